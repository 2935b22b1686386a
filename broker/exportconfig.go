package broker

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/remoting"
)

// exportTypes maps the config types of EXPORT_ROCKSDB_CONFIG_TO_JSON
// (RocketMQ's ExportRocksDBConfigToJsonRequestHeader.ConfigType names) to
// the file each is written to.
var exportTypes = []struct{ name, file string }{
	{"topics", rmqconfig.TopicsFile},
	{"subscriptionGroups", rmqconfig.GroupsFile},
	{"consumerOffsets", rmqconfig.OffsetsFile},
}

// parseExportTypes reads the configType field: type names separated by
// ";", any case, blanks around them and empty names skipped, as RocketMQ
// reads it. It returns the files to write, each once, in the order named.
func parseExportTypes(field string) ([]string, error) {
	var files []string
	for name := range strings.SplitSeq(field, ";") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		found := false
		for _, t := range exportTypes {
			if strings.EqualFold(t.name, name) {
				found = true
				if !slices.Contains(files, t.file) {
					files = append(files, t.file)
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("Unknown config type: %s (topics, subscriptionGroups or consumerOffsets)", name)
		}
	}
	return files, nil
}

// processExportConfigToJSON answers EXPORT_ROCKSDB_CONFIG_TO_JSON (mqadmin
// rocksDBConfigToJson -b or -n -c, RocketMQ 5.3.2 and later). A RocketMQ
// broker that keeps its config in RocksDB writes the tables named by
// configType back to the JSON files of <storePathRootDir>/config, which a
// broker keeping them in files reads; rocketkv keeps them in its index and
// does the same: topics.json, subscriptionGroup.json (with its
// forbiddenTable) and consumerOffset.json, each as RocketMQ's
// ConfigManager persists it (replaced atomically, the previous content
// kept as <file>.bak), stamped with its table's data version. The
// consumer offsets are those GET_ALL_CONSUMER_OFFSET answers. rocketkv
// never reads the files back once it has opened a store: they are for
// RocketMQ, or for reading. Moving a store back to RocketMQ needs more
// (delay offsets, POP state, the timer's progress, the file
// ConsumeQueue): kvdump export-rocketmq, on the stopped store.
func (b *Broker) processExportConfigToJSON(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	field, bad := requiredField(req, "configType")
	if bad != nil {
		return bad
	}
	files, err := parseExportTypes(field)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	b.exportMu.Lock()
	defer b.exportMu.Unlock()
	dir := filepath.Join(b.cfg.StorePathRootDir, "config")
	for _, file := range files {
		if err := b.exportConfigFile(ctx, dir, file); err != nil {
			b.log.Error().Err(err).Str("file", filepath.Join(dir, file)).Stringer("conn", conn).Msg("export of the config to JSON failed")
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
	}
	b.log.Info().Strs("files", files).Str("dir", dir).Stringer("conn", conn).Msg("exported the config to JSON")
	return remoting.NewResponse(req, remoting.Success, "export done.")
}

// exportConfigFile writes one file of processExportConfigToJSON.
func (b *Broker) exportConfigFile(ctx context.Context, dir, file string) error {
	var c rmqconfig.Config
	var version meta.DataVersion
	var err error
	switch file {
	case rmqconfig.TopicsFile:
		version = b.topics.table.Version()
		c.Topics, err = b.topics.table.All(ctx)
	case rmqconfig.GroupsFile:
		version = b.groups.Version()
		if c.Groups, err = b.groups.All(ctx); err == nil {
			c.Forbidden, err = b.forbidden.table.All(ctx)
		}
	case rmqconfig.OffsetsFile:
		version = answerVersion()
		c.Offsets, err = b.rocketMQOffsets(ctx)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("export %s: %w", file, err)
	}
	return rmqconfig.WriteFile(dir, file, c, version)
}

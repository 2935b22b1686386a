package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/ha/autoswitch"
	"github.com/rocketkv/rocketkv/internal/atomicfile"
)

// A controller-mode broker keeps the id its controller gave it in two small
// text files, RocketMQ's (store/ha/autoswitch BrokerMetadata and
// TempBrokerMetadata), so that a RocketMQ controller-mode store's identity
// is read and a restart keeps its id:
//
//	brokerIdentity       clusterName#brokerName#brokerId
//	brokerIdentity-temp  clusterName#brokerName#brokerId#registerCheckCode
//
// The temp file holds an id asked for (GET_NEXT_BROKER_ID) and not yet
// granted (APPLY_BROKER_ID); the check code, brokerAddr;unixMillis, tells
// the controller that a second apply of the same id after a crash is the
// same broker's. Each write first copies the file's previous content to
// <file>.bak, as RocketMQ's MixAll.string2File.

// brokerIdentity is the content of the identity file, or of the temp file
// (with CheckCode).
type brokerIdentity struct {
	Cluster   string
	Broker    string
	ID        int64
	CheckCode string // the temp file only
}

// identityPath is storePathBrokerIdentity, or RocketMQ's default:
// brokerIdentity in the store's root.
func identityPath(cfg configs.Broker) string {
	if cfg.StorePathBrokerIdentity != "" {
		return cfg.StorePathBrokerIdentity
	}
	return filepath.Join(cfg.StorePathRootDir, "brokerIdentity")
}

// tempIdentityPath is the temp file next to the identity file.
func tempIdentityPath(cfg configs.Broker) string { return identityPath(cfg) + "-temp" }

// epochFilePath is storePathEpochFile, or RocketMQ's default:
// epochFileCheckpoint in the store's root.
func epochFilePath(cfg configs.Broker) string {
	if cfg.StorePathEpochFile != "" {
		return cfg.StorePathEpochFile
	}
	return filepath.Join(cfg.StorePathRootDir, autoswitch.EpochFileName)
}

// encode is the file's content: the fields joined by '#', with no
// newline, as RocketMQ writes it.
func (id brokerIdentity) encode(temp bool) string {
	s := id.Cluster + "#" + id.Broker + "#" + strconv.FormatInt(id.ID, 10)
	if temp {
		s += "#" + id.CheckCode
	}
	return s
}

// parseIdentity reads an identity file's content (temp: with its check
// code). White space around the content (an editor's newline) and around
// each field is ignored: none of the fields holds any, and a field kept
// with it would not read back the same once written (the file's
// surrounding white space goes).
func parseIdentity(raw string, temp bool) (brokerIdentity, error) {
	parts := strings.Split(strings.TrimSpace(raw), "#")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	want := 3
	if temp {
		want = 4
	}
	if len(parts) < want {
		return brokerIdentity{}, fmt.Errorf("%d fields separated by '#', want %d", len(parts), want)
	}
	id, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return brokerIdentity{}, fmt.Errorf("broker id %q: %w", parts[2], err)
	}
	out := brokerIdentity{Cluster: parts[0], Broker: parts[1], ID: id}
	if temp {
		out.CheckCode = parts[3]
	}
	if out.Cluster == "" || out.Broker == "" || (temp && out.CheckCode == "") {
		return brokerIdentity{}, errors.New("an empty field")
	}
	return out, nil
}

// readIdentity reads the identity file at path (temp: the temp file);
// ok is false when there is none.
func readIdentity(path string, temp bool) (id brokerIdentity, ok bool, err error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return brokerIdentity{}, false, nil
	}
	if err != nil {
		return brokerIdentity{}, false, fmt.Errorf("read broker identity: %w", err)
	}
	id, err = parseIdentity(string(raw), temp)
	if err != nil {
		return brokerIdentity{}, false, fmt.Errorf("broker identity file %s: %w", path, err)
	}
	return id, true, nil
}

// writeIdentity writes the identity file at path (temp: the temp file),
// copying its previous content to path.bak first, and syncs it.
func writeIdentity(path string, id brokerIdentity, temp bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write broker identity: %w", err)
	}
	if err := atomicfile.ReplaceKeepingBackup(path, []byte(id.encode(temp)), 0o644); err != nil {
		return fmt.Errorf("write broker identity: %w", err)
	}
	return nil
}

// removeIdentity removes the (temp) identity file, as RocketMQ's clear.
func removeIdentity(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove broker identity file: %w", err)
	}
	return nil
}

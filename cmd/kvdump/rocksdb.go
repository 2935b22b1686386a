package main

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/rocksread"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/migrate/rocksdbcq"
)

func rocksDBCommand(o *globalOptions) *cobra.Command {
	var cf string
	var limit int
	cmd := &cobra.Command{
		Use:   "rocksdb DIR [--cf NAME] [--limit K]",
		Short: "List a RocketMQ RocksDB directory's column families, or one column family's entries, decoded where RocketMQ's layout is known",
		Long: `rocksdb reads a RocksDB directory of a RocketMQ 5.3 store read-only, with
rocketkv's own reader (no RocketMQ or RocksDB tool needed): without --cf it
lists the column families (id, name, live SST files by level, writes still
in the WAL); with --cf it lists that column family's live entries in key
order, the newest version of each key, WAL included.

Entries are decoded by the database's column families or name, as RocketMQ
lays them out:
consumequeue (the RocksDB ConsumeQueue: units in "default", max/min
records and the checkpoint in "offset"), topics, subscriptionGroups and
consumerOffsets (config v1: names and JSON), rdb (config v2 keys), kvStore
(KV POP records in "popState"). Anything else prints as text when it is
printable, hex otherwise.

It changes nothing in DIR. A directory using a RocksDB feature the reader
does not implement (merge operands, partitioned indexes, compression
dictionaries, blob files, ...) is refused with the reason.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRocksDB(newOutput(cmd.OutOrStdout(), o.json), args[0], cf, limit)
		},
	}
	cmd.Flags().StringVar(&cf, "cf", "", "column family whose entries to list; empty lists the column families")
	cmd.Flags().IntVar(&limit, "limit", 100, "most entries listed; 0 lists them all")
	return cmd
}

// rocksDBFamily is one column family in JSON output.
type rocksDBFamily struct {
	ID         uint32   `json:"id"`
	Name       string   `json:"name"`
	Files      []string `json:"files"`
	WALEntries int      `json:"walEntries"`
}

// rocksDBEntry is one entry in JSON output.
type rocksDBEntry struct {
	Key     string `json:"key"`
	Value   string `json:"value"`
	Decoded string `json:"decoded,omitempty"`
}

// errEnough stops a scan at --limit.
var errEnough = errors.New("limit reached")

func runRocksDB(out *output, dir, cf string, limit int) error {
	db, err := rocksread.Open(dir)
	if err != nil {
		return err
	}
	defer db.Close()
	if cf == "" {
		var t *table
		if !out.json {
			t = newTable(out.w, "ID", "NAME", "WAL ENTRIES", "FILES (LEVEL:FILE)")
		}
		for _, c := range db.ColumnFamilies() {
			if out.json {
				if err := out.object(rocksDBFamily{ID: c.ID, Name: c.Name, Files: c.Files, WALEntries: c.WALEntries}); err != nil {
					return err
				}
				continue
			}
			t.row(strconv.FormatUint(uint64(c.ID), 10), c.Name, strconv.Itoa(c.WALEntries), orDash(strings.Join(c.Files, " ")))
		}
		if t != nil {
			return t.flush()
		}
		return nil
	}
	kind := rocketMQKind(db, dir)
	var t *table
	if !out.json {
		t = newTable(out.w, "KEY", "VALUE", "DECODED")
	}
	n := 0
	err = db.Scan(cf, func(k, v []byte) error {
		if limit > 0 && n >= limit {
			return errEnough
		}
		n++
		dk, dv := describeRocketMQKey(kind, cf, k), describeRocketMQValue(kind, cf, v)
		decoded := strings.TrimSpace(dk + " = " + dv)
		if dk == "" && dv == "" {
			decoded = ""
		}
		if out.json {
			return out.object(rocksDBEntry{Key: hex.EncodeToString(k), Value: hex.EncodeToString(v), Decoded: decoded})
		}
		t.row(shortHex(k), shortHex(v), orDash(decoded))
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return err
	}
	if t != nil {
		return t.flush()
	}
	return nil
}

// rocketMQKind names the RocketMQ database dir holds by its column
// families (the ConsumeQueue has "offset", KV POP "popState"), else by
// the directory's name (rdb for config v2).
func rocketMQKind(db *rocksread.DB, dir string) string {
	for _, c := range db.ColumnFamilies() {
		switch c.Name {
		case rocksdbcq.OffsetsColumnFamily:
			return "consumequeue"
		case "popState":
			return "kvStore"
		}
	}
	return filepath.Base(filepath.Clean(dir))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortHex is hex cut to rawValueCells bytes.
func shortHex(b []byte) string {
	if len(b) > rawValueCells {
		return hex.EncodeToString(b[:rawValueCells]) + "..."
	}
	return hex.EncodeToString(b)
}

// printable returns b as text when it is valid UTF-8 without control
// characters, else "".
func printable(b []byte) string {
	if !utf8.Valid(b) {
		return ""
	}
	for _, r := range string(b) {
		if r < 0x20 || r == 0x7f {
			return ""
		}
	}
	return string(b)
}

// describeRocketMQKey decodes a key of the RocketMQ database kind (the
// directory's base name), or returns "".
func describeRocketMQKey(kind, cf string, k []byte) string {
	switch kind {
	case "consumequeue":
		return rocksdbcq.DescribeKey(cf, k)
	case "rdb":
		return rmqconfig.DescribeV2Key(k)
	case "kvStore":
		if cf == "popState" {
			return describePopKey(k)
		}
	}
	return printable(k)
}

func describeRocketMQValue(kind, cf string, v []byte) string {
	switch kind {
	case "consumequeue":
		return rocksdbcq.DescribeValue(cf, v)
	case "rdb":
		if d := rmqconfig.DescribeV2Value(v); d != "" {
			return d
		}
	}
	return printable(v)
}

// describePopKey decodes a KV POP record key (spec 7.4):
// [visibleAt:int64][group]@[topic]@[queueId:int32]@[queueOffset:int64].
func describePopKey(k []byte) string {
	n := len(k)
	if n < 8+3+1+4+1+8 || k[n-9] != '@' || k[n-14] != '@' {
		return ""
	}
	group, topic, ok := strings.Cut(string(k[8:n-14]), "@")
	if !ok {
		return ""
	}
	return fmt.Sprintf("visibleAt=%d group=%s topic=%s queue=%d offset=%d", int64(binary.BigEndian.Uint64(k)), group, topic,
		int32(binary.BigEndian.Uint32(k[n-13:])), int64(binary.BigEndian.Uint64(k[n-8:])))
}

package configs

import (
	"fmt"
	"strings"
)

// brokerInertDevelopStore lists the store and POP keys RocketMQ's
// develop branch added after 5.3.3, up to the compatibility baseline
// (8fc57f1468), that rocketkv accepts without effect: the settings of
// RocketMQ's CombineConsumeQueueStore (its double-write of the two
// ConsumeQueue layouts, apache/rocketmq#9254), of its recovery and
// CommitLog write path (#9666, #9693, #9709) and of its POP long-polling
// tables (#9581). Like brokerInert's, ignoring them changes nothing stored
// or delivered; where a value asks for what rocketkv does otherwise, the
// load warns.
var brokerInertDevelopStore = []inert[Broker]{
	{key: "combineCQLoadingCQTypes",
		reason: "under rocksdbCQDoubleWriteEnable both ConsumeQueue layouts are loaded, recovered and written; without it only storeType's is",
		parse:  func(string) error { return nil },
		warn: func(b *Broker, raw string) string {
			if !b.CQDoubleWrite {
				return ""
			}
			types := cqTypesOf(raw)
			if types[StoreTypeFile] && types[StoreTypeKV] {
				return ""
			}
			return fmt.Sprintf("combineCQLoadingCQTypes=%s is not followed: with rocksdbCQDoubleWriteEnable=true both ConsumeQueue layouts (default;defaultRocksDB) are written", raw)
		}},
	{key: "combineCQPreferCQType",
		reason: "the layout storeType names serves reads, under rocksdbCQDoubleWriteEnable too (RocketMQ reads this key only with storeType=default and double-write, where its default is the file layout as here)",
		parse:  func(string) error { return nil },
		warn: func(b *Broker, raw string) string {
			if !b.CQDoubleWrite || b.StoreType != StoreTypeFile {
				return ""
			}
			if t := cqTypesOf(raw); len(t) == 1 && t[StoreTypeFile] {
				return ""
			}
			return fmt.Sprintf("combineCQPreferCQType=%s is not followed: with storeType=default reads are served from the file ConsumeQueue; set storeType=defaultRocksDB (double-write kept on) to read the KV layout while both are written", raw)
		}},
	inertString[Broker]("combineAssignOffsetCQType", "queue offsets are assigned once per append and the same entry is written to both layouts; there is no layout to assign them from"),
	inertBool[Broker]("combineCQEnableCheckSelf", "the two layouts are not compared at start; bin/admin checkRocksdbCqWriteProgress (CHECK_ROCKSDB_CQ_WRITE_PROGRESS) compares them on demand"),
	inertInt[Broker]("combineCQMaxExtraSearchCommitLogFiles", "a layout that fell behind is rebuilt at start from the CommitLog from where it stopped, however far back; recovery searches no bounded number of extra CommitLog files"),
	inertBool[Broker]("enableAcceleratedRecovery", "recovery scans the CommitLog segments it picks from their first record; the end it finds is the one RocketMQ's faster scan from the ConsumeQueue's last entry finds"),
	inertBool[Broker]("enableRunningFlagsInFlush", "a failed CommitLog flush always stops the broker, which recovers the log from its files at the next start; no append after the failure is reported stored"),
	{key: "writeWithoutMmap",
		reason: "appends are copied into the mapped CommitLog segment; there is no write path through the file descriptor",
		parse:  func(raw string) error { _, err := parseBool(raw); return err },
		warn: func(_ *Broker, raw string) string {
			if v, _ := parseBool(raw); !v {
				return ""
			}
			return "writeWithoutMmap=true is not followed: CommitLog appends still go through the mapped segment, so a disk that turns read-only ends the broker process instead of failing the appends"
		}},
	inertInt[Broker]("popPollingMapExpireTimeSeconds", "a queue's set of held pops is dropped as its last held pop is answered; nothing idle stays in the tables to expire"),
}

// cqTypesOf reads a list of RocketMQ store types ("default;defaultRocksDB")
// as RocketMQ's StoreType.fromString does: split at ';', trimmed, matched
// without regard to case, unknown names dropped. The result holds
// rocketkv's names for the layouts (StoreTypeFile, StoreTypeKV).
func cqTypesOf(raw string) map[string]bool {
	out := map[string]bool{}
	for _, s := range strings.Split(raw, ";") {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "default":
			out[StoreTypeFile] = true
		case "defaultrocksdb":
			out[StoreTypeKV] = true
		}
	}
	return out
}

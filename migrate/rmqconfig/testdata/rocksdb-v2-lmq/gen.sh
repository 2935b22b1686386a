#!/usr/bin/env bash
# gen.sh writes config/rdb/: a RocketMQ 5.3 config v2 database
# (configManagerVersion=v2, spec 6.3) of a broker whose groups popped with
# KV POP, written by real RocksDB: Debian's ldb 7.8.3
# (`apt-get install -y rocksdb-tools`). The layout is
# ConsumerOffsetManagerV2's and TopicConfigManagerV2's (column family
# default, big-endian integers):
#   [0x01][tableId:int16][0x01]"data_version" -> [stateVersion:8][timestamp:8][counter:8]
#   [0x01][tableId:int16][0x02][len:int16][name] -> [0x01][JSON]   (3 topic, 4 group)
#   [0x01][tableId:int16][0x02][len:int16][group][0x01][len:int16][topic][0x01][queueId:int32]
#                                              -> [offset:int64]    (1 consumer, 2 pull offset)
# Topic TopicL (one queue, its messages also dispatched to the light
# message queue %LMQ%p1) and group GroupN. Each group's last KV pop of its
# queue read offsets 3 to 5, and all of them were acked: KV POP committed
# the offset it read from (3) and the pull offset past the read (6).
#   %LMQ%pg on %LMQ%p1/0: consumer offset 3, pull offset 6
#   %LMQ%qg on %LMQ%p1/0: consumer offset 3, no pull offset
#   GroupN  on TopicL/0:  consumer offset 3, pull offset 6
# The topic and group are flushed to an SST; the offsets stay in the WAL.
set -euo pipefail
cd "$(dirname "$0")"
command -v ldb >/dev/null || { echo "gen.sh: ldb not found (apt-get install -y rocksdb-tools)" >&2; exit 1; }

rm -rf config && mkdir config
DB=--db=$PWD/config/rdb
ldb $DB --create_if_missing put seed seed >/dev/null
ldb $DB delete seed >/dev/null
f=$(ls config/rdb/OPTIONS-* | sort | tail -1)
sed -i 's/^  compression=.*/  compression=kNoCompression/' "$f"

hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
name() { # table name
	printf '0x01%04x02%04x%s' "$1" "${#2}" "$(hex "$2")"
}
json() { printf '0x01%s' "$(hex "$1")"; }
offset() { # table group topic queueId
	printf '0x01%04x02%04x%s01%04x%s01%08x' "$1" "${#2}" "$(hex "$2")" "${#3}" "$(hex "$3")" "$4"
}
value() { printf '0x%016x' "$1"; }
version() { # table counter
	printf '0x01%04x01%s 0x%016x%016x%016x' "$1" "$(hex data_version)" 0 1795976100000 "$2"
}

ldb $DB --hex batchput \
	"$(name 3 TopicL)" "$(json '{"order":false,"perm":6,"readQueueNums":1,"topicFilterType":"SINGLE_TAG","topicName":"TopicL","topicSysFlag":0,"writeQueueNums":1}')" \
	"$(name 4 GroupN)" "$(json '{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,"groupName":"GroupN","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}')" \
	$(version 3 1) $(version 4 1) >/dev/null
ldb $DB compact >/dev/null
ldb $DB --hex batchput \
	"$(offset 1 %LMQ%pg %LMQ%p1 0)" "$(value 3)" \
	"$(offset 1 %LMQ%qg %LMQ%p1 0)" "$(value 3)" \
	"$(offset 1 GroupN TopicL 0)" "$(value 3)" \
	"$(offset 2 %LMQ%pg %LMQ%p1 0)" "$(value 6)" \
	"$(offset 2 GroupN TopicL 0)" "$(value 6)" \
	$(version 1 3) $(version 2 2) >/dev/null
rm -f config/rdb/LOG config/rdb/LOG.old.* config/rdb/LOCK
ls config/rdb/OPTIONS-* | sort | head -n -1 | xargs -r rm -f
du -sh config

#!/usr/bin/env bash
# gen.sh writes two kvStore/ directories of RocketMQ 5's KV POP
# (PopConsumerRocksdbStore, spec 7.4) with real RocksDB: Debian's ldb
# 7.8.3 (`apt-get install -y rocksdb-tools`). Column families default
# (unused) and popState; one record per message popped and not acked:
#   key   [visibleAt:int64][group]@[topic]@[queueId:int32]@[queueOffset:int64]
#   value fastjson {"popTime":..,"groupId":..,"topicId":..,"queueId":..,"retryFlag":..,
#                   "invisibleTime":..,"offset":..,"attemptTimes":..}
# inflight/: two records, one flushed to an SST and one still in the WAL.
# drained/: the same two records, both acked since (deleted, the last
# deletion in the WAL): nothing is in flight.
# undecodable/: the first record, and one whose value is not a
# PopConsumerRecord (cut short), in the WAL.
# pending/: one pop of GroupA's TopicA/2 in 2100 (not due for a long
# while), offsets 7 and 8.
set -euo pipefail
cd "$(dirname "$0")"
command -v ldb >/dev/null || { echo "gen.sh: ldb not found (apt-get install -y rocksdb-tools)" >&2; exit 1; }

hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
key() { # visibleAt group topic queueId offset
	printf '0x%016x%s40%s40%08x40%016x' "$1" "$(hex "$2")" "$(hex "$3")" "$4" "$5"
}
val() { # popTime group topic queueId invisibleTime offset
	printf '0x%s' "$(hex "{\"attemptTimes\":0,\"groupId\":\"$2\",\"invisibleTime\":$5,\"offset\":$6,\"popTime\":$1,\"queueId\":$4,\"retryFlag\":0,\"topicId\":\"$3\"}")"
}
k1=$(key 1700000060000 GroupA TopicA 0 5) v1=$(val 1700000000000 GroupA TopicA 0 60000 5)
k2=$(key 1700000090000 GroupA TopicA 1 7) v2=$(val 1700000030000 GroupA TopicA 1 60000 7)
k3=$(key 4102444860000 GroupA TopicA 2 7) v3=$(val 4102444800000 GroupA TopicA 2 60000 7)
k4=$(key 4102444860000 GroupA TopicA 2 8) v4=$(val 4102444800000 GroupA TopicA 2 60000 8)

for d in inflight drained undecodable pending; do
	rm -rf "$d" && mkdir "$d"
	ldb --db="$PWD/$d" --create_if_missing put seed seed >/dev/null
	ldb --db="$PWD/$d" create_column_family popState >/dev/null
	ldb --db="$PWD/$d" delete seed >/dev/null
	[ "$d" = pending ] && continue
	ldb --db="$PWD/$d" --hex --column_family=popState put "$k1" "$v1" >/dev/null
	[ "$d" = undecodable ] && continue
	ldb --db="$PWD/$d" --hex --column_family=popState put "$k2" "$v2" >/dev/null
done
ldb --db="$PWD/undecodable" --hex --column_family=popState put "$k2" "${v2:0:40}" >/dev/null
ldb --db="$PWD/pending" --hex --column_family=popState put "$k3" "$v3" >/dev/null
ldb --db="$PWD/pending" --hex --column_family=popState put "$k4" "$v4" >/dev/null
ldb --db="$PWD/drained" --hex --column_family=popState delete "$k1" >/dev/null
ldb --db="$PWD/drained" --hex --column_family=popState delete "$k2" >/dev/null
for d in inflight drained undecodable pending; do
	rm -f "$d"/LOG "$d"/LOG.old.* "$d"/LOCK
	ls "$d"/OPTIONS-* | sort | head -n -1 | xargs -r rm -f
done
du -sh inflight drained undecodable pending

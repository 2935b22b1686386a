#!/usr/bin/env bash
# gen.sh rebuilds the RocksDB directories under testdata/ with Debian's
# rocksdb-tools (ldb 7.8.3): `apt-get install -y rocksdb-tools`, then
# `bash internal/rocksread/testdata/gen.sh` from the repository root.
# The tests only read what this wrote; they never need ldb.
#
# Every ldb call opens the database, replays the WAL the previous call left
# (RocksDB flushes what it replays into a level-0 SST) and closes it again
# without a flush, so the last writes of each database stay in its WAL.
# `load --disable_wal` writes without a WAL, which makes ldb flush at close.
# ldb has no flags for the table options RocketMQ sets, so the script edits
# the OPTIONS file ldb wrote, which the next ldb call loads
# (--try_load_options is on for an existing database).
set -euo pipefail
cd "$(dirname "$0")"
command -v ldb >/dev/null || { echo "gen.sh: ldb not found (apt-get install -y rocksdb-tools)" >&2; exit 1; }

hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
i32() { printf '%08x' "$1"; }
i64() { printf '%016x' "$1"; }
# cqkey topic queueId cqOffset: RocketMQ's CQ unit key (spec 4.3)
cqkey() { printf '0x%s01%s01%s01%s' "$(i32 ${#1})" "$(hex "$1")" "$(i32 "$2")" "$(i64 "$3")"; }
# cqval phy size tagsCode storeTimestamp
cqval() { printf '0x%s%s%s%s' "$(i64 "$1")" "$(i32 "$2")" "$(i64 "$3")" "$(i64 "$4")"; }
# offkey topic max|min queueId: RocketMQ's offset key (spec 4.4)
offkey() { printf '0x%s01%s01%s01%s' "$(i32 ${#1})" "$(hex "$1")" "$(hex "$2")" "$(i32 "$3")"; }
offval() { printf '0x%s%s' "$(i64 "$1")" "$(i64 "$2")"; }

# setopt DB SECTION KEY VALUE: set KEY=VALUE inside [SECTION] of DB's newest OPTIONS file
setopt() {
	local f
	f=$(ls "$1"/OPTIONS-* | sort | tail -1)
	awk -v sec="[$2]" -v k="$3" -v v="$4" '
		/^\[/ { in_sec = ($0 == sec) }
		in_sec && $1 ~ "^"k"=" { sub(/=.*/, "=" v) }
		{ print }' "$f" > "$f.tmp" && mv "$f.tmp" "$f"
}

tidy() {
	rm -f "$1"/LOG "$1"/LOG.old.* "$1"/LOCK
	# keep only the newest OPTIONS file; the reader does not need any
	ls "$1"/OPTIONS-* | sort | head -n -1 | xargs -r rm -f
}

# --- cq: RocketMQ's RocksDB ConsumeQueue (options of RocksDBOptionsFactory) ---
rm -rf cq && mkdir -p cq
DB=--db=$PWD/cq
ldb $DB --create_if_missing put seed seed >/dev/null
ldb $DB create_column_family offset >/dev/null
ldb $DB delete seed >/dev/null
setopt cq 'CFOptions "default"' compression kLZ4Compression
setopt cq 'CFOptions "default"' bottommost_compression kZSTD
setopt cq 'TableOptions/BlockBasedTable "default"' data_block_index_type kDataBlockBinaryAndHash
setopt cq 'TableOptions/BlockBasedTable "default"' block_size 512
setopt cq 'TableOptions/BlockBasedTable "default"' index_block_restart_interval 4
setopt cq 'CFOptions "default"' target_file_size_base 1024 # several files on level 1
setopt cq 'CFOptions "offset"' compression kNoCompression
setopt cq 'TableOptions/BlockBasedTable "offset"' block_size 256
# TopicA queue 0: 60 units, queue 1: 20 units; TopicB queue 0: 30 units
args=()
for i in $(seq 0 59); do args+=("$(cqkey TopicA 0 "$i")" "$(cqval $((i * 200)) 200 $((i % 7)) $((1700000000000 + i)))"); done
for i in $(seq 0 19); do args+=("$(cqkey TopicA 1 "$i")" "$(cqval $((20000 + i * 150)) 150 0 $((1700000100000 + i)))"); done
for i in $(seq 0 29); do args+=("$(cqkey TopicB 0 "$i")" "$(cqval $((40000 + i * 100)) 100 3 $((1700000200000 + i)))"); done
ldb $DB --hex batchput "${args[@]}" >/dev/null
ldb $DB --hex --column_family=offset batchput \
	"$(offkey TopicA max 0)" "$(offval 11800 59)" "$(offkey TopicA min 0)" "$(offval 0 0)" \
	"$(offkey TopicA max 1)" "$(offval 22850 19)" \
	"$(offkey TopicB max 0)" "$(offval 42900 29)" "$(offkey TopicB min 0)" "$(offval 40000 0)" \
	"$(offkey CHECKPOINT_TOPIC max 0)" "0x$(i64 43000)" >/dev/null
# compaction moves everything to the bottommost level (zstd for the CQ CF)
ldb $DB compact >/dev/null
ldb $DB --column_family=offset compact >/dev/null
# no more automatic compactions: the files below stay in level 0 above level 1
setopt cq 'CFOptions "default"' disable_auto_compactions true
setopt cq 'CFOptions "offset"' disable_auto_compactions true
# level-0 files on top: an overwritten unit, a new queue, a deleted unit, a deleted queue (TopicB 0)
printf '%s\n' "put $(cqkey TopicA 0 5) $(cqval 999999 77 1 1700000009999)" "put $(cqkey TopicA 2 0) $(cqval 50000 60 0 1700000300000)" \
	"delete $(cqkey TopicA 0 7)" | ldb $DB --hex query >/dev/null
ldb $DB --hex deleterange "$(printf '0x%s01%s01%s00' "$(i32 6)" "$(hex TopicB)" "$(i32 0)")" "$(printf '0x%s01%s01%s02' "$(i32 6)" "$(hex TopicB)" "$(i32 0)")" >/dev/null
ldb $DB --hex batchput "$(cqkey TopicC 0 0)" "$(cqval 50060 80 0 1700000400000)" "$(cqkey TopicC 0 1)" "$(cqval 50140 80 0 1700000400001)" >/dev/null
printf '%s\n' "delete $(offkey TopicB max 0)" "delete $(offkey TopicB min 0)" "put $(offkey TopicC max 0) $(offval 50140 1)" |
	ldb $DB --hex --column_family=offset query >/dev/null
# the newest writes stay in the WAL: TopicA queue 2's max record, the checkpoint, a deleted min record
printf '%s\n' "put $(offkey TopicA max 2) $(offval 50000 0)" "put $(offkey CHECKPOINT_TOPIC max 0) 0x$(i64 50220)" "delete $(offkey TopicA min 0)" |
	ldb $DB --hex --column_family=offset query >/dev/null
tidy cq

# --- topics: a config v1 database (ConfigHelper's options) with older table formats ---
rm -rf topics && mkdir -p topics
DB=--db=$PWD/topics
ldb $DB --create_if_missing put seed seed >/dev/null
ldb $DB create_column_family kvDataVersion >/dev/null
ldb $DB create_column_family forbidden >/dev/null
ldb $DB delete seed >/dev/null
setopt topics 'CFOptions "default"' compression kSnappyCompression
setopt topics 'TableOptions/BlockBasedTable "default"' format_version 3
setopt topics 'TableOptions/BlockBasedTable "default"' checksum kCRC32c
setopt topics 'TableOptions/BlockBasedTable "default"' block_size 256
setopt topics 'CFOptions "kvDataVersion"' compression kNoCompression
setopt topics 'TableOptions/BlockBasedTable "kvDataVersion"' format_version 2
setopt topics 'TableOptions/BlockBasedTable "kvDataVersion"' checksum kxxHash
setopt topics 'CFOptions "forbidden"' compression kZlibCompression
setopt topics 'TableOptions/BlockBasedTable "forbidden"' format_version 4
setopt topics 'TableOptions/BlockBasedTable "forbidden"' checksum kxxHash64
args=()
for i in $(seq 0 39); do args+=("topic-$i" "{\"order\":false,\"perm\":6,\"readQueueNums\":$((i % 8 + 1)),\"topicFilterType\":\"SINGLE_TAG\",\"topicName\":\"topic-$i\",\"topicSysFlag\":0,\"writeQueueNums\":$((i % 8 + 1))}"); done
ldb $DB batchput "${args[@]}" >/dev/null
ldb $DB --column_family=kvDataVersion put kvDataVersionKey '{"counter":41,"stateVersion":0,"timestamp":1700000000000}' >/dev/null
ldb $DB --column_family=forbidden put group-1 '{"topic-1":1}' >/dev/null
ldb $DB compact >/dev/null
ldb $DB --column_family=forbidden compact >/dev/null
setopt topics 'CFOptions "default"' disable_auto_compactions true
ldb $DB put topic-3 '{"order":true,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"topic-3","topicSysFlag":0,"writeQueueNums":4}' >/dev/null
ldb $DB deleterange topic-20 topic-29 >/dev/null
ldb $DB --column_family=kvDataVersion put kvDataVersionKey '{"counter":44,"stateVersion":0,"timestamp":1700000050000}' >/dev/null
printf '%s\n' 'delete topic-5' 'put topic-new {"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"topic-new","topicSysFlag":0,"writeQueueNums":8}' \
	'put topic-0 {"order":false,"perm":4,"readQueueNums":1,"topicFilterType":"SINGLE_TAG","topicName":"topic-0","topicSysFlag":0,"writeQueueNums":1}' |
	ldb $DB query >/dev/null
# left in the WAL: a range deletion (topic-30 to topic-34)
ldb $DB deleterange topic-30 topic-35 >/dev/null
tidy topics

# expected output: ldb scan of a copy (opening the copy flushes its WAL; the fixture keeps it)
for db in cq topics; do
	rm -rf "/tmp/gen-$db" && cp -r "$db" "/tmp/gen-$db"
	for cf in $(ldb --db="/tmp/gen-$db" list_column_families | tail -1 | tr -d '{} ' | tr ',' ' '); do
		ldb --db="/tmp/gen-$db" --hex --column_family="$cf" scan > "$db.$cf.scan"
	done
	rm -rf "/tmp/gen-$db"
done
du -sh cq topics

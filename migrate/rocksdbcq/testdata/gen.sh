#!/usr/bin/env bash
# gen.sh writes consumequeue-4.9.8/ and consumequeue-4.9.8-long-deleted/: the queues of the RocketMQ 4.9.8
# fixture store (shared/fixtures/rocketmq-store-4.9.8/clean, given as $1)
# as RocketMQ 5.3's RocksDB ConsumeQueue would hold them, written by real
# RocksDB: Debian's ldb 7.8.3 (`apt-get install -y rocksdb-tools`). Each
# unit of the fixture's file ConsumeQueue becomes a unit record in column
# family "default" (its store timestamp read from the CommitLog), each
# queue gets its max and min records in column family "offset", and the
# checkpoint key holds the end of the newest unit. The options are
# RocketMQ's (RocksDBOptionsFactory): lz4, zstd at the bottommost level,
# the data-block hash index; "offset" uncompressed. Everything ends in SST
# files, as after RocketMQ's clean shutdown (it writes no WAL).
set -euo pipefail
store=$(cd "${1:?usage: gen.sh <rocketmq-store-4.9.8/clean>}" && pwd)
cd "$(dirname "$0")"
command -v ldb >/dev/null || { echo "gen.sh: ldb not found (apt-get install -y rocksdb-tools)" >&2; exit 1; }
filesize=16384 # the fixture's mappedFileSizeCommitLog

hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
i32() { printf '%08x' "$1"; }
i64() { printf '%016x' "$1"; }
be() { od -An -v -j "$2" -N "$3" -tx1 "$1" | tr -d ' \n'; }
setopt() {
	local f
	f=$(ls "$1"/OPTIONS-* | sort | tail -1)
	awk -v sec="[$2]" -v k="$3" -v v="$4" '
		/^\[/ { in_sec = ($0 == sec) }
		in_sec && $1 ~ "^"k"=" { sub(/=.*/, "=" v) }
		{ print }' "$f" > "$f.tmp" && mv "$f.tmp" "$f"
}

out=consumequeue-4.9.8
rm -rf "$out" && mkdir "$out"
DB=--db=$PWD/$out
ldb $DB --create_if_missing put seed seed >/dev/null
ldb $DB create_column_family offset >/dev/null
ldb $DB delete seed >/dev/null
setopt "$out" 'CFOptions "default"' compression kLZ4Compression
setopt "$out" 'CFOptions "default"' bottommost_compression kZSTD
setopt "$out" 'TableOptions/BlockBasedTable "default"' data_block_index_type kDataBlockBinaryAndHash
setopt "$out" 'CFOptions "offset"' compression kNoCompression

units=() offsets=()
checkpoint=0
for qdir in "$store"/consumequeue/*/*; do
	topic=$(basename "$(dirname "$qdir")")
	qid=$(basename "$qdir")
	tk="$(i32 ${#topic})01$(hex "$topic")01$(i32 "$qid")01"
	first=-1 last=-1 lastphy=0
	for f in $(ls "$qdir" | sort); do
		base=$((10#$f / 20))
		n=$(($(stat -c %s "$qdir/$f") / 20))
		for ((i = 0; i < n; i++)); do
			u=$(be "$qdir/$f" $((i * 20)) 20)
			phy=$((16#${u:0:16})) size=$((16#${u:16:8}))
			[ "$size" -gt 0 ] || continue
			seg=$(printf '%020d' $((phy / filesize * filesize)))
			ts=$(be "$store/commitlog/$seg" $((phy % filesize + 56)) 8)
			off=$((base + i))
			units+=("0x${tk}$(i64 $off)" "0x${u}${ts}")
			[ "$first" -ge 0 ] || { first=$off; firstphy=$phy; }
			last=$off lastphy=$phy
			[ $((phy + size)) -le "$checkpoint" ] || checkpoint=$((phy + size))
		done
	done
	[ "$last" -ge 0 ] || continue
	ok="$(i32 ${#topic})01$(hex "$topic")01"
	offsets+=("0x${ok}$(hex max)01$(i32 "$qid")" "0x$(i64 "$lastphy")$(i64 "$last")")
	offsets+=("0x${ok}$(hex min)01$(i32 "$qid")" "0x$(i64 "$firstphy")$(i64 "$first")")
done
offsets+=("0x$(i32 16)01$(hex CHECKPOINT_TOPIC)01$(hex max)01$(i32 0)" "0x$(i64 "$checkpoint")")
ldb $DB --hex batchput "${units[@]}" >/dev/null
ldb $DB --hex --column_family=offset batchput "${offsets[@]}" >/dev/null
ldb $DB compact >/dev/null
ldb $DB --column_family=offset compact >/dev/null
# an ldb call that writes nothing, so the WAL the compactions leave is empty
ldb $DB get seed >/dev/null 2>&1 || true
tidy() {
	rm -f "$1"/LOG "$1"/LOG.old.* "$1"/LOCK
	ls "$1"/OPTIONS-* | sort | head -n -1 | xargs -r rm -f
}
tidy "$out"
echo "$out: $((${#units[@]} / 2)) units, $((${#offsets[@]} / 2)) offset records, checkpoint $checkpoint"

# The same after RocketMQ deleted the long topic (RocksDBConsumeQueueTable
# and OffsetTable's destroy, spec 4.10): per queue a range deletion of its
# units in "default" and deletions of its max and min records in
# "offset". The last ldb call leaves its deletions in the WAL.
del=consumequeue-4.9.8-long-deleted
rm -rf "$del" && cp -r "$out" "$del"
DB=--db=$PWD/$del
long=$(basename "$(ls -d "$store"/consumequeue/LongTopic_*)")
for qid in 0 1; do
	tk="$(i32 ${#long})01$(hex "$long")01$(i32 "$qid")"
	ldb $DB --hex deleterange "0x${tk}00" "0x${tk}02" >/dev/null
done
ok="$(i32 ${#long})01$(hex "$long")01"
printf '%s\n' "delete 0x${ok}$(hex max)01$(i32 0)" "delete 0x${ok}$(hex min)01$(i32 0)" \
	"delete 0x${ok}$(hex max)01$(i32 1)" "delete 0x${ok}$(hex min)01$(i32 1)" |
	ldb $DB --hex --column_family=offset query >/dev/null
tidy "$del"
echo "$del: $long deleted"

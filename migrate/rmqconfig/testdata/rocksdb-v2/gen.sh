#!/usr/bin/env bash
# gen.sh writes config/rdb/: the config of the RocketMQ 4.9.8 fixture store
# (shared/fixtures/rocketmq-store-4.9.8/clean, given as $1) as a RocketMQ
# 5.3 broker with configManagerVersion=v2 keeps it (spec 6.3), written by
# real RocksDB: Debian's ldb 7.8.3 (`apt-get install -y rocksdb-tools`);
# python3 only turns the JSON files into ldb arguments.
#
# One database, column family default, big-endian integers:
#   [0x01][tableId:int16][0x01]"data_version" -> [stateVersion:8][timestamp:8][counter:8]
#   [0x01][tableId:int16][0x02][len:int16][name] -> [0x01][JSON]   (3 topic, 4 group)
#   [0x01][tableId:int16][0x02][len:int16][group][0x01][len:int16][topic][0x01][queueId:int32]
#                                              -> [offset:int64]    (1 consumer, 2 pull offset)
# Beside the fixture's config: TopicA@GroupA queue 0 at 15, pull offsets
# of ordinary topics (which RocketMQ never reads back, nor does rocketkv),
# a light message queue's consumer offset (read only with enableLmq),
# topic TopicR. The consumer offsets are the
# last write and stay in the WAL, as between RocketMQ's memtable flushes.
set -euo pipefail
src=$(cd "${1:?usage: gen.sh <rocketmq-store-4.9.8/clean>}" && pwd)/config
cd "$(dirname "$0")"
command -v ldb >/dev/null || { echo "gen.sh: ldb not found (apt-get install -y rocksdb-tools)" >&2; exit 1; }

rm -rf config && mkdir config
DB=--db=$PWD/config/rdb
ldb $DB --create_if_missing put seed seed >/dev/null
ldb $DB delete seed >/dev/null
f=$(ls config/rdb/OPTIONS-* | sort | tail -1)
sed -i 's/^  compression=.*/  compression=kNoCompression/' "$f"

args() {
	python3 - "$src" "$1" <<'PY'
import json, re, struct, sys
src, part = sys.argv[1], sys.argv[2]
def load(name):
    text = open(src + "/" + name).read()
    return json.loads(re.sub(r'([{,]\s*)(-?\d+):', r'\1"\2":', text))
compact = lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=True)
h = lambda b: "0x" + b.hex()
def name(table, s):
    b = s.encode()
    return struct.pack(">BHBH", 1, table, 2, len(b)) + b
def version(table, counter):
    return [h(struct.pack(">BHB", 1, table, 1) + b"data_version"), h(struct.pack(">qqq", 0, 1795976100000, counter))]
def offset(table, group, topic, qid, off):
    g, t = group.encode(), topic.encode()
    k = struct.pack(">BHBH", 1, table, 2, len(g)) + g + b"\x01" + struct.pack(">H", len(t)) + t + b"\x01" + struct.pack(">i", qid)
    return [h(k), h(struct.pack(">q", off))]
out = []
if part == "tables":
    topics = load("topics.json")["topicConfigTable"]
    topics["TopicR"] = dict(topics["TopicA"], topicName="TopicR", readQueueNums=2, writeQueueNums=2)
    for k, v in topics.items():
        out += [h(name(3, k)), h(b"\x01" + compact(v).encode())]
    for k, v in load("subscriptionGroup.json")["subscriptionGroupTable"].items():
        out += [h(name(4, k)), h(b"\x01" + compact(v).encode())]
    out += version(3, 7) + version(4, 5)
    for tg, qs in load("consumerOffset.json")["offsetTable"].items():
        topic, group = tg.rsplit("@", 1)
        for q, o in qs.items():
            out += offset(2, group, topic, int(q), o + 100)
else:
    for tg, qs in load("consumerOffset.json")["offsetTable"].items():
        topic, group = tg.rsplit("@", 1)
        for q, o in qs.items():
            out += offset(1, group, topic, int(q), 15 if tg == "TopicA@GroupA" and q == "0" else o)
    out += offset(1, "%LMQ%g", "%LMQ%x", 0, 4) + version(1, 9)
sys.stdout.write("".join(s + "\0" for s in out))
PY
}
put() {
	local a=()
	while IFS= read -r -d '' s; do a+=("$s"); done < <(args "$1")
	ldb $DB --hex batchput "${a[@]}" >/dev/null
}
put tables
ldb $DB compact >/dev/null
put offsets
rm -f config/rdb/LOG config/rdb/LOG.old.* config/rdb/LOCK
ls config/rdb/OPTIONS-* | sort | head -n -1 | xargs -r rm -f
du -sh config

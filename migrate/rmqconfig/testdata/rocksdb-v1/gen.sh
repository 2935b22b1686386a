#!/usr/bin/env bash
# gen.sh writes config/topics/, config/subscriptionGroups/ and
# config/consumerOffsets/: the config of the RocketMQ 4.9.8 fixture store
# (shared/fixtures/rocketmq-store-4.9.8/clean, given as $1) as a RocketMQ
# 5.3 broker with storeType=defaultRocksDB keeps it (config v1, spec 6.2),
# written by real RocksDB: Debian's ldb 7.8.3 (`apt-get install -y
# rocksdb-tools`); python3 only turns the JSON files into ldb arguments.
#
# Each database has the column families default, kvDataVersion and
# forbidden (ConfigRocksDBStorage) and ConfigHelper's options (no
# compression; format_version 5 and XXH3, ldb's defaults). Values are the
# compact JSON fastjson writes (integer map keys unquoted). The broker "ran
# on" after the switch: its data versions are one past the JSON files',
# TopicA@GroupA's queue 0 is at 15 (5 in consumerOffset.json), and topic
# TopicR and group GroupR exist only here. The consumer offsets' last
# batch is left in the WAL, as RocketMQ leaves it between memtable flushes.
set -euo pipefail
src=$(cd "${1:?usage: gen.sh <rocketmq-store-4.9.8/clean>}" && pwd)/config
cd "$(dirname "$0")"
command -v ldb >/dev/null || { echo "gen.sh: ldb not found (apt-get install -y rocksdb-tools)" >&2; exit 1; }

rm -rf config && mkdir config
newdb() {
	local db=$PWD/config/$1
	ldb --db="$db" --create_if_missing put seed seed >/dev/null
	ldb --db="$db" create_column_family kvDataVersion >/dev/null
	ldb --db="$db" create_column_family forbidden >/dev/null
	ldb --db="$db" delete seed >/dev/null
	f=$(ls "$db"/OPTIONS-* | sort | tail -1)
	sed -i 's/^  compression=.*/  compression=kNoCompression/' "$f"
}
# args FILE KIND: NUL-separated key/value pairs for ldb batchput
args() {
	python3 - "$src/$1" "$2" <<'PY'
import json, re, sys
path, kind = sys.argv[1], sys.argv[2]
text = open(path).read()
# fastjson writes integer map keys unquoted; quote them to parse
doc = json.loads(re.sub(r'([{,]\s*)(-?\d+):', r'\1"\2":', text))
compact = lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=True)
out = []
if kind == "topics":
    t = doc["topicConfigTable"]
    t["TopicR"] = dict(t["TopicA"], topicName="TopicR", readQueueNums=2, writeQueueNums=2)
    for k, v in t.items():
        out += [k, compact(v)]
elif kind == "groups":
    t = doc["subscriptionGroupTable"]
    t["GroupR"] = dict(t["GroupA"], groupName="GroupR", retryMaxTimes=5)
    for k, v in t.items():
        out += [k, compact(v)]
elif kind == "forbidden":
    for k, v in (doc.get("forbiddenTable") or {}).items():
        out += [k, compact(v)]
elif kind == "offsets":
    t = doc["offsetTable"]
    t["TopicA@GroupA"]["0"] = 15
    for k, v in t.items():
        inner = ",".join("%s:%d" % (q, o) for q, o in v.items())
        out += [k, '{"offsetTable":{%s}}' % inner]
elif kind == "version":
    c = doc.get("dataVersion", {"counter": 0, "timestamp": 0})
    out += ["kvDataVersionKey", compact({"counter": c["counter"] + 1, "stateVersion": 0, "timestamp": c["timestamp"] + 1000})]
sys.stdout.write("".join(s + "\0" for s in out))
PY
}
put() { # put DB CF FILE KIND
	local a=()
	while IFS= read -r -d '' s; do a+=("$s"); done < <(args "$3" "$4")
	[ ${#a[@]} -gt 0 ] || return 0
	ldb --db="$PWD/config/$1" --column_family="$2" batchput "${a[@]}" >/dev/null
}

newdb topics
put topics default topics.json topics
put topics kvDataVersion topics.json version
newdb subscriptionGroups
put subscriptionGroups default subscriptionGroup.json groups
put subscriptionGroups forbidden subscriptionGroup.json forbidden
put subscriptionGroups kvDataVersion subscriptionGroup.json version
newdb consumerOffsets
put consumerOffsets kvDataVersion consumerOffset.json version
put consumerOffsets default consumerOffset.json offsets
for d in config/*; do
	rm -f "$d"/LOG "$d"/LOG.old.* "$d"/LOCK
	ls "$d"/OPTIONS-* | sort | head -n -1 | xargs -r rm -f
done
du -sh config

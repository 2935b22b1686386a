package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// processQueryMessage answers QUERY_MESSAGE: messages of a topic by key (a
// word of KEYS) or, with _UNIQUE_KEY_QUERY, by UNIQ_KEY, within a store
// time range. As RocketMQ, a query by unique key returns at most
// defaultQueryMaxNum messages and any query at most maxMsgsNumBatch.
func (b *Broker) processQueryMessage(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	h := remoting.Header(req.ExtFields)
	topic, err := h.String("topic")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	key, err := h.String("key")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	cur := b.current()
	maxNum, _ := h.OptInt32("maxNum", int32(cur.DefaultQueryMaxNum))
	begin, _ := h.OptInt64("beginTimestamp", 0)
	end, _ := h.OptInt64("endTimestamp", 0)
	kind := kvindex.KindKey
	if h.OptBool("_UNIQUE_KEY_QUERY", false) {
		kind = kvindex.KindUniqKey
		maxNum = int32(cur.DefaultQueryMaxNum)
	}
	if maxNum <= 0 || int(maxNum) > cur.MaxMsgsNumBatch {
		maxNum = int32(cur.MaxMsgsNumBatch)
	}
	records := map[int64][]byte{} // verified records by offset
	found, err := b.db.KeyIndex().Lookup(kvindex.KeyQuery{
		Topic: topic, Key: key, Kind: kind, Begin: begin, End: end, Max: int(maxNum),
		MinPhyOffset: b.clog.MinOffset(),
		Verify: func(e kvindex.KeyIndexEntry) (int64, bool) {
			rec, m, ok, err := b.readRecord(e.PhyOffset)
			if err != nil || !ok || m.Topic != topic || !carriesKey(m, kind, key) {
				return 0, false
			}
			records[e.PhyOffset] = rec
			return m.StoreTimestamp, true
		},
	})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if kind == kvindex.KindKey {
		if found, err = b.compactedByKey(topic, key, begin, end, int(maxNum), found, records); err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
	}
	if len(found) == 0 {
		remark := "can not find message, maybe time range not correct"
		if !b.cfg.MessageIndexEnable {
			remark += " (messageIndexEnable=false: this broker does not index message keys)"
		}
		return remoting.NewResponse(req, remoting.QueryNotFound, remark)
	}
	// Oldest first, as RocketMQ sorts the offsets it found: the Java
	// client's queryMessageByUniqKey takes the first record, so a
	// message stored twice (a producer's retry) is its first copy.
	slices.SortFunc(found, func(a, b kvindex.KeyIndexEntry) int { return cmp.Compare(a.PhyOffset, b.PhyOffset) })
	var body []byte
	var lastTS, lastPhy int64
	for _, e := range found {
		body = kvindex.AppendShown(body, records[e.PhyOffset]) // no POP revive's own property
		lastTS, lastPhy = max(lastTS, e.StoreTimestamp), max(lastPhy, e.PhyOffset)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	rh := remoting.Header{}
	rh.SetInt64("indexLastUpdateTimestamp", lastTS)
	rh.SetInt64("indexLastUpdatePhyoffset", lastPhy)
	resp.ExtFields = rh
	resp.Body = body
	return resp
}

// compactedByKey adds to found, up to limit entries, the newest message of
// key (a message's whole KEYS, the compaction key) in each queue of a
// compacted topic from its copy, when the key index did not find it (its
// record left the CommitLog, which took the index entries with it) and it
// was stored in [begin, end] (end 0: no bound); records gets the copies.
func (b *Broker) compactedByKey(topic, key string, begin, end int64, limit int, found []kvindex.KeyIndexEntry, records map[int64][]byte) ([]kvindex.KeyIndexEntry, error) {
	if b.compaction == nil || !b.compaction.Compacts(topic) || len(found) >= limit {
		return found, nil
	}
	tc, ok, err := b.topicConfig(topic)
	if err != nil || !ok {
		return found, err
	}
	for qid := range int32(max(tc.ReadQueueNums, tc.WriteQueueNums)) {
		rec, m, ok, err := b.compaction.Newest(topic, qid, key)
		if err != nil {
			return found, fmt.Errorf("query by key %q of compacted topic %s: %w", key, topic, err)
		}
		if !ok || records[m.PhyOffset] != nil || m.StoreTimestamp < begin || (end > 0 && m.StoreTimestamp > end) {
			continue
		}
		records[m.PhyOffset] = rec
		found = append(found, kvindex.KeyIndexEntry{Topic: topic, Kind: kvindex.KindKey, Key: key, PhyOffset: m.PhyOffset, StoreTimestamp: m.StoreTimestamp})
		if len(found) >= limit {
			break
		}
	}
	return found, nil
}

// carriesKey checks that a record still has the key the index points at it
// for (an entry may outlive a truncated and rewritten record).
func carriesKey(m commitlog.Message, kind byte, key string) bool {
	if kind == kvindex.KindUniqKey {
		v, _ := commitlog.LookupProperty(m.Properties, propUniqKey)
		return v == key
	}
	keys, _ := commitlog.LookupProperty(m.Properties, propKeys)
	// Split as the index splits them (RocketMQ's KEY_SEPARATOR, one
	// space): a key may hold tabs or other spaces.
	for k := range strings.SplitSeq(keys, " ") {
		if k != "" && k == key {
			return true
		}
	}
	return false
}

// processViewMessage answers VIEW_MESSAGE_BY_ID: the record at a CommitLog
// offset (decoded by clients from an offset message id).
func (b *Broker) processViewMessage(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	off, err := remoting.Header(req.ExtFields).Int64("offset")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	rec, m, ok, err := b.readClientRecord(off)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if !ok {
		return remoting.NewResponse(req, remoting.SystemError, "can not find message by the offset, "+remoting.Header(req.ExtFields).OptString("offset", ""))
	}
	if topic := remoting.Header(req.ExtFields).OptString("topic", ""); topic != "" && topic != m.Topic && b.accessControlled() {
		// The check was of the topic named; the message is another's.
		return remoting.NewResponse(req, remoting.NoPermission, fmt.Sprintf("the message at offset %d is not of topic %s", off, topic))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = shownRecord(rec, m.Topic)
	return resp
}

// shownRecord is a record read for a client (VIEW_MESSAGE_BY_ID,
// CONSUME_MESSAGE_DIRECTLY) as it is shown it: without a POP revive's own
// property (kvindex.AppendShown), rec itself when topic cannot hold one.
func shownRecord(rec []byte, topic string) []byte {
	if !kvindex.HoldsRevived(topic) {
		return rec
	}
	return kvindex.AppendShown(nil, rec)
}

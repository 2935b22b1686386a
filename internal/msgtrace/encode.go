package msgtrace

import (
	"slices"
	"strconv"
	"strings"
)

// AppendPub appends r as the Pub record RocketMQ's Java clients write
// (TraceDataEncoder.encoderFromContextBean): its 14 fields, type,
// timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost,
// bodyLength, costTime, msgType, offsetMsgId and success, each followed by
// ContentSplitor but the last, which FieldSplitor ends. The strings are
// written as they are: a Java producer's message without tags or keys
// writes "null", which the caller passes. The bytes are those Decode reads
// back into r (but for ClientHost, which the Java clients do not write).
func AppendPub(dst []byte, r *Record) []byte {
	fields := [...]string{Pub, strconv.FormatInt(r.TimeStamp, 10), r.RegionID, r.GroupName, r.Topic, r.MsgID, r.Tags, r.Keys,
		r.StoreHost, strconv.FormatInt(int64(r.BodyLength), 10), strconv.FormatInt(int64(r.CostTime), 10),
		strconv.Itoa(r.MsgType), r.OffsetMsgID, strconv.FormatBool(r.Success)}
	for i, f := range fields {
		if i > 0 {
			dst = append(dst, ContentSplitor)
		}
		dst = append(dst, f...)
	}
	return append(dst, FieldSplitor)
}

// TransKeys are the keys RocketMQ's trace dispatcher gives the trace
// message holding r (TraceTransferBean's transKey), by which
// queryMsgTraceById finds it: the message id, then each of the message's
// keys (split at ' ', MessageConst.KEY_SEPARATOR), once each. Keys of
// "null" or "" add none, as a Java message without keys adds none.
func TransKeys(r *Record) []string {
	keys := []string{r.MsgID}
	if r.Keys != "" && r.Keys != "null" {
		for _, k := range strings.Split(r.Keys, " ") {
			if k != "" && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

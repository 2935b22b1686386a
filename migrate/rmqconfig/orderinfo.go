package rmqconfig

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/kvindex"
)

// consumerOrderInfo.json is RocketMQ 5's ConsumerOrderInfoManager: the
// batch each orderly POP consumer group has in flight on each queue.
//
//	{"table":{"<topic>@<group>":{<queueId>:{
//	    "popTime":<ms>, "i":<invisibleTime ms>,
//	    "o":[<first offset>, <offset - first>, ...],
//	    "ot":{<offset>:<next visible ms>, ...},   change of invisible time
//	    "oc":{<offset>:<consumed count>, ...},    counts above 0 only, offsets outside o included
//	    "l":<last consume ms>, "cm":<acked bits>, "a":"<attempt id>"}}}}
//
// Bit i of cm is set when the i-th message of o is acknowledged. Map keys
// are bare integers, as fastjson writes them.

// OrderInfo is one orderly POP batch of consumerOrderInfo.json.
type OrderInfo struct {
	Topic, Group string
	QueueID      int32
	// PopTime and InvisibleTime (ms) of the pop; InvisibleTime is 0 when
	// the file has none (RocketMQ then judges the lock with the next
	// pop's invisible time).
	PopTime       int64
	InvisibleTime int64
	// Offsets are the batch's queue offsets, ascending.
	Offsets []int64
	// NextVisible maps an offset to the deadline a change of invisible
	// time gave it.
	NextVisible map[int64]int64
	// Consumed maps an offset to how many earlier pops delivered it. It
	// may hold offsets outside Offsets: a pop repeating the attemptId of
	// the batch it replaced kept that batch's counts (see Carried).
	Consumed map[int64]int32
	// LastConsume is when the group last popped or acked the queue (ms).
	LastConsume int64
	// Acked has bit i set when Offsets[i] is acknowledged.
	Acked uint64
	// AttemptID is the client's attempt id of the pop ("" when none).
	AttemptID string
}

// maxOrderBatch is the most messages an orderly batch can have: its
// acknowledgements are the bits of one Java long.
const maxOrderBatch = 64

func (c *Config) parseOrderInfos(data []byte) error {
	c.OrderInfos = c.OrderInfos[:0]
	skipped, err := eachQueueValue(data, "table", "order info", func(topic, group string, qid int32, value []byte) error {
		info, err := parseOrderInfo(value)
		if err != nil {
			return err
		}
		info.Topic, info.Group, info.QueueID = topic, group, qid
		c.OrderInfos = append(c.OrderInfos, info)
		return nil
	})
	sortByQueue(c.OrderInfos, func(o *OrderInfo) (string, string, int32) { return o.Group, o.Topic, o.QueueID })
	if err == nil {
		c.noteNegativeQueues("consumerOrderInfo.json", skipped)
	}
	return err
}

// errBadOrderInfo is wrapped by every complaint about one OrderInfo.
var errBadOrderInfo = errors.New("bad OrderInfo")

// parseOrderInfo reads one OrderInfo object; unknown fields are ignored
// (later RocketMQ versions may add some).
func parseOrderInfo(data []byte) (OrderInfo, error) {
	var info OrderInfo
	fields, err := adminbody.Members(data)
	if err != nil {
		return info, err
	}
	var diffs []int64
	var acked int64
	for _, f := range fields {
		name := unquote(f.Key)
		if string(f.Value) == "null" {
			continue
		}
		var err error
		switch name {
		case "popTime":
			err = json.Unmarshal(f.Value, &info.PopTime)
		case "i", "invisibleTime":
			err = json.Unmarshal(f.Value, &info.InvisibleTime)
		case "o", "offsetList":
			err = json.Unmarshal(f.Value, &diffs)
		case "ot", "offsetNextVisibleTime":
			info.NextVisible, err = intMap(f.Value, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) })
		case "oc", "offsetConsumedCount":
			info.Consumed, err = intMap(f.Value, func(s string) (int32, error) {
				n, err := strconv.ParseInt(s, 10, 32)
				return int32(n), err
			})
		case "l", "lastConsumeTimestamp":
			err = json.Unmarshal(f.Value, &info.LastConsume)
		case "cm", "commitOffsetBit":
			err = json.Unmarshal(f.Value, &acked)
		case "a", "attemptId":
			err = json.Unmarshal(f.Value, &info.AttemptID)
		}
		if err != nil {
			return info, fmt.Errorf("%w: field %s: %w", errBadOrderInfo, name, err)
		}
	}
	info.Acked = uint64(acked)
	if len(diffs) > maxOrderBatch {
		return info, fmt.Errorf("%w: %d offsets, more than the %d an orderly batch holds", errBadOrderInfo, len(diffs), maxOrderBatch)
	}
	// RocketMQ keeps the first offset and each other's distance from it.
	for i, d := range diffs {
		off := d
		if i > 0 {
			off = diffs[0] + d
		}
		if off < 0 || (i > 0 && off <= info.Offsets[i-1]) {
			return info, fmt.Errorf("%w: offsets %v do not ascend from a first offset >= 0", errBadOrderInfo, diffs)
		}
		info.Offsets = append(info.Offsets, off)
	}
	if n := len(info.Carried()); n > maxOrderBatch {
		return info, fmt.Errorf("%w: %d consumption counts of offsets outside the batch, more than the %d an orderly batch keeps",
			errBadOrderInfo, n, maxOrderBatch)
	}
	if info.InvisibleTime < 0 {
		info.InvisibleTime = 0
	}
	return info, nil
}

// Carried returns the consumption counts of Consumed for offsets outside
// Offsets, in offset order: RocketMQ's OrderInfo.mergeOffsetConsumedCount
// keeps the count table of the batch a pop repeating its attemptId
// replaces as it is, so the table may name offsets the new batch no longer
// holds, for a later retry of the attempt that delivers them again. Counts
// of 0 or less are left out (RocketMQ writes counts above 0 only).
func (o *OrderInfo) Carried() []kvindex.OrderCount {
	var out []kvindex.OrderCount
	for off, n := range o.Consumed {
		if n > 0 && !slices.Contains(o.Offsets, off) {
			out = append(out, kvindex.OrderCount{QueueOffset: off, Consumed: n})
		}
	}
	slices.SortFunc(out, func(a, b kvindex.OrderCount) int { return cmp.Compare(a.QueueOffset, b.QueueOffset) })
	return out
}

// intMap reads an object whose keys are integers (bare, as fastjson
// writes a Map<Long, ...>, or quoted) into a map of offsets.
func intMap[V any](data []byte, value func(string) (V, error)) (map[int64]V, error) {
	members, err := adminbody.Members(data)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]V, len(members))
	for _, m := range members {
		k, err := strconv.ParseInt(unquote(m.Key), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("key %s: not an offset", m.Key)
		}
		v, err := value(unquote(m.Value))
		if err != nil {
			return nil, fmt.Errorf("value of %d: %s: not a number", k, m.Value)
		}
		out[k] = v
	}
	return out, nil
}

// EncodeOrderInfos writes consumerOrderInfo.json as fastjson renders
// RocketMQ's ConsumerOrderInfoManager: fields in name order, integer keys
// bare, empty maps and an empty attempt id left out. The offsets are
// written as RocketMQ keeps them (the first, then each other's distance
// from it).
func EncodeOrderInfos(infos []OrderInfo) ([]byte, error) {
	byKey := map[string][]OrderInfo{}
	for _, info := range infos {
		k := info.Topic + "@" + info.Group
		byKey[k] = append(byKey[k], info)
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	err := appendKeyedTable(&b, "table", byKey, func(k string) error {
		queues := byKey[k]
		sort.Slice(queues, func(i, j int) bool { return queues[i].QueueID < queues[j].QueueID })
		b.WriteByte('{')
		for j, info := range queues {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString("\n\t\t\t")
			b.WriteString(strconv.Itoa(int(info.QueueID)))
			b.WriteByte(':')
			if err := appendOrderInfo(&b, info); err != nil {
				return fmt.Errorf("order info of %s queue %d: %w", k, info.QueueID, err)
			}
		}
		b.WriteString("\n\t\t}")
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.WriteString("\n}\n")
	return b.Bytes(), nil
}

// appendOrderInfo writes one OrderInfo object.
func appendOrderInfo(b *bytes.Buffer, info OrderInfo) error {
	b.WriteByte('{')
	if info.AttemptID != "" {
		a, err := json.Marshal(info.AttemptID)
		if err != nil {
			return err
		}
		b.WriteString(`"a":`)
		b.Write(a)
		b.WriteByte(',')
	}
	fmt.Fprintf(b, `"cm":%d,"i":%d,"l":%d,"o":[`, int64(info.Acked), info.InvisibleTime, info.LastConsume)
	for i, off := range info.Offsets {
		if i > 0 {
			b.WriteByte(',')
			off -= info.Offsets[0]
		}
		b.WriteString(strconv.FormatInt(off, 10))
	}
	b.WriteByte(']')
	if len(info.Consumed) > 0 {
		counts := make(map[int64]int64, len(info.Consumed))
		for off, n := range info.Consumed {
			counts[off] = int64(n)
		}
		b.WriteString(`,"oc":`)
		appendIntTable(b, counts)
	}
	if len(info.NextVisible) > 0 {
		b.WriteString(`,"ot":`)
		appendIntTable(b, info.NextVisible)
	}
	fmt.Fprintf(b, `,"popTime":%d}`, info.PopTime)
	return nil
}

// Package rmqpop reads the POP in-flight state an Apache RocketMQ store
// keeps in its revive topic (rmq_sys_REVIVE_LOG_<cluster>, the classic
// path of RocketMQ 5's POP): one check-point message per pop of a queue,
// and ack messages that mark its messages handled.
//
//	tag "ck"   PopCheckPoint  {"so":start,"pt":popTime,"it":invisibleTime,"bm":ackBitMap,"n":count,
//	                           "q":queueId,"t":topic,"c":group,"d":[offset-start,...],"bn":broker,"rp":"rePuts"}
//	tag "ack"  AckMsg         {"ao":ackOffset,"so":start,"c":group,"t":topic,"q":queueId,"pt":popTime,"bn":broker}
//	tag "bAck" BatchAckMsg    the same with "aol":[ackOffset,...] instead of "ao"
//
// RocketMQ's own revive merges the acks into their check-point by
// topic, group, queue, start offset, pop time and broker name, and re-puts
// what is left unacked once the pop's invisible time has passed. Merge
// does the same merge so that a broker taking the store over keeps those
// messages in flight instead of losing them.
package rmqpop

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// Tags of the revive topic's messages (RocketMQ's PopAckConstants).
const (
	TagCheckpoint = "ck"
	TagAck        = "ack"
	TagBatchAck   = "bAck"
)

// TopicPrefix starts the name of a cluster's revive topic.
const TopicPrefix = "rmq_sys_REVIVE_LOG_"

// ProgressGroup is the group whose consumer offset on each revive queue
// is the last revive-topic offset RocketMQ's revive processed.
const ProgressGroup = "CID_RMQ_SYS_REVIVE_GROUP"

// Checkpoint is a pop whose messages are still in flight.
type Checkpoint struct {
	Group, Topic  string
	QueueID       int32
	StartOffset   int64
	PopTime       int64
	InvisibleTime int64
	BrokerName    string
	// RePuts counts the times RocketMQ stored the check-point again after
	// a failed revive.
	RePuts int32
	// Offsets are the queue offsets not acknowledged, ascending.
	Offsets []int64
}

// key is RocketMQ's merge key of a check-point and its acks.
type key struct {
	topic, group string
	queueID      int32
	start, pop   int64
	broker       string
}

// flexInt64 reads a JSON number or a decimal string (fastjson writes
// "rp" as a string).
type flexInt64 int64

func (f *flexInt64) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' {
		s = s[1 : len(s)-1]
	}
	if s == "" || s == "null" {
		*f = 0
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: %s", b)
	}
	*f = flexInt64(n)
	return nil
}

// ckJSON is PopCheckPoint as fastjson writes it (short names).
type ckJSON struct {
	StartOffset   flexInt64   `json:"so"`
	PopTime       flexInt64   `json:"pt"`
	InvisibleTime flexInt64   `json:"it"`
	BitMap        flexInt64   `json:"bm"`
	Num           flexInt64   `json:"n"`
	QueueID       flexInt64   `json:"q"`
	Topic         string      `json:"t"`
	Group         string      `json:"c"`
	Diffs         []flexInt64 `json:"d"`
	BrokerName    string      `json:"bn"`
	RePut         flexInt64   `json:"rp"`
}

// ackJSON is AckMsg or BatchAckMsg, with the short names fastjson writes
// and the long ones RocketMQ also accepts.
type ackJSON struct {
	AckOffset     *flexInt64  `json:"ao"`
	AckOffsetLong *flexInt64  `json:"ackOffset"`
	AckOffsets    []flexInt64 `json:"aol"`
	AckList       []flexInt64 `json:"ackOffsetList"`
	StartOffset   flexInt64   `json:"so"`
	StartLong     *flexInt64  `json:"startOffset"`
	Group         string      `json:"c"`
	GroupLong     string      `json:"consumerGroup"`
	Topic         string      `json:"t"`
	TopicLong     string      `json:"topic"`
	QueueID       flexInt64   `json:"q"`
	QueueLong     *flexInt64  `json:"queueId"`
	PopTime       flexInt64   `json:"pt"`
	PopLong       *flexInt64  `json:"popTime"`
	BrokerName    string      `json:"bn"`
	BrokerLong    string      `json:"brokerName"`
}

// maxMessages bounds a check-point's message count (RocketMQ stores it
// in a byte).
const maxMessages = 128

// Merger merges check-points and acks read from revive queues.
type Merger struct {
	cks  map[key]*Checkpoint
	acks map[key][]int64
}

// NewMerger returns an empty merger.
func NewMerger() *Merger {
	return &Merger{cks: map[key]*Checkpoint{}, acks: map[key][]int64{}}
}

// Add reads one revive-topic message by its tag. Messages of other tags
// are ignored; a body that does not parse is an error naming it.
func (m *Merger) Add(tag string, body []byte) error {
	switch tag {
	case TagCheckpoint:
		var c ckJSON
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("revive check-point %q: %w", truncate(body), err)
		}
		if c.Num < 0 || c.Num > maxMessages || len(c.Diffs) > maxMessages {
			return fmt.Errorf("revive check-point %q: %d messages", truncate(body), c.Num)
		}
		ck := &Checkpoint{Group: c.Group, Topic: c.Topic, QueueID: int32(c.QueueID), StartOffset: int64(c.StartOffset),
			PopTime: int64(c.PopTime), InvisibleTime: int64(c.InvisibleTime), BrokerName: c.BrokerName, RePuts: int32(c.RePut)}
		for i := 0; i < int(c.Num); i++ {
			if c.BitMap&(1<<i) != 0 {
				continue // acked before the check-point was stored
			}
			off := ck.StartOffset + int64(i) // old check-points without "d"
			if len(c.Diffs) > 0 {
				if i >= len(c.Diffs) {
					break
				}
				off = ck.StartOffset + int64(c.Diffs[i])
			}
			ck.Offsets = append(ck.Offsets, off)
		}
		k := key{ck.Topic, ck.Group, ck.QueueID, ck.StartOffset, ck.PopTime, ck.BrokerName}
		if old, ok := m.cks[k]; ok && old.RePuts > ck.RePuts {
			return nil // an older copy of a check-point RocketMQ stored again
		}
		m.cks[k] = ck
	case TagAck, TagBatchAck:
		var a ackJSON
		if err := json.Unmarshal(body, &a); err != nil {
			return fmt.Errorf("revive ack %q: %w", truncate(body), err)
		}
		k := key{first(a.Topic, a.TopicLong), first(a.Group, a.GroupLong), int32(pick(a.QueueID, a.QueueLong)),
			int64(pick(a.StartOffset, a.StartLong)), int64(pick(a.PopTime, a.PopLong)), first(a.BrokerName, a.BrokerLong)}
		for _, p := range []*flexInt64{a.AckOffset, a.AckOffsetLong} {
			if p != nil {
				m.acks[k] = append(m.acks[k], int64(*p))
			}
		}
		for _, list := range [][]flexInt64{a.AckOffsets, a.AckList} {
			for _, o := range list {
				m.acks[k] = append(m.acks[k], int64(o))
			}
		}
	}
	return nil
}

// InFlight returns the check-points with messages not acknowledged, in
// group, topic, queue, start offset and pop time order.
func (m *Merger) InFlight() []Checkpoint {
	var out []Checkpoint
	for k, ck := range m.cks {
		acked := map[int64]bool{}
		for _, o := range m.acks[k] {
			acked[o] = true
		}
		c := *ck
		c.Offsets = nil
		for _, o := range ck.Offsets {
			if !acked[o] {
				c.Offsets = append(c.Offsets, o)
			}
		}
		if len(c.Offsets) == 0 {
			continue
		}
		sort.Slice(c.Offsets, func(i, j int) bool { return c.Offsets[i] < c.Offsets[j] })
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.Group != b.Group:
			return a.Group < b.Group
		case a.Topic != b.Topic:
			return a.Topic < b.Topic
		case a.QueueID != b.QueueID:
			return a.QueueID < b.QueueID
		case a.StartOffset != b.StartOffset:
			return a.StartOffset < b.StartOffset
		}
		return a.PopTime < b.PopTime
	})
	return out
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func pick(short flexInt64, long *flexInt64) flexInt64 {
	if long != nil {
		return *long
	}
	return short
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

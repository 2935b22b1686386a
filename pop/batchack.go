package pop

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// BatchAckBody is the JSON body of BATCH_ACK_MESSAGE (RocketMQ's
// BatchAckMessageRequestBody):
//
//	{"brokerName":"broker-a","acks":[{"c":"group","t":"topic","r":"0","so":5,"q":3,
//	  "rq":0,"pt":1700000000000,"it":60000,"b":"Aw=="}]}
//
// Each ack names the messages at StartOffset + i for every bit i set in
// BitSet (Java's BitSet.toByteArray: bit i is bit i%8 of byte i/8, written
// as Base64).
type BatchAckBody struct {
	BrokerName string     `json:"brokerName"`
	Acks       []BatchAck `json:"acks"`
}

// BatchAck is one entry of a batch ack.
type BatchAck struct {
	ConsumerGroup string
	// Topic is the requested topic; Retry says whether the messages live
	// in its pop-retry topic (FlagNormal, FlagRetryV1, FlagRetryV2).
	Topic         string
	Retry         string
	StartOffset   int64
	QueueID       int32
	ReviveQueueID int32
	PopTime       int64
	InvisibleTime int64
	// Bits are the acknowledged offsets' bits, Java BitSet byte order.
	Bits []byte
}

// ErrBadBatchAck is returned by DecodeBatchAck for a body it cannot read.
var ErrBadBatchAck = errors.New("pop: malformed batch ack body")

// UnmarshalJSON reads one ack with short or long field names.
func (a *BatchAck) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	get := func(short, long string) json.RawMessage {
		if v, ok := m[short]; ok {
			return v
		}
		return m[long]
	}
	str := func(short, long string) (string, error) {
		v := get(short, long)
		if v == nil || string(v) == "null" {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			return s, nil
		}
		var n json.Number
		if err := json.Unmarshal(v, &n); err == nil {
			return n.String(), nil
		}
		return "", fmt.Errorf("field %s is not a string", short)
	}
	num := func(short, long string, bits int) (int64, error) {
		v := get(short, long)
		if v == nil || string(v) == "null" {
			return 0, nil
		}
		s := string(bytes.Trim(v, `"`))
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return 0, fmt.Errorf("field %s is not a %d-bit integer", short, bits)
		}
		return n, nil
	}
	var err error
	if a.ConsumerGroup, err = str("c", "consumerGroup"); err != nil {
		return err
	}
	if a.Topic, err = str("t", "topic"); err != nil {
		return err
	}
	if a.Retry, err = str("r", "retry"); err != nil {
		return err
	}
	if a.StartOffset, err = num("so", "startOffset", 64); err != nil {
		return err
	}
	q, err := num("q", "queueId", 32)
	if err != nil {
		return err
	}
	a.QueueID = int32(q)
	rq, err := num("rq", "reviveQueueId", 32)
	if err != nil {
		return err
	}
	a.ReviveQueueID = int32(rq)
	if a.PopTime, err = num("pt", "popTime", 64); err != nil {
		return err
	}
	if a.InvisibleTime, err = num("it", "invisibleTime", 64); err != nil {
		return err
	}
	if v := get("b", "bitSet"); v != nil && string(v) != "null" {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			if a.Bits, err = base64.StdEncoding.DecodeString(s); err != nil {
				return fmt.Errorf("field b is not Base64: %w", err)
			}
		} else {
			// fastjson also reads a byte array written as numbers.
			var nums []int8
			if err := json.Unmarshal(v, &nums); err != nil {
				return fmt.Errorf("field b is neither Base64 nor a byte array")
			}
			a.Bits = make([]byte, len(nums))
			for i, n := range nums {
				a.Bits[i] = byte(n)
			}
		}
	}
	return nil
}

// MarshalJSON writes the short names, as the Java client does.
func (a BatchAck) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		C  string `json:"c"`
		T  string `json:"t"`
		R  string `json:"r"`
		SO int64  `json:"so"`
		Q  int32  `json:"q"`
		RQ int32  `json:"rq"`
		PT int64  `json:"pt"`
		IT int64  `json:"it"`
		B  string `json:"b"`
	}{a.ConsumerGroup, a.Topic, a.Retry, a.StartOffset, a.QueueID, a.ReviveQueueID, a.PopTime, a.InvisibleTime,
		base64.StdEncoding.EncodeToString(a.Bits)})
}

// DecodeBatchAck parses a BATCH_ACK_MESSAGE body.
func DecodeBatchAck(body []byte) (BatchAckBody, error) {
	var b BatchAckBody
	if err := json.Unmarshal(body, &b); err != nil {
		return b, fmt.Errorf("%w: %w", ErrBadBatchAck, err)
	}
	return b, nil
}

// Offsets returns the acknowledged offsets, StartOffset + i for each bit
// i set, in increasing order.
func (a *BatchAck) Offsets() []int64 {
	var out []int64
	for i, by := range a.Bits {
		for j := 0; j < 8; j++ {
			if by&(1<<j) != 0 {
				out = append(out, a.StartOffset+int64(8*i+j))
			}
		}
	}
	return out
}

// OffsetsIn returns the acknowledged offsets within [lo, hi], in
// increasing order, without walking bits beyond hi (a body may carry a
// bit set far larger than any queue).
func (a *BatchAck) OffsetsIn(lo, hi int64) []int64 {
	var out []int64
	for i, by := range a.Bits {
		if by == 0 {
			continue
		}
		base := a.StartOffset + int64(8*i)
		if base > hi || base < a.StartOffset {
			break
		}
		for j := 0; j < 8; j++ {
			if off := base + int64(j); by&(1<<j) != 0 && off >= lo && off <= hi {
				out = append(out, off)
			}
		}
	}
	return out
}

// SetBit marks offset StartOffset + i as acknowledged.
func (a *BatchAck) SetBit(i int) {
	for len(a.Bits) <= i/8 {
		a.Bits = append(a.Bits, 0)
	}
	a.Bits[i/8] |= 1 << (i % 8)
}

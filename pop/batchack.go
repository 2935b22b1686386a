package pop

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
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

// batchAckFields are the fields of one ack under both the short names the
// Java client writes and the long ones fastjson also accepts, decoded in
// one pass (a map of raw fields cost 52 allocations and 7 µs per ack).
type batchAckFields struct {
	C             json.RawMessage `json:"c"`
	ConsumerGroup json.RawMessage `json:"consumerGroup"`
	T             json.RawMessage `json:"t"`
	Topic         json.RawMessage `json:"topic"`
	R             json.RawMessage `json:"r"`
	Retry         json.RawMessage `json:"retry"`
	SO            json.RawMessage `json:"so"`
	StartOffset   json.RawMessage `json:"startOffset"`
	Q             json.RawMessage `json:"q"`
	QueueID       json.RawMessage `json:"queueId"`
	RQ            json.RawMessage `json:"rq"`
	ReviveQueueID json.RawMessage `json:"reviveQueueId"`
	PT            json.RawMessage `json:"pt"`
	PopTime       json.RawMessage `json:"popTime"`
	IT            json.RawMessage `json:"it"`
	InvisibleTime json.RawMessage `json:"invisibleTime"`
	B             json.RawMessage `json:"b"`
	BitSet        json.RawMessage `json:"bitSet"`
}

// either returns the short-named field when present, else the long one.
func either(short, long json.RawMessage) json.RawMessage {
	if short != nil {
		return short
	}
	return long
}

// ackString reads a string field, or a number written for one.
func ackString(v json.RawMessage, name string) (string, error) {
	if v == nil || string(v) == "null" {
		return "", nil
	}
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err == nil {
		return n.String(), nil
	}
	return "", fmt.Errorf("field %s is not a string", name)
}

// ackInt reads an integer field, quoted or not.
func ackInt(v json.RawMessage, name string, bits int) (int64, error) {
	if v == nil || string(v) == "null" {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(bytes.Trim(v, `"`)), 10, bits)
	if err != nil {
		return 0, fmt.Errorf("field %s is not a %d-bit integer", name, bits)
	}
	return n, nil
}

// UnmarshalJSON reads one ack with short or long field names.
func (a *BatchAck) UnmarshalJSON(data []byte) error {
	var f batchAckFields
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	var err error
	if a.ConsumerGroup, err = ackString(either(f.C, f.ConsumerGroup), "c"); err != nil {
		return err
	}
	if a.Topic, err = ackString(either(f.T, f.Topic), "t"); err != nil {
		return err
	}
	if a.Retry, err = ackString(either(f.R, f.Retry), "r"); err != nil {
		return err
	}
	if a.StartOffset, err = ackInt(either(f.SO, f.StartOffset), "so", 64); err != nil {
		return err
	}
	q, err := ackInt(either(f.Q, f.QueueID), "q", 32)
	if err != nil {
		return err
	}
	a.QueueID = int32(q)
	rq, err := ackInt(either(f.RQ, f.ReviveQueueID), "rq", 32)
	if err != nil {
		return err
	}
	a.ReviveQueueID = int32(rq)
	if a.PopTime, err = ackInt(either(f.PT, f.PopTime), "pt", 64); err != nil {
		return err
	}
	if a.InvisibleTime, err = ackInt(either(f.IT, f.InvisibleTime), "it", 64); err != nil {
		return err
	}
	if v := either(f.B, f.BitSet); v != nil && string(v) != "null" {
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

// AppendJSON appends the body as JSON to dst and returns the extended
// slice. The bytes are those json.Marshal writes for b (short names in the
// order of MarshalJSON, strings escaped as encoding/json escapes them, a
// nil Acks as null), without reflection and in one buffer.
func (b *BatchAckBody) AppendJSON(dst []byte) []byte {
	// Room for the usual body, whose names need no escapes: the fixed
	// text and five numbers of up to 20 digits per ack.
	n := len(`{"brokerName":"","acks":[]}`) + len(b.BrokerName)
	for i := range b.Acks {
		a := &b.Acks[i]
		n += 160 + len(a.ConsumerGroup) + len(a.Topic) + len(a.Retry) + base64.StdEncoding.EncodedLen(len(a.Bits))
	}
	dst = slices.Grow(dst, n)
	dst = append(dst, `{"brokerName":`...)
	dst = appendJSONString(dst, b.BrokerName)
	dst = append(dst, `,"acks":`...)
	if b.Acks == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range b.Acks {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = b.Acks[i].appendJSON(dst)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// appendJSON appends the ack as MarshalJSON writes it.
func (a *BatchAck) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"c":`...)
	dst = appendJSONString(dst, a.ConsumerGroup)
	dst = append(dst, `,"t":`...)
	dst = appendJSONString(dst, a.Topic)
	dst = append(dst, `,"r":`...)
	dst = appendJSONString(dst, a.Retry)
	dst = append(dst, `,"so":`...)
	dst = strconv.AppendInt(dst, a.StartOffset, 10)
	dst = append(dst, `,"q":`...)
	dst = strconv.AppendInt(dst, int64(a.QueueID), 10)
	dst = append(dst, `,"rq":`...)
	dst = strconv.AppendInt(dst, int64(a.ReviveQueueID), 10)
	dst = append(dst, `,"pt":`...)
	dst = strconv.AppendInt(dst, a.PopTime, 10)
	dst = append(dst, `,"it":`...)
	dst = strconv.AppendInt(dst, a.InvisibleTime, 10)
	dst = append(dst, `,"b":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, a.Bits)
	return append(dst, `"}`...)
}

// jsonHex are the digits of \u escapes, lower case as encoding/json
// writes them.
const jsonHex = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way encoding/json
// writes one: '"' and '\\' escaped with a backslash; \b, \f, \n, \r and
// \t by name; the other control characters and the HTML-sensitive '<',
// '>' and '&' as \u00XX; U+2028 and U+2029 as \u2028 and \u2029; each byte
// of invalid UTF-8 as \ufffd. Everything else is copied as it is.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	done := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[done:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', jsonHex[c>>4], jsonHex[c&0xF])
			}
			i++
			done = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[done:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[done:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', jsonHex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		done = i
	}
	dst = append(dst, s[done:]...)
	return append(dst, '"')
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

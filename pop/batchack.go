package pop

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"

	"github.com/rocketkv/rocketkv/internal/jsonscan"
	"github.com/rocketkv/rocketkv/kvindex"
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

// UnmarshalJSON reads one ack with short or long field names (see
// decodeAck).
func (a *BatchAck) UnmarshalJSON(data []byte) error {
	s := jsonscan.New(data)
	if err := decodeAck(&s, a); err != nil {
		return err
	}
	return s.End()
}

// decodeAck reads one ack object (or null, the zero ack) under the short
// names the Java client writes and the long ones fastjson also accepts;
// a short name wins over its long one. String fields take a number as its
// text and integer fields a quoted number, as fastjson does; the bit set
// is Base64 or an array of signed bytes.
func decodeAck(s *jsonscan.Scanner, a *BatchAck) error {
	*a = BatchAck{}
	if s.Literal("null") {
		return nil
	}
	var short uint16 // bit i: field i was set under its short name
	take := func(field int, isShort bool) bool {
		if isShort {
			short |= 1 << field
			return true
		}
		return short&(1<<field) == 0
	}
	return s.Object(func(key []byte) error {
		var err error
		switch k := string(key); k {
		case "c", "consumerGroup":
			err = ackString(s, k, &a.ConsumerGroup, take(0, k == "c"))
		case "t", "topic":
			err = ackString(s, k, &a.Topic, take(1, k == "t"))
		case "r", "retry":
			err = ackString(s, k, &a.Retry, take(2, k == "r"))
		case "so", "startOffset":
			err = ackInt(s, k, 64, &a.StartOffset, take(3, k == "so"))
		case "q", "queueId":
			var v int64
			if err = ackInt(s, k, 32, &v, true); err == nil && take(4, k == "q") {
				a.QueueID = int32(v)
			}
		case "rq", "reviveQueueId":
			var v int64
			if err = ackInt(s, k, 32, &v, true); err == nil && take(5, k == "rq") {
				a.ReviveQueueID = int32(v)
			}
		case "pt", "popTime":
			err = ackInt(s, k, 64, &a.PopTime, take(6, k == "pt"))
		case "it", "invisibleTime":
			err = ackInt(s, k, 64, &a.InvisibleTime, take(7, k == "it"))
		case "b", "bitSet":
			var bits []byte
			if bits, err = ackBits(s, k); err == nil && take(8, k == "b") {
				a.Bits = bits
			}
		default:
			_, err = s.SkipValue()
		}
		return err
	})
}

// ackString reads a string field (a number is taken as its text, null as
// empty) into *dst when keep is set.
func ackString(s *jsonscan.Scanner, name string, dst *string, keep bool) error {
	var v string
	switch b := s.Peek(); {
	case b == '"':
		raw, err := s.RawString()
		if err != nil {
			return err
		}
		if keep {
			v = string(raw)
		}
	case b == 'n' && s.Literal("null"):
	case b == '-' || (b >= '0' && b <= '9'):
		raw, err := s.Number()
		if err != nil {
			return err
		}
		if keep {
			v = string(raw)
		}
	default:
		return s.Errorf("field %s is not a string", name)
	}
	if keep {
		*dst = v
	}
	return nil
}

// ackInt reads an integer field, quoted or not, into *dst when keep is
// set.
func ackInt(s *jsonscan.Scanner, name string, bits int, dst *int64, keep bool) error {
	v, err := s.Int(bits)
	if err != nil {
		return fmt.Errorf("field %s: %w", name, err)
	}
	if keep {
		*dst = v
	}
	return nil
}

// ackBits reads the bit set: Base64 text, an array of signed bytes, or
// null.
func ackBits(s *jsonscan.Scanner, name string) ([]byte, error) {
	switch s.Peek() {
	case '"':
		text, err := s.RawString()
		if err != nil {
			return nil, err
		}
		bits := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
		n, err := base64.StdEncoding.Decode(bits, text)
		if err != nil {
			return nil, fmt.Errorf("field %s is not Base64: %w", name, err)
		}
		return bits[:n], nil
	case '[':
		bits := []byte{}
		err := s.Array(func() error {
			n, err := s.Int(8)
			if err != nil {
				return fmt.Errorf("field %s: %w", name, err)
			}
			bits = append(bits, byte(n))
			return nil
		})
		return bits, err
	case 'n':
		if s.Literal("null") {
			return nil, nil
		}
	}
	return nil, s.Errorf("field %s is neither Base64 nor a byte array", name)
}

// MarshalJSON writes the short names, as the Java client does (see
// appendJSON).
func (a BatchAck) MarshalJSON() ([]byte, error) { return a.appendJSON(nil), nil }

// AppendJSON appends the body as JSON to dst and returns the extended
// slice: what json.Marshal writes for b (short names in the order of
// MarshalJSON, a nil Acks as null) up to the escaping of strings
// (jsonscan.AppendString), without reflection and in one buffer.
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
	dst = jsonscan.AppendString(dst, b.BrokerName)
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
	dst = jsonscan.AppendString(dst, a.ConsumerGroup)
	dst = append(dst, `,"t":`...)
	dst = jsonscan.AppendString(dst, a.Topic)
	dst = append(dst, `,"r":`...)
	dst = jsonscan.AppendString(dst, a.Retry)
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

// DecodeBatchAck parses a BATCH_ACK_MESSAGE body (null reads as an empty
// one, as fastjson reads it). Unknown members are skipped.
func DecodeBatchAck(body []byte) (BatchAckBody, error) {
	var b BatchAckBody
	s := jsonscan.New(body)
	err := decodeBatchAckBody(&s, &b)
	if err == nil {
		err = s.End()
	}
	if err != nil {
		return BatchAckBody{}, fmt.Errorf("%w: %w", ErrBadBatchAck, err)
	}
	return b, nil
}

func decodeBatchAckBody(s *jsonscan.Scanner, b *BatchAckBody) error {
	if s.Literal("null") {
		return nil
	}
	return s.Object(func(key []byte) error {
		switch string(key) {
		case "brokerName":
			return ackString(s, "brokerName", &b.BrokerName, true)
		case "acks":
			if s.Literal("null") {
				b.Acks = nil
				return nil
			}
			b.Acks = b.Acks[:0]
			return s.Array(func() error {
				b.Acks = append(b.Acks, BatchAck{})
				return decodeAck(s, &b.Acks[len(b.Acks)-1])
			})
		}
		_, err := s.SkipValue()
		return err
	})
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
	// Only a checkpoint's offsets can be acknowledged, and every
	// checkpoint lies within kvindex.MaxCheckpointSpan of its first
	// offset, the entry's StartOffset.
	hi = min(hi, a.StartOffset+kvindex.MaxCheckpointSpan-1)
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

// Count returns how many offsets the entry acknowledges that a
// checkpoint can hold: the bits set within kvindex.MaxCheckpointSpan of
// StartOffset.
func (a *BatchAck) Count() int {
	n := 0
	for _, by := range a.Bits[:min(len(a.Bits), kvindex.MaxCheckpointSpan/8)] {
		n += bits.OnesCount8(by)
	}
	return n
}

// MaxBatchAckOffsets bounds the offsets one BATCH_ACK_MESSAGE may
// acknowledge (Count over its entries): a pop returns at most 32 messages
// of a queue, and one request's bit sets would otherwise make 64 times
// their bytes of offsets.
const MaxBatchAckOffsets = 1 << 20

// MaxAckBits bounds the bit set of one ack entry: an acknowledged offset
// lies at most this many offsets minus one above the entry's StartOffset
// (rocketkv's checkpoints span at most 4,096; this leaves room for any
// broker's filtered pops while keeping a bit set under 2 MiB).
const MaxAckBits = 1 << 24

// ErrAckBit is returned by SetBit for an index outside [0, MaxAckBits).
var ErrAckBit = errors.New("pop: acknowledged offset outside the entry's bit set")

// SetBit marks offset StartOffset + i as acknowledged. An offset below
// StartOffset, or MaxAckBits or more above it (a handle no broker writes,
// but a response's bytes can carry), is ErrAckBit.
func (a *BatchAck) SetBit(i int64) error {
	if i < 0 || i >= MaxAckBits {
		return fmt.Errorf("%w: offset %d of an entry starting at %d", ErrAckBit, a.StartOffset+i, a.StartOffset)
	}
	for int64(len(a.Bits)) <= i/8 {
		a.Bits = append(a.Bits, 0)
	}
	a.Bits[i/8] |= 1 << (i % 8)
	return nil
}

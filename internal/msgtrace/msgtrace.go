// Package msgtrace decodes (and, for a send, encodes) the message trace
// records RocketMQ's clients store in the trace topic (RMQ_SYS_TRACE_TOPIC
// by default), as RocketMQ's TraceDataEncoder.decoderFromTraceDataString
// reads them, for mqadmin
// queryMsgTraceById.
//
// A trace message's body is UTF-8 text holding one or more records, each
// ended by FieldSplitor (0x02); a record's fields are separated by
// ContentSplitor (0x01), its first field naming its type:
//
//	Pub            type timeStamp regionId groupName topic msgId tags keys storeHost bodyLength costTime msgType [offsetMsgId] success [clientHost]
//	SubBefore      type timeStamp regionId groupName requestId msgId retryTimes keys
//	SubAfter       type requestId msgId costTime success keys [contextCode [timeStamp groupName]]
//	EndTransaction type timeStamp regionId groupName topic msgId tags keys storeHost msgType transactionId transactionState fromTransactionCheck
//	Recall         type timeStamp regionId groupName topic msgId success
//
// A Pub record of 12 fields has no success (taken as true), one of 13
// has success and no offsetMsgId. As Java's String.split, empty fields
// at the end of a record, and empty records at the end of the body, are
// dropped; a record of another type is skipped. Numbers are decimal
// (costTime, bodyLength, retryTimes and contextCode 32-bit), booleans true
// when "true" in any case, msgType an index into RocketMQ's MessageType
// (Normal_Msg, Trans_Msg_Half, Trans_msg_Commit, Delay_Msg, Order_Msg) and
// transactionState the name of a LocalTransactionState.
//
// AppendPub writes a Pub record as RocketMQ's Java producers write one (for
// bin/admin sendMessage -m), and TransKeys gives the keys of the trace
// message that holds it.
//
// Decode is safe for concurrent use.
package msgtrace

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ContentSplitor separates the fields of a record and FieldSplitor ends a
// record (RocketMQ's TraceConstants.CONTENT_SPLITOR and FIELD_SPLITOR).
const (
	ContentSplitor = '\x01'
	FieldSplitor   = '\x02'
)

// The record types (RocketMQ's TraceType).
const (
	Pub            = "Pub"
	SubBefore      = "SubBefore"
	SubAfter       = "SubAfter"
	EndTransaction = "EndTransaction"
	Recall         = "Recall"
)

// ErrMalformed is returned by Decode for a record of a known type that
// lacks a field or holds a value the Java decoder cannot parse (where
// RocketMQ's decoder throws).
var ErrMalformed = errors.New("malformed trace record")

// MessageTypes are RocketMQ's MessageType names, by the index a record
// holds.
var MessageTypes = [...]string{"Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg"}

// transactionStates are RocketMQ's LocalTransactionState names.
var transactionStates = map[string]bool{"COMMIT_MESSAGE": true, "ROLLBACK_MESSAGE": true, "UNKNOW": true}

// Record is one decoded trace record (RocketMQ's TraceContext with its
// one TraceBean); a field its type does not carry is left zero, except
// Success, true unless the record says otherwise (TraceContext's
// default).
type Record struct {
	// Type is Pub, SubBefore, SubAfter, EndTransaction or Recall.
	Type string
	// TimeStamp is the client's clock (ms); HasTimeStamp is false for a
	// SubAfter record written without it (RocketMQ then shows the time of
	// decoding).
	TimeStamp    int64
	HasTimeStamp bool
	RegionID     string
	GroupName    string
	RequestID    string
	// CostTime is the send's or the consumption's duration, in ms.
	CostTime    int32
	Success     bool
	ContextCode int32

	Topic       string
	MsgID       string
	Tags        string
	Keys        string
	StoreHost   string
	ClientHost  string
	OffsetMsgID string
	BodyLength  int32
	// MsgType is an index into MessageTypes.
	MsgType              int
	RetryTimes           int32
	TransactionID        string
	TransactionState     string
	FromTransactionCheck bool
}

// Decode reads the records of a trace message's body. Bytes that are not
// UTF-8 are read as U+FFFD, as Java decodes the body.
func Decode(body []byte) ([]Record, error) {
	text := string(bytes.ToValidUTF8(body, []byte("\uFFFD")))
	var out []Record
	for i, rec := range javaSplit(text, FieldSplitor) {
		f := javaSplit(rec, ContentSplitor)
		if len(f) == 0 {
			return out, fmt.Errorf("trace record %d holds nothing but separators: %w", i, ErrMalformed)
		}
		r := Record{Type: f[0], Success: true}
		p := fieldParser{fields: f}
		switch f[0] {
		case Pub:
			f = p.need(12)
			r.TimeStamp, r.HasTimeStamp = p.int64(1), true
			r.RegionID, r.GroupName, r.Topic, r.MsgID, r.Tags, r.Keys, r.StoreHost = f[2], f[3], f[4], f[5], f[6], f[7], f[8]
			r.BodyLength, r.CostTime, r.MsgType = p.int32(9), p.int32(10), p.msgType(11)
			switch {
			case len(f) == 13:
				r.Success = javaBool(f[12])
			case len(f) >= 14:
				r.OffsetMsgID, r.Success = f[12], javaBool(f[13])
				if len(f) >= 15 {
					r.ClientHost = f[14]
				}
			}
		case SubBefore:
			f = p.need(8)
			r.TimeStamp, r.HasTimeStamp = p.int64(1), true
			r.RegionID, r.GroupName, r.RequestID, r.MsgID = f[2], f[3], f[4], f[5]
			r.RetryTimes, r.Keys = p.int32(6), f[7]
		case SubAfter:
			f = p.need(6)
			r.RequestID, r.MsgID, r.CostTime, r.Success, r.Keys = f[1], f[2], p.int32(3), javaBool(f[4]), f[5]
			if len(f) >= 7 {
				r.ContextCode = p.int32(6)
			}
			if len(f) >= 9 {
				r.TimeStamp, r.HasTimeStamp, r.GroupName = p.int64(7), true, f[8]
			}
		case EndTransaction:
			f = p.need(13)
			r.TimeStamp, r.HasTimeStamp = p.int64(1), true
			r.RegionID, r.GroupName, r.Topic, r.MsgID, r.Tags, r.Keys, r.StoreHost = f[2], f[3], f[4], f[5], f[6], f[7], f[8]
			r.MsgType, r.TransactionID, r.TransactionState, r.FromTransactionCheck = p.msgType(9), f[10], f[11], javaBool(f[12])
			if p.err == nil && !transactionStates[r.TransactionState] {
				p.err = fmt.Errorf("field 11, %q, is not a LocalTransactionState", r.TransactionState)
			}
		case Recall:
			f = p.need(7)
			r.TimeStamp, r.HasTimeStamp = p.int64(1), true
			r.RegionID, r.GroupName, r.Topic, r.MsgID, r.Success = f[2], f[3], f[4], f[5], javaBool(f[6])
		default:
			continue
		}
		if p.err != nil {
			return out, fmt.Errorf("trace record %d (%s): %w: %w", i, f[0], ErrMalformed, p.err)
		}
		out = append(out, r)
	}
	return out, nil
}

// fieldParser reads the fields of one record, keeping the first problem.
// After need fails, every field is read as "" or 0.
type fieldParser struct {
	fields []string
	err    error
}

// need checks that the record has at least n fields and returns them,
// padded with empty ones when it has fewer, so that the reads that follow
// stay in range.
func (p *fieldParser) need(n int) []string {
	if len(p.fields) < n {
		p.err = fmt.Errorf("%d fields, want at least %d", len(p.fields), n)
		p.fields = append(p.fields, make([]string, n-len(p.fields))...)
	}
	return p.fields
}

func (p *fieldParser) parse(i, bits int) int64 {
	v, err := strconv.ParseInt(p.fields[i], 10, bits)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("field %d, %q, is not a %d-bit number", i, p.fields[i], bits)
	}
	return v
}

func (p *fieldParser) int64(i int) int64 { return p.parse(i, 64) }

func (p *fieldParser) int32(i int) int32 { return int32(p.parse(i, 32)) }

// msgType reads an index into MessageTypes.
func (p *fieldParser) msgType(i int) int {
	v := p.int32(i)
	if (v < 0 || int(v) >= len(MessageTypes)) && p.err == nil {
		p.err = fmt.Errorf("field %d, %d, is not a MessageType (0 to %d)", i, v, len(MessageTypes)-1)
	}
	return int(v)
}

// javaBool is Java's Boolean.parseBoolean.
func javaBool(s string) bool { return strings.EqualFold(s, "true") }

// javaSplit is Java's String.split by one character: the empty strings at
// the end are dropped, and a string without sep is returned whole (so ""
// gives one empty field).
func javaSplit(s string, sep byte) []string {
	parts := strings.Split(s, string(sep))
	if len(parts) == 1 {
		return parts
	}
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

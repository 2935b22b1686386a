package pop

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The pop response header describes its messages with three strings of
// entries joined by ';', each entry three parts joined by ' '
// (RocketMQ's ExtraInfoUtil):
//
//	startOffsetInfo  "<retryFlag> <queueId> <ckStartOffset>"         one per queue popped
//	msgOffsetInfo    "<retryFlag> <queueId> <off1>,<off2>,..."        one per queue, offsets in pop order
//	orderCountInfo   "<retryFlag> qo<queueId>%<queueOffset> <count>"  per message of an orderly pop,
//	                 then "<retryFlag> <queueId> <minCount>"          per queue
//
// For example a pop of two messages from the V1 retry topic's queue 0 at
// offset 4 and three from queue 2 at offset 10 reports
// startOffsetInfo "1 0 4;0 2 10" and msgOffsetInfo "1 0 4,5;0 2 10,11,12".

// InfoBuilder accumulates the header strings of one pop response. The
// numbers are appended in place (strconv.AppendInt): a pop of 32 messages
// formatted 33 strings of them before.
type InfoBuilder struct {
	start, msg, order []byte
}

// entry starts an entry "<flag> <queueId> " of b, after a ';' when b has
// one already.
func entry(b []byte, flag string, queueID int32) []byte {
	if len(b) > 0 {
		b = append(b, ';')
	}
	b = append(b, flag...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(queueID), 10)
	return append(b, ' ')
}

// AddQueue appends the startOffsetInfo and msgOffsetInfo entries of one
// queue (offsets non-empty).
func (ib *InfoBuilder) AddQueue(flag string, queueID int32, ckOffset int64, offsets []int64) {
	ib.start = strconv.AppendInt(entry(ib.start, flag, queueID), ckOffset, 10)
	ib.msg = entry(ib.msg, flag, queueID)
	for i, o := range offsets {
		if i > 0 {
			ib.msg = append(ib.msg, ',')
		}
		ib.msg = strconv.AppendInt(ib.msg, o, 10)
	}
}

// AddOrderOffset appends the orderCountInfo entry of one message:
// "<flag> qo<queueId>%<offset> <count>".
func (ib *InfoBuilder) AddOrderOffset(flag string, queueID int32, offset int64, count int32) {
	if len(ib.order) > 0 {
		ib.order = append(ib.order, ';')
	}
	ib.order = append(append(ib.order, flag...), " qo"...)
	ib.order = strconv.AppendInt(ib.order, int64(queueID), 10)
	ib.order = strconv.AppendInt(append(ib.order, '%'), offset, 10)
	ib.order = strconv.AppendInt(append(ib.order, ' '), int64(count), 10)
}

// AddOrderQueue appends the per-queue orderCountInfo entry (the smallest
// count of the queue's messages, for older clients).
func (ib *InfoBuilder) AddOrderQueue(flag string, queueID int32, count int32) {
	ib.order = strconv.AppendInt(entry(ib.order, flag, queueID), int64(count), 10)
}

// StartOffsetInfo returns the startOffsetInfo string.
func (ib *InfoBuilder) StartOffsetInfo() string { return string(ib.start) }

// MsgOffsetInfo returns the msgOffsetInfo string.
func (ib *InfoBuilder) MsgOffsetInfo() string { return string(ib.msg) }

// OrderCountInfo returns the orderCountInfo string.
func (ib *InfoBuilder) OrderCountInfo() string { return string(ib.order) }

// ErrBadInfo is returned by the header parsers for malformed strings.
var ErrBadInfo = errors.New("pop: malformed pop response header info")

// InfoKey is the key the parsed header maps use: "<retryFlag>@<queueId>",
// or "<retryFlag>@qo<queueId>%<offset>" for per-message order counts.
func InfoKey(flag string, queueID int32) string { return string(AppendInfoKey(nil, flag, queueID)) }

// AppendInfoKey appends InfoKey(flag, queueID) to dst, for lookups that
// build keys in a reused buffer.
func AppendInfoKey(dst []byte, flag string, queueID int32) []byte {
	dst = append(dst, flag...)
	dst = append(dst, '@')
	return strconv.AppendInt(dst, int64(queueID), 10)
}

// OrderOffsetKey is the orderCountInfo key of one message.
func OrderOffsetKey(flag string, queueID int32, offset int64) string {
	return string(AppendOrderOffsetKey(nil, flag, queueID, offset))
}

// AppendOrderOffsetKey appends OrderOffsetKey(flag, queueID, offset) to
// dst.
func AppendOrderOffsetKey(dst []byte, flag string, queueID int32, offset int64) []byte {
	dst = append(dst, flag...)
	dst = append(dst, "@qo"...)
	dst = strconv.AppendInt(dst, int64(queueID), 10)
	dst = append(dst, '%')
	return strconv.AppendInt(dst, offset, 10)
}

// splitInfo calls fn with the key ("<part1>@<part2>") and the third part
// of each ';'-separated entry of s, which must have exactly three
// ' '-separated parts. It walks s in place rather than splitting it: the
// only allocation per entry is the key.
func splitInfo(s string, fn func(key, value string) error) error {
	if s == "" {
		return nil
	}
	for rest, more := s, true; more; {
		var one string
		one, rest, more = strings.Cut(rest, ";")
		if strings.Count(one, " ") != 2 {
			return fmt.Errorf("%w: entry %q", ErrBadInfo, one)
		}
		first, tail, _ := strings.Cut(one, " ")
		second, value, _ := strings.Cut(tail, " ")
		if err := fn(first+"@"+second, value); err != nil {
			return err
		}
	}
	return nil
}

// infoEntries returns how many entries splitInfo will visit in s, to size
// the maps it fills.
func infoEntries(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(s, ";") + 1
}

// ParseStartOffsetInfo parses startOffsetInfo into ckStartOffset by
// InfoKey. Duplicate keys are an error, as in RocketMQ.
func ParseStartOffsetInfo(s string) (map[string]int64, error) {
	out := make(map[string]int64, infoEntries(s))
	err := splitInfo(s, func(k, v string) error {
		if _, dup := out[k]; dup {
			return fmt.Errorf("%w: duplicate %s", ErrBadInfo, k)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: offset %q", ErrBadInfo, v)
		}
		out[k] = n
		return nil
	})
	return out, err
}

// ParseMsgOffsetInfo parses msgOffsetInfo into offset lists by InfoKey.
func ParseMsgOffsetInfo(s string) (map[string][]int64, error) {
	out := make(map[string][]int64, infoEntries(s))
	err := splitInfo(s, func(k, v string) error {
		if _, dup := out[k]; dup {
			return fmt.Errorf("%w: duplicate %s", ErrBadInfo, k)
		}
		offs := make([]int64, 0, strings.Count(v, ",")+1)
		for rest, more := v, true; more; {
			var o string
			o, rest, more = strings.Cut(rest, ",")
			n, err := strconv.ParseInt(o, 10, 64)
			if err != nil {
				return fmt.Errorf("%w: offset %q", ErrBadInfo, o)
			}
			offs = append(offs, n)
		}
		out[k] = offs
		return nil
	})
	return out, err
}

// ParseOrderCountInfo parses orderCountInfo into counts by InfoKey (queue
// entries) and OrderOffsetKey (message entries).
func ParseOrderCountInfo(s string) (map[string]int32, error) {
	out := make(map[string]int32, infoEntries(s))
	err := splitInfo(s, func(k, v string) error {
		if _, dup := out[k]; dup {
			return fmt.Errorf("%w: duplicate %s", ErrBadInfo, k)
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%w: count %q", ErrBadInfo, v)
		}
		out[k] = int32(n)
		return nil
	})
	return out, err
}

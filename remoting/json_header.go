package remoting

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/rocketkv/rocketkv/internal/jsonscan"
)

// ErrBadJSONHeader is returned (wrapped, with the position and the cause)
// when a JSON header is not a JSON object or one of its known fields has
// the wrong type.
var ErrBadJSONHeader = errors.New("bad JSON header")

// extFieldsHint sizes a decoded header's ext field map: 14 fields (a
// SEND_MESSAGE_V2 header has up to 14) fill a Go map of 16 slots at its
// maximum load; a hint of 16 would allocate 32.
const extFieldsHint = 14

// appendJSONHeader appends the JSON header of c to dst. Field order is the
// Go client's; ext fields come in the map's order (see below); every ext
// value is written as a JSON string.
func appendJSONHeader(dst []byte, c *Command) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	dst = append(dst, `,"language":`...)
	lang := c.Language
	if lang == "" {
		lang = DefaultLanguage
	}
	dst = jsonscan.AppendString(dst, lang)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(c.Flag), 10)
	dst = append(dst, `,"remark":`...)
	dst = jsonscan.AppendString(dst, c.Remark)
	dst = append(dst, `,"extFields":{`...)
	// In the map's order, as Java's HashMap writes them: sorting the keys
	// of every frame cost 5 % of a load generator's CPU, and no reader
	// depends on the order.
	first := true
	for k, v := range c.ExtFields {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = jsonscan.AppendString(dst, k)
		dst = append(dst, ':')
		dst = jsonscan.AppendString(dst, v)
	}
	return append(dst, "}}"...)
}

// decodeJSONHeader fills the header fields of c from a JSON header.
//
// Accepted beyond strict typing, as fastjson accepts it: null for any
// field (zero value), numeric strings for the integer fields, and numbers,
// booleans, objects and arrays as extFields values, which are kept as their
// literal JSON text. Null extFields values are dropped (Java treats them as
// absent). Unknown fields are skipped after being checked for syntax.
func decodeJSONHeader(data []byte, c *Command) error {
	s := jsonscan.New(data)
	if err := decodeHeader(&s, c); err != nil {
		return fmt.Errorf("%w: %w", ErrBadJSONHeader, err)
	}
	return nil
}

// internKey returns the ext field names clients send most as constants, so
// decoding them allocates nothing; other names are copied.
func internKey(k []byte) string {
	switch string(k) {
	case "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n":
		i := k[0] - 'a'
		return letterKeys[i : i+1]
	case "topic":
		return "topic"
	case "queueId":
		return "queueId"
	case "producerGroup":
		return "producerGroup"
	case "consumerGroup":
		return "consumerGroup"
	case "defaultTopic":
		return "defaultTopic"
	case "defaultTopicQueueNums":
		return "defaultTopicQueueNums"
	case "sysFlag":
		return "sysFlag"
	case "bornTimestamp":
		return "bornTimestamp"
	case "flag":
		return "flag"
	case "properties":
		return "properties"
	case "reconsumeTimes":
		return "reconsumeTimes"
	case "unitMode":
		return "unitMode"
	case "maxReconsumeTimes":
		return "maxReconsumeTimes"
	case "batch":
		return "batch"
	case "bname":
		return "bname"
	case "queueOffset":
		return "queueOffset"
	case "maxMsgNums":
		return "maxMsgNums"
	case "commitOffset":
		return "commitOffset"
	case "suspendTimeoutMillis":
		return "suspendTimeoutMillis"
	case "subscription":
		return "subscription"
	case "subVersion":
		return "subVersion"
	case "expressionType":
		return "expressionType"
	case "msgId":
		return "msgId"
	case "transactionId":
		return "transactionId"
	case "offset":
		return "offset"
	case "MSG_REGION":
		return "MSG_REGION"
	case "TRACE_ON":
		return "TRACE_ON"
	}
	return string(k)
}

// letterKeys are the single-letter ext names of SEND_MESSAGE_V2 headers.
const letterKeys = "abcdefghijklmn"

// decodeHeader reads the header object and checks that nothing follows.
func decodeHeader(s *jsonscan.Scanner, c *Command) error {
	err := s.Object(func(key []byte) error {
		var err error
		switch string(key) {
		case "code":
			c.Code, err = int32Value(s, key)
		case "version":
			c.Version, err = int32Value(s, key)
		case "opaque":
			c.Opaque, err = int32Value(s, key)
		case "flag":
			c.Flag, err = int32Value(s, key)
		case "language":
			c.Language, err = stringValue(s, key)
		case "remark":
			c.Remark, err = stringValue(s, key)
		case "extFields":
			err = extFields(s, c)
		default:
			_, err = s.SkipValue()
		}
		return err
	})
	if err != nil {
		return err
	}
	return s.End()
}

// extFields reads the extFields member: null or an object.
func extFields(s *jsonscan.Scanner, c *Command) error {
	if s.Literal("null") {
		return nil
	}
	if c.ExtFields == nil {
		c.ExtFields = make(map[string]string, extFieldsHint)
	}
	return s.Object(func(k []byte) error {
		switch s.Peek() {
		case '"':
			v, err := s.String()
			if err != nil {
				return err
			}
			c.ExtFields[internKey(k)] = v
			return nil
		case 'n':
			if s.Literal("null") {
				delete(c.ExtFields, string(k))
				return nil
			}
		}
		raw, err := s.SkipValue()
		if err != nil {
			return err
		}
		c.ExtFields[internKey(k)] = string(raw)
		return nil
	})
}

// stringValue reads a string or null (empty string).
func stringValue(s *jsonscan.Scanner, field []byte) (string, error) {
	switch s.Peek() {
	case '"':
		return s.String()
	case 'n':
		if s.Literal("null") {
			return "", nil
		}
	}
	return "", s.Errorf("field %q: want a string", field)
}

// int32Value reads an integer, a string holding an integer, or null (0).
func int32Value(s *jsonscan.Scanner, field []byte) (int32, error) {
	v, err := s.Int(32)
	if err != nil {
		return 0, fmt.Errorf("field %q: %w", field, err)
	}
	return int32(v), nil
}

// Package adminbody encodes and decodes the admin response bodies whose
// maps are keyed by MessageQueue objects: ResetOffsetBody, TopicStatsTable,
// ConsumeStats and ConsumerRunningInfo.
//
// RocketMQ serialises them with fastjson, which writes a map with object
// keys by putting the key object itself in key position. That is not JSON,
// so encoding/json can neither write nor read it:
//
//	{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:11110,
//	                {"brokerName":"b","queueId":1,"topic":"t"}:11112}}
//	                '------------- key: a MessageQueue ---------' '-value-'
//
// fastjson writes properties in alphabetical order, omits nulls and writes
// a double with a fraction (0.0). The Java admin tools (mqadmin, the
// dashboard) parse this form; the Go client parses it with a hand-written
// reader for ResetOffsetBody. Encoders here write exactly that form;
// Members reads it leniently (keys may be strings or objects, values any
// JSON value, nested object-keyed maps included).
package adminbody

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// MessageQueue names one queue of a topic on a broker.
type MessageQueue struct {
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	Topic      string `json:"topic"`
}

// Less orders queues by topic, then broker, then queue id.
func (q MessageQueue) Less(o MessageQueue) bool {
	if q.Topic != o.Topic {
		return q.Topic < o.Topic
	}
	if q.BrokerName != o.BrokerName {
		return q.BrokerName < o.BrokerName
	}
	return q.QueueID < o.QueueID
}

// appendKey writes q in fastjson's key form (alphabetical properties).
func (q MessageQueue) appendKey(dst []byte) []byte {
	dst = append(dst, `{"brokerName":`...)
	dst = strconv.AppendQuote(dst, q.BrokerName)
	dst = append(dst, `,"queueId":`...)
	dst = strconv.AppendInt(dst, int64(q.QueueID), 10)
	dst = append(dst, `,"topic":`...)
	dst = strconv.AppendQuote(dst, q.Topic)
	return append(dst, '}')
}

// TopicOffset is one queue's range in a TopicStatsTable.
type TopicOffset struct {
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
	MaxOffset           int64 `json:"maxOffset"`
	MinOffset           int64 `json:"minOffset"`
}

// OffsetWrapper is one queue's progress in a ConsumeStats.
type OffsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
	PullOffset     int64 `json:"pullOffset"`
}

// appendTable writes m as an object-keyed map, queues in order, each value
// written by val.
func appendTable[V any](dst []byte, m map[MessageQueue]V, val func([]byte, V) []byte) []byte {
	keys := make([]MessageQueue, 0, len(m))
	for q := range m {
		keys = append(keys, q)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Less(keys[j]) })
	dst = append(dst, '{')
	for i, q := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = q.appendKey(dst)
		dst = append(dst, ':')
		dst = val(dst, m[q])
	}
	return append(dst, '}')
}

// AppendDouble writes f as fastjson writes a double (and Java's
// Double.toString for the values rates take): always with a fraction part,
// 0.0 rather than 0.
func AppendDouble(dst []byte, f float64) []byte {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	dst = append(dst, s...)
	for _, c := range s {
		if c == '.' || c == 'e' || c == 'E' || c == 'N' || c == 'I' {
			return dst
		}
	}
	return append(dst, ".0"...)
}

// Connection is one client connection of a group (RocketMQ's
// Connection), in GET_CONSUMER_CONNECTION_LIST and
// GET_PRODUCER_CONNECTION_LIST bodies. These bodies are plain JSON;
// fields are in fastjson's alphabetical order.
type Connection struct {
	ClientAddr string `json:"clientAddr"`
	ClientID   string `json:"clientId"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
}

// SubscriptionData is one subscription of a consumer group.
type SubscriptionData struct {
	ClassFilterMode bool     `json:"classFilterMode"`
	CodeSet         []int64  `json:"codeSet"`
	ExpressionType  string   `json:"expressionType"`
	SubString       string   `json:"subString"`
	SubVersion      int64    `json:"subVersion"`
	TagsSet         []string `json:"tagsSet"`
	Topic           string   `json:"topic"`
}

// QueryConsumeQueue is the body of QUERY_CONSUME_QUEUE (RocketMQ's
// QueryConsumeQueueResponseBody), fields in fastjson's order, null ones
// left out as fastjson does.
type QueryConsumeQueue struct {
	FilterData       string             `json:"filterData,omitempty"`
	MaxQueueIndex    int64              `json:"maxQueueIndex"`
	MinQueueIndex    int64              `json:"minQueueIndex"`
	QueueData        []ConsumeQueueData `json:"queueData"`
	SubscriptionData *SubscriptionData  `json:"subscriptionData,omitempty"`
}

// ConsumeQueueData is one ConsumeQueue unit of QueryConsumeQueue, without
// the extension data rocketkv does not keep: eval is a Java boolean, so
// always present.
type ConsumeQueueData struct {
	Eval         bool  `json:"eval"`
	PhysicOffset int64 `json:"physicOffset"`
	PhysicSize   int32 `json:"physicSize"`
	TagsCode     int64 `json:"tagsCode"`
}

// ConsumerConnection is the body of GET_CONSUMER_CONNECTION_LIST: a
// group's live clients and subscriptions.
type ConsumerConnection struct {
	ConnectionSet     []Connection                `json:"connectionSet"`
	ConsumeFromWhere  string                      `json:"consumeFromWhere"`
	ConsumeType       string                      `json:"consumeType"`
	MessageModel      string                      `json:"messageModel"`
	SubscriptionTable map[string]SubscriptionData `json:"subscriptionTable"`
}

// ProducerConnection is the body of GET_PRODUCER_CONNECTION_LIST.
type ProducerConnection struct {
	ConnectionSet []Connection `json:"connectionSet"`
}

// GroupForbidden is the body of UPDATE_AND_GET_GROUP_FORBIDDEN's answer
// (RocketMQ's GroupForbidden, fields in fastjson's order): whether the
// group may read the topic after the request.
type GroupForbidden struct {
	Group    string `json:"group"`
	Readable bool   `json:"readable"`
	Topic    string `json:"topic"`
}

// ProducerInfo is one client of a producer group in a
// GET_ALL_PRODUCER_INFO body (RocketMQ's ProducerInfo). RemoteIP is the
// client's address as Java's SocketAddress.toString writes it, with a
// leading slash ("/10.0.0.1:53211"); LastUpdateTimestamp is the time of
// its last heartbeat, in ms. Fields are in fastjson's alphabetical order.
type ProducerInfo struct {
	ClientID            string `json:"clientId"`
	Language            string `json:"language"`
	LastUpdateTimestamp int64  `json:"lastUpdateTimestamp"`
	RemoteIP            string `json:"remoteIP"`
	Version             int32  `json:"version"`
}

// ProducerTableInfo is the body of GET_ALL_PRODUCER_INFO (RocketMQ's
// ProducerTableInfo): the clients of every producer group with one, by
// group name.
type ProducerTableInfo struct {
	Data map[string][]ProducerInfo `json:"data"`
}

// EncodeResetOffset writes a ResetOffsetBody: {"offsetTable":{<queue>:offset}}.
func EncodeResetOffset(table map[MessageQueue]int64) []byte {
	dst := append([]byte(nil), `{"offsetTable":`...)
	dst = appendTable(dst, table, func(b []byte, v int64) []byte { return strconv.AppendInt(b, v, 10) })
	return append(dst, '}')
}

// EncodeResetOffsetForC writes a ResetOffsetBodyForC, what RocketMQ 4's
// reset pushes to the clients when the admin request came from a C++
// client (language CPP): a list of MessageQueueForC instead of an
// object-keyed map, {"offsetTable":[{"brokerName":"b","offset":5,
// "queueId":0,"topic":"t"}]}, queues in order.
func EncodeResetOffsetForC(table map[MessageQueue]int64) []byte {
	keys := make([]MessageQueue, 0, len(table))
	for q := range table {
		keys = append(keys, q)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Less(keys[j]) })
	dst := append([]byte(nil), `{"offsetTable":[`...)
	for i, q := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"brokerName":`...)
		dst = strconv.AppendQuote(dst, q.BrokerName)
		dst = append(dst, `,"offset":`...)
		dst = strconv.AppendInt(dst, table[q], 10)
		dst = append(dst, `,"queueId":`...)
		dst = strconv.AppendInt(dst, int64(q.QueueID), 10)
		dst = append(dst, `,"topic":`...)
		dst = strconv.AppendQuote(dst, q.Topic)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// EncodeTopicStats writes a TopicStatsTable.
func EncodeTopicStats(table map[MessageQueue]TopicOffset, putTps float64) []byte {
	dst := append([]byte(nil), `{"offsetTable":`...)
	dst = appendTable(dst, table, func(b []byte, v TopicOffset) []byte {
		b = append(b, `{"lastUpdateTimestamp":`...)
		b = strconv.AppendInt(b, v.LastUpdateTimestamp, 10)
		b = append(b, `,"maxOffset":`...)
		b = strconv.AppendInt(b, v.MaxOffset, 10)
		b = append(b, `,"minOffset":`...)
		b = strconv.AppendInt(b, v.MinOffset, 10)
		return append(b, '}')
	})
	dst = append(dst, `,"topicPutTps":`...)
	dst = AppendDouble(dst, putTps)
	return append(dst, '}')
}

// EncodeConsumeStats writes a ConsumeStats.
func EncodeConsumeStats(table map[MessageQueue]OffsetWrapper, consumeTps float64) []byte {
	dst := append([]byte(nil), `{"consumeTps":`...)
	dst = AppendDouble(dst, consumeTps)
	dst = append(dst, `,"offsetTable":`...)
	dst = appendTable(dst, table, func(b []byte, v OffsetWrapper) []byte {
		b = append(b, `{"brokerOffset":`...)
		b = strconv.AppendInt(b, v.BrokerOffset, 10)
		b = append(b, `,"consumerOffset":`...)
		b = strconv.AppendInt(b, v.ConsumerOffset, 10)
		b = append(b, `,"lastTimestamp":`...)
		b = strconv.AppendInt(b, v.LastTimestamp, 10)
		b = append(b, `,"pullOffset":`...)
		b = strconv.AppendInt(b, v.PullOffset, 10)
		return append(b, '}')
	})
	return append(dst, '}')
}

// DecodeResetOffset reads a ResetOffsetBody.
func DecodeResetOffset(body []byte) (map[MessageQueue]int64, error) {
	return decodeOffsets(body, "ResetOffsetBody", "offsetTable")
}

// DecodeConsumerStatus reads a client's answer to
// GET_CONSUMER_STATUS_FROM_CLIENT, a GetConsumerStatusBody:
// {"messageQueueTable":{<queue>:offset}}.
func DecodeConsumerStatus(body []byte) (map[MessageQueue]int64, error) {
	return decodeOffsets(body, "GetConsumerStatusBody", "messageQueueTable")
}

// decodeOffsets reads the queue-to-offset table field of a body.
func decodeOffsets(body []byte, what, field string) (map[MessageQueue]int64, error) {
	var table map[MessageQueue]int64
	err := decodeBody(body, what, func(name string, v []byte) error {
		if name != field {
			return nil
		}
		var err error
		table, err = decodeTable[int64](v)
		return err
	})
	return table, err
}

// EncodeConsumerStatusTable writes the broker's answer to
// INVOKE_BROKER_TO_GET_CONSUMER_STATUS, a GetConsumerStatusBody:
// {"consumerTable":{"<client id>":{<queue>:offset}},"messageQueueTable":{}},
// client ids in order.
func EncodeConsumerStatusTable(table map[string]map[MessageQueue]int64) []byte {
	ids := make([]string, 0, len(table))
	for id := range table {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	dst := append([]byte(nil), `{"consumerTable":{`...)
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendQuote(dst, id)
		dst = append(dst, ':')
		dst = appendTable(dst, table[id], func(b []byte, v int64) []byte { return strconv.AppendInt(b, v, 10) })
	}
	return append(dst, `},"messageQueueTable":{}}`...)
}

// DecodeConsumerStatusTable reads what EncodeConsumerStatusTable writes.
func DecodeConsumerStatusTable(body []byte) (map[string]map[MessageQueue]int64, error) {
	out := map[string]map[MessageQueue]int64{}
	err := decodeBody(body, "GetConsumerStatusBody", func(name string, v []byte) error {
		if name != "consumerTable" {
			return nil
		}
		clients, err := Members(v)
		if err != nil {
			return err
		}
		for _, c := range clients {
			var id string
			if err := json.Unmarshal(c.Key, &id); err != nil {
				return fmt.Errorf("client id %.40q: %w", c.Key, err)
			}
			if out[id], err = decodeTable[int64](c.Value); err != nil {
				return fmt.Errorf("client %s: %w", id, err)
			}
		}
		return nil
	})
	return out, err
}

// DecodeTopicStats reads a TopicStatsTable.
func DecodeTopicStats(body []byte) (map[MessageQueue]TopicOffset, float64, error) {
	return decodeStats[TopicOffset](body, "TopicStatsTable", "topicPutTps")
}

// DecodeConsumeStats reads a ConsumeStats.
func DecodeConsumeStats(body []byte) (map[MessageQueue]OffsetWrapper, float64, error) {
	return decodeStats[OffsetWrapper](body, "ConsumeStats", "consumeTps")
}

// decodeStats reads a body of an offsetTable of V and a rate.
func decodeStats[V any](body []byte, what, rateName string) (map[MessageQueue]V, float64, error) {
	var table map[MessageQueue]V
	var rate float64
	err := decodeBody(body, what, func(name string, v []byte) error {
		switch name {
		case "offsetTable":
			var err error
			table, err = decodeTable[V](v)
			return err
		case rateName:
			return json.Unmarshal(v, &rate)
		}
		return nil
	})
	return table, rate, err
}

// decodeBody walks the top-level properties of body, handing each to
// field with its name.
func decodeBody(body []byte, what string, field func(name string, value []byte) error) error {
	ms, err := Members(body)
	if err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	for _, m := range ms {
		var name string
		if err := json.Unmarshal(m.Key, &name); err != nil {
			return fmt.Errorf("decode %s: property name %.40q is not a string", what, m.Key)
		}
		if err := field(name, m.Value); err != nil {
			return fmt.Errorf("decode %s: %s: %w", what, name, err)
		}
	}
	return nil
}

// decodeTable reads an object-keyed map of queues to V.
func decodeTable[V any](data []byte) (map[MessageQueue]V, error) {
	ms, err := Members(data)
	if err != nil {
		return nil, err
	}
	out := make(map[MessageQueue]V, len(ms))
	for _, m := range ms {
		var q MessageQueue
		if err := json.Unmarshal(m.Key, &q); err != nil {
			return nil, fmt.Errorf("queue key %.60q: %w", m.Key, err)
		}
		var v V
		if err := json.Unmarshal(m.Value, &v); err != nil {
			return nil, fmt.Errorf("value of %s/%s/%d: %w", q.Topic, q.BrokerName, q.QueueID, err)
		}
		out[q] = v
	}
	return out, nil
}

// Member is one property of an object: its key (a JSON string, or an
// object in fastjson's object-keyed maps) and its value, both raw.
type Member struct {
	Key   []byte
	Value []byte
}

// maxDepth bounds the nesting Members follows.
const maxDepth = 64

// ErrSyntax reports input that is not an object in fastjson's form.
var ErrSyntax = errors.New("not a fastjson object")

// Members splits the object in data into its properties. Keys may be
// strings or objects; values may be any JSON value, including objects
// with object keys. Nothing but white space may follow the object.
func Members(data []byte) ([]Member, error) {
	p := parser{data: data}
	p.space()
	if p.i >= len(p.data) || p.data[p.i] != '{' {
		return nil, p.errorf("want '{'")
	}
	var out []Member
	if err := p.object(1, func(key, value []byte) { out = append(out, Member{Key: key, Value: value}) }); err != nil {
		return nil, err
	}
	return out, p.end()
}

// parser skips over fastjson values in data from i.
type parser struct {
	data []byte
	i    int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s at byte %d", ErrSyntax, fmt.Sprintf(format, args...), p.i)
}

func (p *parser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) eat(c byte) bool {
	if p.i < len(p.data) && p.data[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) end() error {
	p.space()
	if p.i != len(p.data) {
		return p.errorf("trailing bytes")
	}
	return nil
}

// key skips a property key: a string, an object, or a bare number
// (fastjson writes integer map keys unquoted).
func (p *parser) key(depth int) error {
	if p.i >= len(p.data) {
		return p.errorf("want a key")
	}
	switch c := p.data[p.i]; {
	case c == '"':
		return p.str()
	case c == '{':
		return p.object(depth+1, nil)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.scalar()
	}
	return p.errorf("want a key")
}

// value skips one value.
func (p *parser) value(depth int) error {
	if depth > maxDepth {
		return p.errorf("nested deeper than %d", maxDepth)
	}
	if p.i >= len(p.data) {
		return p.errorf("want a value")
	}
	switch p.data[p.i] {
	case '"':
		return p.str()
	case '{':
		return p.object(depth+1, nil)
	case '[':
		return p.array(depth + 1)
	}
	return p.scalar()
}

// object skips the object at p.i, handing each property's raw key and
// value to member when it is set.
func (p *parser) object(depth int, member func(key, value []byte)) error {
	return p.sequence(depth, '}', func() error {
		k0 := p.i
		if err := p.key(depth); err != nil {
			return err
		}
		key := p.data[k0:p.i]
		p.space()
		if !p.eat(':') {
			return p.errorf("want ':' after a key")
		}
		p.space()
		v0 := p.i
		if err := p.value(depth); err != nil {
			return err
		}
		if member != nil {
			member(key, p.data[v0:p.i])
		}
		return nil
	})
}

func (p *parser) array(depth int) error {
	return p.sequence(depth, ']', func() error { return p.value(depth) })
}

// sequence walks the comma-separated items of the object or array whose
// opening byte is at p.i, up to its closer.
func (p *parser) sequence(depth int, closer byte, item func() error) error {
	if depth > maxDepth {
		return p.errorf("nested deeper than %d", maxDepth)
	}
	p.i++ // the opening '{' or '['
	p.space()
	if p.eat(closer) {
		return nil
	}
	for {
		p.space()
		if err := item(); err != nil {
			return err
		}
		p.space()
		if p.eat(',') {
			continue
		}
		if p.eat(closer) {
			return nil
		}
		return p.errorf("want ',' or '%c'", closer)
	}
}

func (p *parser) str() error {
	p.i++ // opening quote
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case '\\':
			p.i += 2
		case '"':
			p.i++
			return nil
		default:
			p.i++
		}
	}
	p.i = len(p.data)
	return p.errorf("unterminated string")
}

// scalar skips a number, true, false or null.
func (p *parser) scalar() error {
	start := p.i
	for p.i < len(p.data) {
		c := p.data[p.i]
		if (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '+' || c == '.' {
			p.i++
			continue
		}
		break
	}
	if p.i == start {
		return p.errorf("want a value")
	}
	return nil
}

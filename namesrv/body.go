package namesrv

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/internal/jsonscan"
	"github.com/rocketkv/rocketkv/remoting"
)

// ErrBadRegisterBody is returned (wrapped, with the cause) when a
// REGISTER_BROKER body cannot be decoded.
var ErrBadRegisterBody = errors.New("bad register-broker body")

// Limits on a compressed register body, so a small frame cannot make the
// name server inflate or allocate without bound.
const (
	// maxInflatedBody bounds the inflated size of a compressed body (about
	// 2.5 million topics).
	maxInflatedBody = 256 << 20
	// maxBodyItem bounds one length-prefixed item inside it.
	maxBodyItem = 16 << 20
)

// RegisterBrokerBody is the body of REGISTER_BROKER: the broker's topic
// configuration with its data version, plus legacy filter servers and
// static-topic mapping entries.
//
// Plain form (JSON, fastjson's alphabetical order):
//
//	{"filterServerList":[],
//	 "topicConfigSerializeWrapper":{
//	    "dataVersion":{"counter":N,"stateVersion":0,"timestamp":ms},
//	    "topicConfigTable":{"<topic>":{TopicConfig JSON},...}}}
//
// Compressed form: one zlib stream (Java's DeflaterOutputStream) of
// big-endian length-prefixed items:
//
//	+---------+-------------------+---------+-------------------------------+
//	| int32 n | DataVersion JSON  | int32 T | T x (int32 n, topic text)     |
//	+---------+-------------------+---------+-------------------------------+
//	| int32 n | filter servers JSON array | int32 M | M x (int32 n, mapping JSON) |
//	+---------+---------------------------+---------+---------------------------+
//
// A topic text is Java's TopicConfig.encode(), fields separated by one
// space: "name readQueueNums writeQueueNums perm filterType attributesJSON".
// It carries neither topicSysFlag nor order: both read back as zero. The
// mapping count is present only from brokers of version 5.0.0 (413) on.
type RegisterBrokerBody struct {
	// DataVersion versions TopicConfigTable.
	DataVersion DataVersion
	// TopicConfigTable maps topic name to its configuration.
	TopicConfigTable map[string]TopicConfig
	// FilterServerList lists legacy filter servers; normally empty.
	FilterServerList []string
	// TopicQueueMappingInfo holds static-topic mapping entries by topic as
	// raw JSON (Java TopicQueueMappingInfo); the name server serves them
	// in routes (TopicRouteData.TopicQueueMappingByBroker).
	TopicQueueMappingInfo map[string]json.RawMessage
}

// Encode returns the body in plain JSON, or compressed (zlib) when
// compressed is true. Topics are written in name order.
func (b *RegisterBrokerBody) Encode(compressed bool) ([]byte, error) {
	if !compressed {
		return b.appendJSON(make([]byte, 0, 64+160*len(b.TopicConfigTable))), nil
	}
	var out bytes.Buffer
	zw, err := zlib.NewWriterLevel(&out, zlib.DefaultCompression)
	if err != nil {
		return nil, fmt.Errorf("compress register body: %w", err)
	}
	w := bufio.NewWriter(zw)
	var scratch []byte
	item := func(p []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		_, _ = w.Write(n[:])
		_, _ = w.Write(p)
	}
	count := func(n int) {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(n))
		_, _ = w.Write(b[:])
	}
	item(b.DataVersion.appendJSON(scratch[:0]))
	count(len(b.TopicConfigTable))
	for _, name := range sortedKeys(b.TopicConfigTable) {
		tc := b.TopicConfigTable[name]
		if tc.TopicName == "" {
			tc.TopicName = name
		}
		scratch = appendTopicConfigText(scratch[:0], &tc)
		item(scratch)
	}
	item(appendStringList(scratch[:0], b.FilterServerList))
	count(len(b.TopicQueueMappingInfo))
	for _, topic := range sortedKeys(b.TopicQueueMappingInfo) {
		item(b.TopicQueueMappingInfo[topic])
	}
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("compress register body: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress register body: %w", err)
	}
	return out.Bytes(), nil
}

// appendJSON appends the plain JSON form.
func (b *RegisterBrokerBody) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"filterServerList":`...)
	dst = appendStringList(dst, b.FilterServerList)
	dst = append(dst, `,"topicConfigSerializeWrapper":{"dataVersion":`...)
	dst = b.DataVersion.appendJSON(dst)
	dst = append(dst, `,"topicConfigTable":{`...)
	for i, name := range sortedKeys(b.TopicConfigTable) {
		if i > 0 {
			dst = append(dst, ',')
		}
		tc := b.TopicConfigTable[name]
		if tc.TopicName == "" {
			tc.TopicName = name
		}
		dst = jsonscan.AppendString(dst, name)
		dst = append(dst, ':')
		dst = tc.appendJSON(dst)
	}
	dst = append(dst, '}')
	if len(b.TopicQueueMappingInfo) > 0 {
		dst = append(dst, `,"topicQueueMappingInfoMap":{`...)
		for i, topic := range sortedKeys(b.TopicQueueMappingInfo) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonscan.AppendString(dst, topic)
			dst = append(dst, ':')
			dst = append(dst, b.TopicQueueMappingInfo[topic]...)
		}
		dst = append(dst, '}')
	}
	return append(dst, "}}"...)
}

// appendTopicConfigText appends Java's TopicConfig.encode() text.
func appendTopicConfigText(dst []byte, tc *TopicConfig) []byte {
	dst = append(dst, tc.TopicName...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(tc.ReadQueueNums), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(tc.WriteQueueNums), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(tc.Perm), 10)
	dst = append(dst, ' ')
	dst = append(dst, filterTypeOrDefault(tc.TopicFilterType)...)
	dst = append(dst, ' ')
	return appendStringMap(dst, tc.Attributes)
}

// parseTopicConfigText reads Java's TopicConfig.encode() text with Java's
// rules: split on single spaces with trailing empty parts dropped, at least
// five parts, integers and the filter type must parse, attributes that do
// not parse are ignored (Java's decode swallows that error, as attribute
// values may contain spaces).
func parseTopicConfigText(s string) (TopicConfig, error) {
	parts := strings.Split(s, " ")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) < 5 {
		return TopicConfig{}, fmt.Errorf("topic config %q: %d fields, want at least 5", s, len(parts))
	}
	tc := TopicConfig{TopicName: parts[0]}
	for i, dst := range []*int32{&tc.ReadQueueNums, &tc.WriteQueueNums, &tc.Perm} {
		n, err := strconv.ParseInt(parts[1+i], 10, 32)
		if err != nil {
			return TopicConfig{}, fmt.Errorf("topic config %q: field %d: %w", s, 1+i, err)
		}
		*dst = int32(n)
	}
	switch parts[4] {
	case SingleTag, MultiTag:
		tc.TopicFilterType = parts[4]
	default:
		return TopicConfig{}, fmt.Errorf("topic config %q: unknown filter type %q", s, parts[4])
	}
	if len(parts) >= 6 && parts[5] != "{}" {
		var attrs map[string]string
		if json.Unmarshal([]byte(parts[5]), &attrs) == nil {
			tc.Attributes = attrs
		}
	}
	return tc, nil
}

// plainBody mirrors the plain JSON form for encoding/json.
type plainBody struct {
	FilterServerList            []string      `json:"filterServerList"`
	TopicConfigSerializeWrapper wrapperObject `json:"topicConfigSerializeWrapper"`
}

// wrapperObject mirrors Java's TopicConfig(AndMapping)SerializeWrapper; old
// brokers (before 3.0.11) send it alone as the body.
type wrapperObject struct {
	DataVersion              DataVersion                `json:"dataVersion"`
	TopicConfigTable         map[string]TopicConfig     `json:"topicConfigTable"`
	TopicQueueMappingInfoMap map[string]json.RawMessage `json:"topicQueueMappingInfoMap"`
}

// zlibMagic is the first byte of a zlib stream with a 32 KiB window, the
// only kind Java's Deflater writes; a JSON body starts with '{' or space.
const zlibMagic = 0x78

// DecodeRegisterBrokerBody decodes a REGISTER_BROKER body. compressed is
// the header's "compressed" field; brokerVersion the request's version.
//
// Compatibility: bodies of brokers before version 3.0.11 (37) are a bare
// topic config wrapper; an empty body is an empty table with a zero data
// version, as Java treats it; a body that starts with a zlib header is read
// as compressed even when the header says otherwise (a Java broker with
// compressedRegister=true always sends "compressed":"false").
func DecodeRegisterBrokerBody(data []byte, compressed bool, brokerVersion int32) (*RegisterBrokerBody, error) {
	body := &RegisterBrokerBody{TopicConfigTable: map[string]TopicConfig{}}
	if len(data) == 0 {
		return body, nil
	}
	if compressed || data[0] == zlibMagic {
		if err := decodeCompressed(data, brokerVersion, body); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadRegisterBody, err)
		}
		return body, nil
	}
	var w wrapperObject
	if brokerVersion >= remoting.VersionV3_0_11 {
		var pb plainBody
		if err := adminbody.UnmarshalFastjson(data, &pb); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadRegisterBody, err)
		}
		w = pb.TopicConfigSerializeWrapper
		body.FilterServerList = pb.FilterServerList
	} else if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRegisterBody, err)
	}
	body.DataVersion = w.DataVersion
	for name, tc := range w.TopicConfigTable {
		if tc.TopicName == "" {
			tc.TopicName = name
		}
		body.TopicConfigTable[tc.TopicName] = tc
	}
	if len(w.TopicQueueMappingInfoMap) > 0 {
		body.TopicQueueMappingInfo = w.TopicQueueMappingInfoMap
	}
	return body, nil
}

// bodyReader reads the length-prefixed items of a compressed body.
type bodyReader struct {
	r   *bufio.Reader
	buf bytes.Buffer
}

func (br *bodyReader) int32(what string) (int, error) {
	var b [4]byte
	if _, err := io.ReadFull(br.r, b[:]); err != nil {
		return 0, fmt.Errorf("read %s: %w", what, err)
	}
	n := int32(binary.BigEndian.Uint32(b[:]))
	if n < 0 {
		return 0, fmt.Errorf("%s is negative (%d)", what, n)
	}
	return int(n), nil
}

// item reads one length-prefixed item; the result is valid until the next
// call. Memory grows with the bytes actually present, not with the length
// announced, so a lying length word costs nothing.
func (br *bodyReader) item(what string) ([]byte, error) {
	n, err := br.int32(what + " length")
	if err != nil {
		return nil, err
	}
	if n > maxBodyItem {
		return nil, fmt.Errorf("%s of %d bytes exceeds %d", what, n, maxBodyItem)
	}
	br.buf.Reset()
	if _, err := io.CopyN(&br.buf, br.r, int64(n)); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return br.buf.Bytes(), nil
}

func decodeCompressed(data []byte, brokerVersion int32, body *RegisterBrokerBody) error {
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("open zlib stream: %w", err)
	}
	defer zr.Close()
	br := &bodyReader{r: bufio.NewReader(io.LimitReader(zr, maxInflatedBody))}

	item, err := br.item("data version")
	if err != nil {
		return err
	}
	if err := json.Unmarshal(item, &body.DataVersion); err != nil {
		return fmt.Errorf("data version: %w", err)
	}
	topics, err := br.int32("topic count")
	if err != nil {
		return err
	}
	body.TopicConfigTable = make(map[string]TopicConfig, min(topics, 1<<16))
	for i := range topics {
		item, err := br.item("topic config " + strconv.Itoa(i))
		if err != nil {
			return err
		}
		tc, err := parseTopicConfigText(string(item))
		if err != nil {
			return err
		}
		body.TopicConfigTable[tc.TopicName] = tc
	}
	item, err = br.item("filter server list")
	if err != nil {
		return err
	}
	// Java logs a bad list and goes on with an empty one.
	if json.Unmarshal(item, &body.FilterServerList) != nil {
		body.FilterServerList = nil
	}
	if brokerVersion < remoting.VersionV5_0_0 {
		return nil
	}
	mappings, err := br.int32("mapping count")
	if err != nil {
		return err
	}
	for i := range mappings {
		item, err := br.item("mapping " + strconv.Itoa(i))
		if err != nil {
			return err
		}
		var info struct {
			Topic string `json:"topic"`
		}
		if err := adminbody.UnmarshalFastjson(item, &info); err != nil {
			return fmt.Errorf("mapping %d: %w", i, err)
		}
		item = adminbody.QuoteBareKeys(item) // kept as JSON
		if body.TopicQueueMappingInfo == nil {
			body.TopicQueueMappingInfo = make(map[string]json.RawMessage)
		}
		body.TopicQueueMappingInfo[info.Topic] = slices.Clone(json.RawMessage(item))
	}
	return nil
}

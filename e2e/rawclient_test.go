package e2e

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A minimal Remoting client (JSON headers, one connection per call) for the
// checks the clients under test cannot make: reading a group's committed
// offset or a queue's max offset straight from the broker, a topic's route
// from the name server, creating a topic for clients that cannot.

// rawResponse is a decoded response frame.
type rawResponse struct {
	Code      int               `json:"code"`
	Remark    string            `json:"remark"`
	ExtFields map[string]string `json:"extFields"`
	Body      []byte            `json:"-"`
}

// Request and response codes used here (RocketMQ's RequestCode and
// ResponseCode).
const (
	codeUpdateAndCreateTopic      = 17
	codeQueryConsumerOffset       = 14
	codeGetMaxOffset              = 30
	codeGetAllTopicConfig         = 21
	codeGetRouteInfo              = 105
	codeGetConsumerList           = 38
	codeGetProducerConnectionList = 204
	respSuccess                   = 0
	respTopicNotExist             = 17
	respQueryNotFound             = 22
)

// waitTopicCopied waits until the slave at addr holds topic's config
// (its copy of the master's topic table lists it).
func waitTopicCopied(t *testing.T, addr, topic string) {
	t.Helper()
	waitUntil(t, 30*time.Second, "the slave to copy the topic", func() bool {
		r, err := rawInvoke(addr, codeGetAllTopicConfig, nil, nil)
		return err == nil && strings.Contains(string(r.Body), topic)
	})
}

// rawInvoke sends one request and waits up to 5 s for its response.
func rawInvoke(addr string, code int, ext map[string]string, body []byte) (*rawResponse, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	header, err := json.Marshal(map[string]any{
		"code": code, "language": "GO", "version": 317, "opaque": 1, "flag": 0, "extFields": ext,
	})
	if err != nil {
		return nil, err
	}
	frame := make([]byte, 8, 8+len(header)+len(body))
	binary.BigEndian.PutUint32(frame[0:], uint32(4+len(header)+len(body)))
	binary.BigEndian.PutUint32(frame[4:], uint32(len(header))) // serialize type 0: JSON
	frame = append(append(frame, header...), body...)
	if _, err := conn.Write(frame); err != nil {
		return nil, err
	}
	var pre [8]byte
	if _, err := io.ReadFull(conn, pre[:]); err != nil {
		return nil, fmt.Errorf("read response of code %d from %s: %w", code, addr, err)
	}
	total := binary.BigEndian.Uint32(pre[0:])
	word := binary.BigEndian.Uint32(pre[4:])
	if word>>24 != 0 {
		return nil, fmt.Errorf("response of code %d is not JSON-encoded (type %d)", code, word>>24)
	}
	hlen := word & 0xFFFFFF
	if total < 4+hlen || total > 64<<20 {
		return nil, fmt.Errorf("bad response frame: length %d, header %d", total, hlen)
	}
	rest := make([]byte, total-4)
	if _, err := io.ReadFull(conn, rest); err != nil {
		return nil, err
	}
	var r rawResponse
	if err := json.Unmarshal(rest[:hlen], &r); err != nil {
		return nil, fmt.Errorf("decode response header %q: %w", rest[:hlen], err)
	}
	r.Body = rest[hlen:]
	return &r, nil
}

// committedOffset returns a group's committed offset on a queue, or -1
// when the broker has none.
func committedOffset(t testing.TB, broker, group, topic string, queue int) int64 {
	t.Helper()
	r, err := rawInvoke(broker, codeQueryConsumerOffset, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(queue), "setZeroIfNotFound": "false",
	}, nil)
	if err != nil {
		t.Fatalf("query consumer offset: %v", err)
	}
	switch r.Code {
	case respSuccess:
		return parseOffset(t, r)
	case respQueryNotFound:
		return -1
	default:
		t.Fatalf("query consumer offset of %s on %s/%d: code %d %s", group, topic, queue, r.Code, r.Remark)
		return 0
	}
}

// maxOffset returns a queue's max offset (the offset the next message gets).
func maxOffset(t testing.TB, broker, topic string, queue int) int64 {
	t.Helper()
	r, err := rawInvoke(broker, codeGetMaxOffset, map[string]string{"topic": topic, "queueId": strconv.Itoa(queue)}, nil)
	if err != nil {
		t.Fatalf("get max offset: %v", err)
	}
	if r.Code != respSuccess {
		t.Fatalf("get max offset of %s/%d: code %d %s", topic, queue, r.Code, r.Remark)
	}
	return parseOffset(t, r)
}

// topicTotal returns how many messages queues 0 … queues-1 of a topic hold.
func topicTotal(t testing.TB, broker, topic string, queues int) int64 {
	t.Helper()
	var total int64
	for q := 0; q < queues; q++ {
		total += maxOffset(t, broker, topic, q)
	}
	return total
}

func parseOffset(t testing.TB, r *rawResponse) int64 {
	t.Helper()
	v, err := strconv.ParseInt(r.ExtFields["offset"], 10, 64)
	if err != nil {
		t.Fatalf("offset field %q: %v", r.ExtFields["offset"], err)
	}
	return v
}

// routeInfo is the part of a topic's route the tests read.
type routeInfo struct {
	QueueDatas []struct {
		BrokerName     string `json:"brokerName"`
		ReadQueueNums  int    `json:"readQueueNums"`
		WriteQueueNums int    `json:"writeQueueNums"`
		Perm           int    `json:"perm"`
	} `json:"queueDatas"`
	BrokerDatas []struct {
		BrokerName  string            `json:"brokerName"`
		Cluster     string            `json:"cluster"`
		BrokerAddrs map[string]string `json:"brokerAddrs"`
	} `json:"brokerDatas"`
}

// brokers returns the names of the brokers serving queues of the route.
func (r *routeInfo) brokers() []string {
	var out []string
	for _, q := range r.QueueDatas {
		out = append(out, q.BrokerName)
	}
	return out
}

// topicRoute asks the name server for a topic's route; nil when the name
// server has none.
func topicRoute(t testing.TB, ns, topic string) *routeInfo {
	t.Helper()
	r, err := rawInvoke(ns, codeGetRouteInfo, map[string]string{"topic": topic}, nil)
	if err != nil {
		t.Fatalf("get route of %s: %v", topic, err)
	}
	if r.Code == respTopicNotExist {
		return nil
	}
	if r.Code != respSuccess {
		t.Fatalf("get route of %s: code %d %s", topic, r.Code, r.Remark)
	}
	var ri routeInfo
	if err := json.Unmarshal(r.Body, &ri); err != nil {
		t.Fatalf("decode route of %s %q: %v", topic, r.Body, err)
	}
	return &ri
}

// waitRoute waits until the name server's route of topic names every
// broker of want.
func waitRoute(t testing.TB, ns, topic string, want ...string) *routeInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ri := topicRoute(t, ns, topic)
		if ri != nil {
			have := strings.Join(ri.brokers(), ",")
			all := true
			for _, b := range want {
				if !strings.Contains(","+have+",", ","+b+",") {
					all = false
				}
			}
			if all {
				return ri
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("name server has no route of %s naming %v after 30 s (route: %+v)", topic, want, ri)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// createTopic creates a topic on a broker (UPDATE_AND_CREATE_TOPIC, as
// mqadmin updateTopic does).
func createTopic(t testing.TB, broker, topic string, queues int) {
	t.Helper()
	n := strconv.Itoa(queues)
	r, err := rawInvoke(broker, codeUpdateAndCreateTopic, map[string]string{
		"topic": topic, "defaultTopic": "TBW102", "readQueueNums": n, "writeQueueNums": n,
		"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	}, nil)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if r.Code != respSuccess {
		t.Fatalf("create topic %s: code %d %s", topic, r.Code, r.Remark)
	}
}

// waitDispatched waits until the queues 0 … queues-1 of a topic hold want
// messages in all, by GET_MAX_OFFSET. A send is acknowledged once its
// record is in the CommitLog; the ConsumeQueue entry that makes it visible
// to pulls and to GET_MAX_OFFSET follows asynchronously, as in RocketMQ, so
// a test reading offsets right after sending waits for it. More than want
// fails at once.
func waitDispatched(t testing.TB, broker, topic string, queues int, want int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		total := topicTotal(t, broker, topic, queues)
		if total == want {
			return
		}
		if total > want {
			t.Fatalf("%s holds %d messages on %s, want %d", topic, total, broker, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d messages on %s after 30 s, want %d", topic, total, broker, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// invokeJSON sends one request and decodes a SUCCESS answer's JSON body
// into v; it reports whether the answer was SUCCESS (v is left alone
// otherwise). A failed request or an undecodable body fails the test.
func invokeJSON(t testing.TB, addr string, code int, ext map[string]string, v any) bool {
	t.Helper()
	r, err := rawInvoke(addr, code, ext, nil)
	if err != nil {
		t.Fatalf("request %d to %s: %v", code, addr, err)
	}
	if r.Code != respSuccess {
		return false
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode the answer to request %d %q: %v", code, r.Body, err)
	}
	return true
}

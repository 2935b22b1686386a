package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// traceTestRan is set once TestMessageTraceTopic started in this process.
var traceTestRan atomic.Bool

// TestMessageTraceTopic: with traceTopicEnable and autoCreateTopicEnable
// off (a production broker.conf), the broker creates the trace topic at
// start and registers it, so a Go producer with message trace on finds a
// route for RMQ_SYS_TRACE_TOPIC and stores its trace records there; the
// record of a send names the message's key and can be looked up by it, as
// rocketmq-dashboard's trace view does.
func TestMessageTraceTopic(t *testing.T) {
	if traceTestRan.Swap(true) {
		// The Go client makes one trace client per process (instance
		// INNER_TRACE_CLIENT_DEFAULT) on the first name server it is
		// given; a second producer with trace on another name server gets
		// none and panics on its first send (go test -count=2 did).
		t.Skip("the Go client's trace client is bound to the first run's name server")
	}
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{"autoCreateTopicEnable=false", "traceTopicEnable=true"}})
	const topic, traceTopic = "E2ETraced", "RMQ_SYS_TRACE_TOPIC"
	createTopic(t, b.addr, topic, 2)
	waitRoute(t, ns.addr, topic, b.name)
	waitRoute(t, ns.addr, traceTopic, b.name)

	p := newProducer(t, ns.addr, "pg-trace", producer.WithTrace(&primitive.TraceConfig{
		GroupName: "pg-trace-tracer", Access: primitive.Local, NamesrvAddrs: []string{ns.addr},
	}))
	msg := primitive.NewMessage(topic, []byte("traced body"))
	msg.WithKeys([]string{"trace-e2e-key"})
	res, err := p.SendSync(context.Background(), msg)
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send: %v %v", res, err)
	}

	// The trace record is sent in the background (batched, within about
	// a second), keyed by the message's id and keys.
	var body []byte
	waitUntil(t, 30*time.Second, "the send's trace record stored", func() bool {
		r, err := rawInvoke(b.addr, 12 /* QUERY_MESSAGE */, map[string]string{
			"topic": traceTopic, "key": res.MsgID, "maxNum": "32",
			"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10),
		}, nil)
		if err != nil || r.Code != 0 {
			return false
		}
		body = r.Body
		return len(body) > 0
	})
	for _, want := range []string{"Pub", topic, res.MsgID, "trace-e2e-key"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("trace record lacks %q: %q", want, body)
		}
	}

	// bin/admin queryMsgTraceById reads the Go client's record (its Pub
	// has the 15 fields, client host last) as mqadmin's table.
	out, err := exec.Command(filepath.Join(binDir, "admin"), "queryMsgTraceById", "-n", ns.addr, "-i", res.MsgID).CombinedOutput()
	if err != nil {
		t.Fatalf("admin queryMsgTraceById: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "#Type") || strings.Fields(lines[1])[0] != "Pub" ||
		strings.Fields(lines[1])[1] != "pg-trace" || !strings.HasSuffix(strings.TrimSpace(lines[1]), "success") {
		t.Errorf("admin queryMsgTraceById %s:\n%s", res.MsgID, out)
	}
}

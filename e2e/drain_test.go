package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

const (
	codeUpdateBrokerConfig = 25
	codeGetBrokerConfig    = 26
	codeWipeWritePerm      = 205
	codeAddWritePerm       = 327
)

// waitRoutePerm waits until the name server routes topic on broker with
// perm.
func waitRoutePerm(t testing.TB, ns, topic, broker string, perm int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ri := topicRoute(t, ns, topic)
		if ri != nil {
			for _, q := range ri.QueueDatas {
				if q.BrokerName == broker && q.Perm == perm {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("route of %s never gave %s perm %d (route: %+v)", topic, broker, perm, ri)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sendAndCount sends n messages with a new Go producer (fresh routes) and
// returns how many the send results put on each broker.
func sendAndCount(t *testing.T, ns, group, topic, prefix string, from, n int) map[string]int {
	t.Helper()
	p := newProducer(t, ns, group)
	perBroker := map[string]int{}
	for i := from; i < from+n; i++ {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("%s%d", prefix, i))))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %d: %v %v", i, res, err)
		}
		perBroker[res.MessageQueue.BrokerName]++
	}
	return perBroker
}

// TestDrainingABroker takes one of two brokers out of service the two ways
// RocketMQ operators do, with the unchanged Go client on both sides: the
// broker's own permission (mqadmin updateBrokerConfig -k brokerPermission
// -v 4) and the name server's routes (mqadmin wipeWritePerm). Meanwhile
// producers send only to the other broker and every send succeeds, and a
// consumer still receives what the drained broker holds; afterwards both
// brokers take sends again.
func TestDrainingABroker(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	ba := startBroker(t, ns, brokerOpts{name: "broker-a", cluster: "DrainCluster"})
	bb := startBroker(t, ns, brokerOpts{name: "broker-b", cluster: "DrainCluster"})
	const topic, queues, n = "E2EDrain", 4, 40
	createTopic(t, ba.addr, topic, queues)
	createTopic(t, bb.addr, topic, queues)
	waitRoute(t, ns.addr, topic, ba.name, bb.name)
	sent := 0
	if got := sendAndCount(t, ns.addr, "pg-drain-0", topic, "drain-", sent, n); got[ba.name] == 0 || got[bb.name] == 0 {
		t.Fatalf("before draining the sends went to %v, want both brokers", got)
	}
	sent += n

	for _, drain := range []struct {
		name          string
		out, back     func()
		perm, restore int
	}{{
		name: "brokerPermission",
		out: func() {
			rawMustSucceed(t, ba.addr, codeUpdateBrokerConfig, nil, []byte("brokerPermission=4"))
		},
		back: func() {
			rawMustSucceed(t, ba.addr, codeUpdateBrokerConfig, nil, []byte("brokerPermission=6"))
		},
		perm: 4, restore: 6,
	}, {
		name: "wipeWritePerm",
		out: func() {
			rawMustSucceed(t, ns.addr, codeWipeWritePerm, map[string]string{"brokerName": ba.name}, nil)
		},
		back: func() {
			rawMustSucceed(t, ns.addr, codeAddWritePerm, map[string]string{"brokerName": ba.name}, nil)
		},
		perm: 4, restore: 6,
	}} {
		drain.out()
		waitRoutePerm(t, ns.addr, topic, ba.name, drain.perm)
		got := sendAndCount(t, ns.addr, "pg-drain-"+drain.name, topic, "drain-", sent, n)
		sent += n
		if got[ba.name] != 0 || got[bb.name] != n {
			t.Fatalf("%s: while broker-a was drained the sends went to %v, want all %d to %s", drain.name, got, n, bb.name)
		}
		drain.back()
		waitRoutePerm(t, ns.addr, topic, ba.name, drain.restore)
		got = sendAndCount(t, ns.addr, "pg-back-"+drain.name, topic, "drain-", sent, n)
		sent += n
		if got[ba.name] == 0 {
			t.Fatalf("%s: after putting broker-a back the sends went to %v", drain.name, got)
		}
	}

	got := newCollector()
	startPushConsumer(t, ns.addr, "cg-drain", topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, sent, 60*time.Second)
	checkBodies(t, got, "drain-", sent)
}

// rawMustSucceed sends one request and fails the test unless it succeeds.
func rawMustSucceed(t testing.TB, addr string, code int, ext map[string]string, body []byte) {
	t.Helper()
	r, err := rawInvoke(addr, code, ext, body)
	if err != nil {
		t.Fatalf("request %d to %s: %v", code, addr, err)
	}
	if r.Code != respSuccess {
		t.Fatalf("request %d to %s: code %d %s", code, addr, r.Code, r.Remark)
	}
}

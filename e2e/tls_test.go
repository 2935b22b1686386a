package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestTLSClients: the Go client with WithTls(true), which dials TLS to the
// name server and the broker without verifying certificates, sends and
// receives every message, against servers left at their defaults
// (permissive, self-signed certificate) and against servers enforcing
// TLS; there a plaintext client gets nothing through, while on the
// permissive ones it works beside the TLS clients.
//
// The Go client's WithTls sets a process-wide default (its options point
// at one shared RemotingClientConfig), so every client created after it in
// this process dials TLS, and WithTls(false) turns it back for all. This
// test is therefore not parallel and ends each case with a client built
// with WithTls(false), which leaves the default as the other tests expect
// it. Tests running in parallel elsewhere use permissive servers, which
// serve both.
func TestTLSClients(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sets    []string // for both the name server and the broker
		plainOK bool
	}{
		{"default", nil, true},
		{"enforcing", []string{"tls.server.mode=enforcing"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := startNamesrvWith(t, tc.sets...)
			startBroker(t, ns, brokerOpts{sets: tc.sets})
			topic, n := "E2ETls"+tc.name, 40
			p := newProducer(t, ns.addr, "pg-tls-"+tc.name, producer.WithTls(true))
			for i := 0; i < n; i++ {
				body := fmt.Sprintf("tls-%d-%s", i, string(make([]byte, i*997%5000)))
				res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
				if err != nil || res.Status != primitive.SendOK {
					t.Fatalf("TLS send %d: %v %v", i, res, err)
				}
			}
			got := newCollector()
			startPushConsumer(t, ns.addr, "cg-tls-"+tc.name, topic, consumer.MessageSelector{}, got,
				consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithTls(true))
			got.waitDistinct(t, n, 60*time.Second)
			for i := 0; i < n; i++ {
				body := fmt.Sprintf("tls-%d-%s", i, string(make([]byte, i*997%5000)))
				if got.snapshot()[body] == 0 {
					t.Errorf("message %d not consumed", i)
				}
			}

			plain := newProducer(t, ns.addr, "pg-plain-"+tc.name, producer.WithTls(false), producer.WithRetry(0),
				producer.WithSendMsgTimeout(3*time.Second))
			res, err := plain.SendSync(context.Background(), primitive.NewMessage(topic, []byte("plaintext")))
			if tc.plainOK && (err != nil || res.Status != primitive.SendOK) {
				t.Fatalf("plaintext send on a permissive server: %v %v", res, err)
			}
			if !tc.plainOK {
				if err == nil {
					t.Fatalf("plaintext send on an enforcing server succeeded: %v", res)
				}
				ns.waitLog(t, "plaintext refused, TLS is enforced", 10*time.Second)
			}
		})
	}
}

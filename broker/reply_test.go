package broker

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// sendReply sends SEND_REPLY_MESSAGE (long header names, as the Go client)
// to the cluster's reply topic.
func sendReply(t *testing.T, c *remoting.Client, props, body string) *remoting.Command {
	t.Helper()
	return call(t, c, remoting.SendReplyMessage, map[string]string{
		"producerGroup": "pg-replier", "topic": "DefaultCluster_REPLY_TOPIC", "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "flag": "0", "reconsumeTimes": "0", "unitMode": "false",
		"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "properties": props,
	}, []byte(body))
}

func TestReplyPushedToTheRequester(t *testing.T) {
	b := startTestBroker(t, nil)
	pushed := make(chan *remoting.Command, 4)
	var refuse atomic.Bool
	requester := b.client(func(_ context.Context, cmd *remoting.Command) *remoting.Command {
		if cmd.Code != remoting.PushReplyMessageToClient {
			return nil
		}
		pushed <- cmd
		if refuse.Load() {
			return remoting.NewResponse(cmd, remoting.SystemError, "no such request")
		}
		return remoting.NewResponse(cmd, remoting.Success, "")
	})
	heartbeat(t, requester, heartbeatBody("10.0.0.7@req", "pg-req", "", nil))
	replier := b.client(nil)

	r := sendReply(t, replier, "CORRELATION_ID\x01c-1\x02REPLY_TO_CLIENT\x0110.0.0.7@req\x02MSG_TYPE\x01reply\x02", "pong")
	if r.Code != remoting.Success {
		t.Fatalf("reply: %d %s", r.Code, r.Remark)
	}
	if _, _, err := commitlog.ParseMessageID(r.ExtFields["msgId"]); err != nil {
		t.Fatalf("stored reply's msgId %q: %v", r.ExtFields["msgId"], err)
	}
	var p *remoting.Command
	select {
	case p = <-pushed:
	case <-time.After(10 * time.Second):
		t.Fatal("the stored reply was not pushed to the requester")
	}
	props := commitlog.ParseProperties(p.ExtFields["properties"])
	if string(p.Body) != "pong" || p.ExtFields["topic"] != "DefaultCluster_REPLY_TOPIC" || props["CORRELATION_ID"] != "c-1" ||
		props["PUSH_REPLY_TIME"] == "" || p.ExtFields["storeHost"] != b.hostAddr().String() ||
		!strings.HasPrefix(p.ExtFields["bornHost"], "127.0.0.1:") || p.ExtFields["producerGroup"] != "pg-replier" {
		t.Fatalf("pushed reply %v body %q", p.ExtFields, p.Body)
	}
	if _, err := strconv.ParseInt(p.ExtFields["storeTimestamp"], 10, 64); err != nil {
		t.Fatalf("pushed storeTimestamp %q", p.ExtFields["storeTimestamp"])
	}

	for _, tc := range []struct {
		name, props, remark string
	}{
		{"requester not connected", "CORRELATION_ID\x01c-2\x02REPLY_TO_CLIENT\x0110.0.0.8@gone\x02", "channel of <10.0.0.8@gone> not found"},
		{"no REPLY_TO_CLIENT", "CORRELATION_ID\x01c-3\x02", "properties[REPLY_TO_CLIENT] is null"},
	} {
		r := sendReply(t, replier, tc.props, "lost")
		if r.Code != remoting.SystemError || !strings.Contains(r.Remark, tc.remark) {
			t.Errorf("%s: answered %d %q, want SYSTEM_ERROR naming %q", tc.name, r.Code, r.Remark, tc.remark)
		}
	}
	refuse.Store(true)
	if r := sendReply(t, replier, "CORRELATION_ID\x01c-4\x02REPLY_TO_CLIENT\x0110.0.0.7@req\x02", "refused"); r.Code != remoting.SystemError {
		t.Errorf("a reply the requester refused answered %d %s", r.Code, r.Remark)
	}
	// A requester that drops its connection instead of answering: the
	// push fails when the connection closes, long before pushReplyTimeout.
	var dropper atomic.Pointer[remoting.Client]
	dropper.Store(b.client(func(_ context.Context, cmd *remoting.Command) *remoting.Command {
		if cmd.Code == remoting.PushReplyMessageToClient {
			go dropper.Load().Close()
		}
		return nil
	}))
	heartbeat(t, dropper.Load(), heartbeatBody("10.0.0.6@drop", "pg-req", "", nil))
	r = sendReply(t, replier, "CORRELATION_ID\x01c-5\x02REPLY_TO_CLIENT\x0110.0.0.6@drop\x02", "dropped")
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "push reply message to 10.0.0.6@drop fail") {
		t.Errorf("a reply whose requester dropped the connection answered %d %q", r.Code, r.Remark)
	}
	// Every reply is stored in the reply topic, pushed or not.
	if got := pullAll(t, b, replier, "DefaultCluster_REPLY_TOPIC", 0); len(got) != 5 {
		t.Fatalf("reply topic holds %d messages, want 5", len(got))
	}
}

func TestReplyNotStoredWhenDisabled(t *testing.T) {
	b := startTestBroker(t, map[string]string{"storeReplyMessageEnable": "false"})
	requester := b.client(func(_ context.Context, cmd *remoting.Command) *remoting.Command {
		return remoting.NewResponse(cmd, remoting.Success, "")
	})
	heartbeat(t, requester, heartbeatBody("10.0.0.9@req", "pg-req", "", nil))
	r := sendReply(t, b.client(nil), "REPLY_TO_CLIENT\x0110.0.0.9@req\x02", "pong")
	if r.Code != remoting.Success || r.ExtFields["msgId"] != "0" {
		t.Fatalf("reply: %d %s %v", r.Code, r.Remark, r.ExtFields)
	}
	if got := pullAll(t, b, requester, "DefaultCluster_REPLY_TOPIC", 0); len(got) != 0 {
		t.Fatalf("reply stored with storeReplyMessageEnable=false: %d", len(got))
	}
}

// As many replies at once as the server has workers all reach their
// requester: each waits on a worker for the requester's answer to
// PUSH_REPLY_MESSAGE_TO_CLIENT, and the answers used to be queued for
// those same workers, so every push timed out (pushReplyTimeout, 10 s,
// with nothing else served meanwhile) though the requester answered at
// once. The event loop now hands a client's answer to its waiter, as
// RocketMQ's Netty handler completes response futures on the IO thread
// (NettyRemotingAbstract.processResponseCommand).
func TestAsManyRepliesAsWorkersReachTheirRequester(t *testing.T) {
	workers := max(16, 4*runtime.GOMAXPROCS(0)) // remoting's default
	b := startTestBroker(t, nil)
	var arrived atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	requester, err := remoting.Dial(context.Background(), b.Addr(), remoting.ClientOptions{
		MaxHandlers: workers * 2,
		Handler: func(_ context.Context, cmd *remoting.Command) *remoting.Command {
			if cmd.Code != remoting.PushReplyMessageToClient {
				return nil
			}
			if arrived.Add(1) == int32(workers) {
				once.Do(func() { close(all) })
			}
			select { // answer once every push is in flight (at most 3 s)
			case <-all:
			case <-time.After(3 * time.Second):
			}
			return remoting.NewResponse(cmd, remoting.Success, "")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = requester.Close() })
	heartbeat(t, requester, heartbeatBody("10.0.0.7@req", "pg-req", "", nil))
	replier := b.client(nil)

	var wg sync.WaitGroup
	codes := make([]string, workers)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := sendReply(t, replier, fmt.Sprintf("CORRELATION_ID\x01c-%d\x02REPLY_TO_CLIENT\x0110.0.0.7@req\x02", i), "pong")
			codes[i] = fmt.Sprintf("%d %s", r.Code, r.Remark)
		}()
	}
	wg.Wait()
	failed := 0
	for _, c := range codes {
		if c != "0 " {
			failed++
		}
	}
	if failed > 0 {
		t.Fatalf("%d concurrent replies to a requester that answers every push: %d failed (first answer %q)",
			workers, failed, codes[0])
	}
}

package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/remoting"
)

// testBroker is an in-process broker on a free port with a fresh store.
type testBroker struct {
	*Broker
	t     testing.TB
	store string
}

func startTestBroker(t testing.TB, overrides map[string]string) *testBroker {
	t.Helper()
	store := t.TempDir()
	return startTestBrokerAt(t, store, overrides)
}

func startTestBrokerAt(t testing.TB, store string, overrides map[string]string) *testBroker {
	t.Helper()
	return startTestBrokerWith(t, store, overrides, nil)
}

// startTestBrokerWith is startTestBrokerAt with a function that adjusts the
// broker between New and Start.
func startTestBrokerWith(t testing.TB, store string, overrides map[string]string, adjust func(*Broker)) *testBroker {
	t.Helper()
	o := map[string]string{
		"storePathRootDir":        store,
		"listenPort":              "0",
		"brokerIP1":               "127.0.0.1",
		"mappedFileSizeCommitLog": strconv.Itoa(4 << 20),
	}
	for k, v := range overrides {
		o[k] = v
	}
	loaded, err := configs.LoadBroker("", o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(loaded.Broker, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if adjust != nil {
		adjust(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	tb := &testBroker{Broker: b, t: t, store: store}
	t.Cleanup(func() { tb.stop() })
	return tb
}

// startError starts a broker with these settings (no test defaults) and
// returns why Start failed, or nil after shutting down one that started.
func startError(t testing.TB, settings map[string]string) error {
	t.Helper()
	return startErrorWith(t, settings, nil)
}

// startErrorWith is startError with a function that adjusts the broker
// between New and Start.
func startErrorWith(t testing.TB, settings map[string]string, adjust func(*Broker)) error {
	t.Helper()
	loaded, err := configs.LoadBroker("", settings)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(loaded.Broker, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if adjust != nil {
		adjust(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		return err
	}
	if err := b.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	return nil
}

func (tb *testBroker) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tb.Shutdown(ctx); err != nil {
		tb.t.Errorf("shutdown: %v", err)
	}
}

// client dials the broker; handler answers broker-to-client requests.
func (tb *testBroker) client(handler func(context.Context, *remoting.Command) *remoting.Command) *remoting.Client {
	tb.t.Helper()
	c, err := remoting.Dial(context.Background(), tb.Addr(), remoting.ClientOptions{Handler: handler})
	if err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Cleanup(func() { _ = c.Close() })
	return c
}

// updateConfig sends UPDATE_BROKER_CONFIG (as mqadmin updateBrokerConfig)
// and fails the test unless the broker took it.
func updateConfig(t *testing.T, c *remoting.Client, body string) {
	t.Helper()
	if r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte(body)); r.Code != remoting.Success {
		t.Fatalf("update %q: %d %s", body, r.Code, r.Remark)
	}
}

// call invokes one request with a timeout.
func call(t *testing.T, c *remoting.Client, code int32, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, remoting.NewRequest(code, ext, body))
	if err != nil {
		t.Fatalf("invoke %d: %v", code, err)
	}
	return resp
}

var bornCounter atomic.Int64

// sendV2 sends one message with SEND_MESSAGE_V2's letter header.
func sendV2(t *testing.T, c *remoting.Client, topic string, qid int32, body string, props string) *remoting.Command {
	t.Helper()
	return call(t, c, remoting.SendMessageV2, map[string]string{
		"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": strconv.Itoa(int(qid)),
		"f": "0", "g": strconv.FormatInt(time.Now().UnixMilli()+bornCounter.Add(1), 10), "h": "0", "i": props,
	}, []byte(body))
}

// mustSend sends and fails the test unless the broker answered SUCCESS.
func mustSend(t *testing.T, c *remoting.Client, topic string, qid int32, body string, props string) *remoting.Command {
	t.Helper()
	resp := sendV2(t, c, topic, qid, body, props)
	if resp.Code != remoting.Success {
		t.Fatalf("send to %s/%d: code %d %s", topic, qid, resp.Code, resp.Remark)
	}
	return resp
}

// pullReq builds a PULL_MESSAGE header with its own subscription.
func pullReq(group, topic string, qid int32, offset int64, sysFlag int, suspend time.Duration, sub string) map[string]string {
	return map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(qid)),
		"queueOffset": strconv.FormatInt(offset, 10), "maxMsgNums": "32",
		"sysFlag": strconv.Itoa(sysFlag | pullSubscription), "commitOffset": "0",
		"suspendTimeoutMillis": strconv.FormatInt(suspend.Milliseconds(), 10),
		"subscription":         sub, "subVersion": "0", "expressionType": "TAG",
	}
}

// decodeRecords splits a pull body into messages.
func decodeRecords(t *testing.T, body []byte) []commitlog.Message {
	t.Helper()
	var out []commitlog.Message
	for len(body) > 0 {
		m, err := commitlog.Decode(body)
		if err != nil {
			t.Fatalf("decode pulled record: %v", err)
		}
		out = append(out, m)
		body = body[m.StoreSize:]
	}
	return out
}

// header reads the integer field key of a response, failing the test
// when there is no response or the field is missing or not a number.
func header(t testing.TB, resp *remoting.Command, key string) int64 {
	t.Helper()
	if resp == nil {
		t.Fatalf("response field %s: no response", key)
	}
	v, err := strconv.ParseInt(resp.ExtFields[key], 10, 64)
	if err != nil {
		t.Fatalf("response field %s=%q of an answer %d %q: %v", key, resp.ExtFields[key], resp.Code, resp.Remark, err)
	}
	return v
}

// caughtUp waits until everything appended is dispatched (a send returns
// before its message is indexed, as in RocketMQ).
func (tb *testBroker) caughtUp() {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tb.disp.CatchUp(ctx); err != nil {
		tb.t.Fatal(err)
	}
}

// waitHeld waits until a pull is held (long polling) at the broker.
func (tb *testBroker) waitHeld() {
	tb.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for tb.holds.count() == 0 {
		if time.Now().After(deadline) {
			tb.t.Fatal("pull was not held")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// committedOffset reads a committed offset, failing the test when there
// is none.
func committedOffset(t *testing.T, c *remoting.Client, group, topic string, q int32) int64 {
	t.Helper()
	resp := call(t, c, remoting.QueryConsumerOffset, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(q)), "setZeroIfNotFound": "false"}, nil)
	if resp.Code != remoting.Success {
		t.Fatalf("query offset of %s/%d: %d %s", topic, q, resp.Code, resp.Remark)
	}
	return header(t, resp, "offset")
}

// ensureGroup creates a subscription group with the defaults unless it
// exists: as in RocketMQ, offsets are committed only for known groups
// (a client's heartbeat or pull creates them).
func ensureGroup(t *testing.T, c *remoting.Client, group string) {
	t.Helper()
	if r := call(t, c, remoting.GetSubscriptionGroupConfig, map[string]string{"group": group}, nil); r.Code == remoting.Success {
		return
	}
	if r := call(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+group+`"}`)); r.Code != remoting.Success {
		t.Fatalf("create group %s: %d %s", group, r.Code, r.Remark)
	}
}

// commitOffset sends UPDATE_CONSUMER_OFFSET for a group it creates if
// needed, and returns the answer.
func commitOffset(t *testing.T, c *remoting.Client, group, topic string, q int32, off int64) *remoting.Command {
	t.Helper()
	ensureGroup(t, c, group)
	return call(t, c, remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(q)), "commitOffset": strconv.FormatInt(off, 10)}, nil)
}

// commit commits a consumer offset and fails unless it was accepted.
func commit(t *testing.T, c *remoting.Client, group, topic string, q int32, offset int64) {
	t.Helper()
	if r := commitOffset(t, c, group, topic, q, offset); r.Code != remoting.Success {
		t.Fatalf("commit %s %s/%d: %d %s", group, topic, q, r.Code, r.Remark)
	}
}

// pullAnswer is a pull's response (nil when the pull failed: err says
// why) and when it arrived.
type pullAnswer struct {
	resp *remoting.Command
	err  error
	at   time.Time
}

// String describes the answer for a failure message: its code and
// fields, or the error of a pull that got no response.
func (a pullAnswer) String() string {
	if a.resp == nil {
		return fmt.Sprintf("no response (%v)", a.err)
	}
	return fmt.Sprintf("%d %v", a.resp.Code, a.resp.ExtFields)
}

// holdPull sends a long-polling pull and returns once the broker holds
// it; its answer arrives on the channel.
func (tb *testBroker) holdPull(c *remoting.Client, ext map[string]string) <-chan pullAnswer {
	tb.t.Helper()
	done := make(chan pullAnswer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.PullMessage, ext, nil))
		if err != nil {
			tb.t.Error(err)
		}
		done <- pullAnswer{resp: resp, err: err, at: time.Now()}
	}()
	tb.waitHeld()
	return done
}

// pullAll pulls every message of a queue from offset 0.
func pullAll(t *testing.T, b *testBroker, c *remoting.Client, topic string, qid int32) []commitlog.Message {
	t.Helper()
	b.caughtUp()
	resp := call(t, c, remoting.PullMessage, pullReq("inspect", topic, qid, 0, 0, 0, "*"), nil)
	switch resp.Code {
	case remoting.Success:
		return decodeRecords(t, resp.Body)
	case remoting.PullNotFound, remoting.PullOffsetMoved:
		return nil
	}
	t.Fatalf("pull %s/%d: %d %s", topic, qid, resp.Code, resp.Remark)
	return nil
}

// startRemotingServer starts a Remoting server on a loopback port that
// answers with h (a stand-in for a name server or a master), stopped when
// the test ends, and returns its address.
func startRemotingServer(t testing.TB, h remoting.Handler) string {
	t.Helper()
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, h, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return srv.Addr().String()
}

// losePower makes the stopped broker's store at store look as a power
// failure leaves it: the CommitLog bytes [tail, end) of its first segment
// never reached the disk (zeros), and the abort file says the broker did
// not stop cleanly.
func losePower(t *testing.T, store string, tail, end int64) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(store, "commitlog", fmt.Sprintf("%020d", 0)), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, end-tail), tail); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "abort"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

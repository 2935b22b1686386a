package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// childBrokerEnv makes the test binary run a broker (until SIGTERM or
// SIGKILL) instead of the tests: "storeDir port [key=value ...]"; with
// enableControllerMode=true among the settings, a Supervisor.
const childBrokerEnv = "ROCKETKV_TEST_BROKER_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childBrokerEnv); spec != "" {
		os.Exit(runChildBroker(spec))
	}
	os.Exit(m.Run())
}

func runChildBroker(spec string) int {
	fields := strings.Fields(spec)
	if len(fields) < 2 {
		fmt.Fprintf(os.Stderr, "%s=%q: want \"storeDir port [key=value ...]\"\n", childBrokerEnv, spec)
		return 2
	}
	settings := map[string]string{
		"storePathRootDir": fields[0], "listenPort": fields[1], "brokerIP1": "127.0.0.1",
		"mappedFileSizeCommitLog": strconv.Itoa(childSegmentSize),
		// listenPort+1 and -2 are not known to be free.
		"haListenPort": "-1", "fastListenPort": "-1",
	}
	var cutAt int64
	killAt := ""
	for _, kv := range fields[2:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case childCutAt: // Broker.CutCommitLogAt
			cutAt, _ = strconv.ParseInt(v, 10, 64)
		case childKillAtStep: // a recovery step, spaces as underscores
			killAt = strings.ReplaceAll(v, "_", " ")
		default:
			settings[k] = v
		}
	}
	loaded, err := configs.LoadBroker("", settings)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if loaded.Broker.EnableControllerMode {
		return runChildSupervisor(loaded.Broker)
	}
	b, err := New(loaded.Broker, zerolog.New(os.Stderr).Level(zerolog.WarnLevel))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	b.CutCommitLogAt(cutAt)
	if killAt != "" {
		b.recoveryStep = func(step string) {
			if step == killAt {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := b.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("ready", b.Addr())
	<-ctx.Done()
	if err := b.Shutdown(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runChildSupervisor runs a child broker of enableControllerMode: its
// Supervisor, which takes its id and role from the controller, until
// SIGTERM or SIGKILL. It reports "ready" once the first Broker runs.
func runChildSupervisor(cfg configs.Broker) int {
	s, err := NewSupervisor(cfg, zerolog.New(os.Stderr).Level(zerolog.WarnLevel))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := s.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("ready", net.JoinHostPort(cfg.BrokerIP1, strconv.Itoa(cfg.ListenPort)))
	<-ctx.Done()
	if err := s.Shutdown(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// Settings of a child broker's spec that are not broker settings: the
// offset to cut its CommitLog at, and the recovery step after which it
// SIGKILLs itself (Broker.recoveryStep).
const (
	childCutAt      = "cutAt"
	childKillAtStep = "killAtStep"
)

// childSegmentSize is a child broker's CommitLog segment size; a slave
// of one needs the same.
const childSegmentSize = 16 << 20

// childBroker is a broker in a child process, so it can be SIGKILLed.
type childBroker struct {
	t     *testing.T
	store string
	port  int
	extra []string // key=value settings
	cmd   *exec.Cmd
	addr  string
}

func startChildBroker(t *testing.T, store string, port int, extra ...string) *childBroker {
	t.Helper()
	cb := &childBroker{t: t, store: store, port: port, extra: extra}
	cb.start()
	t.Cleanup(func() { cb.kill() })
	return cb
}

func (cb *childBroker) start() {
	cb.t.Helper()
	spec := strings.Join(append([]string{cb.store, strconv.Itoa(cb.port)}, cb.extra...), " ")
	cb.cmd, cb.addr = testutil.StartChild(cb.t, childBrokerEnv+"="+spec)
}

func (cb *childBroker) kill() {
	if cb.cmd != nil {
		testutil.KillChild(cb.cmd)
		cb.cmd = nil
	}
}

func (cb *childBroker) dial() *remoting.Client {
	cb.t.Helper()
	c, err := remoting.Dial(context.Background(), cb.addr, remoting.ClientOptions{})
	if err != nil {
		cb.t.Fatal(err)
	}
	cb.t.Cleanup(func() { _ = c.Close() })
	return c
}

// sentMsg is an acknowledged send.
type sentMsg struct {
	topic  string
	qid    int32
	offset int64
}

// The scale scenario, small enough for CI: 200 topics x 100 queues, sends
// spread over all 20,000 queues by pipelined producers, the broker
// SIGKILLed in the middle of producing and again in the middle of a
// group's consumption. Afterwards every acknowledged message is in its
// queue at the offset it was acknowledged with, queues are gapless, and
// each of two groups consumes every message exactly once (one of them
// resuming from the offsets it committed before the kill).
func TestScaleScenarioSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("scale scenario")
	}
	const topics, queues, messages = 200, 100, 40000
	store := t.TempDir()
	cb := startChildBroker(t, store, freeTCPPort(t))

	// Bulk creation of every topic in one request.
	var list struct {
		TopicConfigList []meta.TopicConfig `json:"topicConfigList"`
	}
	for i := 0; i < topics; i++ {
		list.TopicConfigList = append(list.TopicConfigList, meta.NewTopicConfig(fmt.Sprintf("S%d", i), queues))
	}
	raw, _ := json.Marshal(list)
	c := cb.dial()
	if r := call(t, c, remoting.UpdateAndCreateTopicList, nil, raw); r.Code != remoting.Success {
		t.Fatalf("bulk create: %d %s", r.Code, r.Remark)
	}

	var mu sync.Mutex
	acked := map[string]sentMsg{} // body -> where the broker put it
	produce := func(c *remoting.Client, from, to int) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64)
		rng := rand.New(rand.NewPCG(uint64(from), 7))
		for i := from; i < to; i++ {
			topic := fmt.Sprintf("S%d", rng.IntN(topics))
			qid := int32(rng.IntN(queues))
			body := fmt.Sprintf("m-%d", i)
			req := remoting.NewRequest(remoting.SendMessageV2, map[string]string{
				"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": strconv.Itoa(int(qid)),
				"f": "0", "g": "1", "h": "0", "i": "",
			}, []byte(body))
			sem <- struct{}{}
			wg.Add(1)
			err := c.InvokeAsync(req, func(resp *remoting.Command, err error) {
				defer func() { <-sem; wg.Done() }()
				if err != nil || resp.Code != remoting.Success {
					return // not acknowledged: may or may not be stored
				}
				off, _ := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
				mu.Lock()
				acked[body] = sentMsg{topic, qid, off}
				mu.Unlock()
			})
			if err != nil {
				<-sem
				wg.Done()
				break // the connection died (the broker was killed)
			}
		}
		wg.Wait()
	}
	// First half, then a SIGKILL while a second burst is in flight.
	produce(c, 0, messages/2)
	done := make(chan struct{})
	go func() { produce(c, messages/2, messages*3/4); close(done) }()
	time.Sleep(50 * time.Millisecond)
	cb.kill()
	<-done
	cb.start()
	c = cb.dial()
	produce(c, messages*3/4, messages)
	mu.Lock()
	nAcked := len(acked)
	mu.Unlock()
	if nAcked < messages*3/4 {
		t.Fatalf("only %d of %d sends acknowledged", nAcked, messages)
	}

	// Where each acknowledged message must be.
	want := map[string]string{} // "topic/qid/offset" -> body
	for body, s := range acked {
		k := fmt.Sprintf("%s/%d/%d", s.topic, s.qid, s.offset)
		if prev, dup := want[k]; dup {
			t.Fatalf("two acknowledged messages (%s, %s) got the same position %s", prev, body, k)
		}
		want[k] = body
	}

	// Group A reads everything; group B is killed half way and resumes
	// from its committed offsets.
	// consume reads every queue of group from its committed offset,
	// committing after each batch (a batch counts only once its commit is
	// acknowledged), with 16 queues in flight. It stops after about
	// stopAfter messages (0: never) or when the connection fails.
	consume := func(c *remoting.Client, group string, stopAfter int64) (map[string]int, bool) {
		var smu sync.Mutex
		seen := map[string]int{}
		var read atomic.Int64
		var failed atomic.Bool
		work := make(chan [2]int, topics*queues)
		for ti := 0; ti < topics; ti++ {
			for q := 0; q < queues; q++ {
				work <- [2]int{ti, q}
			}
		}
		close(work)
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for job := range work {
					if failed.Load() || (stopAfter > 0 && read.Load() >= stopAfter) {
						return
					}
					topic, q := fmt.Sprintf("S%d", job[0]), int32(job[1])
					qs := strconv.Itoa(int(q))
					off := int64(0)
					qr := call2(c, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": group, "topic": topic, "queueId": qs, "setZeroIfNotFound": "false"})
					if qr == nil {
						failed.Store(true)
						return
					}
					if qr.Code == remoting.Success {
						off, _ = strconv.ParseInt(qr.ExtFields["offset"], 10, 64)
					}
					for {
						r := call2(c, remoting.PullMessage, pullReq(group, topic, q, off, 0, 0, "*"))
						if r == nil {
							failed.Store(true)
							return
						}
						if r.Code != remoting.Success {
							break
						}
						// Not decodeRecords: its t.Fatalf may not run
						// outside the test's goroutine.
						msgs, err := decodeBody(r.Body)
						if err != nil {
							t.Errorf("%s/%d at %d: %v", topic, q, off, err)
							failed.Store(true)
							return
						}
						for i, m := range msgs {
							if m.QueueOffset != off+int64(i) {
								t.Errorf("%s/%d: gap: offset %d where %d was expected", topic, q, m.QueueOffset, off+int64(i))
							}
						}
						next := off + int64(len(msgs))
						cr := call2(c, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": group, "topic": topic,
							"queueId": qs, "commitOffset": strconv.FormatInt(next, 10)})
						if cr == nil || cr.Code != remoting.Success {
							failed.Store(true)
							return
						}
						smu.Lock()
						for _, m := range msgs {
							k := fmt.Sprintf("%s/%d/%d", m.Topic, m.QueueID, m.QueueOffset)
							seen[k]++
							if w, ok := want[k]; ok && w != string(m.Body) {
								t.Errorf("%s holds %q, but %q was acknowledged there", k, m.Body, w)
							}
						}
						smu.Unlock()
						off = next
						read.Add(int64(len(msgs)))
					}
				}
			}()
		}
		wg.Wait()
		return seen, !failed.Load() && (stopAfter == 0 || read.Load() < stopAfter)
	}
	seenA, ok := consume(c, "groupA", 0)
	if !ok {
		t.Fatal("group A could not finish")
	}
	partB, _ := consume(c, "groupB", int64(len(seenA)/2))
	cb.kill()
	cb.start()
	c = cb.dial()
	restB, ok := consume(c, "groupB", 0)
	if !ok {
		t.Fatal("group B could not finish after the restart")
	}
	for k, n := range partB {
		restB[k] += n
	}
	for k := range want {
		if seenA[k] != 1 {
			t.Errorf("group A consumed acknowledged %s %d times", k, seenA[k])
		}
		if restB[k] != 1 {
			t.Errorf("group B consumed acknowledged %s %d times across the kill", k, restB[k])
		}
	}
	for k, n := range restB {
		if n != 1 {
			t.Errorf("group B consumed %s %d times", k, n)
		}
	}
	t.Logf("%d acknowledged of %d sent over %d queues; group A read %d, group B %d (%d before the kill)",
		nAcked, messages, topics*queues, len(seenA), len(restB), len(partB))
}

// decodeBody splits a pull body into messages, as decodeRecords does, for
// goroutines that may not stop the test.
func decodeBody(body []byte) ([]commitlog.Message, error) {
	var out []commitlog.Message
	for len(body) > 0 {
		m, err := commitlog.Decode(body)
		if err != nil {
			return out, fmt.Errorf("decode pulled record %d: %w", len(out), err)
		}
		out = append(out, m)
		body = body[m.StoreSize:]
	}
	return out, nil
}

// call2 invokes one request, returning nil when the connection failed.
func call2(c *remoting.Client, code int32, ext map[string]string) *remoting.Command {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, remoting.NewRequest(code, ext, nil))
	if err != nil {
		return nil
	}
	return resp
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

package pop_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/broker"
	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// The crash test re-runs this test binary as a child broker.
const childEnvBroker = "POP_CRASH_BROKER_DIR"

// childEnvWALSync, when set, is the child broker's indexWalSync.
const childEnvWALSync = "POP_CRASH_INDEX_WAL_SYNC"

// childEnvStageAhead, when set, is the child broker's popReviveStageAhead.
const childEnvStageAhead = "POP_CRASH_STAGE_AHEAD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnvBroker); dir != "" {
		os.Exit(runBrokerChild(dir))
	}
	os.Exit(m.Run())
}

// runBrokerChild runs a broker on store dir until SIGKILL or SIGTERM. It
// prints "ready <addr>" once it serves.
func runBrokerChild(dir string) int {
	set := map[string]string{
		"storePathRootDir": dir, "listenPort": "0", "brokerIP1": "127.0.0.1",
		"mappedFileSizeCommitLog": strconv.Itoa(16 << 20),
	}
	if mode := os.Getenv(childEnvWALSync); mode != "" {
		set["indexWalSync"] = mode
	}
	if ahead := os.Getenv(childEnvStageAhead); ahead != "" {
		set["popReviveStageAhead"] = ahead
	}
	loaded, err := configs.LoadBroker("", set)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	// Warnings go to the test's output; everything, down to each pop's
	// queue reads, to a file the failure dump reads (dumpQueueReads).
	debug, err := openMappedLog(filepath.Join(dir, childDebugLog))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer debug.Close()
	logger := zerolog.New(zerolog.MultiLevelWriter(
		&zerolog.FilteredLevelWriter{Writer: zerolog.LevelWriterAdapter{Writer: os.Stderr}, Level: zerolog.WarnLevel},
		debug)).Level(zerolog.DebugLevel)
	b, err := broker.New(loaded.Broker, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := b.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	// Only in the debug log: when this life began, for dumpQueueReads.
	logger.Info().Str("addr", b.Addr()).Int64("at", time.Now().UnixMilli()).Msg(childReadyMessage)
	fmt.Println("ready " + b.Addr())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 5
	}
	return 0
}

// child is a running child broker.
type child struct {
	cmd  *exec.Cmd
	addr string
}

func startBrokerChild(t *testing.T, dir string) *child {
	t.Helper()
	cmd, addr := testutil.StartChild(t, childEnvBroker+"="+dir)
	return &child{cmd: cmd, addr: addr}
}

func (c *child) kill() { testutil.KillChild(c.cmd) }

// delivery is one answered pop of a message, as the test saw it.
type delivery struct {
	id       string
	popTime  int64
	deadline int64
	// answeredAt is when the pop's answer arrived. A pop's popTime is
	// taken when the broker starts it, which may be before it waited for
	// the queue's lock while a revive put the very messages it then
	// returns; its answer always comes after.
	answeredAt int64
	// broker is the address of the child broker that answered: each
	// child listens on a port of its own, so it tells the lives apart.
	broker string
	msg    popclient.Message
	// ackedAt is when a SUCCESS answer to an ack of this delivery
	// arrived (0: never), ackedBy the request that acked it.
	ackedAt int64
	ackedBy string
	// ackSent is set before an ack is sent: an ack whose answer was lost
	// to a kill may or may not have been applied.
	ackSent bool
}

// ledger is the test's record of deliveries and acks.
type ledger struct {
	mu         sync.Mutex
	deliveries map[string][]*delivery
	// foreign lists the deliveries whose handle names another pop than
	// the answer they came in (its popTime differs from the header's):
	// one answer carrying another's records.
	foreign []string
	// suspectQueues lists the queues of records delivered twice or
	// re-delivered after an ack, with a window of time around the pops,
	// for the failure dump's queue reads and acks.
	suspectQueues []tracedQueue
}

func (l *ledger) add(d *delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deliveries[d.id] = append(l.deliveries[d.id], d)
	if d.msg.Handle.PopTime != d.popTime {
		l.foreign = append(l.foreign, fmt.Sprintf("%s: %s/%d@%d in the answer of popTime %d (by %s) has handle %q",
			d.id, d.msg.RealTopic, d.msg.QueueID, d.msg.QueueOffset, d.popTime, d.broker, d.msg.Handle.String()))
	}
}

func (l *ledger) sending(ds []*delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range ds {
		d.ackSent = true
	}
}

func (l *ledger) acked(ds []*delivery, at int64, by string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range ds {
		d.ackedAt, d.ackedBy = at, by
	}
}

const (
	crashGroup     = "crash-g"
	crashTopic     = "CrashT"
	crashMessages  = 1500
	crashInvisible = 1500 * time.Millisecond
)

// consume pops and acks (most messages, leaving some to expire) until
// stop ends or the connection fails. Calls are not cut short by stop, so
// a popped message is acked unless the broker dies.
func consume(stop context.Context, addr, brokerName string, l *ledger, rng *rand.Rand, ackAll bool) {
	ctx := context.Background()
	rc, err := remoting.Dial(ctx, addr, remoting.ClientOptions{})
	if err != nil {
		return
	}
	defer rc.Close()
	c := popclient.New(rc, brokerName)
	for stop.Err() == nil {
		inv := crashInvisible
		if ackAll {
			inv = 5 * time.Second
		}
		res, err := c.Pop(ctx, popclient.PopRequest{Group: crashGroup, Topic: crashTopic, QueueID: -1, MaxMsgNums: 16,
			InvisibleTime: inv, PollTime: 300 * time.Millisecond})
		if err != nil {
			return
		}
		answered := time.Now().UnixMilli()
		var toAck []*delivery
		for _, m := range res.Messages {
			d := &delivery{id: string(m.Body), popTime: res.PopTime, deadline: res.PopTime + res.InvisibleTime, answeredAt: answered, broker: addr, msg: m}
			l.add(d)
			if ackAll || rng.IntN(10) < 8 {
				toAck = append(toAck, d)
			}
		}
		if len(toAck) == 0 {
			continue
		}
		l.sending(toAck)
		if rng.IntN(2) == 0 {
			msgs := make([]popclient.Message, len(toAck))
			for i, d := range toAck {
				msgs[i] = d.msg
			}
			code, err := c.BatchAck(ctx, crashGroup, crashTopic, msgs)
			if err != nil {
				return
			}
			if code == remoting.Success {
				l.acked(toAck, time.Now().UnixMilli(), "BATCH_ACK_MESSAGE")
			}
			continue
		}
		for _, d := range toAck {
			code, err := c.Ack(ctx, crashGroup, d.msg)
			if err != nil {
				return
			}
			if code == remoting.Success {
				l.acked([]*delivery{d}, time.Now().UnixMilli(), "ACK_MESSAGE")
			}
		}
	}
}

// A child broker under a pop/ack load is SIGKILLed repeatedly. Afterwards
// every message was acked by the test (or its last delivery had an ack in
// flight when the broker died), no stored message was popped twice, and
// every re-delivery (a higher reconsume count) was answered after the
// deadline of an earlier delivery that was not acked before it: a message
// acked before its deadline is never revived. No re-delivery is stored twice
// (two deliveries of one reconsume count): a revive that a kill cuts
// short puts its messages once, at the next start if not before.
//
// It runs with both indexWalSync modes: "interval" answers pops and acks
// once their index writes reached the operating system, without waiting
// for an fdatasync, and must survive SIGKILL all the same. And with the
// staged revive on, where the messages left to expire are copied to the
// pop-retry topic before their deadline and handed out from it on.
func TestPopSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	for _, mode := range []string{configs.IndexWALSyncAlways, configs.IndexWALSyncInterval} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv(childEnvWALSync, mode)
			popSurvivesSIGKILL(t, false)
		})
	}
	t.Run("staged", func(t *testing.T) {
		t.Setenv(childEnvWALSync, configs.IndexWALSyncInterval)
		// A look-ahead shorter than the invisible time: a store that
		// never staged stages past its start plus the look-ahead.
		t.Setenv(childEnvStageAhead, "1200")
		popSurvivesSIGKILL(t, true)
	})
}

func popSurvivesSIGKILL(t *testing.T, staged bool) {
	l := &ledger{deliveries: map[string][]*delivery{}}
	var life time.Duration
	if staged {
		// Long enough for the pops of a child's start to be staged
		// before it is killed.
		life = 1500 * time.Millisecond
	}
	runCrashLoad(t, crashLoad{
		life: life,
		seed: 7, topic: crashTopic, queues: 4, messages: crashMessages,
		body: func(i int) string { return fmt.Sprintf("id-%d", i) },
		consume: func(stop context.Context, addr string, rng *rand.Rand, ackAll bool) {
			consume(stop, addr, crashBrokerName, l, rng, ackAll)
		},
		// Revive re-delivers what expired while the broker was down once
		// its deadline passed.
		drained: func() bool { return allAcked(l) }, drainFor: 40 * time.Second,
		verify: func(t *testing.T) []string { return verifyLedger(t, l) },
		traced: func() []tracedQueue { return l.suspectQueues },
	})
	if staged {
		if n := stagedDeliveries(l); n == 0 {
			t.Error("no staged copy was delivered: the test did not exercise the staged revive")
		} else {
			t.Logf("%d deliveries of staged copies", n)
		}
	}
}

// stagedDeliveries counts the deliveries of staged revive copies (those
// carrying pop.PropertyVisibleAt) in the ledger.
func stagedDeliveries(l *ledger) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ds := range l.deliveries {
		for _, d := range ds {
			if _, ok := commitlog.LookupProperty(d.msg.Properties, pop.PropertyVisibleAt); ok {
				n++
			}
		}
	}
	return n
}

// crashBrokerName is the child brokers' name.
const crashBrokerName = "broker-a"

// crashLoad is one SIGKILL crash test of POP consumers.
type crashLoad struct {
	seed     uint64
	topic    string
	queues   int
	messages int
	body     func(i int) string // message i's body, sent to queue i % queues
	consume  func(stop context.Context, addr string, rng *rand.Rand, ackAll bool)
	drained  func() bool
	drainFor time.Duration
	// verify checks the ledger and returns the bodies of the messages
	// it found wrong, whose records the failure dump lists.
	verify func(t *testing.T) []string
	// life is the least time a child broker serves before it is killed
	// (300 ms when zero); each lives up to 500 ms more.
	life time.Duration
	// traced, when set, names the queues whose reads by pops the failure
	// dump lists from the children's debug log (called after verify).
	traced func() []tracedQueue
}

// runCrashLoad sends load's messages to a child broker, kills it six
// times at random moments under three consumers, then runs one consumer
// acking everything until drained (or drainFor passed), verifies, and
// dumps the index's POP state when the test failed.
func runCrashLoad(t *testing.T, load crashLoad) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(load.seed, uint64(time.Now().UnixNano())))
	c := startBrokerChild(t, dir)
	func() {
		rc, err := remoting.Dial(context.Background(), c.addr, remoting.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		for i := 0; i < load.messages; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := rc.Invoke(ctx, remoting.NewRequest(remoting.SendMessageV2, map[string]string{
				"a": "pg", "b": load.topic, "c": "TBW102", "d": strconv.Itoa(load.queues), "e": strconv.Itoa(i % load.queues), "f": "0",
				"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "",
			}, []byte(load.body(i))))
			cancel()
			if err != nil || resp.Code != remoting.Success {
				t.Fatalf("send %d: %v %v", i, err, resp)
			}
		}
	}()
	const kills = 6
	for k := 0; k < kills; k++ {
		if k > 0 {
			c = startBrokerChild(t, dir)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			wg.Add(1)
			seed := rng.Uint64()
			go func() {
				defer wg.Done()
				load.consume(ctx, c.addr, rand.New(rand.NewPCG(seed, 1)), false)
			}()
		}
		life := load.life
		if life == 0 {
			life = 300 * time.Millisecond
		}
		time.Sleep(life + time.Duration(rng.IntN(500))*time.Millisecond)
		c.kill()
		cancel()
		wg.Wait()
	}
	c = startBrokerChild(t, dir)
	defer c.kill()
	deadline := time.Now().Add(load.drainFor)
	for !load.drained() && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		load.consume(ctx, c.addr, rng, true)
		cancel()
	}
	suspects := load.verify(t)
	if t.Failed() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		_ = c.cmd.Wait()
		dumpPopState(t, dir, load.topic, suspects)
		if load.traced != nil {
			dumpQueueReads(t, dir, load.traced())
		}
	}
}

func allAcked(l *ledger) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.deliveries) < crashMessages {
		return false
	}
	for _, ds := range l.deliveries {
		if !ackedSomeDelivery(ds) && !ds[len(ds)-1].ackSent {
			return false
		}
	}
	return true
}

func ackedSomeDelivery(ds []*delivery) bool {
	for _, d := range ds {
		if d.ackedAt != 0 {
			return true
		}
	}
	return false
}

func verifyLedger(t *testing.T, l *ledger) (suspects []string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	type where struct {
		topic  string
		queue  int32
		offset int64
	}
	at := map[where]*delivery{}
	redelivered, expiredUnacked, copies := 0, 0, 0
	for i := 0; i < crashMessages; i++ {
		id := fmt.Sprintf("id-%d", i)
		ds := l.deliveries[id]
		if !ackedSomeDelivery(ds) && !ds[len(ds)-1].ackSent {
			var b strings.Builder
			for _, d := range ds {
				fmt.Fprintf(&b, " [%s/%d@%d popTime %d deadline %d reconsume %d handle %q]", d.msg.RealTopic, d.msg.QueueID,
					d.msg.QueueOffset, d.popTime, d.deadline, d.msg.ReconsumeTimes, d.msg.Handle.String())
			}
			t.Errorf("%s lost (now %d): %d deliveries, none acked:%s", id, time.Now().UnixMilli(), len(ds), b.String())
			suspects = append(suspects, id)
			continue
		}
		// A stored message (topic, queue, offset) is delivered once: a
		// second pop of it would mean a pop position moved back.
		for _, d := range ds {
			w := where{d.msg.RealTopic, d.msg.QueueID, d.msg.QueueOffset}
			if prev := at[w]; prev != nil {
				t.Errorf("%s: %s/%d@%d delivered at %d (answered at %d by %s, handle %q) and again at %d (answered at %d by %s, handle %q)",
					id, w.topic, w.queue, w.offset, prev.popTime, prev.answeredAt, prev.broker, prev.msg.Handle.String(),
					d.popTime, d.answeredAt, d.broker, d.msg.Handle.String())
				suspects = append(suspects, id)
				l.suspectQueues = append(l.suspectQueues, tracedQueue{topic: w.topic, queue: w.queue,
					from: min(prev.popTime, d.popTime) - 2000, to: max(prev.popTime, d.popTime) + 2000})
			}
			at[w] = d
		}
		// Deliveries by reconsume count. Two deliveries with one count are
		// two stored copies of one re-delivery: a revive that put the
		// message twice (checked below: it must not happen).
		gens := map[int32][]*delivery{}
		var counts []int32
		for _, d := range ds {
			c := d.msg.ReconsumeTimes
			if gens[c] == nil {
				counts = append(counts, c)
			}
			gens[c] = append(gens[c], d)
		}
		sort.Slice(counts, func(a, b int) bool { return counts[a] < counts[b] })
		for _, c := range counts {
			if len(gens[c]) > 1 {
				copies += len(gens[c]) - 1
				suspects = append(suspects, id)
			}
			for _, d := range gens[c] {
				if d.ackedAt == 0 {
					expiredUnacked++
				}
			}
		}
		for j := 1; j < len(counts); j++ {
			redelivered++
			next := gens[counts[j]]
			first := next[0]
			for _, d := range next {
				if d.answeredAt < first.answeredAt {
					first = d
				}
			}
			// Some delivery of the previous count must have expired
			// unacked (or been acked only after its deadline) before the
			// re-delivery was answered: a message acked in time is never
			// revived, and a revive puts a message once, after the deadline.
			ok := false
			for _, d := range gens[counts[j-1]] {
				if (d.ackedAt == 0 || d.ackedAt >= d.deadline) && first.answeredAt >= d.deadline {
					ok = true
				}
			}
			if !ok {
				for _, d := range gens[counts[j-1]] {
					l.suspectQueues = append(l.suspectQueues, tracedQueue{topic: d.msg.RealTopic, queue: d.msg.QueueID,
						from: d.popTime - 2000, to: first.answeredAt + 2000})
				}
				var b strings.Builder
				for _, d := range gens[counts[j-1]] {
					fmt.Fprintf(&b, " [%s/%d@%d popTime %d deadline %d ackedAt %d by %s, handle %q, answered by %s]", d.msg.RealTopic, d.msg.QueueID,
						d.msg.QueueOffset, d.popTime, d.deadline, d.ackedAt, d.ackedBy, d.msg.Handle.String(), d.broker)
				}
				t.Errorf("%s re-delivered (reconsume %d, %s/%d@%d) at %d, answered at %d by %s, with no expired delivery of reconsume %d before:%s",
					id, counts[j], first.msg.RealTopic, first.msg.QueueID, first.msg.QueueOffset, first.popTime, first.answeredAt, first.broker, counts[j-1], b.String())
				suspects = append(suspects, id)
			}
		}
	}
	// A pop-retry record's handle is the one its pop wrote into it
	// (POP_CK); every other's is built from the answer's header.
	for _, f := range l.foreign {
		t.Error(f)
	}
	if expiredUnacked == 0 {
		t.Error("no delivery expired unacked: the test did not exercise revive")
	}
	if copies > 0 {
		t.Errorf("%d re-deliveries were stored twice: a revive put a message twice", copies)
	}
	t.Logf("%d messages, %d re-deliveries, %d expired unacked deliveries, %d re-deliveries stored twice",
		crashMessages, redelivered, expiredUnacked, copies)
	return suspects
}

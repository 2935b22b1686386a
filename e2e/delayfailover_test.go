package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// delayedSend is a delayed or timer message the master acknowledged.
type delayedSend struct {
	body string
	// timer: sent with a TIMER_ property, else with a delay level.
	timer bool
	// due is the earliest store time (ms) its delivery may have: the
	// send's start plus its delay, or its TIMER_DELIVER_MS less the
	// timer's precision (the slot it waits in starts there).
	due int64
}

// deliveredCopy is one copy of a message in the target topic.
type deliveredCopy struct {
	queue  int
	offset int64
	store  int64
	host   string
}

// killWindow is when a master was SIGKILLed (ms): from just before the
// signal to once the process was gone.
type killWindow struct {
	from, to int64
	addr     string // the killed master's
}

// rawProps encodes message properties as a send header carries them.
func rawProps(props map[string]string) string {
	var b strings.Builder
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k + "\x01" + props[k] + "\x02")
	}
	return b.String()
}

// rawSend sends one message with SEND_MESSAGE (10) to broker, without a
// client's retries (a retry after a lost answer would store the body
// twice and blur the count of deliveries), and returns the answer's code.
func rawSend(broker, topic string, queue int, body string, props map[string]string) (int, error) {
	r, err := rawInvoke(broker, 10, map[string]string{
		"producerGroup": "pg-delay-failover", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": strconv.Itoa(queue), "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
		"flag": "0", "properties": rawProps(props), "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}, []byte(body))
	if err != nil {
		return -1, err
	}
	return r.Code, nil
}

// groupInSync reports whether the controller at caddr counts both
// brokers of broker-a alive and in the sync state set, and names the
// master's address.
func groupInSync(caddr string) (masterAddr string, ok bool) {
	r, err := rawInvoke(caddr, 1004, map[string]string{"brokerName": "broker-a"}, nil) // CONTROLLER_GET_REPLICA_INFO
	if err != nil || r.Code != 0 {
		return "", false
	}
	var set struct {
		SyncStateSet []int64 `json:"syncStateSet"`
	}
	if err := json.Unmarshal(r.Body, &set); err != nil || len(set.SyncStateSet) != 2 {
		return "", false
	}
	_, _, _, alive, err := controllerGroup(caddr)
	return r.ExtFields["masterAddress"], err == nil && alive == 2
}

// slaveDelayProgress is the delay-level progress the slave at addr
// copied from its master, as GET_ALL_DELAY_OFFSET (45) answers it (its
// data version left out).
func slaveDelayProgress(t *testing.T, addr string) string {
	t.Helper()
	r, err := rawInvoke(addr, 45, nil, nil)
	if err != nil || r.Code != 0 {
		t.Fatalf("GET_ALL_DELAY_OFFSET of the slave %s: %v %+v", addr, err, r)
	}
	table, _, _ := strings.Cut(string(r.Body), "dataVersion")
	return table
}

// TestDelayedAndTimerMessagesSurviveControllerFailovers: a controller (in
// the name server) and a group of two controller-mode brokers, the master
// a SYNC_MASTER with allAckInSyncStateSet, so a send it acknowledges is
// on the slave too (with ASYNC replication an acknowledged message may be
// lost at a failover, and nothing could be asserted of it). Delay levels
// are 1 s, 2 s and 3 s. In each of four rounds a wave of messages is
// sent straight to the master: delay levels 1-3 (RocketMQ 4's DELAY) and
// timer messages due in 1-3 s (TIMER_DELIVER_MS, as the Java 5 client's
// setDeliverTimeMs and the gRPC proxy send them, and TIMER_DELAY_MS, as
// setDelayTimeMs). The master delivers without waiting for its slave, as
// RocketMQ's schedule service and timer do, so the progress a slave
// copies must not pass the deliveries it holds. Once the master has
// delivered part of the wave the slave is paused for 1.3-2 s
// (SIGSTOP: a slave stalled by its disk or a GC pause) while the master
// delivers on, then resumed; as soon as it copied a new progress (its
// first metadata sync after the pause), while it may still be catching
// up, the master is SIGKILLed. The controller elects the slave,
// the killed broker is restarted (it comes back as the new master's slave
// and rejoins the sync state set), and the next round does the same to
// the new master.
//
// A consumer then reads the target topic on the last master. Every
// acknowledged message is there; none was stored before its time; a
// message stored twice was stored first by a master killed afterwards
// and again after that kill by the slave promoted in its place (the old
// master delivered it, the slave's copied progress had not passed it yet:
// at least once, as RocketMQ). Copies with no failover between them, or a
// message missing, fail the test. A slave forgetting parked timer
// messages before it holds their deliveries made every run fail with
// lost messages; slaveDelayOffsets answering the master's whole progress
// made about half the runs fail (a skip needs the kill inside the few
// milliseconds the resumed slave takes to catch up after its copy).
func TestDelayedAndTimerMessagesSurviveControllerFailovers(t *testing.T) {
	t.Parallel()
	caddr, ns := startNamesrvWithController(t)
	const precisionMs = 100
	cur, other := startControllerModeGroup(t, ns, caddr, "allAckInSyncStateSet=true",
		"messageDelayLevel=1s 2s 3s", fmt.Sprintf("timerPrecisionMs=%d", precisionMs))

	const topic, queues, rounds, perWave = "E2EDelayFailover", 4, 4, 60
	createTopic(t, cur.addr, topic, queues)
	waitRoute(t, ns.addr, topic, cur.name)
	waitTopicCopied(t, other.addr, topic)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	var acked []delayedSend
	var kills []killWindow
	refused, midWave := 0, 0
	var lastDue int64
	// Large bodies: the deliveries made while the slave is paused (tens
	// of MiB) are more than the sockets between the brokers buffer, so
	// the resumed slave is still catching up when it asks for the
	// progress.
	pad := strings.Repeat("p", 1<<20)
	for round := 0; round < rounds; round++ {
		waitUntil(t, 60*time.Second, fmt.Sprintf("round %d: both brokers in the sync state set", round), func() bool {
			m, ok := groupInSync(caddr)
			return ok && m == cur.addr
		})
		before := topicTotal(t, cur.addr, topic, queues)
		ackedBefore := len(acked)
		for i := 0; i < perWave; i++ {
			n := round*perWave + i
			body := fmt.Sprintf("df-%d", n)
			start := time.Now().UnixMilli()
			// Each kind with each delay, 1-3 s.
			level := 1 + (i/3)%3
			delayMs := int64(1000 * level)
			var props map[string]string
			var due int64
			switch i % 3 {
			case 0:
				props, due = map[string]string{"DELAY": strconv.Itoa(level)}, start+delayMs
			case 1:
				at := start + delayMs
				props, due = map[string]string{"TIMER_DELIVER_MS": strconv.FormatInt(at, 10)}, at-precisionMs
			default:
				props, due = map[string]string{"TIMER_DELAY_MS": strconv.FormatInt(delayMs, 10)}, start+delayMs-precisionMs
			}
			code, err := rawSend(cur.addr, topic, n%queues, body+" "+pad, props)
			if err != nil || code != 0 {
				// Not acknowledged: it may be delivered or not.
				refused++
				t.Logf("send %s: code %d, %v", body, code, err)
				continue
			}
			acked = append(acked, delayedSend{body: body, timer: i%3 != 0, due: due})
			lastDue = max(lastDue, due+precisionMs)
		}
		// Once the wave's first deliveries are stored, the slave is paused
		// while the master goes on delivering, then resumed: it asks for
		// the delay and timer progress while its CommitLog is still
		// behind the master's deliveries, and the master is SIGKILLed
		// moments later.
		waitUntil(t, 60*time.Second, fmt.Sprintf("round %d: a first delivery of the wave", round), func() bool {
			return topicTotal(t, cur.addr, topic, queues) > before
		})
		delivered := topicTotal(t, cur.addr, topic, queues) - before
		if wave := int64(len(acked) - ackedBefore); delivered > 0 && delivered < wave {
			midWave++
		}
		// Read before: nothing slow between the copy and the kill.
		masters := other.countLog("broker running as SYNC_MASTER")
		slaves := cur.countLog("broker running as SLAVE")
		copied := slaveDelayProgress(t, other.addr)
		if err := other.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatalf("pause the slave: %v", err)
		}
		time.Sleep(time.Duration(1300+rng.IntN(700)) * time.Millisecond)
		if err := other.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatalf("resume the slave: %v", err)
		}
		// The kill comes as soon as the resumed slave copied a new
		// progress (its first sync after the pause), or after a while
		// if the copy did not change.
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && slaveDelayProgress(t, other.addr) == copied; {
		}
		from := time.Now().UnixMilli()
		cur.kill()
		kills = append(kills, killWindow{from: from, to: time.Now().UnixMilli(), addr: cur.addr})
		t.Logf("round %d: %d of %d acknowledged stored in the topic before the slave's pause; master %s killed", round, delivered, len(acked)-ackedBefore, cur.addr)

		waitUntil(t, 60*time.Second, fmt.Sprintf("round %d: the slave elected", round), func() bool {
			return other.countLog("broker running as SYNC_MASTER") > masters
		})
		cur.start(t)
		waitUntil(t, 60*time.Second, fmt.Sprintf("round %d: the killed master back as a slave", round), func() bool {
			return cur.countLog("broker running as SLAVE") > slaves
		})
		cur, other = other, cur
	}
	if midWave == 0 {
		t.Errorf("no kill came while its wave was partly delivered: the test did not test a failover during delivery")
	}
	if len(acked) < rounds*perWave/2 {
		t.Fatalf("only %d of %d sends acknowledged (%d refused)", len(acked), rounds*perWave, refused)
	}

	// Everything due; the group whole again, the route naming the last
	// master.
	waitUntil(t, 60*time.Second, "both brokers in the sync state set", func() bool {
		m, ok := groupInSync(caddr)
		return ok && m == cur.addr
	})
	if wait := time.Until(time.UnixMilli(lastDue + 1000)); wait > 0 {
		time.Sleep(wait)
	}
	waitUntil(t, 60*time.Second, "the route to name the last master", func() bool {
		for _, bd := range topicRoute(t, ns.addr, topic).BrokerDatas {
			if bd.BrokerAddrs["0"] == cur.addr {
				return true
			}
		}
		return false
	})

	var mu sync.Mutex
	copies := map[string]map[[2]int64]deliveredCopy{}
	got := newCollector()
	startPushConsumerFunc(t, ns.addr, "cg-delay-failover", topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			for _, m := range msgs {
				b, _, _ := strings.Cut(string(m.Body), " ")
				if copies[b] == nil {
					copies[b] = map[[2]int64]deliveredCopy{}
				}
				// Keyed by queue position: a consumer's own redelivery of
				// a position is not a second copy.
				key := [2]int64{int64(m.Queue.QueueId), m.QueueOffset}
				copies[b][key] = deliveredCopy{queue: m.Queue.QueueId, offset: m.QueueOffset, store: m.StoreTimestamp, host: m.StoreHost}
			}
			mu.Unlock()
			for _, m := range msgs {
				got.add(fmt.Sprintf("%d/%d", m.Queue.QueueId, m.QueueOffset))
			}
			return consumer.ConsumeSuccess, nil
		}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	// Every acknowledged message (a slow promoted master may still be
	// delivering: up to a generous guard, then what is missing is lost),
	// then every copy the topic holds.
	missing := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, s := range acked {
			if len(copies[s.body]) == 0 {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(60 * time.Second); missing() > 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	total := topicTotal(t, cur.addr, topic, queues)
	got.waitDistinct(t, int(total), 60*time.Second)

	mu.Lock()
	defer mu.Unlock()
	var lost []string
	isTimer := map[string]bool{}
	var again [2]int // delivered again: by delay level, by timer
	for _, s := range acked {
		isTimer[s.body] = s.timer
		cs := copies[s.body]
		if len(cs) == 0 {
			lost = append(lost, s.body)
			continue
		}
		for _, c := range cs {
			if c.store < s.due {
				t.Errorf("%s stored at %d by %s (queue %d offset %d), before it was due at %d", s.body, c.store, c.host, c.queue, c.offset, s.due)
			}
		}
	}
	for body, cs := range copies {
		list := make([]deliveredCopy, 0, len(cs))
		for _, c := range cs {
			list = append(list, c)
		}
		slices.SortFunc(list, func(a, b deliveredCopy) int { return int(a.store - b.store) })
		for i := 1; i < len(list); i++ {
			if isTimer[body] {
				again[1]++
			} else {
				again[0]++
			}
			prev, next := list[i-1], list[i]
			// Stored by a master killed afterwards and again after that
			// kill by another broker, the slave promoted in its place.
			if !slices.ContainsFunc(kills, func(k killWindow) bool {
				return prev.host == k.addr && next.host != k.addr && prev.store <= k.to && next.store >= k.from
			}) {
				t.Errorf("%s stored twice with no failover between: at %d by %s (queue %d offset %d) and at %d by %s (queue %d offset %d); kills %v",
					body, prev.store, prev.host, prev.queue, prev.offset, next.store, next.host, next.queue, next.offset, kills)
			}
		}
	}
	slices.Sort(lost)
	if len(lost) > 0 {
		t.Errorf("%d acknowledged delayed or timer messages never delivered: %v", len(lost), lost)
	}
	t.Logf("%d sends acknowledged (%d refused), %d copies in the topic, delivered again after a failover: %d by delay level, %d by timer; %d kills (%d during a wave's delivery)",
		len(acked), refused, total, again[0], again[1], len(kills), midWave)
}

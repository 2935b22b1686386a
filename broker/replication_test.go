package broker

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/ha"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// fastHA shortens the HA heartbeats for tests.
var fastHA = map[string]string{"haSendHeartbeatInterval": "50", "haHousekeepingInterval": "3000"}

func withHA(kv map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range fastHA {
		out[k] = v
	}
	for k, v := range kv {
		out[k] = v
	}
	return out
}

// startSlaveOf starts a slave (brokerId 1) replicating master, with the
// fast HA settings and the settings of extra.
func startSlaveOf(t *testing.T, master *testBroker, extra map[string]string) *testBroker {
	t.Helper()
	kv := map[string]string{"brokerRole": "SLAVE", "brokerId": "1", "haMasterAddress": master.haServerAddr()}
	for k, v := range extra {
		kv[k] = v
	}
	return startTestBroker(t, withHA(kv))
}

// waitReplicated waits until the slave's CommitLog ends where the
// master's does.
func waitReplicated(t *testing.T, master, slave *testBroker) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for slave.clog.MaxOffset() != master.clog.MaxOffset() {
		if time.Now().After(deadline) {
			t.Fatalf("slave at %d, master at %d", slave.clog.MaxOffset(), master.clog.MaxOffset())
		}
		time.Sleep(5 * time.Millisecond)
	}
	slave.caughtUp()
}

func TestSyncMasterWaitsForItsSlave(t *testing.T) {
	master := startTestBroker(t, withHA(map[string]string{
		"brokerRole": "SYNC_MASTER", "inSyncReplicas": "2", "slaveTimeout": "300"}))
	mc := master.client(nil)
	// No slave: the message is stored, the answer says the slave did not
	// take it.
	resp := sendV2(t, mc, "TopicHA", 0, "alone", "")
	if resp.Code != remoting.FlushSlaveTimeout {
		t.Fatalf("send without a slave: code %d %s, want FLUSH_SLAVE_TIMEOUT", resp.Code, resp.Remark)
	}
	slave := startSlaveOf(t, master, map[string]string{"slaveReadEnable": "true"})
	waitReplicated(t, master, slave)
	for i := range 20 {
		mustSend(t, mc, "TopicHA", int32(i%2), "with a slave", "")
	}
	// Every acknowledged send is in the slave's CommitLog by the time it
	// is answered.
	if s, m := slave.clog.ReplicaOffset(), master.clog.MaxOffset(); s < m {
		t.Fatalf("answered sends past the slave's end: slave %d, master %d", s, m)
	}
	waitReplicated(t, master, slave)
	sc := slave.client(nil)
	// mqadmin haStatus on both.
	var ms, ss ha.RuntimeInfo
	for _, x := range []struct {
		c   *remoting.Client
		out *ha.RuntimeInfo
	}{{mc, &ms}, {sc, &ss}} {
		r := call(t, x.c, remoting.GetBrokerHAStatus, nil, nil)
		if r.Code != remoting.Success || json.Unmarshal(r.Body, x.out) != nil {
			t.Fatalf("GET_BROKER_HA_STATUS: %d %s %q", r.Code, r.Remark, r.Body)
		}
	}
	end := master.clog.MaxOffset()
	if !ms.Master || ms.InSyncSlaveNums != 1 || len(ms.HAConnectionInfo) != 1 || ms.HAConnectionInfo[0].SlaveAckOffset != end ||
		ms.HAConnectionInfo[0].Diff != 0 || !ms.HAConnectionInfo[0].InSync || ms.MasterCommitLogMaxOffset != end {
		t.Errorf("master's HA status %+v, end %d", ms, end)
	}
	if ss.Master || ss.HAClientRuntimeInfo.MasterAddr != master.haServerAddr() || ss.HAClientRuntimeInfo.MaxOffset != end ||
		ss.HAClientRuntimeInfo.LastReadTimestamp == 0 {
		t.Errorf("slave's HA status %+v", ss)
	}
	createTopic(t, sc, "TopicHA", 8, 8) // the slave's own copy of the config, until it syncs
	got := pullAll(t, slave, sc, "TopicHA", 0)
	if len(got) != 11 || string(got[0].Body) != "alone" {
		t.Fatalf("slave's queue 0 holds %d messages", len(got))
	}
	// Sends and send-backs are rejected as RocketMQ's send processor
	// rejects them on a slave.
	if r := sendV2(t, sc, "TopicHA", 0, "to the slave", ""); r.Code != remoting.SystemBusy || !strings.Contains(r.Remark, "[REJECTREQUEST]") {
		t.Fatalf("send to a slave: code %d %s, want SYSTEM_BUSY [REJECTREQUEST]", r.Code, r.Remark)
	}
	if r := call(t, sc, remoting.ConsumerSendMsgBack, map[string]string{"offset": "0", "group": "g", "delayLevel": "0",
		"originTopic": "TopicHA"}, nil); r.Code != remoting.SystemBusy {
		t.Fatalf("send-back to a slave: code %d %s, want SYSTEM_BUSY", r.Code, r.Remark)
	}
}

// slaveReadEnable, inSyncReplicas and slaveTimeout change while the
// brokers run (mqadmin updateBrokerConfig), as RocketMQ reads them at each
// pull and put: a slave takes pulls once slaveReadEnable is on, and a
// SYNC_MASTER's sends wait for its slave once inSyncReplicas is 2.
func TestReplicationSettingsChangeWhileRunning(t *testing.T) {
	master := startTestBroker(t, withHA(map[string]string{"brokerRole": "SYNC_MASTER", "inSyncReplicas": "1"}))
	mc := master.client(nil)
	mustSend(t, mc, "TopicHA", 0, "x", "")
	slave := startSlaveOf(t, master, nil)
	waitReplicated(t, master, slave)
	sc := slave.client(nil)
	createTopic(t, sc, "TopicHA", 8, 8)
	if r := call(t, sc, remoting.PullMessage, pullReq("g", "TopicHA", 0, 0, 0, 0, "*"), nil); r.Code != remoting.SystemBusy {
		t.Fatalf("pull from the slave before slaveReadEnable: code %d %s", r.Code, r.Remark)
	}
	updateConfig(t, sc, "slaveReadEnable=true")
	if r := call(t, sc, remoting.PullMessage, pullReq("g", "TopicHA", 0, 0, 0, 0, "*"), nil); r.Code != remoting.Success {
		t.Fatalf("pull from the slave after slaveReadEnable=true: code %d %s", r.Code, r.Remark)
	}

	// The slave stops: with inSyncReplicas=1 a send does not wait for it,
	// with 2 it waits slaveTimeout and is answered FLUSH_SLAVE_TIMEOUT.
	slave.stop()
	mustSend(t, mc, "TopicHA", 0, "alone", "")
	updateConfig(t, mc, "inSyncReplicas=2\nslaveTimeout=200")
	if r := sendV2(t, mc, "TopicHA", 0, "waits", ""); r.Code != remoting.FlushSlaveTimeout {
		t.Fatalf("send with inSyncReplicas=2 and the slave gone: code %d %s, want FLUSH_SLAVE_TIMEOUT", r.Code, r.Remark)
	}
	updateConfig(t, mc, "inSyncReplicas=1")
	mustSend(t, mc, "TopicHA", 0, "alone again", "")
}

func TestSlaveRefusesPullsWithoutSlaveRead(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slave := startSlaveOf(t, master, nil)
	mc := master.client(nil)
	mustSend(t, mc, "TopicHA", 0, "x", "")
	waitReplicated(t, master, slave)
	sc := slave.client(nil)
	resp := call(t, sc, remoting.PullMessage, pullReq("g", "TopicHA", 0, 0, 0, 0, "*"), nil)
	if resp.Code != remoting.SystemBusy {
		t.Fatalf("pull from a slave without slaveReadEnable: code %d %s", resp.Code, resp.Remark)
	}
	// Pops are not pulls: RocketMQ's slave answers them whatever
	// slaveReadEnable says (TestSlaveAnswersPopsWithoutRecordingThem).
	createTopic(t, sc, "TopicHA", 8, 8)
	if resp := call(t, sc, remoting.PopMessage, map[string]string{"consumerGroup": "g", "topic": "TopicHA",
		"queueId": "-1", "maxMsgNums": "1", "invisibleTime": "10000", "pollTime": "0", "bornTime": "0", "initMode": "0"}, nil); resp.Code != remoting.Success {
		t.Fatalf("pop on a slave without slaveReadEnable: code %d %s, want SUCCESS", resp.Code, resp.Remark)
	}
}

func TestBrokerIDFollowsTheRole(t *testing.T) {
	for _, tc := range []struct {
		role, id string
		want     int64
		fails    bool
	}{
		{"SLAVE", "0", 0, true},
		{"SLAVE", "2", 2, false},
		{"ASYNC_MASTER", "3", 0, false}, // a master is 0 whatever the file says, as RocketMQ
		{"SYNC_MASTER", "0", 0, false},
	} {
		loaded, err := configs.LoadBroker("", map[string]string{"storePathRootDir": t.TempDir(), "brokerRole": tc.role, "brokerId": tc.id})
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(loaded.Broker, zerolog.Nop())
		if (err != nil) != tc.fails {
			t.Errorf("%s brokerId=%s: error %v, want failure %v", tc.role, tc.id, err, tc.fails)
			continue
		}
		if err == nil && b.cfg.BrokerID != tc.want {
			t.Errorf("%s brokerId=%s: brokerId %d, want %d", tc.role, tc.id, b.cfg.BrokerID, tc.want)
		}
	}
}

// The fast channel (listenPort-2) takes sends and refuses pulls, as
// RocketMQ's.
func TestFastChannel(t *testing.T) {
	tb := startTestBroker(t, nil)
	if tb.FastAddr() == nil {
		t.Fatal("no fast channel")
	}
	c, err := remoting.Dial(t.Context(), tb.FastAddr().String(), remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustSend(t, c, "TopicFast", 0, "via the fast channel", "")
	resp := call(t, c, remoting.PullMessage, pullReq("g", "TopicFast", 0, 0, 0, 0, "*"), nil)
	if resp.Code != remoting.RequestCodeNotSupported {
		t.Fatalf("pull on the fast channel: code %d %s", resp.Code, resp.Remark)
	}
	got := pullAll(t, tb, tb.client(nil), "TopicFast", 0)
	if len(got) != 1 || string(got[0].Body) != "via the fast channel" {
		t.Fatalf("main port reads %d messages", len(got))
	}
	off := startTestBroker(t, map[string]string{"fastListenPort": "-1", "haListenPort": "-1"})
	if off.FastAddr() != nil || off.repl.server != nil {
		t.Fatal("fastListenPort=-1 or haListenPort=-1 left a listener on")
	}
}

// A new slave receives its master's newest segment only: its CommitLog
// starts past 0, where its dispatcher stood. It must index what it
// receives without waiting for a restart.
func TestNewSlaveIndexesFromItsFirstSegment(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	mc := master.client(nil)
	big := strings.Repeat("x", 600<<10)
	for range 10 { // about 6 MB: past the first 4 MiB segment
		mustSend(t, mc, "TopicHA", 0, big, "")
	}
	if master.clog.MaxOffset() <= master.clog.SegmentSize() {
		t.Fatalf("master ends at %d, within its first segment", master.clog.MaxOffset())
	}
	slave := startSlaveOf(t, master, nil)
	waitReplicated(t, master, slave) // catches the dispatcher up
	if min := slave.clog.MinOffset(); min == 0 {
		t.Fatal("the slave copied segment 0")
	}
	want, err := master.cqs.MaxOffset("TopicHA", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := slave.cqs.MaxOffset("TopicHA", 0); err != nil || got != want {
		t.Fatalf("slave's queue ends at %d (%v), the master's at %d", got, err, want)
	}
}

// syncMasterSendingBack starts a SYNC_MASTER waiting for one slave
// (slaveTimeout in ms) holding one message of Orders, and returns it with
// a function sending that message back for group g1 to its DLQ (nothing
// is put after it).
func syncMasterSendingBack(t *testing.T, slaveTimeout string) (*testBroker, func() *remoting.Command) {
	t.Helper()
	master := startTestBroker(t, withHA(map[string]string{
		"brokerRole": "SYNC_MASTER", "inSyncReplicas": "2", "slaveTimeout": slaveTimeout}))
	mc := master.client(nil)
	mustSend(t, mc, "Orders", 0, "order-1", "WAIT\x01false\x02")
	master.caughtUp()
	orig := pullAll(t, master, mc, "Orders", 0)
	if len(orig) != 1 {
		t.Fatal("original message not readable")
	}
	return master, func() *remoting.Command {
		return call(t, mc, remoting.ConsumerSendMsgBack, map[string]string{
			"offset": strconv.FormatInt(orig[0].PhyOffset, 10), "group": "g1", "delayLevel": "-1",
			"originMsgId": commitlog.MessageID(orig[0].StoreHost, orig[0].PhyOffset), "originTopic": "Orders",
		}, nil)
	}
}

// A send-back lets the consumer move past the message: a SYNC_MASTER
// answers it once its slave holds the retry message, as a send. When the
// slave does not confirm it in time the copy is stored all the same and
// answered SUCCESS (RocketMQ stores it without waiting): a failure would
// make the client store the message a second time.
func TestSyncMasterSendBackWaitsForItsSlave(t *testing.T) {
	master, sendBack := syncMasterSendingBack(t, "300")
	if r := sendBack(); r.Code != remoting.Success {
		t.Fatalf("send back without a slave: %d %s, want SUCCESS for the copy stored", r.Code, r.Remark)
	}
	master.caughtUp()
	if n, err := master.cqs.MaxOffset("%DLQ%g1", 0); err != nil || n != 1 {
		t.Fatalf("the DLQ holds %d copies (%v), want the one stored", n, err)
	}
	slave := startSlaveOf(t, master, nil)
	waitReplicated(t, master, slave)
	if r := sendBack(); r.Code != remoting.Success {
		t.Fatalf("send back with a slave: %d %s", r.Code, r.Remark)
	}
	if s, m := slave.clog.ReplicaOffset(), master.clog.MaxOffset(); s < m {
		t.Fatalf("answered the send back before the slave held it: slave %d, master %d", s, m)
	}
}

// A timer message the master delivered is forgotten by its slave's timer
// index with the metadata sync, so the slave, promoted, does not deliver
// it again; one not yet due stays and is delivered by the promoted slave.
func TestSlaveForgetsTimerMessagesItsMasterDelivered(t *testing.T) {
	master := startTestBroker(t, withHA(map[string]string{"timerPrecisionMs": "100"}))
	slave := startSlaveOf(t, master, map[string]string{"timerPrecisionMs": "100"})
	mc := master.client(nil)
	mustSend(t, mc, "TmT", 0, "soon", "UNIQ_KEY\x01TM-1\x02TIMER_DELAY_MS\x01300\x02")
	mustSend(t, mc, "TmT", 1, "later", "UNIQ_KEY\x01TM-2\x02TIMER_DELAY_MS\x013000\x02")
	waitDelivered(t, master, mc, "TmT", 0, 1)
	waitReplicated(t, master, slave)
	if err := slave.syncFromMaster(t.Context(), master.Addr()); err != nil {
		t.Fatal(err)
	}
	left, err := slave.db.Timers().Due(math.MaxInt64, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 {
		t.Fatalf("the slave's timer index holds %d entries after the sync, want the one not yet due", len(left))
	}
	master.stop()
	slave.stop()
	promoted := startTestBrokerAt(t, slave.store, withHA(map[string]string{"timerPrecisionMs": "100"}))
	pc := promoted.client(nil)
	createTopic(t, pc, "TmT", 8, 8)
	waitDelivered(t, promoted, pc, "TmT", 1, 1)
	if got := pullAll(t, promoted, pc, "TmT", 0); len(got) != 1 {
		t.Fatalf("the promoted slave's TmT/0 holds %d messages; the master delivered the one timer message once", len(got))
	}
}

// A RocketMQ 5 slave's timer requests: the checkpoint says the time
// before which the master delivered its timer messages (after the one
// delivered, not past the one waiting) and the timer topic's end; the
// metrics table is empty and keeps its version.
//
// The master has no HA port, so the read time is not bounded by what a
// slave holds (TestTimerReadTimeWaitsForTheSlavesLog).
func TestTimerRequestsOfARocketMQSlave(t *testing.T) {
	master := startTestBroker(t, map[string]string{"timerPrecisionMs": "100", "haListenPort": "-1"})
	mc := master.client(nil)
	mustSend(t, mc, "TmT", 0, "soon", "UNIQ_KEY\x01TM-1\x02TIMER_DELAY_MS\x01300\x02")
	later := time.Now().Add(time.Hour).UnixMilli()
	mustSend(t, mc, "TmT", 1, "later", "UNIQ_KEY\x01TM-2\x02TIMER_DELIVER_MS\x01"+strconv.FormatInt(later, 10)+"\x02")
	waitDelivered(t, master, mc, "TmT", 0, 1)
	var readMs, flushPos, lastQ, masterQ int64
	waitFor(t, "the checkpoint past the delivered message", func() bool {
		r := call(t, mc, remoting.GetTimerCheckPoint, nil, nil)
		if r.Code != remoting.Success || len(r.Body) != 56 {
			t.Fatalf("GET_TIMER_CHECK_POINT: %d %s, %d bytes", r.Code, r.Remark, len(r.Body))
		}
		for i, p := range []*int64{&readMs, &flushPos, &lastQ, &masterQ} {
			*p = int64(binary.BigEndian.Uint64(r.Body[8*i:]))
		}
		return readMs > time.Now().Add(-time.Minute).UnixMilli()
	})
	if readMs > later || readMs > time.Now().UnixMilli() || flushPos != 0 || lastQ != 2 || masterQ != 2 {
		t.Fatalf("checkpoint readMs %d (waiting message due %d), flush %d, queue offsets %d/%d (want 2)", readMs, later, flushPos, lastQ, masterQ)
	}
	// Idle, the read time moves on with the clock, slot by slot, as
	// RocketMQ's dequeue moves over empty slots.
	idle := time.Now().UnixMilli()
	waitFor(t, "the checkpoint moving on while idle", func() bool {
		r := call(t, mc, remoting.GetTimerCheckPoint, nil, nil)
		readMs = int64(binary.BigEndian.Uint64(r.Body))
		return readMs > idle
	})
	if readMs%100 != 0 || readMs > later {
		t.Fatalf("checkpoint readMs %d: want a slot of timerPrecisionMs 100, before the waiting message due %d", readMs, later)
	}
	var m struct {
		DataVersion struct{ Timestamp int64 } `json:"dataVersion"`
		TimingCount map[string]any            `json:"timingCount"`
	}
	for range 2 {
		r := call(t, mc, remoting.GetTimerMetrics, nil, nil)
		before := m.DataVersion.Timestamp
		if r.Code != remoting.Success || json.Unmarshal(r.Body, &m) != nil || m.TimingCount == nil || m.DataVersion.Timestamp == 0 ||
			(before != 0 && before != m.DataVersion.Timestamp) {
			t.Fatalf("GET_TIMER_METRICS: %d %q", r.Code, r.Body)
		}
	}
}

// A master that took sends its slave never received, then was replaced by
// that slave and rejoined as the new master's slave, takes nothing from
// the new master: the bytes past what the two share differ, and the new
// master's records would otherwise follow the old master's orphans in one
// CommitLog. Started again with the cut its HA client found, it drops the
// orphans and their index entries and serves the new master's messages.
func TestDemotedMasterRejoiningAsSlaveKeepsItsLog(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slave := startSlaveOf(t, master, nil)
	mc := master.client(nil)
	send := func(c *remoting.Client, from, n int, tag string) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if r := sendV2(t, c, "Rejoin", 0, fmt.Sprintf("%s-%04d", tag, i), ""); r.Code != remoting.Success {
				t.Fatalf("send %d: %d %s", i, r.Code, r.Remark)
			}
		}
	}
	send(mc, 0, 20, "both")
	waitReplicated(t, master, slave)
	shared := slave.clog.MaxOffset()
	// The HA link goes; the master takes sends the slave never gets.
	if err := master.repl.server.Close(); err != nil {
		t.Fatal(err)
	}
	send(mc, 20, 10, "orph")
	oldEnd := master.clog.MaxOffset()
	master.stop()
	slave.stop()

	promoted := startTestBrokerAt(t, slave.store, withHA(nil))
	send(promoted.client(nil), 20, 30, "news")
	asSlave := withHA(map[string]string{"brokerRole": "SLAVE", "brokerId": "1",
		"haMasterAddress": promoted.haServerAddr(), "slaveReadEnable": "true",
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0"})
	rejoined := startTestBrokerAt(t, master.store, asSlave)
	deadline := time.Now().Add(20 * time.Second)
	for d := rejoined.repl.client.Status().Diverged; d == nil || !d.Final; d = rejoined.repl.client.Status().Diverged {
		if time.Now().After(deadline) {
			t.Fatalf("the rejoined master (end %d) never found where its log parts from the new master's (end %d)",
				rejoined.clog.ReplicaOffset(), promoted.clog.MaxOffset())
		}
		time.Sleep(5 * time.Millisecond)
	}
	d := rejoined.repl.client.Status().Diverged
	if !d.Exact || d.At != shared {
		t.Fatalf("divergence %+v; the old master's records from %d are its own", *d, shared)
	}
	time.Sleep(300 * time.Millisecond) // heartbeats of the new master
	if end := rejoined.clog.ReplicaOffset(); end != oldEnd {
		t.Fatalf("the rejoined master's CommitLog ends at %d, was %d: it took the new master's bytes", end, oldEnd)
	}
	// Operators see it in mqadmin brokerStatus and in an alertable gauge.
	if info := runtimeInfo(t, rejoined.client(nil)); info["haDivergedAt"] != strconv.FormatInt(shared, 10) || info["haDivergedExact"] != "true" {
		t.Fatalf("runtime info of the refused slave: haDivergedAt %q, haDivergedExact %q", info["haDivergedAt"], info["haDivergedExact"])
	}
	if v := metricValue(t, scrapeMetrics(t, rejoined), "rocketkv_ha_diverged", `node_id="broker-a"`); v != 1 {
		t.Fatalf("rocketkv_ha_diverged of the refused slave: %v", v)
	}
	rejoined.stop()

	// Cutting is a slave's mend only: as a master the store refuses it.
	asMaster := withHA(map[string]string{"storePathRootDir": master.store, "listenPort": "0", "brokerIP1": "127.0.0.1",
		"mappedFileSizeCommitLog": strconv.Itoa(4 << 20)})
	err := startErrorWith(t, asMaster, func(b *Broker) { b.CutCommitLogAt(d.At) })
	if err == nil || !strings.Contains(err.Error(), "only a slave's") {
		t.Fatalf("a master started with a cut: %v", err)
	}

	mended := startTestBrokerWith(t, master.store, asSlave, func(b *Broker) { b.CutCommitLogAt(d.At) })
	waitReplicated(t, promoted, mended)
	if v := metricValue(t, scrapeMetrics(t, mended), "rocketkv_ha_diverged", `node_id="broker-a"`); v != 0 {
		t.Fatalf("rocketkv_ha_diverged of the mended slave: %v", v)
	}
	if _, ok := runtimeInfo(t, mended.client(nil))["haDivergedAt"]; ok {
		t.Fatal("the mended slave still reports a divergence")
	}
	mended.caughtUp()
	var got []commitlog.Message
	for mc := mended.client(nil); len(got) < 50; {
		resp := call(t, mc, remoting.PullMessage, pullReq("inspect", "Rejoin", 0, int64(len(got)), 0, 0, "*"), nil)
		if resp.Code != remoting.Success {
			break
		}
		got = append(got, decodeRecords(t, resp.Body)...)
	}
	if len(got) != 50 {
		t.Fatalf("the mended slave holds %d messages of Rejoin/0, the new master 50", len(got))
	}
	for i, m := range got {
		want := fmt.Sprintf("both-%04d", i)
		if i >= 20 {
			want = fmt.Sprintf("news-%04d", i)
		}
		if string(m.Body) != want || m.QueueOffset != int64(i) {
			t.Fatalf("message %d of the mended slave: %q at queue offset %d, want %q", i, m.Body, m.QueueOffset, want)
		}
	}
	// The flag left on the command line does not cut again what the
	// master sent since.
	end := mended.clog.MaxOffset()
	mended.stop()
	again := startTestBrokerWith(t, master.store, asSlave, func(b *Broker) { b.CutCommitLogAt(d.At) })
	if cut := again.clog.RecoveryInfo().CutBytes; cut != 0 || again.clog.MaxOffset() < end {
		t.Fatalf("a restart with the same cut cut %d bytes (end %d, was %d)", cut, again.clog.MaxOffset(), end)
	}
}

// A SYNC_MASTER whose sends wait for a slave (inSyncReplicas above 1) and
// that opens no HA port (haListenPort=-1) is refused at start: no slave
// could follow it, and it answered SEND_OK as if one had.
func TestASyncMasterWithoutAnHAPortIsRefused(t *testing.T) {
	for _, tc := range []struct {
		role, port, replicas string
		fails                bool
	}{
		{"SYNC_MASTER", "-1", "2", true},
		{"SYNC_MASTER", "-1", "1", false},
		{"SYNC_MASTER", "0", "2", false},
		{"ASYNC_MASTER", "-1", "2", false},
	} {
		loaded, err := configs.LoadBroker("", map[string]string{"storePathRootDir": t.TempDir(), "brokerRole": tc.role,
			"haListenPort": tc.port, "inSyncReplicas": tc.replicas})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := New(loaded.Broker, zerolog.Nop()); (err != nil) != tc.fails {
			t.Errorf("%s haListenPort=%s inSyncReplicas=%s: error %v, want failure %v", tc.role, tc.port, tc.replicas, err, tc.fails)
		}
	}
}

// A send-back's wait for its slave is bounded below the clients'
// send-back timeouts (sendBackDurableWait), whatever slaveTimeout says:
// with a slave timeout of a minute and no slave, the answer (SUCCESS, the
// copy stored) still comes inside call's 20 s, where an unbounded wait
// would have the client give up and store the message again.
func TestASendBacksWaitForItsSlaveIsBounded(t *testing.T) {
	_, sendBack := syncMasterSendingBack(t, "60000")
	if r := sendBack(); r.Code != remoting.Success {
		t.Fatalf("send back with no slave and a minute's slaveTimeout: %d %s", r.Code, r.Remark)
	}
}

// brokerIP2 may be a host name (a replication network's), registered as
// the HA address verbatim, as RocketMQ passes it on; it was dropped for
// brokerIP1 without a word, sending slaves to the wrong network.
func TestBrokerIP2HostNameIsTheHAAddress(t *testing.T) {
	master := startTestBroker(t, withHA(map[string]string{"brokerIP2": "localhost"}))
	addr := master.haServerAddr()
	if !strings.HasPrefix(addr, "localhost:") {
		t.Fatalf("HA address %q, want brokerIP2's host name localhost and the HA port", addr)
	}
	mustSend(t, master.client(nil), "TopicHA", 0, "x", "")
	waitReplicated(t, master, startSlaveOf(t, master, nil))
}

// A SYNC_MASTER with no HA port refuses an update of inSyncReplicas above
// 1 (its sends would wait for slaves that cannot connect), as it refuses
// to start so; nothing is changed.
func TestInSyncReplicasUpdateNeedsAnHAPort(t *testing.T) {
	b := startTestBroker(t, map[string]string{"brokerRole": "SYNC_MASTER", "haListenPort": "-1", "inSyncReplicas": "1"})
	c := b.client(nil)
	r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("inSyncReplicas=2"))
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "haListenPort") {
		t.Fatalf("inSyncReplicas=2 without an HA port: %d %q, want SYSTEM_ERROR naming haListenPort", r.Code, r.Remark)
	}
	if n := b.current().InSyncReplicas; n != 1 {
		t.Fatalf("inSyncReplicas %d after the refused update, want 1", n)
	}
	mustSend(t, c, "NoHA", 0, "x", "") // sends wait for no slave
}

// A SYNC_MASTER's send under SYNC_FLUSH waits for its flush and its
// slave together, as RocketMQ's put combines the two waits: slaveTimeout
// counts from the append, not from the end of the flush. A slave that
// takes the record only once slaveTimeout has passed, while the flush is
// still stalled, is late: the answer is FLUSH_SLAVE_TIMEOUT when the flush
// comes. Before, the slaves' wait began after the flush and found the
// record acknowledged, and an answer could take syncFlushTimeout and
// slaveTimeout one after the other.
func TestSyncMasterSlaveTimeoutRunsWithTheFlush(t *testing.T) {
	master, open := stalledFlushBroker(t, withHA(map[string]string{
		"brokerRole": "SYNC_MASTER", "inSyncReplicas": "2", "slaveTimeout": "200"}))
	mc := master.client(nil)
	createTopic(t, mc, "TopicHA", 1, 1)
	before := master.clog.MaxOffset()
	answers := sendAsync(t, mc, "TopicHA", 1, "")
	waitFor(t, "the send stored behind the stalled flush", func() bool { return master.clog.MaxOffset() > before })
	time.Sleep(400 * time.Millisecond) // slaveTimeout passes with no slave
	slave := startSlaveOf(t, master, nil)
	waitReplicated(t, master, slave)
	end := master.clog.MaxOffset()
	waitFor(t, "the slave's acknowledgement of the send", func() bool {
		s := master.repl.server.Slaves(end)
		return len(s) == 1 && s[0].AckOffset >= end
	})
	select {
	case r := <-answers:
		t.Fatalf("send answered %d %q before its flush", r.Code, r.Remark)
	default:
	}
	open()
	if r := <-answers; r.Code != remoting.FlushSlaveTimeout {
		t.Fatalf("send answered %d %q: its slave took it after slaveTimeout, want FLUSH_SLAVE_TIMEOUT", r.Code, r.Remark)
	}
}

// A slave with timerWheelEnable learns which timer messages its master
// delivered every few seconds, as RocketMQ's slave syncs its timer
// checkpoint every 3 s, not only with the minute's sync of its other
// tables: promoted, it would deliver again what its master delivered
// since the last copy.
func TestSlaveForgetsDeliveredTimerMessagesBetweenSyncs(t *testing.T) {
	master := startTestBroker(t, withHA(map[string]string{"timerPrecisionMs": "100"}))
	slave := startSlaveOf(t, master, map[string]string{"timerPrecisionMs": "100", "slaveSyncIntervalMillis": "3600000"})
	a := master.Addr() // as the name server tells a registered slave
	slave.repl.masterAddr.Store(&a)
	mc := master.client(nil)
	mustSend(t, mc, "TmT", 0, "soon", "UNIQ_KEY\x01TM-1\x02TIMER_DELAY_MS\x01300\x02")
	mustSend(t, mc, "TmT", 1, "later", "UNIQ_KEY\x01TM-2\x02TIMER_DELAY_MS\x01600000\x02")
	waitDelivered(t, master, mc, "TmT", 0, 1)
	waitReplicated(t, master, slave)
	waitFor(t, "the slave forgetting the timer message its master delivered", func() bool {
		left, err := slave.db.Timers().Due(math.MaxInt64, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(left) == 1
	})
}

// A master without an HA port (haListenPort=-1) still says it is a master
// in GET_BROKER_HA_STATUS (mqadmin haStatus), with its CommitLog's end and
// no slaves, as RocketMQ answers for every broker that is not a SLAVE.
func TestHAStatusOfAMasterWithoutAnHAPort(t *testing.T) {
	b := startTestBroker(t, map[string]string{"haListenPort": "-1"})
	c := b.client(nil)
	mustSend(t, c, "TopicHA", 0, "x", "")
	r := call(t, c, remoting.GetBrokerHAStatus, nil, nil)
	var info ha.RuntimeInfo
	if r.Code != remoting.Success || json.Unmarshal(r.Body, &info) != nil {
		t.Fatalf("GET_BROKER_HA_STATUS: %d %s %q", r.Code, r.Remark, r.Body)
	}
	if !info.Master || info.MasterCommitLogMaxOffset != b.clog.MaxOffset() || info.MasterCommitLogMaxOffset == 0 ||
		len(info.HAConnectionInfo) != 0 || info.InSyncSlaveNums != 0 {
		t.Fatalf("HA status of a master without an HA port: %+v (CommitLog end %d)", info, b.clog.MaxOffset())
	}
}

// An haMasterAddress shorter than 6 characters is ignored, as RocketMQ's
// BrokerController ignores it (HA_ADDRESS_MIN_LENGTH): the slave follows
// the master its name server names. Taken as set, "h:1" would be dialled
// forever and the name server's address never used.
func TestSlaveIgnoresAShortHAMasterAddress(t *testing.T) {
	ns := startTestNameServer(t)
	addr := ns.Addr().String()
	master := startTestBroker(t, withHA(map[string]string{"namesrvAddr": addr}))
	mustSend(t, master.client(nil), "Short", 0, "one", "")
	slave := startTestBroker(t, withHA(map[string]string{"namesrvAddr": addr, "brokerRole": "SLAVE", "brokerId": "1",
		"haMasterAddress": "h:1"}))
	waitReplicated(t, master, slave)
	if got := slave.repl.client.Status().Master; got != master.haServerAddr() {
		t.Fatalf("the slave follows %q, want the name server's %q", got, master.haServerAddr())
	}
}

// A master whose fast channel is not at listenPort-2 is told, at start,
// that an Apache RocketMQ slave would copy no topic table, timer
// checkpoint or timer metrics from it: RocketMQ 5.3's slave asks those
// three on its master's port minus 2 and nowhere else.
func TestFastPortMismatchForRocketMQSlaves(t *testing.T) {
	for _, tc := range []struct {
		listen, fast int
		warn         bool
	}{
		{10911, 10909, false},
		{10911, -1, true},
		{10911, 10000, true},
		{0, 0, false}, // both ports picked at start
		{2, -1, false},
	} {
		why := fastPortMismatch(tc.listen, tc.fast)
		if (why != "") != tc.warn {
			t.Errorf("listenPort %d, fast channel %d: %q, want a warning %v", tc.listen, tc.fast, why, tc.warn)
		}
		if tc.warn && !strings.Contains(why, strconv.Itoa(tc.listen-2)) {
			t.Errorf("listenPort %d, fast channel %d: %q does not name the port the slave asks", tc.listen, tc.fast, why)
		}
	}

	port := freeTCPPort(t)
	logs := &testutil.SyncBuffer{}
	startTestBrokerWith(t, t.TempDir(), map[string]string{"listenPort": strconv.Itoa(port),
		"haListenPort": strconv.Itoa(freeTCPPort(t)), "fastListenPort": "-1"}, func(b *Broker) { b.log = zerolog.New(logs) })
	if got := logLines(logs, fastPortMismatch(port, -1)); len(got) != 1 || got[0]["level"] != "warn" {
		t.Fatalf("start of a master without a fast channel logged %v, want one warning that RocketMQ slaves copy no topics", got)
	}
}

// RESET_MASTER_FLUSH_OFFSET (mqadmin resetMasterFlushOffset) sets a
// slave's masterFlushedOffset, which its checkpoint keeps and haStatus
// shows; a slave refuses a header without an integer offset; a master
// answers SUCCESS and changes nothing, as RocketMQ's does.
func TestResetMasterFlushOffset(t *testing.T) {
	master := startTestBroker(t, fastHA)
	mc := master.client(nil)
	mustSend(t, mc, "TopicMF", 0, "x", "")
	slave := startSlaveOf(t, master, nil)
	waitReplicated(t, master, slave)
	sc := slave.client(nil)

	if r := call(t, mc, remoting.ResetMasterFlushOffset, nil, nil); r.Code != remoting.Success {
		t.Fatalf("on the master without a header: %d %s, want SUCCESS", r.Code, r.Remark)
	}
	if r := call(t, mc, remoting.ResetMasterFlushOffset, map[string]string{"masterFlushOffset": "77"}, nil); r.Code != remoting.Success ||
		master.clog.Checkpoint().MasterFlushedOffset != 0 {
		t.Fatalf("on the master: %d %s, its masterFlushedOffset %d, want SUCCESS and 0", r.Code, r.Remark, master.clog.Checkpoint().MasterFlushedOffset)
	}
	for _, h := range []map[string]string{nil, {"masterFlushOffset": "x1"}} {
		if r := call(t, sc, remoting.ResetMasterFlushOffset, h, nil); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "masterFlushOffset") {
			t.Fatalf("on the slave with header %v: %d %s, want SYSTEM_ERROR naming the field", h, r.Code, r.Remark)
		}
	}
	end := master.clog.MaxOffset()
	if r := call(t, sc, remoting.ResetMasterFlushOffset, map[string]string{"masterFlushOffset": strconv.FormatInt(end, 10)}, nil); r.Code != remoting.Success {
		t.Fatalf("on the slave: %d %s", r.Code, r.Remark)
	}
	if got := slave.clog.Checkpoint().MasterFlushedOffset; got != end {
		t.Fatalf("slave's checkpoint masterFlushedOffset %d, want %d", got, end)
	}
	r := call(t, sc, remoting.GetBrokerHAStatus, nil, nil)
	var info ha.RuntimeInfo
	if r.Code != remoting.Success || json.Unmarshal(r.Body, &info) != nil {
		t.Fatalf("GET_BROKER_HA_STATUS: %d %s %q", r.Code, r.Remark, r.Body)
	}
	if info.Master || info.HAClientRuntimeInfo.MasterFlushOffset != end {
		t.Fatalf("slave's HA status %+v, want masterFlushOffset %d", info.HAClientRuntimeInfo, end)
	}
	// The checkpoint keeps it across a restart.
	slave.stop()
	again := startTestBrokerAt(t, slave.store, withHA(map[string]string{"brokerRole": "SLAVE", "brokerId": "1", "haMasterAddress": master.haServerAddr()}))
	if got := again.clog.Checkpoint().MasterFlushedOffset; got != end {
		t.Fatalf("after a restart the slave's masterFlushedOffset is %d, want %d", got, end)
	}
}

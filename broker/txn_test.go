package broker

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// halfProps are the properties a transaction producer of group pg sends
// with a half message.
func halfProps(uniq string, extra string) string {
	return "TRAN_MSG\x01true\x02PGROUP\x01pg\x02UNIQ_KEY\x01" + uniq + "\x02TAGS\x01ta\x02" + extra
}

// sentHalf is what a half send answered.
type sentHalf struct {
	uniq        string
	phy         int64 // decoded from msgId, as the Go client does
	queueOffset int64
}

// sendHalf sends one half message of producer group pg to topic/qid, born
// at born (ms).
func sendHalf(t *testing.T, c *remoting.Client, topic string, qid int32, uniq, body, extraProps string, born int64) sentHalf {
	t.Helper()
	resp := call(t, c, remoting.SendMessageV2, map[string]string{
		"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": strconv.Itoa(int(qid)),
		"f": "0", "g": strconv.FormatInt(born, 10), "h": "0", "i": halfProps(uniq, extraProps),
	}, []byte(body))
	if resp.Code != remoting.Success {
		t.Fatalf("half send: %d %s", resp.Code, resp.Remark)
	}
	if got := header(t, resp, "queueId"); got != int64(qid) {
		t.Fatalf("half send answered queueId %d, the producer asked for %d", got, qid)
	}
	if resp.ExtFields["transactionId"] != uniq {
		t.Fatalf("half send answered transactionId %q, want the UNIQ_KEY %q", resp.ExtFields["transactionId"], uniq)
	}
	_, phy, err := commitlog.ParseMessageID(resp.ExtFields["msgId"])
	if err != nil {
		t.Fatalf("half send msgId %q: %v", resp.ExtFields["msgId"], err)
	}
	return sentHalf{uniq: uniq, phy: phy, queueOffset: header(t, resp, "queueOffset")}
}

// endTxn sends END_TRANSACTION for a half as a producer of group.
func endTxn(t *testing.T, c *remoting.Client, h sentHalf, group string, state int, fromCheck bool) *remoting.Command {
	t.Helper()
	return call(t, c, remoting.EndTransaction, map[string]string{
		"producerGroup": group, "tranStateTableOffset": strconv.FormatInt(h.queueOffset, 10),
		"commitLogOffset": strconv.FormatInt(h.phy, 10), "commitOrRollback": strconv.Itoa(state),
		"fromTransactionCheck": strconv.FormatBool(fromCheck), "msgId": h.uniq, "transactionId": h.uniq, "bname": "broker-a",
	}, nil)
}

func TestTransactionCommitStoresTheMessageOnce(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	h := sendHalf(t, c, "TxT", 2, "UNIQ-COMMIT", "payload", "KEYS\x01order-1\x02", time.Now().UnixMilli())
	if got := pullAll(t, b, c, "TxT", 2); len(got) != 0 {
		t.Fatalf("a consumer sees %d messages of an open transaction", len(got))
	}
	halves := pullAll(t, b, c, meta.TransHalfTopic, 0)
	if len(halves) != 1 || halves[0].PhyOffset != h.phy || halves[0].QueueOffset != h.queueOffset {
		t.Fatalf("half topic holds %+v, want the half at %d", halves, h.phy)
	}
	hp := commitlog.ParseProperties(halves[0].Properties)
	if hp["REAL_TOPIC"] != "TxT" || hp["REAL_QID"] != "2" || hp["__transactionId__"] != "UNIQ-COMMIT" ||
		commitlog.TransactionType(halves[0].SysFlag) != commitlog.TransactionNotType {
		t.Fatalf("half message properties %v sysFlag %#x", hp, halves[0].SysFlag)
	}

	if r := endTxn(t, c, h, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	got := pullAll(t, b, c, "TxT", 2)
	if len(got) != 1 {
		t.Fatalf("after the commit the queue holds %d messages, want 1", len(got))
	}
	m := got[0]
	p := commitlog.ParseProperties(m.Properties)
	if string(m.Body) != "payload" || m.Topic != "TxT" || m.QueueID != 2 ||
		commitlog.TransactionType(m.SysFlag) != commitlog.TransactionCommit || m.PreparedTransactionOffset != h.phy {
		t.Fatalf("committed message %+v", m)
	}
	// RocketMQ's EndTransactionProcessor stores the half's properties
	// string as it was (it clears REAL_TOPIC, REAL_QID and TRAN_MSG from
	// the map after building the string), so a consumer sees them on the
	// committed message, and RocketMQ's proxy calls it a TRANSACTION
	// message for that TRAN_MSG.
	if p["REAL_TOPIC"] != "TxT" || p["REAL_QID"] != "2" || p["TRAN_MSG"] != "true" || p["__transactionId__"] != "UNIQ-COMMIT" {
		t.Errorf("committed message properties %v, want the half's REAL_TOPIC, REAL_QID, TRAN_MSG and __transactionId__", p)
	}
	if p["UNIQ_KEY"] != "UNIQ-COMMIT" || p["PGROUP"] != "pg" || p["KEYS"] != "order-1" || p["TAGS"] != "ta" {
		t.Errorf("committed message properties %v", p)
	}

	// The same commit again (a check answered late) stores nothing more;
	// a rollback of the committed transaction is refused.
	if r := endTxn(t, c, h, "pg", 8, true); r.Code != remoting.Success {
		t.Fatalf("second commit: %d %s", r.Code, r.Remark)
	}
	if r := endTxn(t, c, h, "pg", 12, true); r.Code != remoting.SystemError {
		t.Fatalf("rollback after commit answered %d %s, want SYSTEM_ERROR", r.Code, r.Remark)
	}
	if got := pullAll(t, b, c, "TxT", 2); len(got) != 1 {
		t.Fatalf("after a second commit the queue holds %d messages, want 1", len(got))
	}
	// The key index finds the committed message by its key.
	q := call(t, c, remoting.QueryMessage, map[string]string{"topic": "TxT", "key": "order-1", "maxNum": "32",
		"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)}, nil)
	if q.Code != remoting.Success || len(decodeRecords(t, q.Body)) != 1 {
		t.Fatalf("query by key: %d %s", q.Code, q.Remark)
	}
}

func TestTransactionRollbackStoresNothing(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	h := sendHalf(t, c, "TxR", 0, "UNIQ-RB", "x", "", time.Now().UnixMilli())
	// The half is dispatched before its end: an END that overtakes it
	// leaves an open half record the checker forgets at its first check
	// (TestCheckerForgetsHalvesThatEndedOrLeftTheLog), which the last
	// assertion would see.
	b.caughtUp()
	if r := endTxn(t, c, h, "pg", 12, false); r.Code != remoting.Success {
		t.Fatalf("rollback: %d %s", r.Code, r.Remark)
	}
	if r := endTxn(t, c, h, "pg", 8, true); r.Code != remoting.SystemError {
		t.Fatalf("commit after rollback answered %d %s, want SYSTEM_ERROR", r.Code, r.Remark)
	}
	if got := pullAll(t, b, c, "TxR", 0); len(got) != 0 {
		t.Fatalf("rolled-back transaction delivered %d messages", len(got))
	}
	if _, open, err := b.db.Transactions().Half(h.phy); err != nil || open {
		t.Fatalf("half still open after the rollback (err %v)", err)
	}
}

func TestEndTransactionErrors(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	h := sendHalf(t, c, "TxE", 0, "UNIQ-E", "x", "", time.Now().UnixMilli())
	plain := mustSend(t, c, "TxE", 0, "plain", "")
	_, plainPhy, _ := commitlog.ParseMessageID(plain.ExtFields["msgId"])
	// The half is indexed before the requests: the check below reads the
	// index, and an undispatched half reads as not open.
	b.caughtUp()

	for _, tc := range []struct {
		name   string
		half   sentHalf
		group  string
		state  int
		code   int32
		remark string
	}{
		{"wrong producer group", h, "other", 8, remoting.SystemError, "The producer group wrong"},
		{"wrong queue offset", sentHalf{h.uniq, h.phy, h.queueOffset + 1}, "pg", 8, remoting.SystemError, "The transaction state table offset wrong"},
		{"offset of a plain message", sentHalf{h.uniq, plainPhy, 0}, "pg", 8, remoting.SystemError, "Find prepared transaction message failed"},
		{"offset inside a record", sentHalf{h.uniq, h.phy + 4, h.queueOffset}, "pg", 12, remoting.SystemError, "Find prepared transaction message failed"},
		{"offset past the log", sentHalf{h.uniq, 1 << 40, h.queueOffset}, "pg", 12, remoting.SystemError, "Find prepared transaction message failed"},
		{"unknown state", h, "pg", 5, remoting.SystemError, "bad END_TRANSACTION header: commitOrRollback must be 0, 8 or 12"},
		{"state unknown: nothing to do", h, "pg", 0, remoting.Success, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := endTxn(t, c, tc.half, tc.group, tc.state, false)
			if r.Code != tc.code || r.Remark != tc.remark {
				t.Fatalf("answered %d %q, want %d %q", r.Code, r.Remark, tc.code, tc.remark)
			}
		})
	}
	r := call(t, c, remoting.EndTransaction, map[string]string{"producerGroup": "pg", "commitOrRollback": "8"}, nil)
	if r.Code != remoting.SystemError {
		t.Fatalf("END_TRANSACTION without offsets answered %d %s", r.Code, r.Remark)
	}
	// None of them ended the transaction.
	if _, open, err := b.db.Transactions().Half(h.phy); err != nil || !open {
		t.Fatalf("half no longer open after refused requests (err %v)", err)
	}
	if r := endTxn(t, c, h, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
}

func TestEndTransactionAfterImmunityTimeWaitsForTheCheck(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	born := time.Now().Add(-20 * time.Second).UnixMilli()
	late := sendHalf(t, c, "TxI", 0, "UNIQ-LATE", "x", "CHECK_IMMUNITY_TIME_IN_SECONDS\x0110\x02", born)
	// RocketMQ refuses a request past the immunity time before it looks
	// at its producer group or queue offset.
	if r := endTxn(t, c, late, "other", 12, false); r.Code != remoting.IllegalOperation {
		t.Fatalf("rollback of another group 20 s after birth with a 10 s immunity answered %d %s, want ILLEGAL_OPERATION", r.Code, r.Remark)
	}
	if r := endTxn(t, c, late, "pg", 8, false); r.Code != remoting.IllegalOperation {
		t.Fatalf("commit 20 s after birth with a 10 s immunity answered %d %s, want ILLEGAL_OPERATION", r.Code, r.Remark)
	}
	if r := endTxn(t, c, late, "pg", 8, true); r.Code != remoting.Success {
		t.Fatalf("the same commit from a check: %d %s", r.Code, r.Remark)
	}
	inTime := sendHalf(t, c, "TxI", 0, "UNIQ-INTIME", "y", "CHECK_IMMUNITY_TIME_IN_SECONDS\x0160\x02", born)
	if r := endTxn(t, c, inTime, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit within the immunity time: %d %s", r.Code, r.Remark)
	}
	if got := pullAll(t, b, c, "TxI", 0); len(got) != 2 {
		t.Fatalf("%d messages committed, want 2", len(got))
	}
}

func TestTransactionalSendsRefused(t *testing.T) {
	b := startTestBroker(t, map[string]string{"rejectTransactionMessage": "true"})
	c := b.client(nil)
	r := sendV2(t, c, "TxN", 0, "x", halfProps("U", ""))
	if r.Code != remoting.NoPermission {
		t.Fatalf("half send with rejectTransactionMessage answered %d %s", r.Code, r.Remark)
	}
	body, err := commitlog.AppendBatchItem(nil, 0, []byte("a"), "UNIQ_KEY\x01B1\x02")
	if err != nil {
		t.Fatal(err)
	}
	r = call(t, c, remoting.SendBatchMessage, map[string]string{
		"a": "pg", "b": "TxN", "c": "TBW102", "d": "4", "e": "0",
		"f": strconv.Itoa(int(commitlog.TransactionPrepared)), "g": strconv.FormatInt(time.Now().UnixMilli(), 10),
		"h": "0", "i": "", "m": "true",
	}, body)
	if r.Code != remoting.MessageIllegal {
		t.Fatalf("prepared batch answered %d %s, want MESSAGE_ILLEGAL", r.Code, r.Remark)
	}
}

// checkRecorder is a producer connection that records the
// CHECK_TRANSACTION_STATE requests the broker sends it.
type checkRecorder struct {
	mu     sync.Mutex
	checks []*remoting.Command
}

func (r *checkRecorder) handle(_ context.Context, cmd *remoting.Command) *remoting.Command {
	if cmd.Code == remoting.CheckTransactionState {
		r.mu.Lock()
		r.checks = append(r.checks, cmd)
		r.mu.Unlock()
	}
	return nil
}

func (r *checkRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.checks)
}

func (r *checkRecorder) first() *remoting.Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checks[0]
}

func TestTransactionCheckAsksTheProducer(t *testing.T) {
	b := startTestBroker(t, map[string]string{"transactionTimeOut": "200", "transactionCheckInterval": "300"})
	var rec checkRecorder
	producer := b.client(rec.handle)
	heartbeat(t, producer, heartbeatBody("10.0.0.9@1", "pg", "", nil))
	h := sendHalf(t, producer, "TxC", 3, "UNIQ-CHECK", "checked", "", time.Now().UnixMilli())
	waitFor(t, "a transaction check", func() bool { return rec.count() > 0 })

	chk := rec.first()
	if !chk.IsOneway() {
		t.Errorf("check sent as a request expecting an answer; RocketMQ sends it oneway")
	}
	want := map[string]string{
		"tranStateTableOffset": strconv.FormatInt(h.queueOffset, 10), "commitLogOffset": strconv.FormatInt(h.phy, 10),
		"msgId": "UNIQ-CHECK", "transactionId": "UNIQ-CHECK", "topic": meta.TransHalfTopic, "bname": "broker-a",
		"offsetMsgId": commitlog.MessageID(b.storeHost, h.phy),
	}
	for k, v := range want {
		if chk.ExtFields[k] != v {
			t.Errorf("check header %s = %q, want %q", k, chk.ExtFields[k], v)
		}
	}
	m, err := commitlog.Decode(chk.Body)
	if err != nil {
		t.Fatalf("check body: %v", err)
	}
	p := commitlog.ParseProperties(m.Properties)
	if m.Topic != "TxC" || m.QueueID != 3 || string(m.Body) != "checked" || m.PhyOffset != h.phy ||
		p["PGROUP"] != "pg" || p["TRANSACTION_CHECK_TIMES"] != "1" {
		t.Fatalf("check body: topic %s queue %d body %q phy %d properties %v", m.Topic, m.QueueID, m.Body, m.PhyOffset, p)
	}

	// The producer answers as the Go client does, from the check's header.
	if r := endTxn(t, producer, h, "pg", 8, true); r.Code != remoting.Success {
		t.Fatalf("commit from the check: %d %s", r.Code, r.Remark)
	}
	got := pullAll(t, b, producer, "TxC", 3)
	if len(got) != 1 || string(got[0].Body) != "checked" {
		t.Fatalf("after the checked commit the queue holds %d messages", len(got))
	}
	// RocketMQ stores the half again with its check count at each check,
	// and the check names that copy: a commit answering a check stores
	// the message with its TRANSACTION_CHECK_TIMES.
	checks := rec.count()
	if n, err := strconv.Atoi(commitlog.ParseProperties(got[0].Properties)["TRANSACTION_CHECK_TIMES"]); err != nil || n < 1 || n > checks {
		t.Errorf("committed after %d checks with properties %q, want TRANSACTION_CHECK_TIMES of the checks", checks, got[0].Properties)
	}
	n := rec.count()
	time.Sleep(900 * time.Millisecond) // three check intervals
	if rec.count() != n {
		t.Fatalf("the broker kept checking a committed transaction: %d checks, then %d", n, rec.count())
	}
}

// waitGivenUp waits until the checker gave a transaction up and returns
// what TRANS_CHECK_MAX_TIME_TOPIC holds.
func waitGivenUp(t *testing.T, b *testBroker, c *remoting.Client, h sentHalf) []commitlog.Message {
	t.Helper()
	waitFor(t, "the transaction given up", func() bool {
		_, ended, err := b.db.Transactions().Ended(h.phy)
		return err == nil && ended
	})
	discarded := pullAll(t, b, c, meta.TransCheckMaxTopic, 0)
	if len(discarded) != 1 {
		t.Fatalf("%d messages in %s, want the given-up half", len(discarded), meta.TransCheckMaxTopic)
	}
	return discarded
}

func TestTransactionGivenUpAfterCheckMax(t *testing.T) {
	b := startTestBroker(t, map[string]string{"transactionTimeOut": "100", "transactionCheckInterval": "100",
		"transactionCheckMax": "2"})
	c := b.client(nil) // no producer of pg is connected
	h := sendHalf(t, c, "TxD", 0, "UNIQ-DISCARD", "lost cause", "", time.Now().UnixMilli())
	discarded := waitGivenUp(t, b, c, h)
	p := commitlog.ParseProperties(discarded[0].Properties)
	if len(discarded) != 1 || string(discarded[0].Body) != "lost cause" || p["REAL_TOPIC"] != "TxD" || p["TRANSACTION_CHECK_TIMES"] != "2" {
		t.Fatalf("discarded: %d messages, first %q properties %v", len(discarded), discarded[0].Body, p)
	}
	e, ended, err := b.db.Transactions().Ended(h.phy)
	if err != nil || !ended || e.State != kvindex.TxnDiscarded {
		t.Fatalf("end of the discarded transaction: %+v %v %v", e, ended, err)
	}
	if got := pullAll(t, b, c, "TxD", 0); len(got) != 0 {
		t.Fatalf("a discarded transaction delivered %d messages", len(got))
	}
	// A rollback changes nothing; the producer's late commit stores the
	// message, once, as RocketMQ stores it (its give-up only copies the
	// half aside).
	if r := endTxn(t, c, h, "pg", 12, false); r.Code != remoting.Success {
		t.Fatalf("rollback of a discarded transaction answered %d %s", r.Code, r.Remark)
	}
	for range 2 {
		if r := endTxn(t, c, h, "pg", 8, false); r.Code != remoting.Success {
			t.Fatalf("late commit of a discarded transaction answered %d %s", r.Code, r.Remark)
		}
	}
	if got := pullAll(t, b, c, "TxD", 0); len(got) != 1 || string(got[0].Body) != "lost cause" {
		t.Fatalf("after a late commit TxD holds %d messages, want the committed one", len(got))
	}
	if r := endTxn(t, c, h, "pg", 12, false); r.Code == remoting.Success {
		t.Fatal("a rollback after the late commit succeeded")
	}
}

// transactionCheckMax=0 is taken, as RocketMQ takes it: a half is checked
// once (counted 1) and given up in that pass, its copy counted 1.
func TestTransactionCheckMaxOfZeroChecksOnce(t *testing.T) {
	b := startTestBroker(t, map[string]string{"transactionTimeOut": "100", "transactionCheckInterval": "100",
		"transactionCheckMax": "0"})
	c := b.client(nil)
	h := sendHalf(t, c, "TxZero", 0, "UNIQ-ZERO", "once", "", time.Now().UnixMilli())
	discarded := waitGivenUp(t, b, c, h)
	if p := commitlog.ParseProperties(discarded[0].Properties); string(discarded[0].Body) != "once" || p["TRANSACTION_CHECK_TIMES"] != "1" {
		t.Fatalf("given up: %q properties %v, want the half, counted once", discarded[0].Body, p)
	}
}

// A half born longer than fileReservedTime ago (the producer's clock,
// here 73 h behind) is given up without a check into
// TRANS_CHECK_MAX_TIME_TOPIC, as RocketMQ's checker skips it.
func TestTransactionOlderThanFileReservedTimeGivenUpUnchecked(t *testing.T) {
	b := startTestBroker(t, map[string]string{"transactionTimeOut": "100", "transactionCheckInterval": "100",
		"transactionCheckMax": "1000", "fileReservedTime": "72"})
	c := b.client(nil)
	h := sendHalf(t, c, "TxOld", 0, "UNIQ-OLD", "too old", "", time.Now().Add(-73*time.Hour).UnixMilli())
	discarded := waitGivenUp(t, b, c, h)
	p := commitlog.ParseProperties(discarded[0].Properties)
	if string(discarded[0].Body) != "too old" || p["REAL_TOPIC"] != "TxOld" || p["TRANSACTION_CHECK_TIMES"] != "1" {
		t.Fatalf("given up: %q properties %v, want the half, counted once", discarded[0].Body, p)
	}
	if e, _, err := b.db.Transactions().Ended(h.phy); err != nil || e.State != kvindex.TxnDiscarded {
		t.Fatalf("end of the transaction given up: %+v %v", e, err)
	}
}

// transactionCheckMax changed with UPDATE_BROKER_CONFIG applies to the
// halves open: one with 1000 checks to go is given up at its next visit
// once the maximum is 2.
func TestTransactionCheckMaxChangesWhileRunning(t *testing.T) {
	b := startTestBroker(t, map[string]string{"transactionTimeOut": "100", "transactionCheckInterval": "100",
		"transactionCheckMax": "1000"})
	c := b.client(nil)
	h := sendHalf(t, c, "TxLive", 0, "UNIQ-LIVE", "live", "", time.Now().UnixMilli())
	waitFor(t, "two checks", func() bool {
		o, open, err := b.db.Transactions().Half(h.phy)
		return err == nil && open && o.Checks >= 2
	})
	if r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("transactionCheckMax=2")); r.Code != remoting.Success {
		t.Fatalf("update transactionCheckMax: %d %s", r.Code, r.Remark)
	}
	discarded := waitGivenUp(t, b, c, h)
	if n, err := strconv.Atoi(commitlog.ParseProperties(discarded[0].Properties)["TRANSACTION_CHECK_TIMES"]); err != nil || n < 2 {
		t.Fatalf("given up with properties %q, want TRANSACTION_CHECK_TIMES of 2 or more", discarded[0].Properties)
	}
}

func TestTransactionEndSurvivesRestart(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	c := b.client(nil)
	committed := sendHalf(t, c, "TxS", 0, "UNIQ-S1", "one", "", time.Now().UnixMilli())
	open := sendHalf(t, c, "TxS", 0, "UNIQ-S2", "two", "", time.Now().UnixMilli())
	if r := endTxn(t, c, committed, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	b.stop()

	b = startTestBrokerAt(t, store, nil)
	c = b.client(nil)
	if r := endTxn(t, c, committed, "pg", 8, true); r.Code != remoting.Success {
		t.Fatalf("commit again after a restart: %d %s", r.Code, r.Remark)
	}
	if got := pullAll(t, b, c, "TxS", 0); len(got) != 1 {
		t.Fatalf("after a restart and a repeated commit the queue holds %d messages, want 1", len(got))
	}
	if _, isOpen, err := b.db.Transactions().Half(open.phy); err != nil || !isOpen {
		t.Fatalf("the open transaction was lost with the restart (err %v)", err)
	}
	if r := endTxn(t, c, open, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit after a restart: %d %s", r.Code, r.Remark)
	}
	if got := pullAll(t, b, c, "TxS", 0); len(got) != 2 {
		t.Fatalf("queue holds %d messages, want 2", len(got))
	}
}

// A committed copy stored without the synced end (a crash between the
// two) still ends its transaction once the dispatcher indexes it, so a
// check's late commit does not store it twice.
func TestCommittedRecordEndsItsTransaction(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	h := sendHalf(t, c, "TxK", 0, "UNIQ-K", "k", "", time.Now().UnixMilli())
	b.caughtUp()
	_, half, ok, err := b.readRecord(h.phy)
	if err != nil || !ok {
		t.Fatalf("read half: %v %v", ok, err)
	}
	copyOnly := half
	copyOnly.Topic, copyOnly.QueueID = "TxK", 0
	copyOnly.SysFlag |= commitlog.TransactionCommit
	copyOnly.PreparedTransactionOffset = h.phy
	if _, err := b.putMessages(context.Background(), []*commitlog.Message{&copyOnly}, true); err != nil {
		t.Fatal(err)
	}
	b.caughtUp()
	if e, ended, err := b.db.Transactions().Ended(h.phy); err != nil || !ended || e.State != kvindex.TxnCommit {
		t.Fatalf("the dispatched commit did not end the transaction: %+v %v %v", e, ended, err)
	}
	if r := endTxn(t, c, h, "pg", 8, true); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	if got := pullAll(t, b, c, "TxK", 0); len(got) != 1 {
		t.Fatalf("queue holds %d messages, want the one committed copy", len(got))
	}
}

// A consumer's retry of a committed transactional message that still
// carries TRAN_MSG (as RocketMQ 4.x left it on committed copies) is a
// retry, not a new transaction.
func TestRetryOfATransactionalMessageIsNotAHalf(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	heartbeat(t, c, heartbeatBody("10.0.0.4@c", "", "cg-tx", map[string]string{"TxRetry": "*"}))
	r := call(t, c, remoting.SendMessageV2, map[string]string{
		"a": "cg-tx", "b": "%RETRY%cg-tx", "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "j": "1",
		"i": "TRAN_MSG\x01true\x02PGROUP\x01pg\x02DELAY\x013\x02RETRY_TOPIC\x01TxRetry\x02",
	}, []byte("retry"))
	if r.Code != remoting.Success {
		t.Fatalf("retry send: %d %s", r.Code, r.Remark)
	}
	b.caughtUp()
	if n, err := b.cqs.MaxOffset(meta.TransHalfTopic, 0); err != nil || n != 0 {
		t.Fatalf("a retry was stored as a half message (%d in the half queue, %v)", n, err)
	}
	if got := pullAll(t, b, c, meta.ScheduleTopic, 2); len(got) != 1 {
		t.Fatalf("the retry is not waiting for its delay level: %d in SCHEDULE_TOPIC_XXXX/2", len(got))
	}
}

func TestResumeCheckOfAGivenUpTransaction(t *testing.T) {
	// One check each, a second after it the give-up: the producer's
	// commit of the resumed half has that second to arrive.
	b := startTestBroker(t, map[string]string{"transactionTimeOut": "100", "transactionCheckInterval": "1000",
		"transactionCheckMax": "1"})
	c := b.client(nil) // no producer yet: the one check goes unasked
	h := sendHalf(t, c, "TxU", 0, "UNIQ-RESUME", "resumed", "", time.Now().UnixMilli())
	discarded := waitGivenUp(t, b, c, h)
	var rec checkRecorder
	producer := b.client(rec.handle)
	heartbeat(t, producer, heartbeatBody("10.0.0.9@2", "pg", "", nil))
	id := commitlog.MessageID(discarded[0].StoreHost, discarded[0].PhyOffset)
	if r := call(t, c, remoting.ResumeCheckHalfMessage, map[string]string{"msgId": id}, nil); r.Code != remoting.Success {
		t.Fatalf("resume: %d %s", r.Code, r.Remark)
	}
	waitFor(t, "a check of the resumed half", func() bool { return rec.count() > 0 })
	chk := rec.first()
	m, err := commitlog.Decode(chk.Body)
	if err != nil || string(m.Body) != "resumed" || m.Topic != "TxU" || commitlog.ParseProperties(m.Properties)["TRANSACTION_CHECK_TIMES"] != "1" {
		t.Fatalf("check of the resumed half: %+v %v", m, err)
	}
	off, _ := strconv.ParseInt(chk.ExtFields["commitLogOffset"], 10, 64)
	qoff, _ := strconv.ParseInt(chk.ExtFields["tranStateTableOffset"], 10, 64)
	resumed := sentHalf{uniq: "UNIQ-RESUME", phy: off, queueOffset: qoff}
	if r := endTxn(t, producer, resumed, "pg", 8, true); r.Code != remoting.Success {
		t.Fatalf("commit of the resumed half: %d %s", r.Code, r.Remark)
	}
	if got := pullAll(t, b, c, "TxU", 0); len(got) != 1 || string(got[0].Body) != "resumed" {
		t.Fatalf("after the commit TxU holds %d messages", len(got))
	}
	// Only transactional halves can be resumed.
	plain := mustSend(t, c, "TxU", 1, "plain", "")
	if r := call(t, c, remoting.ResumeCheckHalfMessage, map[string]string{"msgId": plain.ExtFields["msgId"]}, nil); r.Code != remoting.SystemError {
		t.Fatalf("resume of a plain message: %d %s", r.Code, r.Remark)
	}
}

// The clients set the PREPARED sysFlag with TRAN_MSG: a retry carrying
// both is stored as a plain message, visible in its queue.
func TestRetryWithPreparedSysFlagIsConsumable(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	heartbeat(t, c, heartbeatBody("10.0.0.4@p", "", "cg-txp", map[string]string{"TxRetryP": "*"}))
	r := call(t, c, remoting.SendMessageV2, map[string]string{
		"a": "cg-txp", "b": "%RETRY%cg-txp", "c": "TBW102", "d": "4", "e": "0", "f": strconv.Itoa(int(commitlog.TransactionPrepared)),
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "j": "1",
		"i": "TRAN_MSG\x01true\x02PGROUP\x01pg\x02DELAY\x013\x02RETRY_TOPIC\x01TxRetryP\x02",
	}, []byte("retry"))
	if r.Code != remoting.Success {
		t.Fatalf("retry send: %d %s", r.Code, r.Remark)
	}
	got := pullAll(t, b, c, meta.ScheduleTopic, 2)
	if len(got) != 1 || commitlog.TransactionType(got[0].SysFlag) != commitlog.TransactionNotType {
		t.Fatalf("the retry is not in SCHEDULE_TOPIC_XXXX/2 as a plain message: %+v", got)
	}
}

// A copy of a committed message (a retry, a delayed delivery) keeps the
// COMMIT bits with PREPARED TX OFFSET 0: it does not end the transaction
// of another half that happens to lie there.
func TestCommittedCopyDoesNotEndAnotherTransaction(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	h := sendHalf(t, c, "TxZ", 0, "UNIQ-AT-ZERO", "first", "", time.Now().UnixMilli())
	if h.phy != 0 {
		t.Fatalf("the first half is at %d; the test needs it at 0", h.phy)
	}
	retryCopy := &commitlog.Message{Topic: "TxZ", QueueID: 1, SysFlag: commitlog.TransactionCommit, BornTimestamp: time.Now().UnixMilli(),
		Body: []byte("retry of another committed message"), Properties: "UNIQ_KEY\x01OTHER\x02"}
	if _, err := b.putMessages(context.Background(), []*commitlog.Message{retryCopy}, true); err != nil {
		t.Fatal(err)
	}
	b.caughtUp()
	if _, ended, err := b.db.Transactions().Ended(0); err != nil || ended {
		t.Fatalf("a copy with PREPARED TX OFFSET 0 ended the transaction of the half at 0 (%v)", err)
	}
	if r := endTxn(t, c, h, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	if got := pullAll(t, b, c, "TxZ", 0); len(got) != 1 || string(got[0].Body) != "first" {
		t.Fatalf("the half's commit stored %d messages", len(got))
	}
}

// An append SYNC_FLUSH did not confirm in time is an error to the
// transaction and timer services, so they record nothing as stored.
func TestRecordStoreRefusesUnflushedAppends(t *testing.T) {
	var s recordStore
	if _, err := s.flushed(commitlog.AppendResult{Status: commitlog.FlushDiskTimeout, PhyOffset: 42}, nil); err == nil ||
		!strings.Contains(err.Error(), "not flushed") {
		t.Fatalf("FLUSH_DISK_TIMEOUT append: %v, want an error", err)
	}
	if _, err := s.flushed(commitlog.AppendResult{Status: commitlog.PutOK}, nil); err != nil {
		t.Fatalf("PUT_OK append: %v", err)
	}
}

// END_TRANSACTION and RESUME_CHECK_HALF_MESSAGE naming offsets where no
// half starts (negative, huge, inside a record) or message ids that do
// not decode are refused, without a panic or a hang, and the half is
// committed afterwards.
func TestEndTransactionRefusesOffsetsNamingNoHalf(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	h := sendHalf(t, c, "TxHostile", 0, "UNIQ-H", "x", "", time.Now().UnixMilli())
	b.caughtUp()
	for _, phy := range []int64{-1, -1 << 62, 1<<63 - 1, h.phy + 1, h.phy - 1} {
		r := endTxn(t, c, sentHalf{h.uniq, phy, h.queueOffset}, "pg", 8, false)
		if r.Code != remoting.SystemError {
			t.Errorf("commit at %d answered %d %s", phy, r.Code, r.Remark)
		}
	}
	for _, id := range []string{"", "zz", "0000000000000000FFFFFFFFFFFFFFFF", "7F000001000000000000000000000000000000"} {
		r := call(t, c, remoting.ResumeCheckHalfMessage, map[string]string{"msgId": id}, nil)
		if r.Code == remoting.Success {
			t.Errorf("resume of %q answered success", id)
		}
	}
	if r := endTxn(t, c, h, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
}

// A commit whose message a power failure lost with the CommitLog's
// unflushed tail is asked about again after the restart, as RocketMQ asks
// again when its op message is lost, and the producer's second commit
// stores the message: the end the index had made durable does not
// outlive the message it recorded.
func TestACommitWhoseMessageAPowerFailureLostIsAskedAgain(t *testing.T) {
	store := t.TempDir()
	settings := map[string]string{"transactionTimeOut": "200", "transactionCheckInterval": "300"}
	b := startTestBrokerAt(t, store, map[string]string{"transactionCheckInterval": "3600000"})
	c := b.client(nil)
	h := sendHalf(t, c, "TxLost", 0, "UNIQ-LOST", "lost with the tail", "", time.Now().UnixMilli())
	b.caughtUp()
	tail := b.clog.MaxOffset()
	if r := endTxn(t, c, h, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	if got := pullAll(t, b, c, "TxLost", 0); len(got) != 1 {
		t.Fatalf("the committed message is not in its queue: %d messages", len(got))
	}
	end := b.clog.MaxOffset()
	b.stop()

	// The power failure: the pages of the commit's records never reached
	// the disk, and the broker did not stop cleanly.
	losePower(t, store, tail, end)

	b = startTestBrokerAt(t, store, settings)
	if got := b.clog.MaxOffset(); got != tail {
		t.Fatalf("the recovered log ends at %d, want %d (the lost tail cut)", got, tail)
	}
	var rec checkRecorder
	producer := b.client(rec.handle)
	heartbeat(t, producer, heartbeatBody("10.0.0.9@1", "pg", "", nil))
	waitFor(t, "a check of the transaction whose commit was lost", func() bool { return rec.count() > 0 })
	if got := rec.first().ExtFields["commitLogOffset"]; got != strconv.FormatInt(h.phy, 10) {
		t.Fatalf("the check names the half at %s, want %d", got, h.phy)
	}
	if r := endTxn(t, producer, h, "pg", 8, true); r.Code != remoting.Success {
		t.Fatalf("commit from the check: %d %s", r.Code, r.Remark)
	}
	if got := pullAll(t, b, producer, "TxLost", 0); len(got) != 1 || string(got[0].Body) != "lost with the tail" {
		t.Fatalf("after the second commit TxLost holds %d messages, want the committed one", len(got))
	}
}

// A half whose timer its commit would refuse is refused at the send, as
// RocketMQ's put of the half refuses it: accepted, each commit would fail
// and the checks would give the message up, the producer never told.
func TestAHalfWithATimerTheCommitWouldRefuseIsRefused(t *testing.T) {
	for _, tc := range []struct {
		settings map[string]string
		props    string
		want     int32
	}{
		{nil, "TIMER_DELAY_SEC\x01999999999\x02", remoting.MessageIllegal},
		{nil, "TIMER_DELIVER_MS\x01soon\x02", remoting.MessageIllegal},
		{map[string]string{"timerWheelEnable": "false"}, "TIMER_DELAY_SEC\x0110\x02", remoting.SystemError},
	} {
		b := startTestBroker(t, tc.settings)
		c := b.client(nil)
		resp := call(t, c, remoting.SendMessageV2, map[string]string{
			"a": "pg", "b": "TxTimer", "c": "TBW102", "d": "4", "e": "0",
			"f": "0", "g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": halfProps("u1", tc.props),
		}, []byte("b"))
		if resp.Code != tc.want {
			t.Errorf("%v %q: half send answered %d (%s), want %d", tc.settings, tc.props, resp.Code, resp.Remark, tc.want)
		}
		b.stop()
	}
	// A timer the commit takes is accepted on the half, and so is one a
	// delay level overrides: the commit parks the message for its level
	// without the timer properties, as RocketMQ's put does.
	b := startTestBroker(t, nil)
	sendHalf(t, b.client(nil), "TxTimer", 0, "u2", "b", "TIMER_DELAY_SEC\x0110\x02", time.Now().UnixMilli())
	sendHalf(t, b.client(nil), "TxTimer", 0, "u3", "b", "DELAY\x012\x02TIMER_DELAY_SEC\x01999999999\x02", time.Now().UnixMilli())
}

// A committed message parked for its timer loses the TRAN_MSG a committed
// message otherwise keeps: RocketMQ parks it with a properties string
// rebuilt from the message's map, from which its EndTransactionProcessor
// cleared TRAN_MSG.
func TestACommittedTimerMessageIsParkedWithoutTranMsg(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	h := sendHalf(t, c, "TxParked", 1, "UNIQ-PARKED", "later", "TIMER_DELAY_SEC\x01600\x02", time.Now().UnixMilli())
	if r := endTxn(t, c, h, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	parked := pullAll(t, b, c, meta.TimerTopic, 0)
	if len(parked) != 1 {
		t.Fatalf("the timer topic holds %d messages, want the committed one", len(parked))
	}
	p := commitlog.ParseProperties(parked[0].Properties)
	if _, ok := p["TRAN_MSG"]; ok || p["REAL_TOPIC"] != "TxParked" || p["REAL_QID"] != "1" || p["PGROUP"] != "pg" ||
		commitlog.TransactionType(parked[0].SysFlag) != commitlog.TransactionCommit {
		t.Fatalf("parked committed message: sysFlag %#x properties %v", parked[0].SysFlag, p)
	}
}

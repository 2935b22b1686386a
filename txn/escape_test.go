package txn

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/repeatlog"
)

// An escaped half is the prepared message of its real topic, as
// RocketMQ's buildTransactionalMessageFromHalfMessage builds it: the
// half's properties with TRAN_MSG=true, REAL_TOPIC kept, REAL_QID and
// TRAN_PREPARED_QUEUE_OFFSET dropped, sysFlag PREPARED.
func TestEscapedHalf(t *testing.T) {
	half := &commitlog.Message{Topic: "RMQ_SYS_TRANS_HALF_TOPIC", Body: []byte("b"), Flag: 7, BornTimestamp: 42,
		SysFlag: commitlog.FlagCompressed,
		Properties: commitlog.FormatProperties(map[string]string{"REAL_TOPIC": "T", "REAL_QID": "3", "PGROUP": "pg",
			"UNIQ_KEY": "U", "TRAN_PREPARED_QUEUE_OFFSET": "9", "TRAN_MSG": "true"})}
	m, err := escapedHalf(half)
	if err != nil {
		t.Fatal(err)
	}
	props := commitlog.ParseProperties(m.Properties)
	if m.Topic != "T" || m.QueueID != 3 || string(m.Body) != "b" || m.Flag != 7 || m.BornTimestamp != 42 {
		t.Fatalf("escaped half %+v", m)
	}
	if m.SysFlag != commitlog.FlagCompressed|commitlog.TransactionPrepared {
		t.Errorf("sysFlag %#x, want compressed and PREPARED", m.SysFlag)
	}
	if props["TRAN_MSG"] != "true" || props["REAL_TOPIC"] != "T" || props["PGROUP"] != "pg" || props["UNIQ_KEY"] != "U" {
		t.Errorf("properties %v", props)
	}
	if _, ok := props["REAL_QID"]; ok {
		t.Error("REAL_QID kept")
	}
	if _, ok := props["TRAN_PREPARED_QUEUE_OFFSET"]; ok {
		t.Error("TRAN_PREPARED_QUEUE_OFFSET kept")
	}
	if _, err := escapedHalf(&commitlog.Message{Properties: "PGROUP\x01pg\x02"}); err == nil {
		t.Error("a half without REAL_TOPIC escaped")
	}
}

// An open half whose escape fails every pass (a topic no other broker
// group has) is retried every pass, but logged the first time and then
// once per repeatlog.DefaultInterval (15 s): a minute of passes writes 4
// lines, not 60, each after the first counting the passes held back; the
// pass that sends it writes one info line.
func TestAnEscapeFailingEveryPassIsLoggedAFewTimesAMinute(t *testing.T) {
	f := newFixture(t, DefaultConfig())
	h := f.sendHalfTo("T", "U1")
	noRoute := errors.New("put to remote broker failed: no route of the topic")
	puts := 0
	failing := true
	put := func(_ context.Context, m *commitlog.Message) error {
		puts++
		if failing {
			return noRoute
		}
		return nil
	}
	var buf bytes.Buffer
	fails := repeatlog.New(zerolog.New(&buf), repeatlog.DefaultInterval, f.svc.now)
	const passes = 60 // a minute of passes, one a second
	for range passes {
		f.svc.escapeRound(context.Background(), put, fails)
		f.now = f.now.Add(time.Second)
	}
	if puts != passes {
		t.Fatalf("%d puts over %d passes, want one a pass", puts, passes)
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(got) != 4 {
		t.Fatalf("%d lines over %d failing passes, want 4:\n%s", len(got), passes, buf.String())
	}
	for i, l := range got {
		if !strings.Contains(l, `"level":"warn"`) || !strings.Contains(l, "no route of the topic") {
			t.Errorf("line %d: %s", i, l)
		}
		if i > 0 && !strings.Contains(l, `"suppressed":14`) {
			t.Errorf("line %d does not count the 14 passes held back: %s", i, l)
		}
	}
	buf.Reset()

	failing = false
	f.svc.escapeRound(context.Background(), put, fails)
	if _, open := f.open(h.PhyOffset); open {
		t.Fatal("the half is still open after its escape")
	}
	f.svc.escapeRound(context.Background(), put, fails)
	got = strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(got) != 1 || !strings.Contains(got[0], `"level":"info"`) || !strings.Contains(got[0], `"suppressed":14`) {
		t.Fatalf("after the escape, logged:\n%s\nwant one info line counting the 14 passes held back", buf.String())
	}
}

package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/kvindex"
)

func summaryCommand(o *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "summary",
		Short: "Keys and bytes per keyspace, dispatched offset against the CommitLog end, topic, queue, POP in-flight, transaction and timer message counts, ACL 2.0 users and access lists",
		Args:  cobra.NoArgs,
		RunE:  withStore(o, runSummary),
	}
}

// keyspaceLine is one keyspace in JSON output.
type keyspaceLine struct {
	Kind       string `json:"kind"` // "keyspace"
	Name       string `json:"name"`
	Prefix     string `json:"prefix"`
	Known      bool   `json:"known"`
	Derivable  bool   `json:"derivable"`
	Keys       int64  `json:"keys"`
	KeyBytes   int64  `json:"keyBytes"`
	ValueBytes int64  `json:"valueBytes"`
}

// summaryLine is the store summary in JSON output. The CommitLog fields
// are null when the store has no CommitLog.
type summaryLine struct {
	Kind           string `json:"kind"` // "summary"
	Store          string `json:"store"`
	Index          string `json:"index"`
	Broker         string `json:"broker,omitempty"`
	Dispatched     int64  `json:"dispatched"`
	LogMin         *int64 `json:"logMinOffset"`
	LogMax         *int64 `json:"logMaxOffset"`
	Lag            *int64 `json:"lag"`
	LogError       string `json:"logError,omitempty"`
	Topics         int64  `json:"topics"`
	Queues         int64  `json:"queues"`
	PopCheckpoints int64  `json:"popCheckpoints"`
	PopInFlight    int64  `json:"popInFlight"`
	// PopStaged and PopStagedMessages are the staged checkpoints
	// (popReviveStageAhead) among PopCheckpoints and their messages among
	// PopInFlight: messages already copied to a pop-retry topic, handed
	// out from their deadline on unless acknowledged first.
	PopStaged         int64 `json:"popStaged"`
	PopStagedMessages int64 `json:"popStagedMessages"`
	// PopReviving is the messages of revive batches (0x58) and of an
	// earlier version's revive intents (0x57): messages whose put a revive
	// has not finished, or a crash cut short (finished at the next start).
	PopReviving int64 `json:"popReviving"`
	// PopRollback is the last POP_ROLLBACK, when there was one.
	PopRollback *kvindex.PopRollback `json:"popRollback,omitempty"`
	// TxnOpenHalves and TxnEnded are the keys of the transaction
	// keyspaces: half messages not yet ended, and ended transactions.
	// TxnOpMessages is the keys of the op-message keyspace: an op message
	// is written for every end rocketkv records, and is the only record of
	// the ends a moved Apache RocketMQ store made (kvdump txn --ended
	// lists those as OP_MESSAGE; telling them apart takes a lookup per op).
	TxnOpenHalves int64 `json:"txnOpenHalves"`
	TxnEnded      int64 `json:"txnEnded"`
	TxnOpMessages int64 `json:"txnOpMessages"`
	// TimerMessages is the keys of the timer keyspace: timer messages
	// parked and not yet delivered.
	TimerMessages int64 `json:"timerMessages"`
	// Users and ACLs are the keys of the ACL 2.0 keyspaces.
	Users int64 `json:"users"`
	ACLs  int64 `json:"acls"`
	// CQWritten is, per ConsumeQueue layout ("kv", "file") with a record
	// of it, the CommitLog offset before which it holds every entry.
	CQWritten map[string]int64 `json:"cqWritten,omitempty"`
	// SlaveTopicsAt is, on a store serving as a slave, the CommitLog
	// offset below which its topic table holds every topic of its master
	// (a start as the master gives the topics with entries past it and
	// no config one of their own).
	SlaveTopicsAt  *int64 `json:"slaveTopicsAt,omitempty"`
	IndexDiskBytes uint64 `json:"indexDiskBytes"`
}

func runSummary(ctx context.Context, s *store, out *output) error {
	stats, err := s.db.KeyspaceStats()
	if err != nil {
		return err
	}
	sum := summaryLine{Kind: "summary", Store: s.root, Index: s.indexDir, Broker: s.broker,
		Dispatched: s.dispatched, IndexDiskBytes: s.db.DiskUsage()}
	if s.log != nil {
		lo, hi := s.log.MinOffset(), s.logEnd
		lag := max(0, hi-s.dispatched)
		sum.LogMin, sum.LogMax, sum.Lag = &lo, &hi, &lag
	} else {
		sum.LogError = s.logErr.Error()
	}
	lastTopic := ""
	err = s.db.ConsumeQueue(1).Queues(func(topic string, _ int32) bool {
		sum.Queues++
		if sum.Queues == 1 || topic != lastTopic {
			sum.Topics++
			lastTopic = topic
		}
		return ctx.Err() == nil
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("count queues: %w", err)
	}
	cks, err := s.db.Pop().CountCheckpoints()
	if err != nil {
		return err
	}
	sum.PopCheckpoints, sum.PopInFlight, sum.PopStaged, sum.PopStagedMessages = cks.Checkpoints, cks.Messages, cks.Staged, cks.StagedMessages
	if sum.PopReviving, err = s.db.Pop().CountReviveIntents(); err != nil {
		return err
	}
	if r, ok, err := s.db.LastPopRollback(); err != nil {
		return err
	} else if ok {
		sum.PopRollback = &r
	}
	if at, ok, err := s.db.SlaveTopicsAt(); err != nil {
		return err
	} else if ok {
		sum.SlaveTopicsAt = &at
	}
	var layouts []string
	for _, name := range []string{kvindex.LayoutKV, kvindex.LayoutFile} {
		off, ok, err := s.db.LayoutProgress(name)
		if err != nil {
			return err
		}
		if ok {
			if sum.CQWritten == nil {
				sum.CQWritten = map[string]int64{}
			}
			sum.CQWritten[name] = off
			layouts = append(layouts, fmt.Sprintf("%s to %d", name, off))
		}
	}
	for _, st := range stats {
		switch st.Prefix {
		case kvindex.PrefixTxnHalf:
			sum.TxnOpenHalves = st.Keys
		case kvindex.PrefixTxnEnd:
			sum.TxnEnded = st.Keys
		case kvindex.PrefixTxnOp:
			sum.TxnOpMessages = st.Keys
		case kvindex.PrefixTimer:
			sum.TimerMessages = st.Keys
		case kvindex.PrefixAuthUser:
			sum.Users = st.Keys
		case kvindex.PrefixAuthACL:
			sum.ACLs = st.Keys
		}
	}

	if out.json {
		for _, st := range stats {
			if err := out.object(keyspaceLine{Kind: "keyspace", Name: st.Name, Prefix: fmt.Sprintf("0x%02x", st.Prefix),
				Known: st.Known, Derivable: st.Derivable, Keys: st.Keys, KeyBytes: st.KeyBytes, ValueBytes: st.ValueBytes}); err != nil {
				return err
			}
		}
		return out.object(sum)
	}
	t := newTable(out.w, "KEYSPACE", "PREFIX", "KEYS", "KEY BYTES", "VALUE BYTES")
	for _, st := range stats {
		t.row(st.Name, fmt.Sprintf("0x%02x", st.Prefix), num(st.Keys), num(st.KeyBytes), num(st.ValueBytes))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if err := out.line(""); err != nil {
		return err
	}
	t = newTable(out.w)
	t.row("store", s.root)
	t.row("index", s.indexDir)
	if s.broker != "" {
		t.row("broker", s.broker+" (checkpoint)")
	}
	t.row("dispatched offset", num(s.dispatched))
	if s.log != nil {
		t.row("commitlog", fmt.Sprintf("[%d, %d)", *sum.LogMin, *sum.LogMax))
		t.row("lag (bytes)", num(*sum.Lag))
	} else {
		t.row("commitlog", sum.LogError)
		t.row("lag (bytes)", "-")
	}
	t.row("topics", num(sum.Topics))
	t.row("queues", num(sum.Queues))
	t.row("pop in flight", fmt.Sprintf("%d messages in %d checkpoints", sum.PopInFlight, sum.PopCheckpoints))
	if sum.PopStaged > 0 {
		t.row("pop staged", fmt.Sprintf("%d of those messages in %d staged checkpoints, already copied to the pop-retry topics (handed out from their deadline unless acknowledged first)",
			sum.PopStagedMessages, sum.PopStaged))
	}
	if sum.PopReviving > 0 {
		t.row("pop reviving", fmt.Sprintf("%d messages whose revive has not finished (a crash's are settled at the broker's next start)", sum.PopReviving))
	}
	if r := sum.PopRollback; r != nil {
		t.row("pop rollback", fmt.Sprintf("pops before %s written to %s/0 from offset %d", formatTime(r.At), r.Topic, r.From))
	}
	t.row("transactions", fmt.Sprintf("%d half messages open, %d ended, %d op messages", sum.TxnOpenHalves, sum.TxnEnded, sum.TxnOpMessages))
	t.row("timer messages", fmt.Sprintf("%d waiting", sum.TimerMessages))
	t.row("access control (ACL 2.0)", fmt.Sprintf("%d users, %d access lists", sum.Users, sum.ACLs))
	if len(layouts) > 0 {
		t.row("consumequeue written", strings.Join(layouts, ", "))
	}
	if at := sum.SlaveTopicsAt; at != nil {
		t.row("slave's topics", fmt.Sprintf("copied from its master for the records below %d (started as the master, it takes the topics with entries past it and no config)", *at))
	}
	t.row("index disk usage", strconv.FormatUint(sum.IndexDiskBytes, 10)+" bytes")
	return t.flush()
}

// formatTime formats a store timestamp for a table cell.
func formatTime(ms int64) string { return kvindex.FormatMillis(ms) }

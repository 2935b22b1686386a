package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

func txnCommand(o *globalOptions) *cobra.Command {
	var open, ended bool
	var dueBefore string
	cmd := &cobra.Command{
		Use:   "txn [--open [--due-before TIME] | --ended]",
		Short: "Transactions: open half messages (keyspace 0x60) in CommitLog order, then ended transactions (0x61, and 0x62 for a RocketMQ store's)",
		Long: `txn lists the transaction state of the index: first the half messages whose
transaction has not ended, in CommitLog order (the order the transaction
checker visits them), with when the checker next asks their producer group
and how often it asked; then how each ended transaction ended, by the
CommitLog offset of its half message, and last the transactions of a moved
Apache RocketMQ store that only its op messages ended (STATE OP_MESSAGE:
an op message does not say whether the transaction committed or rolled
back; "-" for a half whose ConsumeQueue entry is gone).

An open half with an end all the same (ENDED is not "-") is one the checker
deletes on its next visit: the dispatcher saw its committed message or an
op message ending it, or dispatched the half again after a crash. An end time of "-" is a commit the
dispatcher learnt from the committed message.

--open lists only the open halves, --ended only the ended transactions.
--due-before lists the open halves the checker asks about at or before TIME
(RFC 3339 or milliseconds since the epoch); it implies --open.`,
		Args: cobra.NoArgs,
		RunE: withStore(o, func(ctx context.Context, s *store, out *output) error {
			before, err := dueBound(dueBefore)
			if err != nil {
				return err
			}
			if ended {
				return runTxnEnds(ctx, s, out)
			}
			if err := runTxnHalves(ctx, s, out, before); err != nil {
				return err
			}
			if open || dueBefore != "" {
				return nil
			}
			if !out.json {
				if err := out.line(""); err != nil {
					return err
				}
			}
			return runTxnEnds(ctx, s, out)
		}),
	}
	cmd.Flags().BoolVar(&open, "open", false, "list only the open half messages")
	cmd.Flags().BoolVar(&ended, "ended", false, "list only the ended transactions")
	cmd.Flags().StringVar(&dueBefore, "due-before", "", "only open halves whose next check is at or before this time (implies --open)")
	cmd.MarkFlagsMutuallyExclusive("open", "ended")
	cmd.MarkFlagsMutuallyExclusive("ended", "due-before")
	return cmd
}

// txnHalfLine is an open half message in JSON output.
type txnHalfLine struct {
	Kind string `json:"kind"` // "half"
	kvindex.TxnHalf
	// Ended is the state of the half's transaction when it has an end
	// nonetheless (see the command's help), absent otherwise.
	Ended string `json:"ended,omitempty"`
}

// txnEndLine is an ended transaction in JSON output.
type txnEndLine struct {
	Kind string `json:"kind"` // "end"
	kvindex.TxnEndRecord
}

func runTxnHalves(ctx context.Context, s *store, out *output, before int64) error {
	list := newListing(ctx, out, "HALF PHY", "QUEUE OFFSET", "STORE TIME", "NEXT CHECK", "CHECKS", "ENDED")
	tx := s.db.Transactions()
	err := tx.OpenHalves(func(h kvindex.TxnHalf) bool {
		if h.NextCheckAt > before {
			return list.skip()
		}
		l := txnHalfLine{Kind: "half", TxnHalf: h}
		e, ok, err := tx.Ended(h.PhyOffset)
		if err != nil {
			return list.fail(err)
		}
		if ok {
			l.Ended = e.State.String()
		} else if ok, err = tx.RocketMQOpEnded(h.QueueOffset, h.PhyOffset); err != nil {
			return list.fail(err)
		} else if ok {
			l.Ended = txnOpEndedState
		}
		return list.emit(l, func() []string {
			return []string{num(h.PhyOffset), num(h.QueueOffset), formatTime(h.StoreTimestamp), formatTime(h.NextCheckAt), num(h.Checks), cell(l.Ended)}
		})
	})
	if err := list.finish(err); err != nil {
		return fmt.Errorf("list open half messages: %w", err)
	}
	return nil
}

// txnOpEndLine is, in JSON output, a transaction only an op message ended
// (keyspace 0x62 without 0x61): one an Apache RocketMQ store ended before
// its move. The op message does not say whether it committed or rolled
// back.
type txnOpEndLine struct {
	Kind            string `json:"kind"` // "op-end"
	HalfQueueOffset int64  `json:"halfQueueOffset"`
	// HalfPhyOffset is -1 when the half's ConsumeQueue entry is gone.
	HalfPhyOffset int64 `json:"halfPhyOffset"`
	OpPhyOffset   int64 `json:"opPhyOffset"`
}

// txnOpEndedState is the STATE of a transaction only an op message ended.
const txnOpEndedState = "OP_MESSAGE"

func runTxnEnds(ctx context.Context, s *store, out *output) error {
	list := newListing(ctx, out, "HALF PHY", "STATE", "ENDED AT")
	if err := listTxnEnds(s, list); err != nil {
		return list.finish(err)
	}
	if err := listTxnOpEnds(s, list); err != nil {
		return list.finish(err)
	}
	if err := list.finish(nil); err != nil {
		return fmt.Errorf("list ended transactions: %w", err)
	}
	return nil
}

// listTxnEnds lists the ends the index recorded (0x61).
func listTxnEnds(s *store, list *listing) error {
	err := s.db.Scan([]byte{kvindex.PrefixTxnEnd}, func(k, v []byte) bool {
		rec, err := kvindex.DecodeKey(k, v)
		if err != nil {
			return list.fail(err)
		}
		e := rec.(kvindex.TxnEndRecord)
		return list.emit(txnEndLine{Kind: "end", TxnEndRecord: e}, func() []string {
			at := "-"
			if e.At != 0 {
				at = formatTime(e.At)
			}
			return []string{num(e.HalfPhyOffset), e.State, at}
		})
	})
	if err != nil {
		return fmt.Errorf("list ended transactions: %w", err)
	}
	return nil
}

// listTxnOpEnds lists the transactions an op message ended (0x62) that
// have no end of their own (0x61): those of a RocketMQ store, which
// records an end only as an op message. rocketkv writes an op message
// for each end it records, so its own ends are not listed twice.
func listTxnOpEnds(s *store, list *listing) error {
	tx := s.db.Transactions()
	err := s.db.Scan([]byte{kvindex.PrefixTxnOp}, func(k, v []byte) bool {
		rec, err := kvindex.DecodeKey(k, v)
		if err != nil {
			return list.fail(err)
		}
		op := rec.(kvindex.TxnOpRecord)
		phy, err := halfPhyOffset(s, op.HalfQueueOffset)
		if err != nil {
			return list.fail(err)
		}
		if phy >= 0 {
			if _, ended, err := tx.Ended(phy); err != nil {
				return list.fail(err)
			} else if ended {
				return list.skip()
			}
		}
		l := txnOpEndLine{Kind: "op-end", HalfQueueOffset: op.HalfQueueOffset, HalfPhyOffset: phy, OpPhyOffset: op.OpPhyOffset}
		return list.emit(l, func() []string {
			half := "-"
			if phy >= 0 {
				half = num(phy)
			}
			return []string{half, txnOpEndedState, "-"}
		})
	})
	if err != nil {
		return fmt.Errorf("list transactions ended by op messages: %w", err)
	}
	return nil
}

// halfPhyOffset returns the CommitLog offset of the half message at
// queueOffset of the half topic, -1 when its entry is gone.
func halfPhyOffset(s *store, queueOffset int64) (int64, error) {
	phy := int64(-1)
	err := s.db.ScanQueue(meta.TransHalfTopic, 0, queueOffset, func(e kvindex.CQEntryRecord, derr error) bool {
		if derr == nil && e.QueueOffset == queueOffset {
			phy = e.PhyOffset
		}
		return false
	})
	if err != nil {
		return -1, fmt.Errorf("half message at queue offset %d: %w", queueOffset, err)
	}
	return phy, nil
}

package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/timer"
)

func timerCommand(o *globalOptions) *cobra.Command {
	var dueBefore string
	cmd := &cobra.Command{
		Use:   "timer [--due-before TIME]",
		Short: "Timer messages waiting for their delivery time (keyspace 0x70), earliest first",
		Long: `timer lists the timer messages parked in ` + meta.TimerTopic + ` and not yet
delivered, earliest delivery time first (the order the timer delivers
them), with where the parked record is in the CommitLog and, read from it,
the topic and queue the message is stored in when due (REAL_TOPIC,
REAL_QID), its message id and when it was parked.

A message that cancels another (TIMER_DEL_UNIQKEY, "<topic>+<UNIQ_KEY>")
shows it after its MSGID: the timer stores neither of the two.

A TOPIC or QUEUE of "-" is a record without a valid destination, which the
timer drops when it comes due; "error: ..." is a record that cannot be read
(gone from the CommitLog, which the timer also drops) or does not match its
entry.

--due-before lists only the messages due at or before TIME (RFC 3339 or
milliseconds since the epoch): those the timer delivers by then.`,
		Args: cobra.NoArgs,
		RunE: withStore(o, func(ctx context.Context, s *store, out *output) error {
			before, err := dueBound(dueBefore)
			if err != nil {
				return err
			}
			return runTimer(ctx, s, out, before)
		}),
	}
	cmd.Flags().StringVar(&dueBefore, "due-before", "", "only messages due at or before this time")
	return cmd
}

// timerLine is a waiting timer message in JSON output.
type timerLine struct {
	Kind string `json:"kind"` // "timer"
	kvindex.TimerEntry
	// RealTopic and RealQueueID are where the message is stored when due
	// (the parked record's REAL_TOPIC and REAL_QID), absent when the
	// record has no valid one.
	RealTopic   string `json:"realTopic,omitempty"`
	RealQueueID *int32 `json:"realQueueId,omitempty"`
	// DueMs is the parked record's TIMER_OUT_MS when the entry is at an
	// earlier roll point (deliverMs), where the timer parks the message
	// again; absent when the entry is at the delivery time.
	DueMs int64 `json:"dueMs,omitempty"`
	// MsgID is the client's message id (UNIQ_KEY), absent when none.
	MsgID string `json:"msgId,omitempty"`
	// Cancels is the message this one cancels when it comes due
	// (TIMER_DEL_UNIQKEY: "<topic>+<UNIQ_KEY>"), absent for others.
	Cancels string `json:"cancels,omitempty"`
	// ParkedAt is the store time of the parked record.
	ParkedAt int64 `json:"parkedAt,omitempty"`
	// MessageError says why the parked record could not be read, or how
	// it differs from its entry.
	MessageError string `json:"messageError,omitempty"`
}

func runTimer(ctx context.Context, s *store, out *output, before int64) error {
	list := newListing(ctx, out, "DELIVER AT", "PHY", "SIZE", "TOPIC", "QUEUE", "MSGID", "PARKED AT")
	// The keyspace is in delivery-time order: the scan stops at the first
	// message due after the bound.
	err := s.db.Scan([]byte{kvindex.PrefixTimer}, func(k, v []byte) bool {
		rec, err := kvindex.DecodeKey(k, v)
		if err != nil {
			return list.fail(err)
		}
		e := rec.(kvindex.TimerRecord).TimerEntry
		if e.DeliverMs > before {
			return false
		}
		l := timerLine{Kind: "timer", TimerEntry: e}
		if err := readParked(s, &l); err != nil {
			l.MessageError = err.Error()
		}
		return list.emit(l, func() []string {
			at := formatTime(e.DeliverMs)
			if l.DueMs != 0 {
				at += " (roll; due " + formatTime(l.DueMs) + ")"
			}
			row := []string{at, num(e.PhyOffset), num(e.Size)}
			if l.MessageError != "" {
				return append(row, "error: "+cell(l.MessageError), "-", "-", "-")
			}
			queue := "-"
			if l.RealQueueID != nil {
				queue = num(*l.RealQueueID)
			}
			id := cell(l.MsgID)
			if l.Cancels != "" {
				id += " (cancels " + l.Cancels + ")"
			}
			return append(row, cell(l.RealTopic), queue, id, formatTime(l.ParkedAt))
		})
	})
	if err := list.finish(err); err != nil {
		return fmt.Errorf("list timer messages: %w", err)
	}
	return nil
}

// readParked fills l with what the parked record at its entry's offset
// says, checking that it is a record of the timer topic of the entry's
// size.
func readParked(s *store, l *timerLine) error {
	log, err := s.needLog()
	if err != nil {
		return err
	}
	m, err := readRecord(log, l.PhyOffset)
	if err != nil {
		return err
	}
	if m.Topic != meta.TimerTopic {
		return fmt.Errorf("record at %d is in topic %s, not %s", l.PhyOffset, m.Topic, meta.TimerTopic)
	}
	if m.StoreSize != l.Size {
		return fmt.Errorf("record at %d is %d bytes, the entry says %d", l.PhyOffset, m.StoreSize, l.Size)
	}
	l.RealTopic, _ = commitlog.LookupProperty(m.Properties, commitlog.PropertyRealTopic)
	if qs, ok := commitlog.LookupProperty(m.Properties, commitlog.PropertyRealQueueID); ok {
		if q, err := strconv.ParseInt(qs, 10, 32); err == nil && q >= 0 {
			qid := int32(q)
			l.RealQueueID = &qid
		}
	}
	if v, ok := commitlog.LookupProperty(m.Properties, timer.PropOutMs); ok {
		if due, err := strconv.ParseInt(v, 10, 64); err == nil && due > l.DeliverMs {
			l.DueMs = due
		}
	}
	l.MsgID, _ = commitlog.LookupProperty(m.Properties, commitlog.PropertyUniqID)
	l.Cancels, _ = commitlog.LookupProperty(m.Properties, timer.PropDeleteKey)
	l.ParkedAt = m.StoreTimestamp
	return nil
}

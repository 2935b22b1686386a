package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
)

type cqOptions struct {
	topic       string
	queue       int32
	from        int64
	limit       int
	withMessage bool
}

func cqCommand(o *globalOptions) *cobra.Command {
	var co cqOptions
	cmd := &cobra.Command{
		Use:   "cq --topic T [--queue N] [--from OFF] [--limit K] [--with-message]",
		Short: "ConsumeQueue ranges and entries of a topic's queues",
		Args:  cobra.NoArgs,
	}
	cmd.RunE = withStore(o, func(ctx context.Context, s *store, out *output) error {
		return runCQ(ctx, s, out, co, cmd.Flags().Changed("queue"), cmd.Flags().Changed("from"))
	})
	f := cmd.Flags()
	f.StringVar(&co.topic, "topic", "", "topic (required)")
	f.Int32Var(&co.queue, "queue", 0, "only this queue (default: every queue of the topic)")
	f.Int64Var(&co.from, "from", 0, "first queue offset to list (default: each queue's minimum)")
	f.IntVar(&co.limit, "limit", 100, "entries listed per queue; 0 lists them all")
	f.BoolVar(&co.withMessage, "with-message", false, "join each entry with its CommitLog record")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// queueLine is one queue range in JSON output.
type queueLine struct {
	Kind      string `json:"kind"` // "queue"
	Topic     string `json:"topic"`
	QueueID   int32  `json:"queueId"`
	MinOffset int64  `json:"minOffset"`
	MaxOffset int64  `json:"maxOffset"`
}

// entryLine is one cq entry in JSON output.
type entryLine struct {
	Kind           string       `json:"kind"` // "entry"
	Topic          string       `json:"topic"`
	QueueID        int32        `json:"queueId"`
	QueueOffset    int64        `json:"queueOffset"`
	PhyOffset      int64        `json:"phyOffset"`
	Size           int32        `json:"size"`
	TagsCode       int64        `json:"tagsCode"`
	StoreTimestamp int64        `json:"storeTimestamp"`
	Error          string       `json:"error,omitempty"`
	Message        *messageInfo `json:"message,omitempty"`
	MessageError   string       `json:"messageError,omitempty"`
}

func runCQ(ctx context.Context, s *store, out *output, co cqOptions, oneQueue, fromSet bool) error {
	var log *commitlog.ReadOnlyLog
	if co.withMessage {
		var err error
		if log, err = s.needLog(); err != nil {
			return err
		}
	}
	// The queues of one topic are few: hold their ranges to print them
	// before the entries.
	var ranges []kvindex.QueueRange
	err := s.db.QueueRanges(co.topic, func(r kvindex.QueueRange) bool {
		if !oneQueue || r.QueueID == co.queue {
			ranges = append(ranges, r)
		}
		return ctx.Err() == nil
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return err
	}
	if out.json {
		for _, r := range ranges {
			if err := out.object(queueLine{"queue", r.Topic, r.QueueID, r.MinOffset, r.MaxOffset}); err != nil {
				return err
			}
		}
	} else {
		t := newTable(out.w, "TOPIC", "QUEUE", "MIN", "MAX")
		for _, r := range ranges {
			t.row(cell(r.Topic), num(r.QueueID), num(r.MinOffset), num(r.MaxOffset))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if err := out.line(""); err != nil {
			return err
		}
	}

	var t *table
	if !out.json {
		headers := []string{"TOPIC", "QUEUE", "OFFSET", "PHY", "SIZE", "TAGSCODE", "STORETIME"}
		if co.withMessage {
			headers = append(headers, messageHeaders...)
		}
		t = newTable(out.w, headers...)
	}
	for _, r := range ranges {
		from := r.MinOffset
		if fromSet {
			from = co.from
		}
		n := 0
		var werr error
		err := s.db.ScanQueue(r.Topic, r.QueueID, from, func(e kvindex.CQEntryRecord, derr error) bool {
			if co.limit > 0 && n >= co.limit {
				return false
			}
			n++
			werr = writeEntry(out, t, log, e, derr)
			return werr == nil && ctx.Err() == nil
		})
		if err == nil {
			err = werr
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return err
		}
	}
	if t != nil {
		return t.flush()
	}
	return nil
}

func writeEntry(out *output, t *table, log *commitlog.ReadOnlyLog, e kvindex.CQEntryRecord, derr error) error {
	var m messageInfo
	var merr error
	if log != nil && derr == nil {
		m, merr = readMessage(log, e.PhyOffset)
	}
	if out.json {
		l := entryLine{Kind: "entry", Topic: e.Topic, QueueID: e.QueueID, QueueOffset: e.QueueOffset, PhyOffset: e.PhyOffset,
			Size: e.Size, TagsCode: e.TagsCode, StoreTimestamp: e.StoreTimestamp}
		switch {
		case derr != nil:
			l.Error = derr.Error()
		case merr != nil:
			l.MessageError = merr.Error()
		case log != nil:
			l.Message = &m
		}
		return out.object(l)
	}
	if derr != nil {
		row := []string{cell(e.Topic), num(e.QueueID), num(e.QueueOffset), "malformed: " + cell(derr.Error())}
		t.row(row...)
		return nil
	}
	row := []string{cell(e.Topic), num(e.QueueID), num(e.QueueOffset), num(e.PhyOffset), num(e.Size), num(e.TagsCode), formatTime(e.StoreTimestamp)}
	if log != nil {
		row = append(row, messageCells(m, merr)...)
	}
	t.row(row...)
	return nil
}

// messageInfo is what kvdump shows of a CommitLog record next to an index
// entry.
type messageInfo struct {
	// MsgID is the client's message id (UNIQ_KEY), empty when absent.
	MsgID string `json:"msgId"`
	// OffsetMsgID is the broker's offset message id.
	OffsetMsgID string `json:"offsetMsgId"`
	Topic       string `json:"topic"`
	QueueID     int32  `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	Keys        string `json:"keys"`
	Tags        string `json:"tags"`
	BornHost    string `json:"bornHost"`
	BodySize    int    `json:"bodySize"`
}

// messageHeaders are the table columns of messageCells.
var messageHeaders = []string{"MSGID", "OFFSETMSGID", "KEYS", "TAGS", "BORNHOST", "BODYSIZE"}

func messageCells(m messageInfo, err error) []string {
	if err != nil {
		return []string{"error: " + cell(err.Error()), "-", "-", "-", "-", "-"}
	}
	return []string{cell(m.MsgID), m.OffsetMsgID, cell(m.Keys), cell(m.Tags), m.BornHost, num(m.BodySize)}
}

// readMessage reads and decodes the record at phy.
func readMessage(log *commitlog.ReadOnlyLog, phy int64) (messageInfo, error) {
	m, err := readRecord(log, phy)
	if err != nil {
		return messageInfo{}, err
	}
	return messageInfoOf(m), nil
}

// readRecord decodes the record at phy.
func readRecord(log *commitlog.ReadOnlyLog, phy int64) (commitlog.Message, error) {
	e, err := log.ReadRecord(phy)
	if err != nil {
		return commitlog.Message{}, err
	}
	m, err := commitlog.Decode(e.Data)
	if err != nil {
		return commitlog.Message{}, fmt.Errorf("decode record at %d: %w", phy, err)
	}
	return m, nil
}

// messageInfoOf is the summary of a decoded record.
func messageInfoOf(m commitlog.Message) messageInfo {
	uniq, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyUniqID)
	keys, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyKeys)
	tags, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyTags)
	return messageInfo{
		MsgID:       uniq,
		OffsetMsgID: commitlog.MessageID(m.StoreHost, m.PhyOffset),
		Topic:       m.Topic,
		QueueID:     m.QueueID,
		QueueOffset: m.QueueOffset,
		Keys:        keys,
		Tags:        tags,
		BornHost:    m.BornHost.String(),
		BodySize:    len(m.Body),
	}
}

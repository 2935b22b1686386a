package main

import (
	"context"
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
)

type keysOptions struct {
	topic, key, kind string
	limit            int
	withMessage      bool
}

func keysCommand(o *globalOptions) *cobra.Command {
	var ko keysOptions
	cmd := &cobra.Command{
		Use:   "keys --topic T --key K [--kind key|uniq|any] [--limit N] [--with-message]",
		Short: "Message-key index lookups: which records of a topic carry a key (newest first)",
		Args:  cobra.NoArgs,
		RunE: withStore(o, func(ctx context.Context, s *store, out *output) error {
			return runKeys(ctx, s, out, ko)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&ko.topic, "topic", "", "topic (required)")
	f.StringVar(&ko.key, "key", "", "message key, or client message id with --kind uniq (required)")
	f.StringVar(&ko.kind, "kind", "any", "key (a word of KEYS), uniq (UNIQ_KEY, the client message id) or any")
	f.IntVar(&ko.limit, "limit", 64, "most results; 0 for all")
	f.BoolVar(&ko.withMessage, "with-message", false, "join each result with its CommitLog record")
	_ = cmd.MarkFlagRequired("topic")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

// keyLine is one key-index result in JSON output.
type keyLine struct {
	Topic          string       `json:"topic"`
	KeyKind        string       `json:"keyKind"`
	Key            string       `json:"key"`
	PhyOffset      int64        `json:"phyOffset"`
	StoreTimestamp int64        `json:"storeTimestamp"`
	Message        *messageInfo `json:"message,omitempty"`
	MessageError   string       `json:"messageError,omitempty"`
}

func runKeys(_ context.Context, s *store, out *output, ko keysOptions) error {
	var kinds []byte
	switch ko.kind {
	case "key":
		kinds = []byte{kvindex.KindKey}
	case "uniq":
		kinds = []byte{kvindex.KindUniqKey}
	case "any":
		kinds = []byte{kvindex.KindKey, kvindex.KindUniqKey}
	default:
		return fmt.Errorf("--kind %q: want key, uniq or any", ko.kind)
	}
	limit := ko.limit
	if limit <= 0 {
		limit = 1 << 30
	}
	var log *commitlog.ReadOnlyLog
	var minPhy int64
	if s.log != nil {
		minPhy = s.log.MinOffset()
	}
	if ko.withMessage {
		var err error
		if log, err = s.needLog(); err != nil {
			return err
		}
	}
	var res []kvindex.KeyIndexEntry
	for _, k := range kinds {
		r, err := s.db.KeyIndex().Lookup(kvindex.KeyQuery{Topic: ko.topic, Key: ko.key, Kind: k, Max: limit, MinPhyOffset: minPhy})
		if err != nil {
			return err
		}
		res = append(res, r...)
	}
	sort.SliceStable(res, func(i, j int) bool { return res[i].PhyOffset > res[j].PhyOffset })
	res = res[:min(len(res), limit)]
	var t *table
	if !out.json {
		headers := []string{"TOPIC", "KIND", "KEY", "PHY", "STORETIME"}
		if log != nil {
			headers = append(headers, "QUEUE", "QUEUEOFFSET")
			headers = append(headers, messageHeaders...)
		}
		t = newTable(out.w, headers...)
	}
	for _, e := range res {
		// One read of the record gives the store time (the index keeps
		// none per entry) and, with --with-message, the message.
		var m messageInfo
		var merr error
		if s.log != nil {
			var rec commitlog.Message
			if rec, merr = readRecord(s.log, e.PhyOffset); merr == nil {
				e.StoreTimestamp, m = rec.StoreTimestamp, messageInfoOf(rec)
			}
		}
		if out.json {
			l := keyLine{Topic: e.Topic, KeyKind: kvindex.KindName(e.Kind), Key: e.Key, PhyOffset: e.PhyOffset, StoreTimestamp: e.StoreTimestamp}
			if merr != nil {
				l.MessageError = merr.Error()
			} else if log != nil {
				l.Message = &m
			}
			if err := out.object(l); err != nil {
				return err
			}
			continue
		}
		row := []string{cell(e.Topic), kvindex.KindName(e.Kind), cell(e.Key), num(e.PhyOffset), formatTime(e.StoreTimestamp)}
		if log != nil {
			if merr != nil {
				row = append(row, "-", "-")
			} else {
				row = append(row, num(m.QueueID), num(m.QueueOffset))
			}
			row = append(row, messageCells(m, merr)...)
		}
		t.row(row...)
	}
	if t != nil {
		return t.flush()
	}
	return nil
}

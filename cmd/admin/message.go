package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// queryMessages asks every master of topic's route for the messages
// indexed under key (a KEYS entry, or with unique the UNIQ_KEY of
// QUERY_MESSAGE's _UNIQUE_KEY_QUERY) stored between begin and end (ms),
// and returns them decoded, broker by broker. A broker that finds none
// answers QUERY_NOT_FOUND, which is not an error here.
func (g *globals) queryMessages(ctx context.Context, topic, key string, unique bool, maxNum int, begin, end int64) ([]commitlog.Message, error) {
	masters, err := g.masters(ctx, topic)
	if err != nil {
		return nil, err
	}
	h := remoting.Header{"topic": topic, "key": key}
	h.SetInt32("maxNum", int32(maxNum))
	h.SetInt64("beginTimestamp", begin)
	h.SetInt64("endTimestamp", end)
	if unique {
		h.SetBool("_UNIQUE_KEY_QUERY", true)
	}
	var out []commitlog.Message
	for _, addr := range masters {
		resp, err := g.invoke(ctx, addr, remoting.QueryMessage, h, nil)
		if resp != nil && resp.Code == remoting.QueryNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		for body := resp.Body; len(body) > 0; {
			m, err := commitlog.Decode(body)
			if err != nil {
				return nil, fmt.Errorf("decode a message %s answered for key %q: %w", addr, key, err)
			}
			out = append(out, m)
			body = body[m.StoreSize:]
		}
	}
	return out, nil
}

// clientMsgID is the id the clients show for a message: its UNIQ_KEY when
// the producer set one, else the offset message id.
func clientMsgID(m *commitlog.Message) string {
	if id, ok := commitlog.LookupProperty(m.Properties, "UNIQ_KEY"); ok && id != "" {
		return id
	}
	return commitlog.MessageID(m.StoreHost, m.PhyOffset)
}

func queryMsgByKeyCmd(g *globals) *cobra.Command {
	var topic, key string
	var maxNum int
	var begin, end int64
	cmd := &cobra.Command{
		Use:   "queryMsgByKey",
		Short: "list the messages of a topic whose KEYS hold a key, from every master of its route (QUERY_MESSAGE)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if end <= 0 {
				end = time.Now().UnixMilli() + 1
			}
			msgs, err := g.queryMessages(cmd.Context(), topic, key, false, maxNum, begin, end)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%-50s %4s %40s\n", "#Message ID", "#QID", "#Offset")
			for i := range msgs {
				fmt.Fprintf(w, "%-50s %4d %40d\n", clientMsgID(&msgs[i]), msgs[i].QueueID, msgs[i].QueueOffset)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.StringVarP(&key, "msgKey", "k", "", "message key")
	f.IntVarP(&maxNum, "maxNum", "c", 64, "most messages a broker returns")
	f.Int64Var(&begin, "beginTimestamp", 0, "store time from (ms since the epoch)")
	f.Int64VarP(&end, "endTimestamp", "e", 0, "store time up to (ms since the epoch; 0: now)")
	_ = cmd.MarkFlagRequired("topic")
	_ = cmd.MarkFlagRequired("msgKey")
	return cmd
}

func queryMsgByIDCmd(g *globals) *cobra.Command {
	var ids []string
	var showBody bool
	cmd := &cobra.Command{
		Use:   "queryMsgById",
		Short: "print a message by its offset message id, from the broker the id names or -b when given (VIEW_MESSAGE_BY_ID)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, id := range ids {
				addr, phy, err := commitlog.ParseMessageID(strings.TrimSpace(id))
				if err != nil {
					return fmt.Errorf("message id %q: %w", id, err)
				}
				h := remoting.Header{}
				h.SetInt64("offset", phy)
				target := addr.String()
				if cmd.Flags().Changed("broker") {
					target = g.broker // a broker reached by another address than its store host
				}
				resp, err := g.invoke(cmd.Context(), target, remoting.ViewMessageByID, h, nil)
				if err != nil {
					return err
				}
				m, err := commitlog.Decode(resp.Body)
				if err != nil {
					return fmt.Errorf("decode message %s: %w", id, err)
				}
				printMessage(cmd.OutOrStdout(), &m, showBody)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&ids, "msgId", "i", nil, "offset message id(s), comma-separated")
	cmd.Flags().BoolVar(&showBody, "body", false, "print the body too (as text when it is UTF-8, else its length)")
	_ = cmd.MarkFlagRequired("msgId")
	return cmd
}

func queryMsgByUniqueKeyCmd(g *globals) *cobra.Command {
	var topic, id string
	var showBody bool
	cmd := &cobra.Command{
		Use:   "queryMsgByUniqueKey",
		Short: "print the messages of a topic with a message id (UNIQ_KEY) a client showed (QUERY_MESSAGE, unique key)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			msgs, err := g.queryMessages(cmd.Context(), topic, id, true, 32, 0, time.Now().UnixMilli()+1)
			if err != nil {
				return err
			}
			if len(msgs) == 0 {
				return fmt.Errorf("no message of %s has the id %s", topic, id)
			}
			for i := range msgs {
				printMessage(cmd.OutOrStdout(), &msgs[i], showBody)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&id, "msgId", "i", "", "message id (UNIQ_KEY)")
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.BoolVar(&showBody, "body", false, "print the body too (as text when it is UTF-8, else its length)")
	_ = cmd.MarkFlagRequired("msgId")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// printMessage prints a message's fields as mqadmin's queryMsgById does,
// the body only when asked (mqadmin writes it to a file).
func printMessage(w io.Writer, m *commitlog.Message, showBody bool) {
	props := commitlog.ParseProperties(m.Properties)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, 0, len(keys))
	for _, k := range keys {
		pairs = append(pairs, k+"="+props[k])
	}
	ms := func(t int64) string { return time.UnixMilli(t).Format("2006-01-02 15:04:05.000") }
	rows := [][2]string{
		{"OffsetID:", commitlog.MessageID(m.StoreHost, m.PhyOffset)},
		{"Topic:", m.Topic},
		{"Tags:", "[" + props["TAGS"] + "]"},
		{"Keys:", "[" + props["KEYS"] + "]"},
		{"Queue ID:", strconv.Itoa(int(m.QueueID))},
		{"Queue Offset:", strconv.FormatInt(m.QueueOffset, 10)},
		{"CommitLog Offset:", strconv.FormatInt(m.PhyOffset, 10)},
		{"Reconsume Times:", strconv.Itoa(int(m.ReconsumeTimes))},
		{"Born Timestamp:", ms(m.BornTimestamp)},
		{"Store Timestamp:", ms(m.StoreTimestamp)},
		{"Born Host:", m.BornHost.String()},
		{"Store Host:", m.StoreHost.String()},
		{"System Flag:", strconv.Itoa(int(m.SysFlag))},
		{"Properties:", "{" + strings.Join(pairs, ", ") + "}"},
	}
	if showBody {
		body := fmt.Sprintf("%d bytes", len(m.Body))
		if m.SysFlag&commitlog.FlagCompressed == 0 && utf8.Valid(m.Body) {
			body = string(m.Body)
		}
		rows = append(rows, [2]string{"Body:", body})
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%-20s %s\n", r[0], r[1])
	}
	fmt.Fprintln(w)
}

package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/msgtrace"
)

// defaultTraceTopic is the topic RocketMQ's clients write message traces
// to unless told another (TopicValidator.RMQ_SYS_TRACE_TOPIC).
const defaultTraceTopic = "RMQ_SYS_TRACE_TOPIC"

// traceView is one trace record of the message asked about, as mqadmin's
// TraceView shows it.
type traceView struct {
	typ, group, clientHost, status string
	timeStamp                      int64
	costTime                       int32
}

// queryMsgTraceByIDCmd is mqadmin queryMsgTraceById: the trace messages
// keyed by a message id in the trace topic (QUERY_MESSAGE on every master
// of its route), decoded, and the records of that message printed as
// mqadmin's Pub and Sub tables.
func queryMsgTraceByIDCmd(g *globals) *cobra.Command {
	var msgID, traceTopic string
	var begin, end int64
	var maxNum int
	cmd := &cobra.Command{
		Use:     "queryMsgTraceById",
		Aliases: []string{"QueryMsgTraceById"},
		Short:   "print a message's trace: its sends and consumptions as the clients recorded them in the trace topic (QUERY_MESSAGE)",
		Long: `queryMsgTraceById looks up the trace records of the message whose id (the
id clients show) is -i in the trace topic -t, as mqadmin queryMsgTraceById:
the trace messages keyed by the id on every master of the topic's route,
stored from -b to -e (ms since the epoch; -b is the begin time here, not a
broker), at most -c from each broker. It prints a table for each send (Pub:
producer group, client host, send time, cost, status) and one for each
consumer group's consumptions (Sub). The client host is the address the
trace message came from, and times are local. A trace message whose body is
not RocketMQ's trace format is named in the error, after the rest is
printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			msgID, traceTopic = strings.TrimSpace(msgID), strings.TrimSpace(traceTopic)
			if msgID == "" {
				return fmt.Errorf("-i (--msgId) names no message")
			}
			msgs, err := g.queryMessages(cmd.Context(), cmd.ErrOrStderr(), "", traceTopic, msgID, false, maxNum, begin, end)
			if err != nil {
				return err
			}
			msgs = keyedBy(msgs, traceTopic, msgID)
			if len(msgs) == 0 {
				return fmt.Errorf("%s (no trace message of %s in %s)", noMessageFound, msgID, traceTopic)
			}
			views, bad := traceViews(msgs, msgID, time.Now())
			printTraceViews(cmd.OutOrStdout(), views)
			if len(bad) > 0 {
				return fmt.Errorf("trace messages of %s in %s that are not RocketMQ's trace format: %s", msgID, traceTopic, strings.Join(bad, "; "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&msgID, "msgId", "i", "", "the message's id (the id clients show)")
	f.StringVarP(&traceTopic, "traceTopic", "t", defaultTraceTopic, "the trace topic")
	f.Int64VarP(&begin, "beginTimestamp", "b", 0, "trace messages stored from (ms since the epoch)")
	f.Int64VarP(&end, "endTimestamp", "e", math.MaxInt64, "trace messages stored up to (ms since the epoch)")
	f.IntVarP(&maxNum, "maxNum", "c", 64, "most trace messages a broker returns")
	_ = cmd.MarkFlagRequired("msgId")
	return cmd
}

// keyedBy keeps the messages of topic whose KEYS hold key, as RocketMQ's
// MQAdminImpl.queryMessage checks what the brokers' key index found (a
// hash of the key, which another key can share).
func keyedBy(msgs []commitlog.Message, topic, key string) []commitlog.Message {
	var out []commitlog.Message
	for i := range msgs {
		keys, _ := commitlog.LookupProperty(msgs[i].Properties, "KEYS")
		if msgs[i].Topic == topic && containsWord(keys, key) {
			out = append(out, msgs[i])
		}
	}
	return out
}

// containsWord reports whether key is one of the space-separated words of
// keys (MessageConst.KEY_SEPARATOR).
func containsWord(keys, key string) bool {
	for _, k := range strings.Split(keys, " ") {
		if k == key {
			return true
		}
	}
	return false
}

// traceViews decodes the trace messages and returns the records of msgID
// in order, as RocketMQ's TraceView.decodeFromTraceTransData builds them
// (now stands for the time of a record written without one), and the
// messages whose bodies could not be read, each named with why.
func traceViews(msgs []commitlog.Message, msgID string, now time.Time) (views []traceView, bad []string) {
	for i := range msgs {
		m := &msgs[i]
		body, err := inflateBody(m)
		var recs []msgtrace.Record
		if err == nil {
			recs, err = msgtrace.Decode(body)
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", commitlog.MessageID(m.StoreHost, m.PhyOffset), err))
			continue
		}
		for _, r := range recs {
			if r.MsgID != msgID {
				continue
			}
			v := traceView{typ: r.Type, group: r.GroupName, clientHost: m.BornHost.Addr().String(), status: "failed",
				timeStamp: now.UnixMilli(), costTime: r.CostTime}
			if r.Success {
				v.status = "success"
			}
			if r.HasTimeStamp {
				v.timeStamp = r.TimeStamp
			}
			views = append(views, v)
		}
	}
	return views, bad
}

// printTraceViews prints the records as mqadmin queryMsgTraceById does:
// each Pub under its own header, then the SubAfter records by consumer
// group (in the order of the groups' names), a header above each group.
func printTraceViews(w io.Writer, views []traceView) {
	const row = "%-10s %-20s %-20s %-20s %-10s %-10s\n"
	at := func(ms int64) string { return time.UnixMilli(ms).Format("2006-01-02 15:04:05") }
	subs := map[string][]traceView{}
	for _, v := range views {
		switch v.typ {
		case msgtrace.Pub:
			fmt.Fprintf(w, row, "#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status")
			fmt.Fprintf(w, row, "Pub", v.group, v.clientHost, at(v.timeStamp), fmt.Sprintf("%dms", v.costTime), v.status)
			fmt.Fprintln(w)
		case msgtrace.SubAfter:
			subs[v.group] = append(subs[v.group], v)
		}
	}
	for _, group := range sortedKeys(subs) {
		fmt.Fprintf(w, row, "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status")
		for _, v := range subs[group] {
			fmt.Fprintf(w, row, "Sub", v.group, v.clientHost, at(v.timeStamp), fmt.Sprintf("%dms", v.costTime), v.status)
		}
		fmt.Fprintln(w)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/remoting"
)

// resetOffsetCmd is mqadmin's resetOffsetByTime: it asks every broker
// holding the topic (or the one given with -b) to move the group's
// consumer offsets to the first message stored at or after a time.
func resetOffsetCmd(g *globals) *cobra.Command {
	var group, topic, at, cluster string
	var queue int32
	var offset int64
	force := true
	cmd := &cobra.Command{
		Use:   "resetOffsetByTime",
		Short: "move a consumer group's offsets of a topic to a store time, the end (-s -1) or one queue's offset (-q, -o)",
		Long: `resetOffsetByTime moves a consumer group's committed offsets of a topic on every
master broker of the topic's route (-c: only those of that cluster; for an
LMQ, the route of the cluster or parent topic -c names), or on the broker -b
names. Running consumers take the new offsets at their next pull; a broker
with useServerSideResetOffset=false pushes them to the group's online
consumers instead, and when none is online the admin commits them itself
(as mqadmin's fallback, resetOffsetByTimeOld; not for -q).

  -s now | -1 (the end of each queue) | milliseconds since the epoch |
     yyyy-MM-dd#HH:mm:ss:SSS (local time, as mqadmin) | RFC 3339
  -f false: only move offsets back (mqadmin's force, true by default)
  -q Q: only queue Q, to offset -o, or without -o to the queue's offset at -s
     (found on each broker, as mqadmin does with -b)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			ts, err := parseResetTime(at, time.Now())
			if err != nil {
				return err
			}
			if offset >= 0 && queue < 0 {
				return fmt.Errorf("-o needs -q: an offset is one queue's")
			}
			addrs := []string{g.broker}
			if !cmd.Flags().Changed("broker") {
				if addrs, _, err = g.queryTargets(ctx, strings.TrimSpace(cluster), topic); err != nil {
					return err
				}
			}
			header := func(addr string) (remoting.Header, error) {
				h := remoting.Header{"group": group, "topic": topic}
				h.SetBool("isForce", force)
				h.SetInt64("timestamp", ts)
				if queue < 0 {
					return h, nil
				}
				off := offset
				if off < 0 {
					lookup := ts
					if ts == -1 {
						lookup = math.MaxInt64 // the end of the queue
					}
					var err error
					if off, err = g.queueOffsetAt(ctx, addr, topic, int(queue), lookup); err != nil {
						return nil, fmt.Errorf("offset of queue %d at %s: %w", queue, at, err)
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: reset consumer offset of queue %d to %d\n", addr, queue, off)
				}
				h.SetInt32("queueId", queue)
				h.SetInt64("offset", off)
				return h, nil
			}
			var old func(addr string) ([]rollback, error)
			if queue < 0 {
				old = func(addr string) ([]rollback, error) {
					return g.resetOffsetOld(ctx, addr, group, topic, ts, force)
				}
			}
			return resetOn(cmd, g, addrs, header, old)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&group, "group", "g", "", "consumer group")
	f.StringVarP(&topic, "topic", "t", "", "topic")
	f.StringVarP(&at, "timestamp", "s", "", "where to move to (see above)")
	f.VarP(javaBool{&force}, "force", "f", "false: do not move an offset forward (true|false)")
	f.StringVarP(&cluster, "cluster", "c", "", "only the topic's masters of this cluster (for an LMQ: the cluster or parent topic whose route to use)")
	f.Int32VarP(&queue, "queue", "q", -1, "only this queue")
	f.Int64VarP(&offset, "offset", "o", -1, "the queue's new offset (with -q; default: its offset at -s)")
	for _, name := range []string{"group", "topic"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// resetOn sends the reset to each broker, with the header header makes
// for it, and prints the new offsets. A broker that answers
// CONSUMER_NOT_ONLINE (it resets through the group's clients and none is
// online) has the offsets committed by old, as mqadmin falls back to
// resetOffsetByTimeOld, unless old is nil.
func resetOn(cmd *cobra.Command, g *globals, addrs []string, header func(addr string) (remoting.Header, error),
	old func(addr string) ([]rollback, error)) error {
	all := make(map[adminbody.MessageQueue]int64)
	for _, addr := range addrs {
		h, err := header(addr)
		if err != nil {
			return err
		}
		resp, err := g.invoke(cmd.Context(), addr, remoting.InvokeBrokerToResetOffset, h, nil)
		if resp != nil && resp.Code == remoting.ConsumerNotOnline && old != nil {
			rbs, err := old(addr)
			if err != nil {
				return fmt.Errorf("%s resets offsets through the group's live consumers and none is online; "+
					"committing the offsets from the admin (as mqadmin resetOffsetByTimeOld) failed: %w", addr, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: no consumer of the group online; offsets committed by the admin (as mqadmin resetOffsetByTimeOld)\n", addr)
			for _, rb := range rbs {
				all[rb.queue] = rb.resetOffset
			}
			continue
		}
		if err != nil {
			return err
		}
		table, err := adminbody.DecodeResetOffset(resp.Body)
		if err != nil {
			return fmt.Errorf("answer of %s: %w", addr, err)
		}
		for q, off := range table {
			all[q] = off
		}
	}
	w := newTable(cmd.OutOrStdout())
	fmt.Fprintln(w, "BROKER\tQUEUE\tOFFSET")
	for _, q := range sortedQueues(all) {
		fmt.Fprintf(w, "%s\t%d\t%d\n", q.BrokerName, q.QueueID, all[q])
	}
	return w.Flush()
}

// masters returns the master address of every broker group holding
// topic, in address order.
func (g *globals) masters(ctx context.Context, topic string) ([]string, error) {
	named, err := g.namedMasters(ctx, topic)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(named))
	for i, m := range named {
		addrs[i] = m.addr
	}
	sort.Strings(addrs)
	return addrs, nil
}

// namedMasters returns the master of every broker group holding topic,
// with the group's name, in name order.
func (g *globals) namedMasters(ctx context.Context, topic string) ([]brokerTarget, error) {
	route, err := g.route(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []brokerTarget
	for name, addr := range mastersByName(route) {
		out = append(out, brokerTarget{name: name, addr: addr})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("route of %s names no master broker", topic)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// brokerTarget is a broker a request goes to; name is empty for one given
// with -b.
type brokerTarget struct{ name, addr string }

// String names the broker as the output lines do.
func (t brokerTarget) String() string {
	if t.name == "" {
		return t.addr
	}
	return t.name + " " + t.addr
}

// parseResetTime reads -s: "now", -1, milliseconds since the epoch,
// mqadmin's yyyy-MM-dd#HH:mm:ss:SSS in local time, or RFC 3339.
func parseResetTime(s string, now time.Time) (int64, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return 0, fmt.Errorf("-s is required: now, -1, milliseconds, yyyy-MM-dd#HH:mm:ss:SSS or RFC 3339")
	case s == "now":
		return now.UnixMilli(), nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < -1 {
			return 0, fmt.Errorf("-s %d: want -1 or a time", ms)
		}
		return ms, nil
	}
	if t, ok := parseMQAdminTime(s); ok {
		return t.UnixMilli(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixMilli(), nil
	}
	return 0, fmt.Errorf("-s %q: want now, -1, milliseconds, yyyy-MM-dd#HH:mm:ss:SSS or RFC 3339", s)
}

// parseMQAdminTime reads yyyy-MM-dd#HH:mm:ss:SSS in local time (Go's
// layouts take a fraction of a second only after a '.' or ',').
func parseMQAdminTime(s string) (time.Time, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 || len(s)-i-1 != 3 {
		return time.Time{}, false
	}
	ms, err := strconv.Atoi(s[i+1:])
	if err != nil || ms < 0 {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation("2006-01-02#15:04:05", s[:i], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	return t.Add(time.Duration(ms) * time.Millisecond), true
}

// skipAccumulatedMessageCmd is mqadmin skipAccumulatedMessage: the
// group's offsets of every queue of the topic move to the end of the
// queue, by an INVOKE_BROKER_TO_RESET_OFFSET with timestamp -1 (and
// offset -1, no one queue) to every broker group of the topic's route, as
// mqadmin's resetOffsetByTimestamp sends it.
func skipAccumulatedMessageCmd(g *globals) *cobra.Command {
	var group, topic, cluster string
	force := true
	cmd := &cobra.Command{
		Use:   "skipAccumulatedMessage",
		Short: "move a consumer group's offsets of a topic to the end of every queue (INVOKE_BROKER_TO_RESET_OFFSET, timestamp -1)",
		Long: `skipAccumulatedMessage skips what a consumer group has not consumed of a topic,
as mqadmin skipAccumulatedMessage: every broker group of the topic's route (a
master, or a slave of a group without one) moves the group's offsets to the
end of each queue. -c names the cluster, or the parent topic, whose route an
LMQ (or the timer wheel's topic) is reached by; -b asks that broker only.
A broker group that fails does not stop the others: the offsets that moved
are printed, and the failed groups named in the error. A broker with
useServerSideResetOffset=false pushes the offsets to the group's online
consumers, and when none is online the admin commits them itself, as
mqadmin does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group, topic, cluster = strings.TrimSpace(group), strings.TrimSpace(topic), strings.TrimSpace(cluster)
			var addrs []string
			if cmd.Flags().Changed("broker") {
				addrs = []string{g.broker}
			} else {
				routeTopic := topic
				if cluster != "" && (strings.HasPrefix(topic, lmqPrefix) || topic == wheelTimerTopic) {
					routeTopic = cluster
				}
				route, err := g.route(cmd.Context(), routeTopic)
				if err != nil {
					return err
				}
				for _, bd := range route.BrokerDatas {
					if a, ok := brokerAddrOf(route, bd.BrokerName); ok {
						addrs = append(addrs, a)
					}
				}
				sort.Strings(addrs)
			}
			// Every broker group is asked even when one fails (mqadmin
			// stops at it): the offsets that did move are printed, and
			// the groups that failed are named in the error.
			all := make(map[adminbody.MessageQueue]int64)
			var errs []error
			for _, addr := range addrs {
				h := remoting.Header{"group": group, "topic": topic}
				h.SetInt64("timestamp", -1)
				h.SetBool("isForce", force)
				h.SetInt32("queueId", -1) // ResetOffsetRequestHeader's default, which mqadmin sends
				h.SetInt64("offset", -1)
				resp, err := g.invoke(cmd.Context(), addr, remoting.InvokeBrokerToResetOffset, h, nil)
				if resp != nil && resp.Code == remoting.ConsumerNotOnline {
					// The broker resets through the group's clients
					// (useServerSideResetOffset=false) and none is
					// online: the admin commits the offsets, as mqadmin
					// falls back to resetOffsetByTimestampOld.
					rbs, err := g.resetOffsetOld(cmd.Context(), addr, group, topic, -1, force)
					if err != nil {
						errs = append(errs, fmt.Errorf("%s resets offsets through the group's live consumers and none is online; "+
							"committing the offsets from the admin failed: %w", addr, err))
						continue
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: no consumer of the group online; offsets committed by the admin\n", addr)
					for _, rb := range rbs {
						all[rb.queue] = rb.resetOffset
					}
					continue
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("skip the accumulated messages of %s for %s on %s: %w", topic, group, addr, err))
					continue
				}
				table, err := adminbody.DecodeResetOffset(resp.Body)
				if err != nil {
					errs = append(errs, fmt.Errorf("answer of %s: %w", addr, err))
					continue
				}
				for q, off := range table {
					all[q] = off
				}
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%-40s  %-40s  %-40s\n", "#brokerName", "#queueId", "#offset")
			for _, q := range sortedQueues(all) {
				name := q.BrokerName
				if len(name) > 32 {
					name = name[:32] // mqadmin's frontStringAtLeast(name, 32)
				}
				fmt.Fprintf(w, "%-40s  %-40d  %-40d\n", name, q.QueueID, all[q])
			}
			return errors.Join(errs...)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&group, "group", "g", "", "consumer group")
	f.StringVarP(&topic, "topic", "t", "", "topic")
	f.VarP(javaBool{&force}, "force", "f", "force (true|false), sent as isForce")
	f.StringVarP(&cluster, "cluster", "c", "", "for an LMQ: the cluster or parent topic whose route to use")
	_ = cmd.MarkFlagRequired("group")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

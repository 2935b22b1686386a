package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/text/encoding"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/msgtrace"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// queryMessages asks a broker of each group of topic's route (the master,
// or a slave when the group has none) for the messages indexed under key
// (a KEYS entry, or with unique the UNIQ_KEY of QUERY_MESSAGE's
// _UNIQUE_KEY_QUERY) stored between begin and end (ms), and returns them
// decoded, broker by broker, as RocketMQ's MQAdminImpl.queryMessage
// gathers them. cluster, when set, is mqadmin's -c: only the route's
// brokers of that cluster are asked, and for an LMQ or the timer wheel's
// topic it is the topic whose route is used and that is queried. A broker
// that finds none answers QUERY_NOT_FOUND; one that fails is reported on
// warn and skipped, as MQAdminImpl skips it, and only when every broker
// fails is that an error. A message the index found that does not match
// (by unique key: its client id is not key; by key: none of its KEYS is
// key, or it is of another topic than an LMQ's) is left out, as
// MQAdminImpl leaves out an index's hash collisions.
func (g *globals) queryMessages(ctx context.Context, warn io.Writer, cluster, topic, key string, unique bool, maxNum int, begin, end int64) ([]commitlog.Message, error) {
	brokers, queryTopic, err := g.queryTargets(ctx, cluster, topic)
	if err != nil {
		return nil, err
	}
	h := remoting.Header{"topic": queryTopic, "key": key}
	h.SetInt32("maxNum", int32(maxNum))
	h.SetInt64("beginTimestamp", begin)
	h.SetInt64("endTimestamp", end)
	if unique {
		h.SetBool("_UNIQUE_KEY_QUERY", true)
	}
	lmq := strings.HasPrefix(topic, lmqPrefix)
	var out []commitlog.Message
	var errs []error
	for _, addr := range brokers {
		resp, err := g.invoke(ctx, addr, remoting.QueryMessage, h, nil)
		if resp != nil && resp.Code == remoting.QueryNotFound {
			continue
		}
		var msgs []commitlog.Message
		if err == nil {
			if msgs, err = commitlog.DecodeAll(resp.Body); err != nil {
				err = fmt.Errorf("decode the messages %s answered for key %q: %w", addr, key, err)
			}
		}
		if err != nil {
			fmt.Fprintf(warn, "query of %s skipped: %v\n", addr, err)
			errs = append(errs, err)
			continue
		}
		for i := range msgs {
			if queryMatches(&msgs[i], topic, key, unique, lmq) {
				out = append(out, msgs[i])
			}
		}
	}
	if len(errs) == len(brokers) {
		return nil, fmt.Errorf("query of %s by key %q: every broker failed: %w", topic, key, errors.Join(errs...))
	}
	return out, nil
}

// noMessageFound is how RocketMQ's MQAdminImpl.queryMessage fails a
// query that found nothing, by key or by unique key alike, and so how
// mqadmin's queryMsgByKey, queryMsgByUniqueKey and queryMsgTraceById fail
// then; bin/admin's say it too, on stderr with exit status 1.
const noMessageFound = "query message by key finished, but no message."

// queryMatches tells whether a message the index answered for key is one
// of the query's, as MQAdminImpl.queryMessage checks: by unique key, its
// client id (UNIQ_KEY, else its offset id) is key; by key, one of its KEYS
// (separated by ' ') is key and, but for an LMQ, its topic is topic.
func queryMatches(m *commitlog.Message, topic, key string, unique, lmq bool) bool {
	if unique {
		return clientMsgID(m) == key
	}
	keys, ok := commitlog.LookupProperty(m.Properties, "KEYS")
	if !ok || (!lmq && m.Topic != topic) {
		return false
	}
	return slices.Contains(strings.Split(keys, " "), key)
}

// queryTargets returns the brokers a message query of topic goes to and
// the topic it names, as RocketMQ's MQAdminImpl.queryMessage picks them:
// a broker of each group of topic's route, its master or else a slave
// (BrokerData.selectBrokerAddr), of the groups of cluster only when it is
// set; for an LMQ (or rmq_sys_wheel_timer) with cluster set, those of the
// route of cluster (a cluster or the LMQ's parent topic), queried with it
// for an LMQ.
func (g *globals) queryTargets(ctx context.Context, cluster, topic string) ([]string, string, error) {
	lmq := strings.HasPrefix(topic, lmqPrefix)
	routeTopic, queryTopic := topic, topic
	if cluster != "" && (lmq || topic == wheelTimerTopic) {
		routeTopic = cluster
	}
	if cluster != "" && lmq {
		queryTopic = cluster
	}
	route, err := g.route(ctx, routeTopic)
	if err != nil {
		return nil, "", err
	}
	var addrs []string
	for _, bd := range route.BrokerDatas {
		if !lmq && cluster != "" && bd.Cluster != cluster {
			continue
		}
		if a, ok := selectBrokerAddr(bd.BrokerAddrs); ok {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		if cluster != "" {
			return nil, "", fmt.Errorf("route of %s names no broker of cluster %s", routeTopic, cluster)
		}
		return nil, "", fmt.Errorf("route of %s names no broker", routeTopic)
	}
	sort.Strings(addrs)
	return addrs, queryTopic, nil
}

// lmqPrefix starts the name of a light message queue, and wheelTimerTopic
// is the timer wheel's topic; RocketMQ routes both by a cluster's name.
const (
	lmqPrefix       = "%LMQ%"
	wheelTimerTopic = "rmq_sys_wheel_timer"
)

// clientMsgID is the id the clients show for a message: its UNIQ_KEY when
// the producer set one, else the offset message id.
func clientMsgID(m *commitlog.Message) string {
	if id, ok := commitlog.LookupProperty(m.Properties, "UNIQ_KEY"); ok && id != "" {
		return id
	}
	return commitlog.MessageID(m.StoreHost, m.PhyOffset)
}

func queryMsgByKeyCmd(g *globals) *cobra.Command {
	var topic, key, cluster string
	var maxNum int
	var begin, end int64
	cmd := &cobra.Command{
		Use:   "queryMsgByKey",
		Short: "list the messages of a topic whose KEYS hold a key, from every master of its route (QUERY_MESSAGE)",
		Long: `queryMsgByKey lists the messages of a topic whose KEYS hold a key, stored
from -b to -e (ms since the epoch), at most -m from each master of the
topic's route, as mqadmin queryMsgByKey: its -b is the begin time here,
not a broker. -c keeps to the brokers of a cluster (for an LMQ, it names
the cluster or parent topic whose route to use).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			msgs, err := g.queryMessages(cmd.Context(), cmd.ErrOrStderr(), strings.TrimSpace(cluster), strings.TrimSpace(topic), strings.TrimSpace(key), false, maxNum, begin, end)
			if err != nil {
				return err
			}
			if len(msgs) == 0 {
				// As MQAdminImpl.queryMessage, which throws before
				// mqadmin prints the table.
				return fmt.Errorf("%s (no message of %s has the key %s)", noMessageFound, topic, key)
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
	f.Int64VarP(&begin, "beginTimestamp", "b", 0, "store time from (ms since the epoch)")
	f.Int64VarP(&end, "endTimestamp", "e", math.MaxInt64, "store time up to (ms since the epoch)")
	f.IntVarP(&maxNum, "maxNum", "m", 64, "most messages a broker returns")
	f.StringVarP(&cluster, "cluster", "c", "", "only the brokers of this cluster (for an LMQ: the cluster or parent topic whose route to use)")
	_ = cmd.MarkFlagRequired("topic")
	_ = cmd.MarkFlagRequired("msgKey")
	return cmd
}

func queryMsgByIDCmd(g *globals) *cobra.Command {
	var ids []string
	var topic, cluster, group, clientID, bodyFormat string
	var showBody, resend bool
	cmd := &cobra.Command{
		Use:   "queryMsgById",
		Short: "print a message by its offset message id, or by the id a client shows (UNIQ_KEY) with -t (VIEW_MESSAGE_BY_ID, QUERY_MESSAGE)",
		Long: `queryMsgById prints messages by id, as mqadmin queryMsgById: an offset message
id is read from the broker it names (or -b when given: the broker serving a
store moved from another, whose ids name the old one); an id that is not
one, or that the broker does not find, is looked up as the id clients show
(UNIQ_KEY) on every master of the route of -t (as RocketMQ's
MQAdminExt.queryMessage falls back), which needs -t. -f prints the body in
that charset.

With -g and -d the message is not printed but handed to that client of the
group to consume (CONSUME_MESSAGE_DIRECTLY, relayed by the broker that
stored it), which must be a push consumer; its result is printed. With
-s true (and without -g -d) the message is sent again, to its topic, as a
producer sends it, keeping its properties (its UNIQ_KEY too); -s false
does nothing, as mqadmin's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			topic, cluster = strings.TrimSpace(topic), strings.TrimSpace(cluster)
			group, clientID = strings.TrimSpace(group), strings.TrimSpace(clientID)
			var dec *encoding.Decoder
			if bodyFormat != "" {
				var err error
				if dec, err = charsetDecoder(bodyFormat); err != nil {
					return fmt.Errorf("-f %q: unknown charset", bodyFormat)
				}
			}
			direct := group != "" && clientID != ""
			if direct {
				push, err := g.pushConsumer(cmd, group, clientID)
				if err != nil {
					return err
				}
				if !push {
					fmt.Fprintf(cmd.OutOrStdout(), "this %s client is not push consumer ,not support direct push \n", clientID)
					return nil
				}
			}
			if !direct && cmd.Flags().Changed("sendMessage") && !resend {
				return nil
			}
			for _, id := range ids {
				if id = strings.TrimSpace(id); id == "" {
					continue
				}
				msgs, err := g.messagesByID(cmd, id, topic, cluster)
				if err != nil {
					return err
				}
				switch {
				case direct:
					err = g.consumeDirectly(cmd, group, clientID, topic, &msgs[0])
				case resend:
					err = g.resendMessage(cmd, id, &msgs[0])
				default:
					for i := range msgs {
						if err = printMessageIn(cmd.OutOrStdout(), &msgs[i], showBody, dec); err != nil {
							break
						}
					}
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&ids, "msgId", "i", nil, "message id(s), comma-separated: offset message ids, or with -t the ids clients show (UNIQ_KEY)")
	f.StringVarP(&topic, "topic", "t", "", "the messages' topic (needed for ids that are not offset message ids)")
	f.StringVarP(&cluster, "cluster", "c", "", "only the brokers of this cluster for a look-up by UNIQ_KEY (for an LMQ: the cluster or parent topic whose route to use)")
	f.BoolVar(&showBody, "body", false, "print the body too (as text when it is UTF-8, else its length)")
	f.StringVarP(&bodyFormat, "bodyFormat", "f", "", "print the body in this charset (UTF-8, GBK, ...), as mqadmin's")
	f.StringVarP(&group, "consumerGroup", "g", "", "with -d: the group of the client to hand the message to")
	f.StringVarP(&clientID, "clientId", "d", "", "with -g: the client (its client id) to consume the message directly")
	f.VarP(javaBool{&resend}, "sendMessage", "s", "true: send the message again, to its topic")
	_ = cmd.MarkFlagRequired("msgId")
	return cmd
}

// resendMessage sends m again as mqadmin queryMsgById -s true does (its
// producer group ReSendMsgById): to a queue of its topic, with its
// properties, UNIQ_KEY included, and its body as the consumers read it,
// printing the SendResult.
func (g *globals) resendMessage(cmd *cobra.Command, id string, m *commitlog.Message) error {
	body, err := inflateBody(m)
	if err != nil {
		return fmt.Errorf("resend %s: %w", id, err)
	}
	target, err := g.sendTargetOf(cmd.Context(), m.Topic, "", -1, int(time.Now().UnixNano()>>10))
	if err != nil {
		return fmt.Errorf("resend %s: %w", id, err)
	}
	p := g.newToolProducer("ReSendMsgById")
	defer p.Close()
	fmt.Fprintf(cmd.OutOrStdout(), "prepare resend msg. originalMsgId=%s\n", id)
	res, err := p.send(cmd.Context(), target, m.Topic, commitlog.ParseProperties(m.Properties), body)
	if err != nil {
		return fmt.Errorf("resend %s: %w", id, err)
	}
	fmt.Fprintln(cmd.OutOrStdout(), res)
	return nil
}

// messagesByID finds the message of an id: by its offset when it is an
// offset message id, else, or when that finds nothing, by UNIQ_KEY in
// topic (mqadmin's order).
func (g *globals) messagesByID(cmd *cobra.Command, id, topic, cluster string) ([]commitlog.Message, error) {
	addr, phy, err := commitlog.ParseMessageID(id)
	// askedStoreHost: the broker asked is the one the id names, which
	// after a store's move is not the one serving it.
	askedStoreHost := err == nil && !cmd.Flags().Changed("broker")
	if err == nil {
		h := remoting.Header{}
		h.SetInt64("offset", phy)
		target := addr.String()
		if cmd.Flags().Changed("broker") {
			target = g.broker // a broker reached by another address than its store host
		}
		var resp *remoting.Command
		resp, err = g.invoke(cmd.Context(), target, remoting.ViewMessageByID, h, nil)
		if err == nil {
			var m commitlog.Message
			if m, err = commitlog.Decode(resp.Body); err == nil {
				return []commitlog.Message{m}, nil
			}
			err = fmt.Errorf("decode message %s: %w", id, err)
		}
	} else {
		err = fmt.Errorf("message id %q: %w", id, err)
	}
	if topic == "" && askedStoreHost {
		return nil, fmt.Errorf("%w (the id names the broker that stored the message, %s: give the address of the broker serving its store now with -b, as after a move, or the topic with -t to look %s up as the id a client shows, its UNIQ_KEY)", err, addr, id)
	}
	if topic == "" {
		return nil, fmt.Errorf("%w (give the topic with -t to look %s up as the id a client shows, its UNIQ_KEY)", err, id)
	}
	msgs, qerr := g.queryMessages(cmd.Context(), cmd.ErrOrStderr(), cluster, topic, id, true, 32, 0, math.MaxInt64)
	if qerr != nil {
		return nil, fmt.Errorf("message %s of %s: %w", id, topic, errors.Join(err, qerr))
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("no message of %s has the id %s (%w)", topic, id, err)
	}
	return msgs, nil
}

// queryMsgByUniqueKeyCmd is mqadmin queryMsgByUniqueKey: the message of
// a topic with the id a client showed (UNIQ_KEY), the first stored, or
// every one found (at most 32 a broker) with -a; with -g and -d it is
// handed to that client to consume instead.
func queryMsgByUniqueKeyCmd(g *globals) *cobra.Command {
	var topic, id, cluster, group, clientID string
	var showBody, showAll bool
	cmd := &cobra.Command{
		Use:   "queryMsgByUniqueKey",
		Short: "print the message of a topic with a message id (UNIQ_KEY) a client showed (QUERY_MESSAGE, unique key)",
		Long: `queryMsgByUniqueKey prints the message of topic -t whose id (UNIQ_KEY) is -i,
asking every master of the topic's route (those of cluster -c only; for an
LMQ, -c names the cluster or parent topic whose route to use). A message
sent again has the id more than once: the first stored is printed, or with
-a every one, by store time, as mqadmin's. With -g and -d the message is
handed to that client of the group to consume (CONSUME_MESSAGE_DIRECTLY),
which must be a push consumer, and its result printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group, clientID = strings.TrimSpace(group), strings.TrimSpace(clientID)
			direct := group != "" && clientID != ""
			if direct {
				push, err := g.pushConsumer(cmd, group, clientID)
				if err != nil || !push {
					if err != nil {
						fmt.Fprintf(cmd.OutOrStdout(), "get consumer runtime info for %s client failed \n", clientID)
					}
					fmt.Fprintf(cmd.OutOrStdout(), "get consumer info failed or this %s client is not push consumer, not support direct push \n", clientID)
					return err
				}
			}
			msgs, err := g.queryMessages(cmd.Context(), cmd.ErrOrStderr(), strings.TrimSpace(cluster), topic, id, true, 32, 0, math.MaxInt64)
			if err != nil {
				return err
			}
			if len(msgs) == 0 {
				return fmt.Errorf("%s (no message of %s has the id %s)", noMessageFound, topic, id)
			}
			sort.SliceStable(msgs, func(i, j int) bool { return msgs[i].StoreTimestamp < msgs[j].StoreTimestamp })
			if direct {
				return g.consumeDirectly(cmd, group, clientID, topic, &msgs[0])
			}
			if !showAll {
				msgs = msgs[:1]
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
	f.StringVarP(&cluster, "cluster", "c", "", "only the brokers of this cluster (for an LMQ: the cluster or parent topic whose route to use)")
	f.BoolVarP(&showAll, "showAll", "a", false, "print every message with the id (a message sent again has it more than once), not only the first stored")
	f.StringVarP(&group, "consumerGroup", "g", "", "with -d: the group of the client to hand the message to")
	f.StringVarP(&clientID, "clientId", "d", "", "with -g: the client (its client id) to consume the message directly")
	f.BoolVar(&showBody, "body", false, "print the body too (as text when it is UTF-8, else its length)")
	_ = cmd.MarkFlagRequired("msgId")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// printMessage prints a message's fields as mqadmin's queryMsgById does,
// the body only when asked (mqadmin writes it to a file).
func printMessage(w io.Writer, m *commitlog.Message, showBody bool) {
	_ = printMessageIn(w, m, showBody, nil)
}

// printMessageIn is printMessage with, when dec is not nil, the body
// decoded by it ("Message Body:", mqadmin's -f).
func printMessageIn(w io.Writer, m *commitlog.Message, showBody bool, dec *encoding.Decoder) error {
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
	// mqadmin prints "[" + msg.getTags() + "]": Java writes a property
	// the message lacks, a null String, as null.
	bracketed := func(key string) string {
		v, ok := props[key]
		if !ok {
			v = "null"
		}
		return "[" + v + "]"
	}
	rows := [][2]string{
		{"OffsetID:", commitlog.MessageID(m.StoreHost, m.PhyOffset)},
		{"Topic:", m.Topic},
		{"Tags:", bracketed("TAGS")},
		{"Keys:", bracketed("KEYS")},
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
	if dec != nil {
		raw, err := inflateBody(m)
		if err != nil {
			return err
		}
		text, err := dec.Bytes(raw)
		if err != nil {
			return fmt.Errorf("decode the body of %s: %w", commitlog.MessageID(m.StoreHost, m.PhyOffset), err)
		}
		rows = append(rows, [2]string{"Message Body:", string(text)})
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%-20s %s\n", r[0], r[1])
	}
	fmt.Fprintln(w)
	return nil
}

// sendTarget is where sendMessage puts a message: a broker group's master
// and a queue of the topic there.
type sendTarget struct {
	brokerName, addr string
	queueID          int
}

// sendTargetOf picks where to send a message of topic: queue qid of
// brokerName when both are given, else a writable queue of a master
// (chosen by seed) of publishQueues.
func (g *globals) sendTargetOf(ctx context.Context, topic, brokerName string, qid int, seed int) (sendTarget, error) {
	choices, err := g.publishQueues(ctx, topic, brokerName, qid)
	if err != nil {
		return sendTarget{}, err
	}
	return choices[seed%len(choices)], nil
}

// publishQueues returns the queues a producer sends a message of topic
// to, in the order of RocketMQ's TopicPublishInfo (by broker name, then
// queue id): the writable queues of the masters of the topic's route, or
// of the route of the auto-create template TBW102 for a topic the name
// servers do not know yet, limited to its first defaultTopicQueueNums
// queues (as the clients do; the broker then creates the topic with that
// many). brokerName and qid (when not negative) keep to those.
func (g *globals) publishQueues(ctx context.Context, topic, brokerName string, qid int) ([]sendTarget, error) {
	maxQueues := int32(math.MaxInt32)
	route, err := g.route(ctx, topic)
	if err != nil {
		var tmplErr error
		if route, tmplErr = g.route(ctx, autoCreateTemplate); tmplErr != nil {
			return nil, err
		}
		maxQueues = defaultTopicQueueNums
	}
	masters := mastersByName(route)
	sort.SliceStable(route.QueueDatas, func(i, j int) bool { return route.QueueDatas[i].BrokerName < route.QueueDatas[j].BrokerName })
	var choices []sendTarget
	for _, qd := range route.QueueDatas {
		addr, ok := masters[qd.BrokerName]
		if !ok || !meta.Writable(int(qd.Perm)) || (brokerName != "" && qd.BrokerName != brokerName) {
			continue
		}
		for q := range int(min(qd.WriteQueueNums, maxQueues)) {
			if qid < 0 || q == qid {
				choices = append(choices, sendTarget{brokerName: qd.BrokerName, addr: addr, queueID: q})
			}
		}
	}
	if len(choices) == 0 {
		where := "a master"
		if brokerName != "" {
			where = "the master of " + brokerName
		}
		return nil, fmt.Errorf("no writable queue of %s on %s", topic, where)
	}
	return choices, nil
}

// autoCreateTemplate is the topic whose route clients use for a topic
// the name servers do not know (RocketMQ's TBW102), and
// defaultTopicQueueNums the queues such a topic gets (the clients'
// default, sent as the send header's defaultTopicQueueNums).
const (
	autoCreateTemplate    = "TBW102"
	defaultTopicQueueNums = 4
)

// mastersByName maps each broker group of a route to its master's
// address (groups without a master are left out).
func mastersByName(route namesrv.TopicRouteData) map[string]string {
	masters := map[string]string{}
	for _, bd := range route.BrokerDatas {
		if a, ok := bd.BrokerAddrs[0]; ok {
			masters[bd.BrokerName] = a
		}
	}
	return masters
}

// route asks the name servers for a topic's route.
func (g *globals) route(ctx context.Context, topic string) (namesrv.TopicRouteData, error) {
	var route namesrv.TopicRouteData
	resp, err := g.invokeNamesrv(ctx, remoting.GetRouteInfoByTopic, remoting.Header{"topic": topic}, nil)
	if err != nil {
		return route, fmt.Errorf("route of %s: %w", topic, err)
	}
	if err := json.Unmarshal(resp.Body, &route); err != nil {
		return route, fmt.Errorf("decode route of %s: %w", topic, err)
	}
	return route, nil
}

func sendMessageCmd(g *globals) *cobra.Command {
	var topic, body, keys, tags, brokerName string
	var qid int
	var traceEnable bool
	cmd := &cobra.Command{
		Use:   "sendMessage",
		Short: "send one message with a UTF-8 body to a topic, as mqadmin sendMessage (SEND_MESSAGE_V2)",
		Long: `sendMessage sends one message as a producer does: to a writable queue of the
topic's route (the route of TBW102 for a topic the name server does not know
yet, which the broker then creates), or to queue -i of broker group -b. It prints
mqadmin's columns; the message id is the one clients show (UNIQ_KEY), and the
offset id queryMsgById reads follows. With -m true it then writes the send's
trace record to RMQ_SYS_TRACE_TOPIC, the Pub record a Java producer with
message trace on writes (queryMsgTraceById reads it), unless the broker
answered TRACE_ON false.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if qid >= 0 && brokerName == "" {
				return fmt.Errorf("-i needs -b (--broker-name): a queue id names a queue of one broker group")
			}
			target, err := g.sendTargetOf(cmd.Context(), topic, brokerName, qid, int(time.Now().UnixNano()>>10))
			if err != nil {
				return err
			}
			props := map[string]string{}
			if keys != "" {
				props["KEYS"] = keys
			}
			if tags != "" {
				props["TAGS"] = tags
			}
			// mqadmin's SendMessageCommand names its producer group by
			// the time it starts (ms), and so its trace records.
			p := g.newToolProducer(strconv.FormatInt(time.Now().UnixMilli(), 10))
			defer p.Close()
			began := time.Now()
			res, err := p.send(cmd.Context(), target, topic, props, []byte(body))
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%-32s  %-4s  %-20s    %s\n", "#Broker Name", "#QID", "#Send Result", "#MsgId")
			fmt.Fprintf(w, "%-32s  %-4d  %-20s    %s\n", target.brokerName, target.queueID, res.status, res.msgID)
			fmt.Fprintf(w, "offset message id: %s\n", res.offsetMsgID)
			if traceEnable && res.traceOn {
				r := msgtrace.Record{Type: msgtrace.Pub, TimeStamp: began.UnixMilli(), HasTimeStamp: true, RegionID: res.regionID,
					GroupName: p.group, Topic: topic, MsgID: res.msgID, Tags: cmp.Or(tags, "null"), Keys: cmp.Or(keys, "null"),
					StoreHost: target.addr, BodyLength: int32(len(body)), CostTime: int32(time.Since(began).Milliseconds()),
					OffsetMsgID: res.offsetMsgID, Success: res.status == "SEND_OK"}
				if err := g.sendTrace(cmd.Context(), p.group, &r); err != nil {
					// mqadmin's trace dispatcher sends in the background
					// and only logs a failure.
					fmt.Fprintln(cmd.ErrOrStderr(), "send the message trace:", err)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.StringVarP(&body, "body", "p", "", "message body (UTF-8 text)")
	f.StringVarP(&keys, "key", "k", "", "message keys")
	f.StringVarP(&tags, "tags", "c", "", "message tag")
	f.StringVarP(&brokerName, "broker-name", "b", "", "broker group (name) to send to, as mqadmin's -b")
	f.IntVarP(&qid, "qid", "i", -1, "queue to send to (needs -b)")
	f.VarP(javaBool{&traceEnable}, "msgTraceEnable", "m", "true: write the send's trace record to "+defaultTraceTopic+", as mqadmin's")
	_ = cmd.MarkFlagRequired("topic")
	_ = cmd.MarkFlagRequired("body")
	return cmd
}

// sendTrace writes r to the trace topic as RocketMQ's trace dispatcher
// sends a producer's records (AsyncTraceDispatcher): one message of
// RMQ_SYS_TRACE_TOPIC whose body is the record and whose KEYS are its
// TransKeys, from the producer group _INNER_TRACE_PRODUCER-<group>-PRODUCE-1.
func (g *globals) sendTrace(ctx context.Context, group string, r *msgtrace.Record) error {
	target, err := g.sendTargetOf(ctx, defaultTraceTopic, "", -1, int(time.Now().UnixNano()>>10))
	if err != nil {
		return err
	}
	p := g.newToolProducer("_INNER_TRACE_PRODUCER-" + group + "-PRODUCE-1")
	defer p.Close()
	_, err = p.send(ctx, target, defaultTraceTopic, map[string]string{"KEYS": strings.Join(msgtrace.TransKeys(r), " ")}, msgtrace.AppendPub(nil, r))
	return err
}

// toolsConsumerGroup is the group consumeMessage pulls as, mqadmin's
// default; it commits nothing.
const toolsConsumerGroup = "TOOLS_CONSUMER"

// queueOffsetAt asks a broker for a queue offset: the minimum (at < 0),
// the maximum (at == math.MaxInt64), or the first message stored at or
// after at (ms).
func (g *globals) queueOffsetAt(ctx context.Context, addr, topic string, qid int, at int64) (int64, error) {
	h := remoting.Header{"topic": topic}
	h.SetInt32("queueId", int32(qid))
	code := remoting.SearchOffsetByTimestamp
	switch {
	case at < 0:
		code = remoting.GetMinOffset
	case at == math.MaxInt64:
		code = remoting.GetMaxOffset
	default:
		h.SetInt64("timestamp", at)
	}
	resp, err := g.invoke(ctx, addr, code, h, nil)
	if err != nil {
		return 0, err
	}
	off, err := remoting.Header(resp.ExtFields).Int64("offset")
	if err != nil {
		return 0, fmt.Errorf("offset of %s/%d on %s: %w", topic, qid, addr, err)
	}
	return off, nil
}

// pulled is one PULL_MESSAGE's answer: its code, the offset to pull from
// next, the queue's bounds the broker reported, and the messages found.
type pulled struct {
	code                 int32
	next, minOff, maxOff int64
	nextOK               bool
	msgs                 []commitlog.Message
}

// pullStatus is the PullStatus a RocketMQ client makes of a pull's code.
func (p pulled) pullStatus() string {
	switch p.code {
	case remoting.Success:
		return "FOUND"
	case remoting.PullRetryImmediately:
		return "NO_MATCHED_MSG"
	case remoting.PullOffsetMoved:
		return "OFFSET_ILLEGAL"
	}
	return "NO_NEW_MSG"
}

// pullOnce pulls up to maxNums messages of queue qid of topic on broker
// group brokerName (at addr) from offset from, matching the tag
// expression sub, as consumer group group, as mqadmin's
// DefaultMQPullConsumer pulls (TOOLS_CONSUMER unless told, its broker suspend time of 20 s, unused without the
// suspend flag, and no byte limit), committing nothing. A code other than
// the pull's four is an error.
func (g *globals) pullOnce(ctx context.Context, group, addr, brokerName, topic, sub string, qid int, from int64, maxNums int) (pulled, error) {
	h := remoting.Header{"consumerGroup": group, "topic": topic, "subscription": sub, "expressionType": "TAG",
		"subVersion": "0", "commitOffset": "0", "suspendTimeoutMillis": "20000", "bname": brokerName}
	h.SetInt32("maxMsgBytes", math.MaxInt32)
	h.SetInt32("queueId", int32(qid))
	h.SetInt64("queueOffset", from)
	h.SetInt32("maxMsgNums", int32(maxNums))
	h.SetInt32("sysFlag", 4) // subscription given; no commit, no suspend
	resp, err := g.invoke(ctx, addr, remoting.PullMessage, h, nil)
	if resp == nil {
		return pulled{}, err
	}
	rh := remoting.Header(resp.ExtFields)
	p := pulled{code: resp.Code}
	var nerr error
	p.next, nerr = rh.Int64("nextBeginOffset")
	p.nextOK = nerr == nil
	p.minOff, _ = rh.Int64("minOffset")
	p.maxOff, _ = rh.Int64("maxOffset")
	switch resp.Code {
	case remoting.Success:
		if p.msgs, err = commitlog.DecodeAll(resp.Body); err != nil {
			return p, fmt.Errorf("decode the messages pulled from %s/%d@%d: %w", topic, qid, from, err)
		}
	case remoting.PullNotFound, remoting.PullOffsetMoved, remoting.PullRetryImmediately:
	default:
		return p, err
	}
	return p, nil
}

// pullRange pulls, as consumer group group, queue qid of topic on broker
// group brokerName (at addr) from offset from up to before end, at most max messages, without
// committing anything, and hands each message to fn.
func (g *globals) pullRange(ctx context.Context, group, addr, brokerName, topic string, qid int, from, end int64, max int, fn func(*commitlog.Message)) (int, error) {
	n := 0
	for from < end && n < max {
		p, err := g.pullOnce(ctx, group, addr, brokerName, topic, "*", qid, from, min(32, max-n))
		if err != nil {
			return n, err
		}
		for i := range p.msgs {
			if n < max && p.msgs[i].QueueOffset < end {
				fn(&p.msgs[i])
				n++
			}
		}
		if p.code == remoting.PullNotFound || !p.nextOK || p.next <= from {
			return n, nil // nothing further to read
		}
		from = p.next
	}
	return n, nil
}

func consumeMessageCmd(g *globals) *cobra.Command {
	var topic, brokerName, group string
	var qid, count int
	var offset, begin, end int64
	var showBody bool
	cmd := &cobra.Command{
		Use:   "consumeMessage",
		Short: "print a topic's messages without consuming them: pulls that commit nothing, as mqadmin consumeMessage",
		Long: `consumeMessage reads up to -c messages of every queue of a topic (or of
broker group -b, queue -i), from -o, or from the first message stored at -s, or
from each queue's minimum, up to the message stored at -e or the end, and
prints them. It pulls as group TOOLS_CONSUMER (or -g) and commits no offset.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			group = cmp.Or(strings.TrimSpace(group), toolsConsumerGroup)
			if qid >= 0 && brokerName == "" {
				return fmt.Errorf("-i needs -b (--broker-name): a queue id names a queue of one broker group")
			}
			route, err := g.route(ctx, topic)
			if err != nil {
				return err
			}
			masters := mastersByName(route)
			sort.Slice(route.QueueDatas, func(i, j int) bool { return route.QueueDatas[i].BrokerName < route.QueueDatas[j].BrokerName })
			printed := 0
			for _, qd := range route.QueueDatas {
				addr, ok := masters[qd.BrokerName]
				if !ok || (brokerName != "" && qd.BrokerName != brokerName) {
					continue
				}
				for q := range int(qd.ReadQueueNums) {
					if (qid >= 0 && q != qid) || printed >= count {
						continue
					}
					from := offset
					if !cmd.Flags().Changed("offset") {
						at := int64(-1)
						if cmd.Flags().Changed("beginTimestamp") {
							at = begin
						}
						if from, err = g.queueOffsetAt(ctx, addr, topic, q, at); err != nil {
							return err
						}
					}
					to := int64(math.MaxInt64)
					if cmd.Flags().Changed("endTimestamp") {
						to = end
					}
					if to, err = g.queueOffsetAt(ctx, addr, topic, q, to); err != nil {
						return err
					}
					n, err := g.pullRange(ctx, group, addr, qd.BrokerName, topic, q, from, to, count-printed, func(m *commitlog.Message) {
						fmt.Fprintf(cmd.OutOrStdout(), "%s %s/%d@%d\n", qd.BrokerName, m.Topic, m.QueueID, m.QueueOffset)
						printMessage(cmd.OutOrStdout(), m, showBody)
					})
					printed += n
					if err != nil {
						return err
					}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d messages\n", printed)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.StringVarP(&brokerName, "broker-name", "b", "", "only this broker group (name), as mqadmin's -b")
	f.IntVarP(&qid, "queueId", "i", -1, "only this queue (needs -b)")
	f.Int64VarP(&offset, "offset", "o", 0, "queue offset to start from (default: each queue's minimum)")
	f.Int64VarP(&begin, "beginTimestamp", "s", 0, "start at the first message stored at or after this time (ms since the epoch)")
	f.Int64VarP(&end, "endTimestamp", "e", 0, "stop before the first message stored at or after this time (ms since the epoch)")
	f.IntVarP(&count, "messageCount", "c", 128, "most messages to print")
	f.StringVarP(&group, "consumerGroup", "g", "", "the consumer group to pull as (default "+toolsConsumerGroup+"); nothing is committed")
	f.BoolVar(&showBody, "body", false, "print the bodies too (as text when UTF-8, else their length)")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

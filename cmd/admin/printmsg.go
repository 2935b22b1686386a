package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/filter"
	"github.com/rocketkv/rocketkv/internal/msgbody"
	"github.com/rocketkv/rocketkv/remoting"
)

// parseToolTimestamp reads mqadmin's -b and -e of printMsg and
// printMsgByQueue: milliseconds since the epoch or yyyy-MM-dd#HH:mm:ss:SSS
// in local time.
func parseToolTimestamp(flag, s string) (int64, error) {
	s = strings.TrimSpace(s)
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	if t, ok := parseMQAdminTime(s); ok {
		return t.UnixMilli(), nil
	}
	return 0, fmt.Errorf("-%s %q: want milliseconds since the epoch or yyyy-MM-dd#HH:mm:ss:SSS", flag, s)
}

// charsetDecoder returns the decoder of a Java charset name (UTF-8, GBK,
// ISO-8859-1, ...): malformed input becomes U+FFFD, as Java's new
// String(bytes, charset) makes it.
func charsetDecoder(name string) (*encoding.Decoder, error) {
	name = strings.TrimSpace(name)
	enc, err := ianaindex.IANA.Encoding(name)
	if err != nil || enc == nil {
		if enc, err = htmlindex.Get(name); err != nil {
			return nil, fmt.Errorf("-c %q: unknown charset", name)
		}
	}
	return enc.NewDecoder(), nil
}

// maxInflatedBody bounds a decompressed body: RocketMQ's largest message
// is well under it.
const maxInflatedBody = 256 << 20

// inflateBody returns a message's body decompressed when the producer
// compressed it (sysFlag), as RocketMQ's clients hand it to the
// application.
func inflateBody(m *commitlog.Message) ([]byte, error) {
	ct := commitlog.CompressionType(m.SysFlag)
	if ct == 0 {
		return m.Body, nil
	}
	return msgbody.Decompress(ct, m.Body, maxInflatedBody)
}

// tagFilter is a tag subscription expression ("TagA || TagB") as
// RocketMQ's clients read it (filter.ParseTags, the broker's parser):
// nil for every message ("*" or empty, or an expression without a tag,
// which PullAPIWrapper does not filter by; the broker refuses one of
// separators alone, as FilterAPI refuses it in the tool).
type tagFilter map[string]bool

func parseTagFilter(expr string) tagFilter {
	tags, all, err := filter.ParseTags(expr)
	if all || err != nil || len(tags) == 0 {
		return nil
	}
	f := tagFilter{}
	for _, t := range tags {
		f[t] = true
	}
	return f
}

// match tells whether a pulled message's tag is one of the expression's:
// the broker filters by the tags' hash codes, and the client drops the
// messages whose tag only collides, as RocketMQ's PullAPIWrapper does.
func (f tagFilter) match(m *commitlog.Message) bool {
	if f == nil {
		return true
	}
	tag, _ := commitlog.LookupProperty(m.Properties, "TAGS")
	return f[tag]
}

// toolQueue is a queue the print commands read: its topic, broker group
// and id, and the address of the broker pulled from.
type toolQueue struct {
	topic, brokerName, addr string
	queueID                 int
}

// String is RocketMQ's MessageQueue.toString.
func (q toolQueue) String() string {
	return fmt.Sprintf("MessageQueue [topic=%s, brokerName=%s, queueId=%d]", q.topic, q.brokerName, q.queueID)
}

// queueBounds returns the offsets printMsg reads a queue between: its
// minimum and maximum, or the offsets of the first messages stored at or
// after -b and -e when given.
func (g *globals) queueBounds(ctx context.Context, q toolQueue, begin, end *int64) (lo, hi int64, err error) {
	// Searching from -1 finds the minimum, from MaxInt64 the maximum.
	from, to := int64(-1), int64(math.MaxInt64)
	if begin != nil {
		from = max(*begin, 0)
	}
	if end != nil {
		to = max(*end, 0)
	}
	if lo, err = g.queueOffsetAt(ctx, q.addr, q.topic, q.queueID, from); err != nil {
		return 0, 0, err
	}
	if hi, err = g.queueOffsetAt(ctx, q.addr, q.topic, q.queueID, to); err != nil {
		return 0, 0, err
	}
	return lo, hi, nil
}

// javaBytes is Java's Arrays.toString of a byte array: signed values.
func javaBytes(b []byte) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i, c := range b {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Itoa(int(int8(c))))
	}
	sb.WriteByte(']')
	return sb.String()
}

// printToolMessage prints a pulled message as mqadmin's printMsg and
// printMsgByQueue do: "MSGID: <id the client shows> <MessageExt's
// toString> BODY: <body in the charset | NOT PRINT BODY>". The properties
// are those the client holds, with the MIN_OFFSET and MAX_OFFSET its pull
// adds, sorted by key.
func printToolMessage(w io.Writer, m *commitlog.Message, brokerName string, p pulled, dec *encoding.Decoder, showBody bool) {
	props := commitlog.ParseProperties(m.Properties)
	props["MIN_OFFSET"] = strconv.FormatInt(p.minOff, 10)
	props["MAX_OFFSET"] = strconv.FormatInt(p.maxOff, 10)
	txID := "null"
	if strings.EqualFold(props["TRAN_MSG"], "true") {
		txID = props["UNIQ_KEY"]
	}
	pairs := make([]string, 0, len(props))
	for _, k := range sortedKeys(props) {
		pairs = append(pairs, k+"="+props[k])
	}
	body, err := inflateBody(m)
	if err != nil {
		body = m.Body
	}
	text := "NOT PRINT BODY"
	if showBody {
		if s, derr := dec.Bytes(body); derr == nil {
			text = string(s)
		} else {
			text = strings.ToValidUTF8(string(body), "\uFFFD")
		}
	}
	fmt.Fprintf(w, "MSGID: %s MessageExt [brokerName=%s, queueId=%d, storeSize=%d, queueOffset=%d, sysFlag=%d, bornTimestamp=%d, bornHost=/%s, "+
		"storeTimestamp=%d, storeHost=/%s, msgId=%s, commitLogOffset=%d, bodyCRC=%d, reconsumeTimes=%d, preparedTransactionOffset=%d, "+
		"toString()=Message{topic='%s', flag=%d, properties={%s}, body=%s, transactionId='%s'}] BODY: %s\n",
		clientMsgID(m), brokerName, m.QueueID, m.StoreSize, m.QueueOffset, m.SysFlag, m.BornTimestamp, m.BornHost,
		m.StoreTimestamp, m.StoreHost, commitlog.MessageID(m.StoreHost, m.PhyOffset), m.PhyOffset, m.BodyCRC, m.ReconsumeTimes,
		m.PreparedTransactionOffset, m.Topic, m.Flag, strings.Join(pairs, ", "), javaBytes(body), txID, text)
}

// printOptions are the options printMsg and printMsgByQueue share.
type printOptions struct {
	topic, charset, sub, begin, end string
	beginMs, endMs                  *int64
	dec                             *encoding.Decoder
	filter                          tagFilter
}

func (o *printOptions) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&o.topic, "topic", "t", "", "topic name")
	f.StringVarP(&o.charset, "charsetName", "c", "UTF-8", "charset of the bodies (UTF-8, GBK, ISO-8859-1, ...)")
	f.StringVarP(&o.sub, "subExpression", "s", "*", "tag expression (TagA || TagB)")
	f.StringVarP(&o.begin, "beginTimestamp", "b", "", "from the first message stored at this time (ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS)")
	f.StringVarP(&o.end, "endTimestamp", "e", "", "up to the first message stored at this time (ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS)")
	_ = cmd.MarkFlagRequired("topic")
}

// parse reads the options' values.
func (o *printOptions) parse(cmd *cobra.Command) error {
	o.topic = strings.TrimSpace(o.topic)
	var err error
	if o.dec, err = charsetDecoder(o.charset); err != nil {
		return err
	}
	// mqadmin trims the option with Java's String.trim, which leaves
	// Unicode spaces (U+00A0, U+3000) in a tag.
	o.sub = filter.JavaTrim(o.sub)
	o.filter = parseTagFilter(o.sub)
	if o.sub == "" {
		o.sub = "*"
	}
	for _, t := range []struct {
		flag, name, v string
		dst           **int64
	}{{"b", "beginTimestamp", o.begin, &o.beginMs}, {"e", "endTimestamp", o.end, &o.endMs}} {
		if !cmd.Flags().Changed(t.name) {
			continue
		}
		ms, err := parseToolTimestamp(t.flag, t.v)
		if err != nil {
			return err
		}
		*t.dst = &ms
	}
	return nil
}

// printMsgCmd is mqadmin printMsg: every message of every queue of a
// topic (between -b and -e), pulled as group TOOLS_CONSUMER, committing
// nothing.
func printMsgCmd(g *globals) *cobra.Command {
	var o printOptions
	printBody := true
	var lmqParent string
	cmd := &cobra.Command{
		Use:   "printMsg",
		Short: "print every message of a topic's queues, as mqadmin printMsg (PULL_MESSAGE, nothing committed)",
		Long: `printMsg prints the messages of every queue of the topic's route, each
queue from its minimum offset (or the first message stored at -b) up to its
maximum (or the first message stored at -e), matching the tag expression -s,
as mqadmin printMsg: a "minOffset=..., maxOffset=..., MessageQueue [...]"
line per queue, a "MSGID: ..." line per message with its body decoded in
charset -c (-d false leaves the bodies out), and a line of dashes. It pulls
as group TOOLS_CONSUMER and commits nothing. -l finds the queues of an LMQ
through the route of its parent topic.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.parse(cmd); err != nil {
				return err
			}
			ctx := cmd.Context()
			routeTopic := o.topic
			if lmqParent = strings.TrimSpace(lmqParent); lmqParent != "" {
				routeTopic = lmqParent
			}
			route, err := g.route(ctx, routeTopic)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, mq := range subscribeQueues(route, o.topic) {
				addr, ok := brokerAddrOf(route, mq.BrokerName)
				if !ok {
					continue // a broker group without an address
				}
				q := toolQueue{topic: o.topic, brokerName: mq.BrokerName, addr: addr, queueID: int(mq.QueueID)}
				lo, hi, err := g.queueBounds(ctx, q, o.beginMs, o.endMs)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "minOffset=%d, maxOffset=%d, %s\n", lo, hi, q)
				for off := lo; off < hi; {
					p, err := g.pullOnce(ctx, toolsConsumerGroup, q.addr, q.brokerName, q.topic, o.sub, q.queueID, off, 32)
					if err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "printMsg: %s: %v\n", q, err)
						break
					}
					next := off
					if p.nextOK {
						next = p.next
					}
					prev := off
					off = next
					status := p.pullStatus()
					if status == "FOUND" {
						for i := range p.msgs {
							if p.msgs[i].QueueOffset < hi && o.filter.match(&p.msgs[i]) {
								printToolMessage(w, &p.msgs[i], q.brokerName, p, o.dec, printBody)
							}
						}
					} else if status == "NO_MATCHED_MSG" {
						fmt.Fprintf(w, "%s no matched msg. status=%s, offset=%d\n", q, status, off)
					} else {
						fmt.Fprintf(w, "%s print msg finished. status=%s, offset=%d\n", q, status, off)
						break
					}
					if off <= prev {
						break // the broker names no further offset
					}
				}
				fmt.Fprintln(w, "--------------------------------------------------------")
			}
			return nil
		},
	}
	o.flags(cmd)
	f := cmd.Flags()
	f.VarP(javaBool{&printBody}, "printBody", "d", "print the bodies (true|false)")
	f.StringVarP(&lmqParent, "lmqParentTopic", "l", "", "an LMQ's parent topic, whose route finds its queues")
	return cmd
}

// printMsgByQueueCmd is mqadmin printMsgByQueue: the messages of one
// queue, printed (-p), counted by tag (-f), or both.
func printMsgByQueueCmd(g *globals) *cobra.Command {
	var o printOptions
	var brokerName string
	var qid int
	var printMsg, printBody, calByTag bool
	cmd := &cobra.Command{
		Use:   "printMsgByQueue",
		Short: "print or count by tag the messages of one queue, as mqadmin printMsgByQueue (PULL_MESSAGE, nothing committed)",
		Long: `printMsgByQueue reads queue -i of broker group -a of topic -t from its minimum
offset (or the first message stored at -b) up to its maximum (or the first
message stored at -e), matching the tag expression -s, as mqadmin
printMsgByQueue: -p true prints each message ("MSGID: ..."; -d true with its
body in charset -c), -f true then prints how many messages carry each tag,
most first. It stops at the first pull that matches nothing, pulls as group
TOOLS_CONSUMER and commits nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.parse(cmd); err != nil {
				return err
			}
			if qid < 0 {
				return fmt.Errorf("-i %d: a queue id is not negative", qid)
			}
			ctx := cmd.Context()
			brokerName = strings.TrimSpace(brokerName)
			route, err := g.route(ctx, o.topic)
			if err != nil {
				return err
			}
			addr, ok := brokerAddrOf(route, brokerName)
			if !ok {
				return fmt.Errorf("-a %s: the route of %s has no broker group of that name", brokerName, o.topic)
			}
			q := toolQueue{topic: o.topic, brokerName: brokerName, addr: addr, queueID: qid}
			lo, hi, err := g.queueBounds(ctx, q, o.beginMs, o.endMs)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			tags := map[string]int64{}
			for off := lo; off < hi; {
				p, err := g.pullOnce(ctx, toolsConsumerGroup, q.addr, q.brokerName, q.topic, o.sub, q.queueID, off, 32)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "printMsgByQueue: %s: %v\n", q, err)
					break
				}
				if p.code != remoting.Success || !p.nextOK || p.next <= off {
					break
				}
				off = p.next
				for i := range p.msgs {
					m := &p.msgs[i]
					if m.QueueOffset >= hi || !o.filter.match(m) {
						continue
					}
					if tag, _ := commitlog.LookupProperty(m.Properties, "TAGS"); calByTag && strings.TrimSpace(tag) != "" {
						tags[tag]++
					}
					if printMsg {
						printToolMessage(w, m, q.brokerName, p, o.dec, printBody)
					}
				}
			}
			if calByTag {
				names := sortedKeys(tags)
				sort.SliceStable(names, func(i, j int) bool { return tags[names[i]] > tags[names[j]] })
				for _, t := range names {
					fmt.Fprintf(w, "Tag: %-30s Count: %d\n", t, tags[t])
				}
			}
			return nil
		},
	}
	o.flags(cmd)
	f := cmd.Flags()
	f.StringVarP(&brokerName, "brokerName", "a", "", "broker name (the broker group)")
	f.IntVarP(&qid, "queueId", "i", 0, "queue id")
	f.VarP(javaBool{&printMsg}, "printMsg", "p", "print the messages (true|false)")
	f.VarP(javaBool{&printBody}, "printBody", "d", "print the bodies too (true|false)")
	f.VarP(javaBool{&calByTag}, "calculate", "f", "count the messages by tag (true|false)")
	_ = cmd.MarkFlagRequired("brokerName")
	_ = cmd.MarkFlagRequired("queueId")
	return cmd
}

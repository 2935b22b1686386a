package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/uniqid"
	"github.com/rocketkv/rocketkv/remoting"
)

// toolProducer sends messages as the tools' producers do: as one
// producer group, each message with a fresh client message id
// (UNIQ_KEY), over one connection per broker kept for the command's run,
// so that a send's time is the request's alone. The connections are a
// pool's, as RocketMQ's client keeps one channel per address: a broker
// that answers GO_AWAY (stopping with enableShutdownGracefully) gets the
// send once more on a new connection (enableReconnectForGoAway).
type toolProducer struct {
	g     *globals
	group string
	ids   *uniqid.Gen
	pool  *remoting.ClientPool
}

// newToolProducer returns a producer of group; Close closes its
// connections.
func (g *globals) newToolProducer(group string) *toolProducer {
	return &toolProducer{g: g, group: group, ids: uniqid.New([4]byte{127, 0, 0, 1}), pool: remoting.NewClientPool(g.clientOptions())}
}

// Close closes the producer's connections.
func (p *toolProducer) Close() { _ = p.pool.Close() }

// sendResult is a send's outcome, as RocketMQ's SendResult holds it.
type sendResult struct {
	status, msgID, offsetMsgID, recallHandle string
	// regionID and traceOn are the broker's MSG_REGION (DefaultRegion
	// when it gives none) and TRACE_ON (false only when it says so), as
	// RocketMQ's client reads them into the SendResult.
	regionID    string
	traceOn     bool
	target      sendTarget
	topic       string
	queueOffset int64
}

// String is RocketMQ's SendResult.toString.
func (r sendResult) String() string {
	recall := r.recallHandle
	if recall == "" {
		recall = "null"
	}
	return fmt.Sprintf("SendResult [sendStatus=%s, msgId=%s, offsetMsgId=%s, messageQueue=%s, queueOffset=%d, recallHandle=%s]",
		r.status, r.msgID, r.offsetMsgID, toolQueue{topic: r.topic, brokerName: r.target.brokerName, queueID: r.target.queueID}, r.queueOffset, recall)
}

// defaultRegionID is the region a send's result names when the broker
// gives none (MixAll.DEFAULT_TRACE_REGION_ID).
const defaultRegionID = "DefaultRegion"

// sendStatuses are the send statuses of the answers that stored the
// message (RocketMQ's SendStatus).
var sendStatuses = map[int32]string{
	remoting.Success:           "SEND_OK",
	remoting.FlushDiskTimeout:  "FLUSH_DISK_TIMEOUT",
	remoting.FlushSlaveTimeout: "FLUSH_SLAVE_TIMEOUT",
	remoting.SlaveNotAvailable: "SLAVE_NOT_AVAILABLE",
}

// send sends one message of topic to target (SEND_MESSAGE_V2), with the
// properties props (a UNIQ_KEY and WAIT=true added).
func (p *toolProducer) send(ctx context.Context, target sendTarget, topic string, props map[string]string, body []byte) (sendResult, error) {
	res := sendResult{target: target, topic: topic, msgID: p.ids.Next()}
	all := map[string]string{"UNIQ_KEY": res.msgID, "WAIT": "true"}
	for k, v := range props {
		all[k] = v
	}
	// A message sent again keeps its id, as a RocketMQ producer keeps
	// the UNIQ_KEY a message already has.
	res.msgID = all["UNIQ_KEY"]
	h := remoting.Header{"a": p.group, "b": topic, "c": autoCreateTemplate, "d": strconv.Itoa(defaultTopicQueueNums), "f": "0", "h": "0",
		"i": commitlog.FormatProperties(all), "j": "0", "m": "false"}
	h.SetInt32("e", int32(target.queueID))
	h.SetInt64("g", time.Now().UnixMilli())
	ctx, cancel := context.WithTimeout(ctx, p.g.timeout)
	defer cancel()
	resp, err := p.pool.Invoke(ctx, target.addr, remoting.NewRequest(remoting.SendMessageV2, h, body))
	if err != nil {
		// The connection may be broken: the next send dials again, as
		// RocketMQ's invokeSync closes the channel of a failed call.
		p.pool.CloseAddr(target.addr)
		return res, fmt.Errorf("send to %s: %w", target.addr, err)
	}
	status, ok := sendStatuses[resp.Code]
	if !ok {
		return res, fmt.Errorf("send to %s: code %d: %s", target.addr, resp.Code, resp.Remark)
	}
	rh := remoting.Header(resp.ExtFields)
	res.status, res.offsetMsgID, res.recallHandle = status, rh["msgId"], rh["recallHandle"]
	res.queueOffset, _ = rh.Int64("queueOffset")
	res.regionID, res.traceOn = cmp.Or(rh["MSG_REGION"], defaultRegionID), rh["TRACE_ON"] != "false"
	return res, nil
}

// repeatBody returns a body of size bytes of 'a', as mqadmin's
// checkMsgSendRT and clusterRT send.
func repeatBody(size int64) []byte {
	return []byte(strings.Repeat("a", int(max(size, 0))))
}

// averageRT is mqadmin's average of a run of sends: the time of all but
// the first (which opens the connections), over their number (NaN for a
// run of one, as mqadmin prints it).
func averageRT(elapsedMs int64, amount int64) float64 {
	return float64(elapsedMs) / float64(amount-1)
}

// sendMsgStatusCmd is mqadmin sendMsgStatus: messages to the topic named
// after a broker (which every broker has), each line the send's time and
// result.
func sendMsgStatusCmd(g *globals) *cobra.Command {
	var brokerName string
	var size, count int
	cmd := &cobra.Command{
		Use:   "sendMsgStatus",
		Short: "send messages to the topic named after a broker and print each send's time and result, as mqadmin sendMsgStatus (SEND_MESSAGE_V2)",
		Long: `sendMsgStatus sends -c messages of about -s bytes ("hello jodie" repeated) to
the topic named after the broker -b (a broker name: every broker has the
topic of its name, writable with brokerTopicEnable), after one message of 16
bytes that opens the connection, and prints "rt=<ms>ms, SendResult=[...]"
for each, as mqadmin sendMsgStatus.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			brokerName = strings.TrimSpace(brokerName)
			queues, err := g.publishQueues(ctx, brokerName, "", -1)
			if err != nil {
				return err
			}
			p := g.newToolProducer("PID_SMSC")
			defer p.Close()
			body := func(n int) []byte { return []byte(strings.Repeat("hello jodie", (max(n, 0)+10)/11)) }
			next := int(time.Now().UnixNano() >> 10)
			if _, err := p.send(ctx, queues[next%len(queues)], brokerName, nil, body(16)); err != nil {
				return err
			}
			for range count {
				next++
				began := time.Now()
				res, err := p.send(ctx, queues[next%len(queues)], brokerName, nil, body(size))
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "rt=%dms, SendResult=%s\n", time.Since(began).Milliseconds(), res)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&brokerName, "brokerName", "b", "", "broker name, the topic sent to")
	f.IntVarP(&size, "messageSize", "s", 128, "message size in bytes")
	f.IntVarP(&count, "count", "c", 50, "messages to send")
	_ = cmd.MarkFlagRequired("brokerName")
	return cmd
}

// checkMsgSendRTCmd is mqadmin checkMsgSendRT: -a messages to a topic, the
// i-th to the i-th of its queues (round the list), each line the queue,
// whether the send succeeded and its time, then the average.
func checkMsgSendRTCmd(g *globals) *cobra.Command {
	var topic string
	var amount, size int64
	cmd := &cobra.Command{
		Use:   "checkMsgSendRT",
		Short: "send messages to a topic's queues in turn and print each send's time and the average, as mqadmin checkMsgSendRT (SEND_MESSAGE_V2)",
		Long: `checkMsgSendRT sends -a messages of -s bytes to the topic, the i-th to queue
i modulo the number of its writable queues (by broker name and queue id), and
prints for each the broker name, queue id, whether it was stored and the
time in ms, then "Avg RT" over all but the first send (which opens the
connection), as mqadmin checkMsgSendRT. A failed send is printed as false.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			topic = strings.TrimSpace(topic)
			queues, err := g.publishQueues(ctx, topic, "", -1)
			if err != nil {
				return err
			}
			p := g.newToolProducer(strconv.FormatInt(time.Now().UnixMilli(), 10))
			defer p.Close()
			body := repeatBody(size)
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%-32s  %-4s  %-20s    %s\n", "#Broker Name", "#QID", "#Send Result", "#RT")
			var elapsed int64
			for i := range amount {
				q := queues[i%int64(len(queues))]
				began := time.Now()
				_, err := p.send(ctx, q, topic, nil, body)
				rt := time.Since(began).Milliseconds()
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "checkMsgSendRT: %v\n", err)
				}
				if i != 0 {
					elapsed += rt
				}
				fmt.Fprintf(w, "%-32s  %-4d  %-20t    %d\n", q.brokerName, q.queueID, err == nil, rt)
			}
			fmt.Fprintf(w, "Avg RT: %.2f\n", averageRT(elapsed, amount))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.Int64VarP(&amount, "amount", "a", 100, "messages to send")
	f.Int64VarP(&size, "size", "s", 128, "message size in bytes")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// clusterRTCmd is mqadmin clusterRT: for every broker of every cluster
// (or of -c), -a messages to the topic named after it, then the average
// time and the successes and failures; again every -i seconds.
func clusterRTCmd(g *globals) *cobra.Command {
	var cluster, machineRoom string
	var amount, size, interval int64
	var tlog bool
	var rounds int
	cmd := &cobra.Command{
		Use:   "clusterRT",
		Short: "send messages to every broker of the clusters and print the average send time, as mqadmin clusterRT (SEND_MESSAGE_V2)",
		Long: `clusterRT sends -a messages of -s bytes to the topic named after each broker
of every cluster (or of -c), and prints the cluster, the broker, the average
time of the sends but the first, and how many succeeded and failed, as
mqadmin clusterRT; then again every -i seconds until interrupted (or
--rounds times). -p true prints each as "time|machine room|cluster|broker|rt"
instead, the time in GMT+8 as mqadmin's, the machine room from -m.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if interval < 0 {
				return fmt.Errorf("-i %d: want seconds, not negative", interval)
			}
			info, err := g.clusterInfo(ctx)
			if err != nil {
				return err
			}
			clusters := []string{strings.TrimSpace(cluster)}
			if clusters[0] == "" {
				clusters = sortedKeys(info.ClusterAddrTable)
			}
			for _, c := range clusters {
				if _, ok := info.ClusterAddrTable[c]; !ok {
					return fmt.Errorf("cluster [%s] not exist", c)
				}
			}
			w := cmd.OutOrStdout()
			if !tlog {
				fmt.Fprintf(w, "%-24s  %-24s  %-4s  %-8s  %-8s\n", "#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount")
			}
			p := g.newToolProducer(strconv.FormatInt(time.Now().UnixMilli(), 10))
			defer p.Close()
			body := repeatBody(size)
			for round := 1; ; round++ {
				for _, c := range clusters {
					names := append([]string(nil), info.ClusterAddrTable[c]...)
					sort.Strings(names)
					for _, name := range names {
						g.clusterRTLine(ctx, cmd.ErrOrStderr(), w, p, c, name, body, amount, tlog, machineRoom)
					}
				}
				if rounds > 0 && round >= rounds {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Duration(interval) * time.Second):
				}
			}
		},
	}
	f := cmd.Flags()
	f.Int64VarP(&amount, "amount", "a", 100, "messages to send to each broker")
	f.Int64VarP(&size, "size", "s", 128, "message size in bytes")
	f.StringVarP(&cluster, "cluster", "c", "", "only this cluster")
	f.VarP(javaBool{&tlog}, "printLog", "p", "print as time|machine room|cluster|broker|rt lines (true|false)")
	f.StringVarP(&machineRoom, "machineRoom", "m", "noname", "machine room name for -p")
	f.Int64VarP(&interval, "interval", "i", 10, "seconds between rounds")
	f.IntVar(&rounds, "rounds", 0, "stop after this many rounds (0: go on until interrupted, as mqadmin)")
	return cmd
}

// clusterRTLine sends amount messages to the topic of broker name and
// prints clusterRT's line for it.
func (g *globals) clusterRTLine(ctx context.Context, errw, w io.Writer, p *toolProducer, cluster, name string, body []byte, amount int64, tlog bool, room string) {
	var elapsed int64
	success, fail := 0, 0
	queues, qerr := g.publishQueues(ctx, name, "", -1)
	if qerr != nil {
		fmt.Fprintf(errw, "clusterRT: %v\n", qerr)
	}
	for i := range amount {
		began := time.Now()
		err := qerr
		if err == nil {
			_, err = p.send(ctx, queues[int(i)%len(queues)], name, nil, body)
		}
		if err == nil {
			success++
		} else {
			fail++
		}
		if i != 0 {
			elapsed += time.Since(began).Milliseconds()
		}
	}
	rt := averageRT(elapsed, amount)
	if tlog {
		now := time.Now().In(time.FixedZone("GMT+8", 8*3600)).Format("2006-01-02 15:04:05")
		fmt.Fprintf(w, "%s|%s|%s|%s|%s\n", now, room, cluster, name, strconv.FormatFloat(math.Round(rt), 'f', 0, 64))
		return
	}
	fmt.Fprintf(w, "%-24s  %-24s  %-8s  %-16d  %-16d\n", cluster, name, fmt.Sprintf("%.2f", rt), success, fail)
}

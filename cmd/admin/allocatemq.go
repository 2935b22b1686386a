package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
)

// subscribeQueues returns the queues a consumer of topic reads by its
// route (RocketMQ's topicRouteData2TopicSubscribeInfo): the read queues of
// every broker group whose queues are readable, sorted by broker name and
// queue id, as a client's rebalance sorts them.
func subscribeQueues(route namesrv.TopicRouteData, topic string) []adminbody.MessageQueue {
	var mqs []adminbody.MessageQueue
	for _, qd := range route.QueueDatas {
		if !meta.Readable(int(qd.Perm)) {
			continue
		}
		for q := range qd.ReadQueueNums {
			mqs = append(mqs, adminbody.MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: q})
		}
	}
	sort.Slice(mqs, func(i, j int) bool { return mqs[i].Less(mqs[j]) })
	return mqs
}

// allocateAveragely is RocketMQ's AllocateMessageQueueAveragely: the
// queues of consumer index out of consumers (meta.AverageShare), never
// nil (mqadmin prints an empty list).
func allocateAveragely(mqs []adminbody.MessageQueue, index, consumers int) []adminbody.MessageQueue {
	from, to := meta.AverageShare(len(mqs), consumers, index)
	return append([]adminbody.MessageQueue{}, mqs[from:to]...)
}

// allocateMQCmd is mqadmin allocateMQ: how the average allocation
// strategy shares a topic's queues among the clients of -i.
func allocateMQCmd(g *globals) *cobra.Command {
	var topic, ipList string
	cmd := &cobra.Command{
		Use:   "allocateMQ",
		Short: "print how the average allocation strategy shares a topic's queues among clients, as mqadmin allocateMQ",
		Long: `allocateMQ prints, as mqadmin allocateMQ, the queues each client of -i (ids or
IPs separated by ',', in the order the consumers would be sorted) gets from
the average allocation strategy (AllocateMessageQueueAveragely) over the read
queues of the topic's route: {"result":{"<client>":[{"brokerName":...,
"queueId":...,"topic":...}]}}. The queues are shared in the order a
consumer's rebalance sorts them (broker name, queue id), which is what the
consumers get; mqadmin's allocateMQ takes them in a Java hash set's order,
and may print other runs of queues.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			topic = strings.TrimSpace(topic)
			var clients []string
			for _, c := range strings.Split(ipList, ",") {
				if c = strings.TrimSpace(c); c != "" {
					clients = append(clients, c)
				}
			}
			if len(clients) == 0 {
				return fmt.Errorf("-i %q names no client", ipList)
			}
			route, err := g.route(cmd.Context(), topic)
			if err != nil {
				return err
			}
			mqs := subscribeQueues(route, topic)
			result := map[string][]adminbody.MessageQueue{}
			for i, c := range clients {
				if _, dup := result[c]; !dup {
					result[c] = allocateAveragely(mqs, i, len(clients))
				}
			}
			out, err := json.Marshal(struct {
				Result map[string][]adminbody.MessageQueue `json:"result"`
			}{result})
			if err != nil {
				return fmt.Errorf("encode the allocation: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.StringVarP(&ipList, "ipList", "i", "", "the clients, separated by ','")
	_ = cmd.MarkFlagRequired("topic")
	_ = cmd.MarkFlagRequired("ipList")
	return cmd
}

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// updateTopicPermCmd is mqadmin updateTopicPerm: the topic's queue counts
// and system flag are read from its route (its first queue data, as
// mqadmin reads them) and sent back with the new permission in an
// UPDATE_AND_CREATE_TOPIC to the -b master or every master of the -c
// cluster. As mqadmin's, the request carries order false and no
// attribute modifications.
func updateTopicPermCmd(g *globals) *cobra.Command {
	var topic, cluster string
	var perm int
	cmd := &cobra.Command{
		Use:   "updateTopicPerm",
		Short: "change a topic's permission on a master broker or every master of a cluster (UPDATE_AND_CREATE_TOPIC)",
		Long: `updateTopicPerm sets the permission of a topic (-p 2 write, 4 read, 6 both)
on the master broker -b names (an address, which must be a master in the
topic's route) or on every master of the cluster -c names, as mqadmin
updateTopicPerm: the queue counts and system flag are the route's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			topic, cluster = strings.TrimSpace(topic), strings.TrimSpace(cluster)
			byBroker := cmd.Flags().Changed("broker")
			if !byBroker && cluster == "" {
				return fmt.Errorf("give the master broker with -b or the cluster with -c")
			}
			if perm < 0 || perm > 7 {
				return fmt.Errorf("-p %d: topicPermission value is invalid (2 write, 4 read, 6 both)", perm)
			}
			route, err := g.route(cmd.Context(), topic)
			if err != nil {
				return err
			}
			if len(route.QueueDatas) == 0 {
				return fmt.Errorf("route of %s has no queue data", topic)
			}
			first := route.QueueDatas[0]
			h := remoting.Header{"topic": topic, "defaultTopic": autoCreateTemplate, "topicFilterType": meta.SingleTag, "attributes": ""}
			h.SetInt32("readQueueNums", first.ReadQueueNums)
			h.SetInt32("writeQueueNums", first.WriteQueueNums)
			h.SetInt32("perm", int32(perm))
			h.SetInt32("topicSysFlag", first.TopicSysFlag)
			h.SetBool("order", false)
			w := cmd.OutOrStdout()
			if byBroker {
				addr := strings.TrimSpace(g.broker)
				name, ok := masterName(route, addr)
				if !ok {
					return fmt.Errorf("-b %s is not a master broker of the route of %s", addr, topic)
				}
				oldPerm := int32(0)
				for _, qd := range route.QueueDatas {
					if qd.BrokerName == name {
						oldPerm = qd.Perm
						break
					}
				}
				if oldPerm == int32(perm) {
					fmt.Fprintln(w, "new perm equals to the old one!")
					return nil
				}
				if _, err := g.invoke(cmd.Context(), addr, remoting.UpdateAndCreateTopic, h, nil); err != nil {
					return fmt.Errorf("update the perm of %s on %s: %w", topic, addr, err)
				}
				fmt.Fprintf(w, "update topic perm from %d to %d in %s success.\n", oldPerm, perm, addr)
				fmt.Fprintf(w, "TopicConfig [topicName=%s, readQueueNums=%d, writeQueueNums=%d, perm=%s, topicFilterType=%s, topicSysFlag=%d, order=false, attributes={}].\n",
					topic, first.ReadQueueNums, first.WriteQueueNums, permString(perm), meta.SingleTag, first.TopicSysFlag)
				return nil
			}
			masters, err := g.clusterMasters(cmd.Context(), cluster)
			if err != nil {
				return fmt.Errorf("-c %s: %w", cluster, err)
			}
			for _, addr := range masters {
				if _, err := g.invoke(cmd.Context(), addr, remoting.UpdateAndCreateTopic, h, nil); err != nil {
					return fmt.Errorf("update the perm of %s on %s: %w", topic, addr, err)
				}
				fmt.Fprintf(w, "update topic perm from %d to %d in %s success.\n", first.Perm, perm, addr)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster instead of -b")
	f.IntVarP(&perm, "perm", "p", 0, "the topic's permission: 2 write, 4 read, 6 both")
	_ = cmd.MarkFlagRequired("topic")
	_ = cmd.MarkFlagRequired("perm")
	return cmd
}

// masterName returns the name of the broker group whose master (id 0) is
// at addr in route.
func masterName(route namesrv.TopicRouteData, addr string) (string, bool) {
	for _, bd := range route.BrokerDatas {
		if bd.BrokerAddrs[0] == addr && addr != "" {
			return bd.BrokerName, true
		}
	}
	return "", false
}

// permString writes a permission as RocketMQ's PermName.perm2String:
// R, W and X (inherited) in place, '-' where a bit is clear.
func permString(perm int) string {
	b := []byte("---")
	for i, bit := range []int{meta.PermRead, meta.PermWrite, meta.PermInherit} {
		if perm&bit != 0 {
			b[i] = "RWX"[i]
		}
	}
	return string(b)
}

// Command admin is rocketkv's small mqadmin: topic and broker
// administration over the Remoting protocol, including bulk topic creation
// (10,000 topics x 100 queues in one request per chunk), the queue and
// consumer views of mqadmin topicStatus, consumerProgress and
// consumerConnection, and its resetOffsetByTime.
//
//	admin createTopics       -b 127.0.0.1:10911 --prefix Scale --count 10000 --queues 100
//	admin updateTopic        -b 127.0.0.1:10911 -t TopicA -r 8 -w 8
//	admin deleteTopic        -b 127.0.0.1:10911 -t TopicA
//	admin topicList          -n 127.0.0.1:9876
//	admin topicRoute         -n 127.0.0.1:9876 -t TopicA
//	admin clusterList        -n 127.0.0.1:9876
//	admin brokerStatus       -b 127.0.0.1:10911
//	admin topicStatus        -b 127.0.0.1:10911 -t TopicA
//	admin consumerProgress   -b 127.0.0.1:10911 -g GroupA [-t TopicA]
//	admin brokerConsumeStats -b 127.0.0.1:10911 [-l 100] [-o]
//	admin consumerConnection -b 127.0.0.1:10911 -g GroupA
//	admin producer           -b 127.0.0.1:10911
//	admin resetOffsetByTime  -n 127.0.0.1:9876 -g GroupA -t TopicA -s 2026-11-30#12:00:00:000
//	admin updateSubGroup     -b 127.0.0.1:10911 -g GroupA -r 3 -s true (or -c DefaultCluster)
//	admin deleteSubGroup     -c DefaultCluster -g GroupA -r true
//	admin groupForbidden     -b 127.0.0.1:10911 -g GroupA -t TopicA [-r false|true]
//	admin cloneGroupOffset   -n 127.0.0.1:9876 -s GroupA -d GroupB -t TopicA [-o]
//	admin queryMsgByKey      -n 127.0.0.1:9876 -t TopicA -k order-42
//	admin queryMsgById       -i 7F00000100002A9F0000000000000400 [--body]
//	admin sendMessage        -n 127.0.0.1:9876 -t TopicA -p "hello" [-k order-42] [-c TagA]
//	admin consumeMessage     -n 127.0.0.1:9876 -t TopicA [-o 100] [-c 10] [--body]
//
// and mqadmin's ACL 2.0 commands (createUser, updateUser, deleteUser,
// getUser, listUser, createAcl, updateAcl, deleteAcl, getAcl, listAcl):
//
//	admin createUser -b 127.0.0.1:10911 -u alice -p alice-secret [-t Normal]
//	admin createAcl  -c DefaultCluster -s User:alice -r Topic:orders,Group:billing -a Pub,Sub -d Allow [-i 10.0.0.0/8]
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

func main() {
	if err := newRoot(os.Stdout).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "admin:", err)
		os.Exit(1)
	}
}

// globals are the flags every command shares.
type globals struct {
	broker  string
	namesrv string
	timeout time.Duration
	// accessKey and secretKey sign every request for a broker with the
	// ACL on (mqadmin takes them from conf/tools.yml).
	accessKey, secretKey string
	// tls dials TLS, without verifying the server's certificate, as
	// RocketMQ's clients do (tls.enable).
	tls bool
}

// clientOptions are the options of every connection the tool opens.
func (g *globals) clientOptions() remoting.ClientOptions {
	o := remoting.ClientOptions{BeforeRequest: acl.RequestSigner(
		cmp.Or(g.accessKey, os.Getenv(acl.EnvAccessKey)), cmp.Or(g.secretKey, os.Getenv(acl.EnvSecretKey)))}
	if g.tls {
		o.TLS = &tls.Config{InsecureSkipVerify: true} // #nosec G402 -- RocketMQ's clients do not verify either
	}
	return o
}

func newRoot(out io.Writer) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "admin",
		Short:         "administer rocketkv brokers and name servers",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	pf := root.PersistentFlags()
	pf.StringVarP(&g.broker, "broker", "b", "127.0.0.1:10911", "broker address")
	pf.StringVarP(&g.namesrv, "namesrv", "n", "127.0.0.1:9876", "name server address")
	pf.DurationVar(&g.timeout, "timeout", 60*time.Second, "timeout of one request")
	pf.BoolVar(&g.tls, "tls", false, "connect with TLS (certificates not verified, as RocketMQ's clients), for servers with tls.server.mode=enforcing")
	pf.StringVar(&g.accessKey, "access-key", "", "ACL account to sign requests as (default $ROCKETKV_ACCESS_KEY)")
	pf.StringVar(&g.secretKey, "secret-key", "", "the account's secret key (default $ROCKETKV_SECRET_KEY, which keeps it off the command line)")
	root.AddCommand(cloneGroupOffsetCmd(g), createTopicsCmd(g), updateTopicCmd(g), deleteTopicCmd(g), topicListCmd(g),
		topicRouteCmd(g), clusterListCmd(g), brokerStatusCmd(g), topicStatusCmd(g), consumerProgressCmd(g), brokerConsumeStatsCmd(g),
		consumerConnectionCmd(g), resetOffsetCmd(g), updateBrokerConfigCmd(g), getBrokerConfigCmd(g), updateNamesrvConfigCmd(g), getNamesrvConfigCmd(g), deleteExpiredCommitLogCmd(g), setCommitLogReadAheadModeCmd(g), cleanUnusedTopicCmd(g), cleanExpiredCQCmd(g), exportPopRecordCmd(g), rocksDBConfigToJSONCmd(g), queryCQCmd(g),
		checkCQWriteProgressCmd(g), statsAllCmd(g), haStatusCmd(g), updateSubGroupCmd(g), deleteSubGroupCmd(g), groupForbiddenCmd(g),
		queryMsgByKeyCmd(g), queryMsgByIDCmd(g), queryMsgByUniqueKeyCmd(g), sendMessageCmd(g), consumeMessageCmd(g),
		writePermCmd(g, "wipeWritePerm", remoting.WipeWritePermOfBroker, "wipeTopicCount", "wipe"),
		writePermCmd(g, "addWritePerm", remoting.AddWritePermOfBroker, "addTopicCount", "add"), producerInfoCmd(g))
	root.AddCommand(authCmds(g)...)
	return root
}

// invoke sends one request and returns the response, failing on anything
// but SUCCESS.
func (g *globals) invoke(ctx context.Context, addr string, code int32, ext map[string]string, body []byte) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	c, err := remoting.Dial(ctx, addr, g.clientOptions())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	resp, err := c.Invoke(ctx, remoting.NewRequest(code, ext, body))
	if err != nil {
		return nil, fmt.Errorf("request %d to %s: %w", code, addr, err)
	}
	if resp.Code != remoting.Success {
		return resp, fmt.Errorf("request %d to %s: code %d: %s", code, addr, resp.Code, resp.Remark)
	}
	return resp, nil
}

func createTopicsCmd(g *globals) *cobra.Command {
	var prefix string
	var count, queues, batch, start int
	cmd := &cobra.Command{
		Use:   "createTopics",
		Short: "create many topics named <prefix><n> in bulk (UPDATE_AND_CREATE_TOPIC_LIST)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if count <= 0 || queues <= 0 || batch <= 0 {
				return fmt.Errorf("--count, --queues and --batch must be positive")
			}
			began := time.Now()
			for i := 0; i < count; i += batch {
				var body struct {
					TopicConfigList []meta.TopicConfig `json:"topicConfigList"`
				}
				for j := i; j < min(i+batch, count); j++ {
					body.TopicConfigList = append(body.TopicConfigList, meta.NewTopicConfig(prefix+strconv.Itoa(start+j), queues))
				}
				raw, err := json.Marshal(body)
				if err != nil {
					return err
				}
				if _, err := g.invoke(cmd.Context(), g.broker, remoting.UpdateAndCreateTopicList, nil, raw); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %d topics x %d queues (%d queues) in %v\n",
				count, queues, count*queues, time.Since(began).Round(time.Millisecond))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&prefix, "prefix", "Topic", "topic name prefix")
	f.IntVar(&count, "count", 1, "number of topics")
	f.IntVar(&start, "start", 0, "first topic number")
	f.IntVar(&queues, "queues", 8, "read and write queues of each topic")
	f.IntVar(&batch, "batch", 2000, "topics per request")
	return cmd
}

func updateTopicCmd(g *globals) *cobra.Command {
	var topic, attributes string
	var read, write, perm int
	var order bool
	cmd := &cobra.Command{
		Use:   "updateTopic",
		Short: "create or update one topic (UPDATE_AND_CREATE_TOPIC)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h := remoting.Header{"topic": topic, "defaultTopic": "TBW102", "topicFilterType": meta.SingleTag}
			h.SetInt32("readQueueNums", int32(read))
			h.SetInt32("writeQueueNums", int32(write))
			h.SetInt32("perm", int32(perm))
			h.SetBool("order", order)
			if attributes != "" {
				h["attributes"] = attributes
			}
			if _, err := g.invoke(cmd.Context(), g.broker, remoting.UpdateAndCreateTopic, h, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "topic %s: %d read, %d write queues, perm %d\n", topic, read, write, perm)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.IntVarP(&read, "read", "r", 8, "read queues")
	f.IntVarP(&write, "write", "w", 8, "write queues")
	f.IntVarP(&perm, "perm", "p", 6, "permission (4 read, 2 write)")
	f.BoolVarP(&order, "order", "o", false, "ordered topic")
	f.StringVarP(&attributes, "attributes", "a", "", "attribute modifications, as mqadmin's: +message.type=FIFO adds or changes, -reserve.time removes (comma-separated)")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

func deleteTopicCmd(g *globals) *cobra.Command {
	var topic string
	cmd := &cobra.Command{
		Use:   "deleteTopic",
		Short: "delete a topic from a broker (DELETE_TOPIC_IN_BROKER) and the name server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := g.invoke(cmd.Context(), g.broker, remoting.DeleteTopicInBroker, remoting.Header{"topic": topic}, nil); err != nil {
				return err
			}
			if _, err := g.invoke(cmd.Context(), g.namesrv, remoting.DeleteTopicInNamesrv, remoting.Header{"topic": topic}, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "topic %s deleted\n", topic)
			return nil
		},
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

func topicListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "topicList",
		Short: "list every topic the name server knows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			topics, err := g.allTopics(cmd.Context())
			if err != nil {
				return err
			}
			for _, t := range topics {
				fmt.Fprintln(cmd.OutOrStdout(), t)
			}
			return nil
		},
	}
}

// allTopics lists every topic the name server knows, sorted.
func (g *globals) allTopics(ctx context.Context) ([]string, error) {
	resp, err := g.invoke(ctx, g.namesrv, remoting.GetAllTopicListFromNameServer, nil, nil)
	if err != nil {
		return nil, err
	}
	var body struct {
		TopicList []string `json:"topicList"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("decode topic list: %w", err)
	}
	sort.Strings(body.TopicList)
	return body.TopicList, nil
}

func topicRouteCmd(g *globals) *cobra.Command {
	var topic string
	cmd := &cobra.Command{
		Use:   "topicRoute",
		Short: "print a topic's route as the name server answers it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := g.invoke(cmd.Context(), g.namesrv, remoting.GetRouteInfoByTopic, remoting.Header{"topic": topic}, nil)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(resp.Body))
			return nil
		},
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

func clusterListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "clusterList",
		Short: "print the clusters and brokers the name server knows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := g.invoke(cmd.Context(), g.namesrv, remoting.GetBrokerClusterInfo, nil, nil)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(resp.Body))
			return nil
		},
	}
}

func brokerStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "brokerStatus",
		Short: "print a broker's runtime info",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := g.invoke(cmd.Context(), g.broker, remoting.GetBrokerRuntimeInfo, nil, nil)
			if err != nil {
				return err
			}
			var body struct {
				Table map[string]string `json:"table"`
			}
			if err := json.Unmarshal(resp.Body, &body); err != nil {
				return fmt.Errorf("decode runtime info: %w", err)
			}
			keys := make([]string, 0, len(body.Table))
			for k := range body.Table {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(cmd.OutOrStdout(), "%-28s %s\n", k, body.Table[k])
			}
			return nil
		},
	}
}

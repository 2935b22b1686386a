// Command admin is rocketkv's small mqadmin: topic and broker
// administration over the Remoting protocol, including bulk topic creation
// (10,000 topics x 100 queues in one request per chunk), the queue and
// consumer views of mqadmin topicStatus, consumerProgress and
// consumerConnection, and its resetOffsetByTime.
//
//	admin createTopics       -b 127.0.0.1:10911 --prefix Scale --count 10000 --queues 100
//	admin updateTopicList    -b 127.0.0.1:10911 -f topics.json (or -c DefaultCluster; a JSON array of TopicConfig)
//	admin updateSubGroupList -b 127.0.0.1:10911 -f groups.json (or -c DefaultCluster; a JSON array of SubscriptionGroupConfig)
//	admin setConsumeMode     -b 127.0.0.1:10911 -t TopicA -g GroupA -m POP [-q 2] (or -c DefaultCluster)
//	admin updateTopic        -b 127.0.0.1:10911 -t TopicA -r 8 -w 8 [-o true] (or -c DefaultCluster)
//	admin deleteTopic        -c DefaultCluster -t TopicA (or -b one broker)
//	admin topicList          -n 127.0.0.1:9876 [-c] (-c: a row per topic and consuming group, with its cluster)
//	admin topicRoute         -n 127.0.0.1:9876 -t TopicA [-l]
//	admin clusterList        -n 127.0.0.1:9876 [-m] [-c DefaultCluster] [--json]
//	admin brokerStatus       -b 127.0.0.1:10911 (or -c DefaultCluster)
//	admin haStatus           -b 127.0.0.1:10911 [-i 3] (or -c DefaultCluster)
//	admin getBrokerEpoch     -b broker-a [-i 3] (or -c DefaultCluster; controller mode)
//	admin resetMasterFlushOffset -b 127.0.0.1:10921 -o 1073741824 (a slave; a master ignores it)
//	admin topicStatus        -n 127.0.0.1:9876 -t TopicA (or -b one broker; -c the cluster or LMQ parent whose route to use)
//	admin consumerProgress   -n 127.0.0.1:9876 -g GroupA [-t TopicA] [-s true] [-c C] (or -b one broker; without -g every group)
//	admin brokerConsumeStats -b 127.0.0.1:10911 [-l 100] [-o true] [-t 50000]
//	admin consumerConnection -b 127.0.0.1:10911 -g GroupA
//	admin producer           -b 127.0.0.1:10911
//	admin resetOffsetByTime  -n 127.0.0.1:9876 -g GroupA -t TopicA -s 2026-11-30#12:00:00:000 [-f false] [-c DefaultCluster]
//	admin updateSubGroup     -b 127.0.0.1:10911 -g GroupA -r 3 -s true (or -c DefaultCluster)
//	admin deleteSubGroup     -c DefaultCluster -g GroupA -r true
//	admin groupForbidden     -b 127.0.0.1:10911 -g GroupA -t TopicA [-r false|true]
//	admin cloneGroupOffset   -n 127.0.0.1:9876 -s GroupA -d GroupB -t TopicA [-o true]
//	admin queryMsgByKey      -n 127.0.0.1:9876 -t TopicA -k order-42 [-b beginMs] [-e endMs] [-m 64]
//	admin queryMsgById       [-t TopicA] -i 7F00000100002A9F0000000000000400 [--body | -f UTF-8] [-g GroupA -d clientId | -s true]
//	admin queryMsgByUniqueKey -t TopicA -i 7F0000010001... [-a] [-c C] [-g GroupA -d clientId]
//	admin sendMessage        -n 127.0.0.1:9876 -t TopicA -p "hello" [-k order-42] [-c TagA] [-b broker-a [-i 1]] [-m true]
//	admin sendMsgStatus      -n 127.0.0.1:9876 -b broker-a [-s 128] [-c 50]
//	admin checkMsgSendRT     -n 127.0.0.1:9876 -t TopicA [-a 100] [-s 128]
//	admin clusterRT          -n 127.0.0.1:9876 [-c DefaultCluster] [-a 100] [-s 128] [-i 10] [--rounds 1]
//	admin consumeMessage     -n 127.0.0.1:9876 -t TopicA [-b broker-a [-i 0]] [-o 100] [-c 10] [-g GroupA] [--body]
//	admin queryMsgByOffset   -n 127.0.0.1:9876 -t TopicA -b broker-a -i 0 -o 100 [-f UTF-8]
//	admin printMsg           -n 127.0.0.1:9876 -t TopicA [-s TagA] [-b 2026-11-30#12:00:00:000] [-e ms] [-c UTF-8] [-d false]
//	admin printMsgByQueue    -n 127.0.0.1:9876 -t TopicA -a broker-a -i 0 [-p true] [-d true] [-f true]
//	admin DecodeMessageId    -i 0A01020300002A9F3B1C000000000001
//	admin dumpCompactionLog  -f store/compaction/compactionLog/TopicA/0/00000000000000000000
//	admin updateTopicPerm    -n 127.0.0.1:9876 -b 127.0.0.1:10911 -t TopicA -p 4 (or -c DefaultCluster)
//	admin updateOrderConf    -n 127.0.0.1:9876 -t TopicA -m get|put|delete [-v "broker-a:8"]
//	admin updateKvConfig     -n 127.0.0.1:9876 -s NAMESPACE -k KEY -v VALUE (deleteKvConfig -s -k)
//	admin skipAccumulatedMessage -n 127.0.0.1:9876 -g GroupA -t TopicA [-f false]
//	admin producerConnection -n 127.0.0.1:9876 -g ProducerGroupA -t TopicA
//	admin consumerStatus     -n 127.0.0.1:9876 -g GroupA [-i clientId] [-s]
//	admin topicClusterList   -n 127.0.0.1:9876 -t TopicA
//	admin getConsumerConfig  -n 127.0.0.1:9876 -g GroupA
//	admin allocateMQ         -n 127.0.0.1:9876 -t TopicA -i 10.0.0.1,10.0.0.2
//	admin updateColdDataFlowCtrGroupConfig -b 127.0.0.1:10911 -g GroupA -v 1048576 (or -c DefaultCluster)
//	admin removeColdDataFlowCtrGroupConfig -b 127.0.0.1:10911 -g GroupA (or -c DefaultCluster)
//	admin getColdDataFlowCtrInfo -b 127.0.0.1:10911 (or -c DefaultCluster)
//	admin queryMsgTraceById -n 127.0.0.1:9876 -i 0A01020300002A9F3B1C000000000001 [-t RMQ_SYS_TRACE_TOPIC] [-b beginMs] [-e endMs] [-c 64]
//	admin exportMetadata     -n 127.0.0.1:9876 -c DefaultCluster [-f /tmp/rocketmq/export] [-t | -g] [-s] (or -b one broker)
//	admin exportMetadataInRocksDB -p /rmq/store/config -t topics [-j true] (a RocketMQ broker's RocksDB config on the local disk)
//	admin rocksDBConfigToJson -p /rmq/store/config -t consumerOffsets [-e out.json | -j false] (or -b / -n -c: the broker writes it)
//	admin exportConfigs      -n 127.0.0.1:9876 -c DefaultCluster [-f /tmp/rocketmq/export]
//	admin exportMetrics      -n 127.0.0.1:9876 -c DefaultCluster [-f /tmp/rocketmq/export]
//	admin startMonitoring    -n 127.0.0.1:9876 [--delay 20s] [--interval 1m] [--rounds 0]
//
// and mqadmin's ACL 2.0 commands (createUser, updateUser, deleteUser,
// getUser, listUser, copyUser, createAcl, updateAcl, deleteAcl, getAcl,
// listAcl, copyAcl):
//
//	admin createUser -b 127.0.0.1:10911 -u alice -p alice-secret [-t Normal]
//	admin createAcl  -c DefaultCluster -s User:alice -r Topic:orders,Group:billing -a Pub,Sub -d Allow [-i 10.0.0.0/8]
//	admin copyUser   -f 127.0.0.1:10911 -t 127.0.0.2:10911 [-u alice,bob] (copyAcl -f -t [-s User:alice])
//
// -n takes several name servers separated by ';', as mqadmin's; without
// it, NAMESRV_ADDR names them, as for mqadmin, else 127.0.0.1:9876. The flags
// are mqadmin's where it has the command: -b is a broker address except
// where mqadmin gives it another meaning (the begin time of queryMsgByKey,
// printMsg, printMsgByQueue and queryMsgTraceById; the broker name of
// wipeWritePerm, getBrokerEpoch, queryMsgByOffset, sendMsgStatus,
// sendMessage and consumeMessage). The clean-ups cleanExpiredCQ, cleanUnusedTopic and
// deleteExpiredCommitLog take -c, and without -b or -c ask every broker
// of every cluster, as mqadmin's. mqadmin's long option names are accepted too where
// bin/admin spells them otherwise, each only on the commands whose mqadmin
// class has it (--brokerAddr for --broker, --namesrvAddr for --namesrv,
// consumerProgress's --groupName and --topicName, ...), and
// checkRocksdbCqWriteProgress's two-letter -cf; --help shows bin/admin's.
// The controller commands (getControllerMetaData, getSyncStateSet,
// electMaster, cleanBrokerMetadata, getControllerConfig,
// updateControllerConfig) take mqadmin's -a, the controllers separated by
// ';', and send what reads or changes the replicated state to the leader
// the controllers name, as mqadmin's; electMaster's and
// cleanBrokerMetadata's -bn works as in mqadmin.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/tlsconf"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

func main() {
	// SIGINT and SIGTERM cancel the command's context: the commands that
	// go on until interrupted (startMonitoring, haStatus -i, clusterRT)
	// end cleanly, the others fail with the request they were waiting on.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := newRoot(os.Stdout)
	root.SetArgs(mqadminArgs(os.Args[1:]))
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
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
	// tls dials TLS (tls.enable), with the tls.client.* keys of
	// tlsConfigFile (tls.config.file) as RocketMQ's tools read them:
	// without them the server's certificate is not verified and none is
	// presented. clientTLS is what they build, before the command runs.
	tls           bool
	tlsConfigFile string
	clientTLS     *tls.Config
}

// clientOptions are the options of every connection the tool opens.
func (g *globals) clientOptions() remoting.ClientOptions {
	o := remoting.ClientOptions{BeforeRequest: acl.RequestSigner(
		cmp.Or(g.accessKey, os.Getenv(acl.EnvAccessKey)), cmp.Or(g.secretKey, os.Getenv(acl.EnvSecretKey)))}
	if g.tls {
		o.TLS = g.clientTLS
	}
	return o
}

// defaultBroker is -b's default, the broker address of most commands.
const defaultBroker = "127.0.0.1:10911"

// namesrvAddrEnv is the environment variable mqadmin takes the name
// servers from when -n is not given (MixAll.NAMESRV_ADDR_ENV), and
// defaultNamesrv -n's default when it is not set either.
const (
	namesrvAddrEnv = "NAMESRV_ADDR"
	defaultNamesrv = "127.0.0.1:9876"
)

func newRoot(out io.Writer) *cobra.Command {
	g := &globals{broker: defaultBroker}
	root := &cobra.Command{
		Use:           "admin",
		Short:         "administer rocketkv brokers and name servers",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) (err error) {
			g.clientTLS, err = tlsconf.Client("admin", g.tls, configs.TLS{ConfigFile: g.tlsConfigFile}, zerolog.Nop())
			return err
		},
	}
	root.SetOut(out)
	pf := root.PersistentFlags()
	pf.StringVarP(&g.namesrv, "namesrv", "n", cmp.Or(os.Getenv(namesrvAddrEnv), defaultNamesrv),
		"name server address; several separated by ';' as mqadmin's (tried in turn); without -n, $"+namesrvAddrEnv+" as mqadmin's, else "+defaultNamesrv)
	pf.DurationVar(&g.timeout, "timeout", 60*time.Second, "timeout of one request")
	pf.BoolVar(&g.tls, "tls", false, "connect with TLS, for servers with tls.server.mode=enforcing (certificates not verified and none presented unless --tls-config-file says otherwise)")
	pf.StringVar(&g.tlsConfigFile, "tls-config-file", configs.DefaultTLSConfigFile,
		"with --tls: a properties file (tls.config.file) whose tls.client.* keys give the certificate to present and tls.client.authServer; skipped when absent")
	pf.StringVar(&g.accessKey, "access-key", "", "ACL account to sign requests as (default $ROCKETKV_ACCESS_KEY)")
	pf.StringVar(&g.secretKey, "secret-key", "", "the account's secret key (default $ROCKETKV_SECRET_KEY, which keeps it off the command line)")
	root.AddCommand(cloneGroupOffsetCmd(g), createTopicsCmd(g), updateTopicCmd(g), updateStaticTopicCmd(g), remappingStaticTopicCmd(g), deleteTopicCmd(g), topicListCmd(g),
		topicRouteCmd(g), clusterListCmd(g), brokerStatusCmd(g), topicStatusCmd(g), consumerProgressCmd(g), brokerConsumeStatsCmd(g),
		consumerConnectionCmd(g), resetOffsetCmd(g), updateBrokerConfigCmd(g), getBrokerConfigCmd(g), updateNamesrvConfigCmd(g), getNamesrvConfigCmd(g), deleteExpiredCommitLogCmd(g), setCommitLogReadAheadModeCmd(g), cleanUnusedTopicCmd(g), cleanExpiredCQCmd(g), exportPopRecordCmd(g), rocksDBConfigToJSONCmd(g), queryCQCmd(g),
		checkCQWriteProgressCmd(g), statsAllCmd(g), haStatusCmd(g), getBrokerEpochCmd(g), updateSubGroupCmd(g), deleteSubGroupCmd(g), groupForbiddenCmd(g),
		queryMsgByKeyCmd(g), queryMsgByIDCmd(g), queryMsgByUniqueKeyCmd(g), sendMessageCmd(g), consumeMessageCmd(g),
		writePermCmd(g, "wipeWritePerm", remoting.WipeWritePermOfBroker, "wipeTopicCount", "wipe"),
		writePermCmd(g, "addWritePerm", remoting.AddWritePermOfBroker, "addTopicCount", "add"), producerInfoCmd(g),
		queryMsgByOffsetCmd(g), decodeMessageIDCmd(), updateTopicPermCmd(g),
		updateOrderConfCmd(g), updateKvConfigCmd(g), deleteKvConfigCmd(g),
		skipAccumulatedMessageCmd(g), producerConnectionCmd(g), topicClusterListCmd(g), getConsumerConfigCmd(g), consumerStatusCmd(g),
		printMsgCmd(g), printMsgByQueueCmd(g), sendMsgStatusCmd(g), checkMsgSendRTCmd(g), clusterRTCmd(g), allocateMQCmd(g),
		setConsumeModeCmd(g), updateTopicListCmd(g), updateSubGroupListCmd(g), getColdDataFlowCtrInfoCmd(g),
		updateColdDataFlowCtrGroupConfigCmd(g), removeColdDataFlowCtrGroupConfigCmd(g), queryMsgTraceByIDCmd(g),
		exportMetadataCmd(g), exportMetadataInRocksDBCmd(), exportConfigsCmd(g), exportMetricsCmd(g), resetMasterFlushOffsetCmd(g), dumpCompactionLogCmd(), startMonitoringCmd(g),
		getControllerMetaDataCmd(g), getSyncStateSetCmd(g), electMasterCmd(g), cleanBrokerMetadataCmd(g), getControllerConfigCmd(g), updateControllerConfigCmd(g))
	root.AddCommand(authCmds(g)...)
	for _, c := range root.Commands() {
		addBrokerFlag(c, g)
	}
	if err := acceptMQAdminLongNames(root); err != nil {
		// The table of long names is fixed at build time: every test
		// building the root finds a mistake in it.
		panic(err)
	}
	return root
}

// addBrokerFlag gives cmd and its subcommands -b, --broker, the broker
// address, except those that take -b for something else as mqadmin's do
// (the beginTimestamp of queryMsgByKey, printMsg, printMsgByQueue and
// queryMsgTraceById; the brokerName of wipeWritePerm, getBrokerEpoch, queryMsgByOffset,
// sendMsgStatus, sendMessage and consumeMessage).
func addBrokerFlag(cmd *cobra.Command, g *globals) {
	if cmd.Flags().ShorthandLookup("b") == nil && cmd.Flags().Lookup("broker") == nil {
		cmd.Flags().StringVarP(&g.broker, "broker", "b", defaultBroker, "broker address")
	}
	for _, c := range cmd.Commands() {
		addBrokerFlag(c, g)
	}
}

// nameServers returns the addresses of -n, which holds one or several
// separated by ';' as mqadmin's.
func (g *globals) nameServers() []string {
	return namesrv.ParseNameServers(g.namesrv)
}

// invokeNamesrv sends a request to the name servers of -n in turn, as
// RocketMQ's clients fail over: one that cannot be reached (or does not
// answer in time) gives way to the next; the first answer, a success or
// not, is returned.
func (g *globals) invokeNamesrv(ctx context.Context, code int32, ext map[string]string, body []byte) (*remoting.Command, error) {
	addrs := g.nameServers()
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no name server address in -n %q", g.namesrv)
	}
	var errs []error
	for _, addr := range addrs {
		resp, err := g.invoke(ctx, addr, code, ext, body)
		if resp != nil || err == nil {
			return resp, err
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("no name server of %s answered: %w", g.namesrv, errors.Join(errs...))
}

// onEveryNamesrv sends a request to every name server of -n, as RocketMQ's
// putKVConfigValue and deleteKVConfigValue do: each is asked even when one
// fails, and every failure is returned.
func (g *globals) onEveryNamesrv(ctx context.Context, code int32, h remoting.Header) error {
	addrs := g.nameServers()
	if len(addrs) == 0 {
		return fmt.Errorf("no name server address in -n %q", g.namesrv)
	}
	var errs []error
	for _, addr := range addrs {
		if _, err := g.invoke(ctx, addr, code, h, nil); err != nil {
			errs = append(errs, fmt.Errorf("name server %s: %w", addr, err))
		}
	}
	return errors.Join(errs...)
}

// deleteTopicInNamesrvs deletes topic from every name server of -n, as
// mqadmin's deleteTopic does (going on past one that fails, which
// mqadmin's stops at); cluster, when set, limits the deletion to
// the routes of that cluster's brokers.
func (g *globals) deleteTopicInNamesrvs(ctx context.Context, topic, cluster string) error {
	h := remoting.Header{"topic": topic}
	if cluster != "" {
		h["clusterName"] = cluster
	}
	if err := g.onEveryNamesrv(ctx, remoting.DeleteTopicInNamesrv, h); err != nil {
		return fmt.Errorf("delete topic %s from the name servers: %w", topic, err)
	}
	return nil
}

// invoke sends one request and returns the response, failing on anything
// but SUCCESS. It dials through a pool of its own, so a server that
// answers GO_AWAY gets the request once more on a new connection, as
// mqadmin's client (enableReconnectForGoAway) sends it.
func (g *globals) invoke(ctx context.Context, addr string, code int32, ext map[string]string, body []byte) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	pool := remoting.NewClientPool(g.clientOptions())
	defer pool.Close()
	resp, err := pool.Invoke(ctx, addr, remoting.NewRequest(code, ext, body))
	if err != nil {
		if !g.tls && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
			return nil, fmt.Errorf("request %d to %s: %w (closed unanswered: a server with tls.server.mode=enforcing closes plaintext connections; try --tls)", code, addr, err)
		}
		return nil, fmt.Errorf("request %d to %s: %w", code, addr, err)
	}
	if resp.Code != remoting.Success {
		return resp, fmt.Errorf("request %d to %s: code %d: %s", code, addr, resp.Code, resp.Remark)
	}
	return resp, nil
}

// invokeJSON sends one request whose body is v as JSON, failing on
// anything but SUCCESS.
func (g *globals) invokeJSON(ctx context.Context, addr string, code int32, ext map[string]string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode the body of request %d: %w", code, err)
	}
	_, err = g.invoke(ctx, addr, code, ext, body)
	return err
}

// fetchJSON sends one request and decodes the JSON body of its answer into
// a T; found is false when the answer has no body (a RocketMQ broker's
// answer for what it does not have), v then T's zero value.
func fetchJSON[T any](ctx context.Context, g *globals, addr string, code int32, ext map[string]string) (v T, found bool, err error) {
	resp, err := g.invoke(ctx, addr, code, ext, nil)
	if err != nil || len(resp.Body) == 0 {
		return v, false, err
	}
	if err := json.Unmarshal(resp.Body, &v); err != nil {
		return v, false, fmt.Errorf("decode the answer of request %d from %s: %w", code, addr, err)
	}
	return v, true, nil
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
				topics := make([]meta.TopicConfig, 0, min(batch, count-i))
				for j := i; j < min(i+batch, count); j++ {
					topics = append(topics, meta.NewTopicConfig(prefix+strconv.Itoa(start+j), queues))
				}
				if err := g.sendTopicList(cmd.Context(), g.broker, topics); err != nil {
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
	var topic, attributes, cluster string
	var read, write, perm int
	var order bool
	cmd := &cobra.Command{
		Use:   "updateTopic",
		Short: "create or update one topic on a broker or every master of a cluster (UPDATE_AND_CREATE_TOPIC)",
		Long: `updateTopic creates or updates a topic on the -b broker, or with -c on every
master broker of the cluster, as mqadmin updateTopic. Booleans are given as
text as mqadmin takes them: -o true makes the topic ordered.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h := remoting.Header{"topic": topic, "defaultTopic": "TBW102", "topicFilterType": meta.SingleTag}
			h.SetInt32("readQueueNums", int32(read))
			h.SetInt32("writeQueueNums", int32(write))
			h.SetInt32("perm", int32(perm))
			h.SetBool("order", order)
			if attributes != "" {
				h["attributes"] = attributes
			}
			targets, err := g.groupTargets(cmd.Context(), cluster)
			if err != nil {
				return err
			}
			for _, addr := range targets {
				if _, err := g.invoke(cmd.Context(), addr, remoting.UpdateAndCreateTopic, h, nil); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "create topic to %s success.\n", addr)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "topic %s: %d read, %d write queues, perm %d, order %t\n", topic, read, write, perm, order)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster instead of -b")
	f.IntVarP(&read, "readQueueNums", "r", 8, "read queues")
	f.IntVarP(&write, "writeQueueNums", "w", 8, "write queues")
	f.IntVarP(&perm, "perm", "p", 6, "permission (4 read, 2 write)")
	f.VarP(javaBool{&order}, "order", "o", "ordered topic (true|false)")
	f.StringVarP(&attributes, "attributes", "a", "", "attribute modifications, as mqadmin's: +message.type=FIFO adds or changes, -reserve.time removes (comma-separated)")
	aliasFlag(cmd, "readQueueNums", "read")
	aliasFlag(cmd, "writeQueueNums", "write")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// aliasFlag adds alias, a hidden long name for the flag name of cmd, so
// that an older spelling keeps working beside mqadmin's.
func aliasFlag(cmd *cobra.Command, name, alias string) {
	f := cmd.Flags().Lookup(name)
	cmd.Flags().Var(f.Value, alias, f.Usage)
	_ = cmd.Flags().MarkHidden(alias)
}

// deleteTopicCmd is mqadmin deleteTopic: with -c, the topic is deleted
// from every master of the cluster and then from the name servers (for
// that cluster); without, from the -b broker and the name servers.
func deleteTopicCmd(g *globals) *cobra.Command {
	var topic, cluster string
	cmd := &cobra.Command{
		Use:   "deleteTopic",
		Short: "delete a topic from a broker or every master of a cluster (DELETE_TOPIC_IN_BROKER) and the name servers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			targets, err := g.groupTargets(cmd.Context(), cluster)
			if err != nil {
				return err
			}
			for _, addr := range targets {
				if _, err := g.invoke(cmd.Context(), addr, remoting.DeleteTopicInBroker, remoting.Header{"topic": topic}, nil); err != nil {
					return err
				}
			}
			if cluster != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "delete topic [%s] from cluster [%s] success.\n", topic, cluster)
			}
			if err := g.deleteTopicInNamesrvs(cmd.Context(), topic, cluster); err != nil {
				return err
			}
			if cluster != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "delete topic [%s] from NameServer success.\n", topic)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "topic %s deleted\n", topic)
			return nil
		},
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster instead of -b")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// topicListCmd is mqadmin topicList: every topic the name servers know,
// or with -c (clusterModel) a row per topic and consumer group with the
// topic's cluster, %RETRY% and %DLQ% topics left out, as mqadmin's.
func topicListCmd(g *globals) *cobra.Command {
	var clusterModel bool
	cmd := &cobra.Command{
		Use:   "topicList",
		Short: "list every topic the name server knows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			topics, err := g.allTopics(cmd.Context())
			if err != nil {
				return err
			}
			if clusterModel {
				return g.printTopicClusterModel(cmd, topics)
			}
			for _, t := range topics {
				fmt.Fprintln(cmd.OutOrStdout(), t)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&clusterModel, "clusterModel", "c", false, "a row per topic and consumer group, with the topic's cluster")
	return cmd
}

// printTopicClusterModel prints topicList -c: for each topic but the
// %RETRY% and %DLQ% ones, its cluster (that of the first broker group of
// its route) and each group consuming it (QUERY_TOPIC_CONSUME_BY_WHO of a
// broker of its route), a row with an empty group when none does. A topic
// whose route or groups cannot be read is printed with what was found, as
// mqadmin's does.
func (g *globals) printTopicClusterModel(cmd *cobra.Command, topics []string) error {
	ctx := cmd.Context()
	info, err := g.clusterInfo(ctx)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%-20s  %-48s  %-48s\n", "#Cluster Name", "#Topic", "#Consumer Group")
	for _, topic := range topics {
		if strings.HasPrefix(topic, meta.RetryGroupTopicPrefix) || strings.HasPrefix(topic, meta.DLQGroupTopicPrefix) {
			continue
		}
		cluster, groups := "", []string{""}
		if route, err := g.route(ctx, topic); err == nil && len(route.BrokerDatas) > 0 {
			cluster = clusterOfBroker(info, route.BrokerDatas[0].BrokerName)
			if addr, ok := firstBroker(route); ok {
				if found, _, err := fetchJSON[struct {
					GroupList []string `json:"groupList"`
				}](ctx, g, addr, remoting.QueryTopicConsumeByWho, remoting.Header{"topic": topic}); err == nil && len(found.GroupList) > 0 {
					groups = slices.Sorted(slices.Values(found.GroupList))
				}
			}
		}
		for _, group := range groups {
			fmt.Fprintf(w, "%-20s  %-64s  %-64s\n", frontStringAtLeast(cluster, 20), frontStringAtLeast(topic, 64), frontStringAtLeast(group, 64))
		}
	}
	return nil
}

// clusterOfBroker returns the cluster whose brokers include the group
// brokerName, "" when none does.
func clusterOfBroker(info namesrv.ClusterInfo, brokerName string) string {
	for _, cluster := range slices.Sorted(maps.Keys(info.ClusterAddrTable)) {
		if slices.Contains(info.ClusterAddrTable[cluster], brokerName) {
			return cluster
		}
	}
	return ""
}

// allTopics lists every topic the name server knows, sorted.
func (g *globals) allTopics(ctx context.Context) ([]string, error) {
	resp, err := g.invokeNamesrv(ctx, remoting.GetAllTopicListFromNameServer, nil, nil)
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

// topicRouteCmd is mqadmin topicRoute: the route as the name server
// answers it, or with -l mqadmin's list format, a row per broker group
// (cluster, name, addresses, read and write queues, perm) and the totals.
func topicRouteCmd(g *globals) *cobra.Command {
	var topic string
	var list bool
	cmd := &cobra.Command{
		Use:   "topicRoute",
		Short: "print a topic's route as the name server answers it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !list {
				resp, err := g.invokeNamesrv(cmd.Context(), remoting.GetRouteInfoByTopic, remoting.Header{"topic": topic}, nil)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), string(resp.Body))
				return nil
			}
			route, err := g.route(cmd.Context(), topic)
			if err != nil {
				return err
			}
			printRouteList(cmd.OutOrStdout(), route)
			return nil
		},
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	cmd.Flags().BoolVarP(&list, "list", "l", false, "print mqadmin's list format: a row per broker group and the totals")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// brokerStatusCmd is mqadmin brokerStatus: the runtime info of the -b
// broker or, with -c and without -b, of every broker (masters and slaves)
// of the cluster, each line led by the broker's address as mqadmin's. A
// broker of the cluster that fails does not stop the others; the exit
// status tells whether any failed.
// routeListFormat is the row of mqadmin topicRoute -l.
const routeListFormat = "%-45s %-32s %-50s %-10s %-11s %-5s\n"

// printRouteList prints a route as mqadmin topicRoute -l does: the broker
// groups by name, each with its addresses as Java prints the map
// ({0=addr, 1=addr}), then a rule and the totals. A group the route has
// no queues of is left out (mqadmin's fails on it).
func printRouteList(w io.Writer, route namesrv.TopicRouteData) {
	queues := map[string]namesrv.QueueData{}
	for _, qd := range route.QueueDatas {
		queues[qd.BrokerName] = qd
	}
	brokers := slices.Clone(route.BrokerDatas)
	sort.Slice(brokers, func(i, j int) bool { return brokers[i].BrokerName < brokers[j].BrokerName })
	fmt.Fprintf(w, routeListFormat, "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
	var read, write int32
	for _, bd := range brokers {
		qd, ok := queues[bd.BrokerName]
		if !ok {
			continue
		}
		read += qd.ReadQueueNums
		write += qd.WriteQueueNums
		var addrs []string
		for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
			addrs = append(addrs, fmt.Sprintf("%d=%s", id, bd.BrokerAddrs[id]))
		}
		fmt.Fprintf(w, routeListFormat, bd.Cluster, bd.BrokerName, "{"+strings.Join(addrs, ", ")+"}",
			strconv.Itoa(int(qd.ReadQueueNums)), strconv.Itoa(int(qd.WriteQueueNums)), strconv.Itoa(int(qd.Perm)))
	}
	fmt.Fprintln(w, strings.Repeat("-", 158))
	fmt.Fprintf(w, routeListFormat, "Total:", strconv.Itoa(len(queues)), "", strconv.Itoa(int(read)), strconv.Itoa(int(write)), "")
}

func brokerStatusCmd(g *globals) *cobra.Command {
	var cluster string
	cmd := &cobra.Command{
		Use:   "brokerStatus",
		Short: "print a broker's runtime info",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if cmd.Flags().Changed("broker") || cluster == "" {
				table, err := g.runtimeInfo(cmd.Context(), g.broker)
				if err != nil {
					return err
				}
				for _, k := range sortedKeys(table) {
					fmt.Fprintf(out, "%-28s %s\n", k, table[k])
				}
				return nil
			}
			addrs, err := g.clusterBrokers(cmd.Context(), cluster, false)
			if err != nil {
				return err
			}
			var failed []string
			for _, addr := range addrs {
				table, err := g.runtimeInfo(cmd.Context(), addr)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "brokerStatus of %s: %v\n", addr, err)
					failed = append(failed, addr)
					continue
				}
				for _, k := range sortedKeys(table) {
					fmt.Fprintf(out, "%-24s %-28s %s\n", addr, k, table[k])
				}
			}
			if len(failed) > 0 {
				return fmt.Errorf("brokerStatus failed on %s", strings.Join(failed, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "every broker (masters and slaves) of this cluster (without -b)")
	return cmd
}

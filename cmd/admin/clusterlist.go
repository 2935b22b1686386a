package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// runtimeInfo asks the broker at addr for its runtime info, the KVTable of
// GET_BROKER_RUNTIME_INFO.
func (g *globals) runtimeInfo(ctx context.Context, addr string) (map[string]string, error) {
	resp, err := g.invoke(ctx, addr, remoting.GetBrokerRuntimeInfo, nil, nil)
	if err != nil {
		return nil, err
	}
	table, err := adminbody.DecodeKVTable(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("decode the runtime info of %s: %w", addr, err)
	}
	return table, nil
}

// clusterListCmd is mqadmin clusterList: a line per broker of every
// cluster (or of -c), with the rates and state of its runtime info, or
// with -m its message totals of yesterday and today; -i repeats it every
// that many seconds. --json prints the name server's cluster info instead.
func clusterListCmd(g *globals) *cobra.Command {
	var cluster string
	var more, asJSON bool
	var interval int64
	cmd := &cobra.Command{
		Use:   "clusterList",
		Short: "print every broker of the clusters with its version, rates and state, as mqadmin clusterList (GET_BROKER_CLUSTER_INFO, GET_BROKER_RUNTIME_INFO)",
		Long: `clusterList prints a line per broker of every cluster the name servers know
(or of -c), as mqadmin clusterList: its id, address, version, the put and
get rates of the last 10 s with the send and pull queues, the timer's
backlog, how many hours of messages it holds and its disk usage. -m prints
the messages put and got yesterday and today instead; -i N repeats every N
seconds until interrupted. --json prints the cluster info as the name
server answers it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				resp, err := g.invokeNamesrv(cmd.Context(), remoting.GetBrokerClusterInfo, nil, nil)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), string(resp.Body))
				return nil
			}
			repeat := cmd.Flags().Changed("interval")
			if repeat && interval <= 0 {
				return fmt.Errorf("-i %d: want a positive number of seconds", interval)
			}
			for {
				info, err := g.clusterInfo(cmd.Context())
				if err != nil {
					return err
				}
				if more {
					g.printClusterMoreStats(cmd, info, strings.TrimSpace(cluster))
				} else {
					g.printClusterBaseInfo(cmd, info, strings.TrimSpace(cluster), time.Now())
				}
				if !repeat {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(time.Duration(interval) * time.Second):
				}
			}
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&more, "moreStats", "m", false, "print the messages put and got yesterday and today")
	f.Int64VarP(&interval, "interval", "i", 0, "print again every this many seconds")
	f.StringVarP(&cluster, "clusterName", "c", "", "only this cluster")
	f.BoolVar(&asJSON, "json", false, "print the name server's cluster info (JSON) instead")
	return cmd
}

// clusterBroker is one broker of a cluster listing.
type clusterBroker struct {
	cluster, name, addr string
	id                  int64
}

// clusterListBrokers returns the brokers of cluster (of every cluster when
// it is empty) in mqadmin clusterList's order: by cluster, broker name and
// broker id.
func clusterListBrokers(info namesrv.ClusterInfo, cluster string) []clusterBroker {
	var clusters []string
	if cluster != "" {
		clusters = []string{cluster}
	} else {
		for c := range info.ClusterAddrTable {
			clusters = append(clusters, c)
		}
		sort.Strings(clusters)
	}
	var out []clusterBroker
	for _, c := range clusters {
		names := append([]string(nil), info.ClusterAddrTable[c]...)
		sort.Strings(names)
		for _, name := range names {
			bd, ok := info.BrokerAddrTable[name]
			if !ok {
				continue
			}
			ids := make([]int64, 0, len(bd.BrokerAddrs))
			for id := range bd.BrokerAddrs {
				ids = append(ids, id)
			}
			sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
			for _, id := range ids {
				out = append(out, clusterBroker{cluster: c, name: name, addr: bd.BrokerAddrs[id], id: id})
			}
		}
	}
	return out
}

// javaGet is a runtime info value as Java's Map.get prints it with %s:
// "null" when the key is missing.
func javaGet(table map[string]string, key string) string {
	if v, ok := table[key]; ok {
		return v
	}
	return "null"
}

// firstRate returns the first of a "10s 1min 10min" rate string, 0 when
// there is none.
func firstRate(s string) float64 {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(fields[0], 64)
	return v
}

func (g *globals) printClusterBaseInfo(cmd *cobra.Command, info namesrv.ClusterInfo, cluster string, now time.Time) {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %-11s  %-12s  %-8s  %-10s\n",
		"#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)",
		"#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED")
	for _, b := range clusterListBrokers(info, cluster) {
		table, err := g.runtimeInfo(cmd.Context(), b.addr)
		if err != nil {
			// mqadmin prints the broker with what it could not read
			// left empty, and the failure.
			fmt.Fprintf(cmd.ErrOrStderr(), "clusterList: %v\n", err)
		}
		printClusterBaseLine(w, b, table, err == nil, now)
	}
}

// printClusterBaseLine prints one broker's line of clusterList from its
// runtime info (read says whether it was).
func printClusterBaseLine(w io.Writer, b clusterBroker, table map[string]string, read bool, now time.Time) {
	get := func(k string) string {
		if !read {
			return ""
		}
		return javaGet(table, k)
	}
	orN := func(k string) string {
		if v, ok := table[k]; ok || !read {
			return v
		}
		return "N"
	}
	version, inTPS, outTPS, timer, pcWait := "", "", "", "", ""
	var in, out float64
	var readBehind, offsetBehind, congest int64
	var enqTPS, deqTPS float64
	if read {
		version = get("brokerVersionDesc")
		in, out = firstRate(table["putTps"]), firstRate(table["getTransferredTps"])
		readBehind, _ = strconv.ParseInt(table["timerReadBehind"], 10, 64)
		offsetBehind, _ = strconv.ParseInt(table["timerOffsetBehind"], 10, 64)
		congest, _ = strconv.ParseInt(table["timerCongestNum"], 10, 64)
		enqTPS, _ = strconv.ParseFloat(table["timerEnqueueTps"], 64)
		deqTPS, _ = strconv.ParseFloat(table["timerDequeueTps"], 64)
		pcWait = get("pageCacheLockTimeMills")
	}
	inTPS = fmt.Sprintf("%9.2f(%s,%sms)", in, get("sendThreadPoolQueueSize"), get("sendThreadPoolQueueHeadWaitTimeMills"))
	outTPS = fmt.Sprintf("%9.2f(%s,%sms|%s,%sms)", out, get("pullThreadPoolQueueSize"), get("pullThreadPoolQueueHeadWaitTimeMills"),
		orN("ackThreadPoolQueueSize"), orN("ackThreadPoolQueueHeadWaitTimeMills"))
	timer = fmt.Sprintf("%d-%d(%.1fw, %.1f, %.1f)", readBehind, offsetBehind, float64(congest)/10000, enqTPS, deqTPS)
	hour, space := 0.0, 0.0
	if ts, err := strconv.ParseInt(table["earliestMessageTimeStamp"], 10, 64); err == nil {
		hour = float64(now.UnixMilli()-ts) / 1000 / 60 / 60
	}
	if r, err := strconv.ParseFloat(table["commitLogDiskRatio"], 64); err == nil {
		space = r
	}
	active := strings.EqualFold(table["brokerActive"], "true")
	fmt.Fprintf(w, "%-22s  %-22s  %-4d  %-22s %-16s  %16s  %30s  %-22s  %11s  %-12s  %-8s  %10t\n",
		b.cluster, b.name, b.id, b.addr, version, inTPS, outTPS, timer, pcWait,
		fmt.Sprintf("%2.2f", hour), fmt.Sprintf("%.4f", space), active)
}

func (g *globals) printClusterMoreStats(cmd *cobra.Command, info namesrv.ClusterInfo, cluster string) {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%-16s  %-32s %14s %14s %14s %14s\n",
		"#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday")
	for _, b := range clusterListBrokers(info, cluster) {
		var inYest, outYest, inToday, outToday int64
		table, err := g.runtimeInfo(cmd.Context(), b.addr)
		if err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "clusterList: %v\n", err)
		} else {
			n := func(k string) int64 { v, _ := strconv.ParseInt(table[k], 10, 64); return v }
			inYest = n("msgPutTotalTodayMorning") - n("msgPutTotalYesterdayMorning")
			outYest = n("msgGetTotalTodayMorning") - n("msgGetTotalYesterdayMorning")
			inToday = n("msgPutTotalTodayNow") - n("msgPutTotalTodayMorning")
			outToday = n("msgGetTotalTodayNow") - n("msgGetTotalTodayMorning")
		}
		fmt.Fprintf(w, "%-16s  %-32s %14d %14d %14d %14d\n", b.cluster, b.name, inYest, outYest, inToday, outToday)
	}
}

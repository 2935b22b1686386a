package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// topicPutNums is the statistic of messages put in a topic
// (BrokerStatsManager.TOPIC_PUT_NUMS).
const topicPutNums = "TOPIC_PUT_NUMS"

// metricsTotals are the sums over a cluster's brokers that exportMetrics
// writes as totalData.
type metricsTotals struct {
	tps    map[string]float64
	dayNum map[string]int64
}

// exportMetricsCmd is mqadmin exportMetrics: for each broker group of a
// cluster, its master's runtime figures, written to metrics.json with the
// cluster's totals.
func exportMetricsCmd(g *globals) *cobra.Command {
	return clusterExportCmd(g, "exportMetrics",
		"write the rates, day totals and sizes of a cluster's masters as JSON (GET_BROKER_RUNTIME_INFO, VIEW_BROKER_STATS_DATA)",
		`exportMetrics writes <-f>/metrics.json, as mqadmin exportMetrics:
evaluateReport, for each broker group of the -c cluster (by brokerName) what
its master reports:
  runtimeEnv      cpuNum (its clientCallbackExecutorThreads setting) and
                  totalMemKBytes (of its runtime info), where it has them
  runtimeQuota    diskRatio (commitLogDiskRatio, consumeQueueDiskRatio);
                  tps: normalInTps and normalOutTps (the first rate of
                  putTps and getTransferredTps), transInTps and
                  scheduleInTps (puts per second of the last minute in the
                  half and the schedule topic); oneDayNum: normalOneDayInNum
                  and normalOneDayOutNum (yesterday's puts and gets),
                  transOneDayInNum and scheduleOneDayInNum (the day's puts
                  in those topics); messageAverageSize; topicSize and
                  groupSize (user topics and groups)
  runtimeVersion  rocketmqVersion (the version this tool speaks) and
                  clientInfo (language%version of each consumer connected
                  to the broker's user groups)
and totalData: totalTps and totalOneDayNum, the sums over the cluster.`,
		"metrics.json", func(ctx context.Context, groups []brokerGroup) (any, error) {
			totals := metricsTotals{
				tps:    map[string]float64{"totalNormalInTps": 0, "totalNormalOutTps": 0, "totalTransInTps": 0, "totalScheduleInTps": 0},
				dayNum: map[string]int64{"normalOneDayInNum": 0, "normalOneDayOutNum": 0, "transOneDayInNum": 0, "scheduleOneDayInNum": 0},
			}
			report := map[string]map[string]any{}
			for _, grp := range groups {
				info, err := g.brokerMetrics(ctx, grp.master, &totals)
				if err != nil {
					return nil, fmt.Errorf("metrics of broker %s (%s): %w", grp.name, grp.master, err)
				}
				report[grp.name] = info
			}
			return map[string]any{
				"evaluateReport": report,
				"totalData":      map[string]any{"totalTps": totals.tps, "totalOneDayNum": totals.dayNum},
			}, nil
		})
}

// brokerMetrics reads what exportMetrics reports of the broker at addr
// (runtimeEnv, runtimeQuota, runtimeVersion) and adds its rates and day
// totals to totals. A runtime figure the report is computed from that the
// broker does not give, or gives as something else than a number, is an
// error, as it is for mqadmin.
func (g *globals) brokerMetrics(ctx context.Context, addr string, totals *metricsTotals) (map[string]any, error) {
	kv, err := g.runtimeInfo(ctx, addr)
	if err != nil {
		return nil, err
	}
	props, err := g.brokerConfig(ctx, addr)
	if err != nil {
		return nil, err
	}
	_, groups, err := g.userGroups(ctx, addr)
	if err != nil {
		return nil, err
	}
	_, topics, err := g.userTopics(ctx, addr, false)
	if err != nil {
		return nil, err
	}
	// present copies the keys src has, as fastjson leaves out null values.
	present := func(dst map[string]any, src map[string]string, pairs ...[2]string) map[string]any {
		for _, p := range pairs {
			if v, ok := src[p[1]]; ok {
				dst[p[0]] = v
			}
		}
		return dst
	}
	firstRateOf := func(key string) (float64, error) {
		v, ok := kv[key]
		if !ok {
			return 0, fmt.Errorf("its runtime info has no %s", key)
		}
		// As Java's split(" "): no rate measured yet ("  ") reads as 0.
		rates := strings.TrimRight(v, " ")
		if rates == "" {
			return 0, nil
		}
		f, err := strconv.ParseFloat(strings.SplitN(rates, " ", 2)[0], 64)
		if err != nil {
			return 0, fmt.Errorf("the %s of its runtime info, %q, does not start with a rate", key, v)
		}
		return f, nil
	}
	dayOf := func(today, yesterday string) (int64, error) {
		var n [2]int64
		for i, key := range []string{today, yesterday} {
			v, perr := strconv.ParseInt(kv[key], 10, 64)
			if perr != nil {
				return 0, fmt.Errorf("the %s of its runtime info, %q, is not a count", key, kv[key])
			}
			n[i] = v
		}
		return n[0] - n[1], nil
	}
	normalIn, err := firstRateOf("putTps")
	if err != nil {
		return nil, err
	}
	normalOut, err := firstRateOf("getTransferredTps")
	if err != nil {
		return nil, err
	}
	dayIn, err := dayOf("msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning")
	if err != nil {
		return nil, err
	}
	dayOut, err := dayOf("msgGetTotalTodayMorning", "msgGetTotalYesterdayMorning")
	if err != nil {
		return nil, err
	}
	trans := g.brokerStats(ctx, addr, topicPutNums, meta.TransHalfTopic)
	schedule := g.brokerStats(ctx, addr, topicPutNums, meta.ScheduleTopic)
	tps := map[string]float64{"normalInTps": normalIn, "normalOutTps": normalOut, "transInTps": trans.Minute.TPS, "scheduleInTps": schedule.Minute.TPS}
	dayNum := map[string]int64{"normalOneDayInNum": dayIn, "normalOneDayOutNum": dayOut, "transOneDayInNum": dayTotal(trans), "scheduleOneDayInNum": dayTotal(schedule)}
	totals.tps["totalNormalInTps"] += tps["normalInTps"]
	totals.tps["totalNormalOutTps"] += tps["normalOutTps"]
	totals.tps["totalTransInTps"] += tps["transInTps"]
	totals.tps["totalScheduleInTps"] += tps["scheduleInTps"]
	for k, v := range dayNum {
		totals.dayNum[k] += v
	}
	quota := present(map[string]any{
		"diskRatio": present(map[string]any{}, kv, [2]string{"commitLogDiskRatio", "commitLogDiskRatio"}, [2]string{"consumeQueueDiskRatio", "consumeQueueDiskRatio"}),
		"tps":       tps, "oneDayNum": dayNum, "topicSize": len(topics), "groupSize": len(groups),
	}, kv, [2]string{"messageAverageSize", "putMessageAverageSize"})
	env := present(map[string]any{}, props, [2]string{"cpuNum", "clientCallbackExecutorThreads"})
	present(env, kv, [2]string{"totalMemKBytes", "totalMemKBytes"})
	return map[string]any{
		"runtimeEnv":   env,
		"runtimeQuota": quota,
		"runtimeVersion": map[string]any{
			"rocketmqVersion": remoting.VersionName(int(remoting.CurrentVersion)),
			"clientInfo":      g.consumerClientInfo(ctx, addr, groups),
		},
	}, nil
}

// consumerClientInfo returns "language%version" of every consumer
// connected to the broker at addr in one of groups, sorted; a group the
// broker has no connection of is passed over, as mqadmin passes over the
// groups it cannot ask about.
func (g *globals) consumerClientInfo(ctx context.Context, addr string, groups configTable) []string {
	seen := map[string]bool{}
	for name := range groups {
		cc, err := g.consumerConnections(ctx, addr, name)
		if err != nil {
			continue
		}
		for _, c := range cc.ConnectionSet {
			seen[c.Language+"%"+remoting.VersionName(int(c.Version))] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

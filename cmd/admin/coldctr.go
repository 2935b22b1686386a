package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/remoting"
)

// coldCtrTargets returns the brokers a cold-data flow control command
// goes to, as mqadmin's: the -b broker when -b is given, else every master
// of the -c cluster (mqadmin prints its usage when neither is given; here
// -b's default broker is asked).
func (g *globals) coldCtrTargets(cmd *cobra.Command, cluster string) ([]string, error) {
	if cmd.Flags().Changed("broker") || cluster == "" {
		return []string{g.broker}, nil
	}
	return g.clusterMasters(cmd.Context(), cluster)
}

// updateColdDataFlowCtrGroupConfigCmd is mqadmin
// updateColdDataFlowCtrGroupConfig: UPDATE_COLD_DATA_FLOW_CTR_CONFIG with
// the properties text "group=threshold" to the -b broker or every master
// of the -c cluster.
func updateColdDataFlowCtrGroupConfigCmd(g *globals) *cobra.Command {
	var cluster, group, threshold string
	cmd := &cobra.Command{
		Use:   "updateColdDataFlowCtrGroupConfig",
		Short: "set a consumer group's cold-read threshold in bytes (UPDATE_COLD_DATA_FLOW_CTR_CONFIG)",
		Long: `updateColdDataFlowCtrGroupConfig gives the consumer group -g a cold-read
threshold of its own, -v bytes per accounting period, on the -b broker or on
every master of the -c cluster (-b wins when both are given, as mqadmin's).
With -c a broker that fails does not stop the others; the exit status tells
whether any failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group, threshold = strings.TrimSpace(group), strings.TrimSpace(threshold)
			if group == "" {
				return fmt.Errorf("-g (--consumerGroup) names no group")
			}
			addrs, err := g.coldCtrTargets(cmd, strings.TrimSpace(cluster))
			if err != nil {
				return err
			}
			return g.invokeEach(cmd, addrs, "updateColdDataFlowCtrGroupConfig", remoting.UpdateColdDataFlowCtrConfig, []byte(group+"="+threshold+"\n"))
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster (without -b)")
	f.StringVarP(&group, "consumerGroup", "g", "", "the consumer group")
	f.StringVarP(&threshold, "threshold", "v", "", "the group's cold-read threshold, in bytes")
	_ = cmd.MarkFlagRequired("consumerGroup")
	_ = cmd.MarkFlagRequired("threshold")
	return cmd
}

// removeColdDataFlowCtrGroupConfigCmd is mqadmin
// removeColdDataFlowCtrGroupConfig: REMOVE_COLD_DATA_FLOW_CTR_CONFIG with
// the group's name as the body, to the -b broker or every master of the
// -c cluster.
func removeColdDataFlowCtrGroupConfigCmd(g *globals) *cobra.Command {
	var cluster, group string
	cmd := &cobra.Command{
		Use:   "removeColdDataFlowCtrGroupConfig",
		Short: "drop a consumer group's own cold-read threshold (REMOVE_COLD_DATA_FLOW_CTR_CONFIG)",
		Long: `removeColdDataFlowCtrGroupConfig drops the cold-read threshold set for the
consumer group -g, which goes back to the broker's cgColdReadThreshold, on
the -b broker or on every master of the -c cluster (-b wins when both are
given, as mqadmin's).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group = strings.TrimSpace(group)
			if group == "" {
				return fmt.Errorf("-g (--consumerGroup) names no group")
			}
			addrs, err := g.coldCtrTargets(cmd, strings.TrimSpace(cluster))
			if err != nil {
				return err
			}
			return g.invokeEach(cmd, addrs, "remove broker cold read threshold", remoting.RemoveColdDataFlowCtrConfig, []byte(group))
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster (without -b)")
	f.StringVarP(&group, "consumerGroup", "g", "", "the consumer group to remove from the config")
	_ = cmd.MarkFlagRequired("consumerGroup")
	return cmd
}

// getColdDataFlowCtrInfoCmd is mqadmin getColdDataFlowCtrInfo: the
// GET_COLD_DATA_FLOW_CTR_INFO answer of the -b broker, or of every broker
// of the -c cluster (each master, then its slaves), pretty-printed with
// the times of runtimeTable as dates, as mqadmin prints it.
func getColdDataFlowCtrInfoCmd(g *globals) *cobra.Command {
	var cluster string
	cmd := &cobra.Command{
		Use:   "getColdDataFlowCtrInfo",
		Short: "print the cold-data flow control state of a broker or of every broker of a cluster (GET_COLD_DATA_FLOW_CTR_INFO)",
		Long: `getColdDataFlowCtrInfo prints what the -b broker, or every broker of the -c
cluster, holds for cold-data flow control (-b wins when both are given, as
mqadmin's): runtimeTable, the groups that read cold data lately with the
bytes read this period (coldAcc) and the times of their last cold read and
first (lastColdReadTimeFormat, createTimeFormat, local time); configTable,
the thresholds set per group (and adapted ones, suffixed ||adaptive);
cgColdReadThreshold, globalColdReadThreshold and globalAcc.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cluster = strings.TrimSpace(cluster)
			if cmd.Flags().Changed("broker") || cluster == "" {
				return g.printColdCtrInfo(cmd, fmt.Sprintf("============%s============", g.broker), g.broker)
			}
			groups, err := g.clusterGroups(cmd.Context(), cluster)
			if err != nil {
				return err
			}
			for _, t := range masterSlaveTargets(groups) {
				if err := g.printColdCtrInfo(cmd, t.title, t.addr); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "every broker (masters and slaves) of this cluster (without -b)")
	return cmd
}

// printColdCtrInfo asks addr for its cold-data flow control state and
// prints it under title.
func (g *globals) printColdCtrInfo(cmd *cobra.Command, title, addr string) error {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, " %s\n", title)
	resp, err := g.invoke(cmd.Context(), addr, remoting.GetColdDataFlowCtrInfo, nil, nil)
	if err != nil {
		return err
	}
	if len(resp.Body) == 0 {
		fmt.Fprintf(w, "Broker[%s] has no cold ctr table !\n", addr)
		return nil
	}
	return writeColdCtrInfo(w, resp.Body, time.Local)
}

// writeColdCtrInfo pretty-prints a GET_COLD_DATA_FLOW_CTR_INFO body as
// mqadmin does: each runtimeTable entry's lastColdReadTimeMills and
// createTimeMills become lastColdReadTimeFormat and createTimeFormat,
// "yyyy-MM-dd HH:mm:ss" in loc; every other field is printed as the
// broker wrote it.
func writeColdCtrInfo(w io.Writer, body []byte, loc *time.Location) error {
	var info map[string]json.RawMessage
	if err := json.Unmarshal(body, &info); err != nil {
		return fmt.Errorf("decode the cold-data flow control info: %w", err)
	}
	if raw, ok := info["runtimeTable"]; ok && string(raw) != "null" {
		var table map[string]map[string]json.RawMessage
		if err := json.Unmarshal(raw, &table); err != nil {
			return fmt.Errorf("decode the runtimeTable of the cold-data flow control info: %w", err)
		}
		for group, entry := range table {
			for _, f := range [][2]string{{"lastColdReadTimeMills", "lastColdReadTimeFormat"}, {"createTimeMills", "createTimeFormat"}} {
				ms, err := strconv.ParseInt(string(entry[f[0]]), 10, 64)
				if err != nil {
					return fmt.Errorf("the %s of group %s in the cold-data flow control info, %s, is not a time in ms", f[0], group, entry[f[0]])
				}
				entry[f[1]] = json.RawMessage(strconv.Quote(time.UnixMilli(ms).In(loc).Format("2006-01-02 15:04:05")))
				delete(entry, f[0])
			}
		}
		rewritten, err := json.Marshal(table)
		if err != nil {
			return fmt.Errorf("encode the runtimeTable of the cold-data flow control info: %w", err)
		}
		info["runtimeTable"] = rewritten
	}
	pretty, err := json.MarshalIndent(info, "", "\t")
	if err != nil {
		return fmt.Errorf("format the cold-data flow control info: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", pretty)
	return err
}

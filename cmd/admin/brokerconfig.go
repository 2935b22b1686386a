package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// updateBrokerConfigCmd is mqadmin updateBrokerConfig: set keys of a
// running broker (written back into its configuration file), or with -c
// of every master of a cluster (and its slaves with -a).
func updateBrokerConfigCmd(g *globals) *cobra.Command {
	var in settingsInput
	var cluster, allBrokers string
	cmd := &cobra.Command{
		Use:   "updateBrokerConfig",
		Short: "change a running broker's settings (UPDATE_BROKER_CONFIG), e.g. -k brokerPermission -v 4 to stop sends to it",
		Long: `updateBrokerConfig changes settings of the -b broker, or with -c of every
master of the cluster (masters and slaves with -a, whose value mqadmin does
not read either). With -c a broker that fails does not stop the others; the
exit status tells whether any failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := in.body()
			if err != nil {
				return err
			}
			if cluster == "" {
				resp, err := g.invoke(cmd.Context(), g.broker, remoting.UpdateBrokerConfig, nil, body)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "update broker config success, %s\n", g.broker)
				printRemark(cmd.OutOrStdout(), resp.Remark)
				return nil
			}
			addrs, err := g.clusterBrokers(cmd.Context(), cluster, !cmd.Flags().Changed("updateAllBroker"))
			if err != nil {
				return err
			}
			return g.invokeEach(cmd, addrs, "update broker config", remoting.UpdateBrokerConfig, body)
		},
	}
	in.flags(cmd)
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster instead of -b")
	cmd.Flags().StringVarP(&allBrokers, "updateAllBroker", "a", "", "with -c, the slaves too (any value, as mqadmin)")
	return cmd
}

// settingsInput is the keys an UPDATE_*_CONFIG command sets: -k and -v,
// and every --set key=value.
type settingsInput struct {
	key, value string
	pairs      []string
}

// flags declares -k, -v and --set on cmd.
func (in *settingsInput) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&in.key, "key", "k", "", "key to set")
	f.StringVarP(&in.value, "value", "v", "", "value of --key")
	f.StringArrayVar(&in.pairs, "set", nil, "key=value to set (repeatable)")
}

// body is the request's properties text.
func (in *settingsInput) body() ([]byte, error) {
	var body strings.Builder
	if in.key != "" {
		fmt.Fprintf(&body, "%s=%s\n", in.key, in.value)
	}
	for _, p := range in.pairs {
		if !strings.Contains(p, "=") {
			return nil, fmt.Errorf("--set %q: want key=value", p)
		}
		body.WriteString(p)
		body.WriteByte('\n')
	}
	if body.Len() == 0 {
		return nil, fmt.Errorf("nothing to set: give -k and -v, or --set key=value")
	}
	return []byte(body.String()), nil
}

// updateNamesrvConfigCmd is mqadmin updateNamesrvConfig: set keys of every
// name server of -n (written back into their configuration files).
func updateNamesrvConfigCmd(g *globals) *cobra.Command {
	var in settingsInput
	cmd := &cobra.Command{
		Use:   "updateNamesrvConfig",
		Short: "change the name servers' settings (UPDATE_NAMESRV_CONFIG), e.g. -k orderMessageEnable -v true",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := in.body()
			if err != nil {
				return err
			}
			return g.invokeEach(cmd, namesrv.ParseNameServers(g.namesrv), "update name server config", remoting.UpdateNamesrvConfig, body)
		},
	}
	in.flags(cmd)
	return cmd
}

// getNamesrvConfigCmd is mqadmin getNamesrvConfig: the settings of every
// name server of -n, each under a line naming it.
func getNamesrvConfigCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "getNamesrvConfig",
		Short: "print the name servers' settings (GET_NAMESRV_CONFIG)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			for _, addr := range namesrv.ParseNameServers(g.namesrv) {
				resp, err := g.invoke(cmd.Context(), addr, remoting.GetNamesrvConfig, nil, nil)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "============%s============\n", addr)
				if _, err := out.Write(resp.Body); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// getBrokerConfigCmd is mqadmin getBrokerConfig: the settings of the -b
// broker, or with -c of every broker of a cluster, each under a line
// naming it as mqadmin's.
func getBrokerConfigCmd(g *globals) *cobra.Command {
	var cluster string
	cmd := &cobra.Command{
		Use:   "getBrokerConfig",
		Short: "print a running broker's settings, or every broker's of a cluster with -c (GET_BROKER_CONFIG)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if cluster == "" {
				resp, err := g.invoke(cmd.Context(), g.broker, remoting.GetBrokerConfig, nil, nil)
				if err != nil {
					return err
				}
				_, err = out.Write(resp.Body)
				return err
			}
			groups, err := g.clusterGroups(cmd.Context(), cluster)
			if err != nil {
				return err
			}
			for _, t := range masterSlaveTargets(groups) {
				resp, err := g.invoke(cmd.Context(), t.addr, remoting.GetBrokerConfig, nil, nil)
				if err != nil {
					return err
				}
				fmt.Fprintln(out, t.title)
				if _, err := out.Write(resp.Body); err != nil {
					return err
				}
				fmt.Fprintln(out)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "every broker (masters and slaves) of this cluster instead of -b")
	return cmd
}

// titledBroker is a broker a cluster-wide command asks, with the line
// mqadmin prints above its answer.
type titledBroker struct{ title, addr string }

// masterSlaveTargets lists the brokers of groups in the order mqadmin's
// CommandUtil.fetchMasterAndSlaveDistinguish gives them, each master
// then its slaves, titled as mqadmin titles them.
func masterSlaveTargets(groups []brokerGroup) []titledBroker {
	var out []titledBroker
	for _, grp := range groups {
		if grp.master != "" {
			out = append(out, titledBroker{fmt.Sprintf("============Master: %s============", grp.master), grp.master})
		}
		for _, s := range grp.slaves {
			out = append(out, titledBroker{fmt.Sprintf("============My Master: %s=====Slave: %s============", grp.master, s), s})
		}
	}
	return out
}

// writePermCmd is mqadmin wipeWritePerm or addWritePerm: change the write
// permission of a broker group's routes on every name server of -n
// (addresses separated by ';'). As mqadmin's, -b names the broker group,
// not a broker address.
func writePermCmd(g *globals, use string, code int32, countField, verb string) *cobra.Command {
	var brokerName string
	cmd := &cobra.Command{
		Use:   use,
		Short: fmt.Sprintf("%s the write permission of a broker group's routes on the name servers", verb),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if brokerName == "" {
				return fmt.Errorf("-b (--brokerName) is required")
			}
			addrs := g.nameServers()
			var failed []string
			for _, addr := range addrs {
				resp, err := g.invoke(cmd.Context(), addr, code, map[string]string{"brokerName": brokerName}, nil)
				if err != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "%s write perm of broker[%s] in name server[%s] failed: %v\n", verb, brokerName, addr, err)
					failed = append(failed, addr)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s write perm of broker[%s] in name server[%s] OK, %s topics\n",
					verb, brokerName, addr, resp.ExtFields[countField])
			}
			if len(failed) > 0 {
				return fmt.Errorf("%s write perm failed on %s", verb, strings.Join(failed, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&brokerName, "brokerName", "b", "", "the broker group (brokerName), as mqadmin's -b")
	cmd.Flags().StringVar(&brokerName, "broker-name", "", "same as -b")
	return cmd
}

// deleteExpiredCommitLogCmd is mqadmin deleteExpiredCommitLog.
func deleteExpiredCommitLogCmd(g *globals) *cobra.Command {
	return brokerActionCmd(g, "deleteExpiredCommitLog",
		"make the broker delete CommitLog segments older than fileReservedTime now rather than at deleteWhen (DELETE_EXPIRED_COMMITLOG)",
		remoting.DeleteExpiredCommitLog, "deletes its expired CommitLog segments within its next cleaner passes", true)
}

// setCommitLogReadAheadModeCmd is mqadmin setCommitLogReadAheadMode:
// SET_COMMITLOG_READ_MODE with -m 1 (random reads) or 0 (read-ahead), to
// the -b broker or, with -c and without -b, to every broker of the
// cluster, each master then its slaves, under mqadmin's titles.
func setCommitLogReadAheadModeCmd(g *globals) *cobra.Command {
	var mode, cluster string
	cmd := &cobra.Command{
		Use:   "setCommitLogReadAheadMode",
		Short: "advise the broker's sealed CommitLog segments for random reads (-m 1) or the kernel's read-ahead (-m 0) (SET_COMMITLOG_READ_MODE)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if mode != "0" && mode != "1" {
				return fmt.Errorf("-m must be 0 (read-ahead) or 1 (random reads), not %q", mode)
			}
			set := func(addr string) error {
				resp, err := g.invoke(cmd.Context(), addr, remoting.SetCommitLogReadMode, map[string]string{"READ_AHEAD_MODE": mode}, nil)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", addr, resp.Remark)
				return nil
			}
			if cmd.Flags().Changed("broker") || cluster == "" {
				return set(g.broker)
			}
			groups, err := g.clusterGroups(cmd.Context(), cluster)
			if err != nil {
				return err
			}
			for _, t := range masterSlaveTargets(groups) {
				fmt.Fprintln(cmd.OutOrStdout(), t.title)
				if err := set(t.addr); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&mode, "commitLogReadAheadMode", "m", "", "1 for random reads, 0 for read-ahead (required)")
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "every broker (masters and slaves) of this cluster (without -b)")
	return cmd
}

// cleanUnusedTopicCmd is mqadmin cleanUnusedTopic.
func cleanUnusedTopicCmd(g *globals) *cobra.Command {
	return brokerActionCmd(g, "cleanUnusedTopic",
		"make the broker drop the ConsumeQueues of topics it has no config for, system and LMQ topics excepted (CLEAN_UNUSED_TOPIC)",
		remoting.CleanUnusedTopic, "dropped the ConsumeQueues of topics without a config", true)
}

// cleanExpiredCQCmd is mqadmin cleanExpiredCQ.
func cleanExpiredCQCmd(g *globals) *cobra.Command {
	return brokerActionCmd(g, "cleanExpiredCQ",
		"make the broker drop ConsumeQueue entries of records retention deleted now (CLEAN_EXPIRED_CONSUMEQUEUE)",
		remoting.CleanExpiredConsumeQueue, "dropped its expired ConsumeQueue entries", true)
}

// exportPopRecordCmd is mqadmin exportPopRecord: POP_ROLLBACK, which
// makes the broker write its POP messages in flight to the revive topic as
// RocketMQ check-points (the way back to Apache RocketMQ). -d is read as
// mqadmin's ExportPopRecordCommand reads it: -d false is the dry run,
// which sends nothing; -d with any other value, or no -d, exports.
func exportPopRecordCmd(g *globals) *cobra.Command {
	export := brokerActionCmd(g, "exportPopRecord",
		"make the broker write its POP messages in flight to the revive topic as RocketMQ check-points, before the way back to Apache RocketMQ (POP_ROLLBACK); stop the POP consumers first",
		remoting.PopRollback, "wrote its POP messages in flight to the revive topic", false)
	var dryRunArg string
	run := export.RunE
	export.RunE = func(cmd *cobra.Command, args []string) error {
		if !cmd.Flags().Changed("dryRun") || !strings.EqualFold(strings.TrimSpace(dryRunArg), "false") {
			return run(cmd, args)
		}
		cfg, err := g.brokerConfig(cmd.Context(), g.broker)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "Export broker records, brokerName=%s, brokerAddr=%s, dryRun=true\n", cfg["brokerName"], g.broker)
		return nil
	}
	export.Flags().StringVarP(&dryRunArg, "dryRun", "d", "", `as mqadmin's, inverted: "-d false" is the dry run (nothing exported); any other value exports`)
	return export
}

// brokerActionCmd is a command that sends one request without fields to
// the broker (-b) and reports "success: <broker> <done>". With withCluster
// it takes mqadmin's -c too, as mqadmin's DefaultMQAdminExtImpl sends
// these: without -b, to every broker (masters and slaves) of the -c
// cluster, or of every cluster without -c either. A broker that fails
// does not stop the others; the exit status tells whether any failed.
func brokerActionCmd(g *globals, use, short string, code int32, done string, withCluster bool) *cobra.Command {
	var cluster string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addrs := []string{g.broker}
			if withCluster && !cmd.Flags().Changed("broker") {
				var err error
				if addrs, err = g.everyBrokerOf(cmd.Context(), strings.TrimSpace(cluster)); err != nil {
					return err
				}
			}
			var failed []string
			for _, addr := range addrs {
				if _, err := g.invoke(cmd.Context(), addr, code, nil, nil); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s failed, %s: %v\n", use, addr, err)
					failed = append(failed, addr)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "success: %s %s\n", addr, done)
			}
			if len(failed) > 0 {
				return fmt.Errorf("%s failed on %s", use, strings.Join(failed, ", "))
			}
			return nil
		},
	}
	if withCluster {
		cmd.Flags().StringVarP(&cluster, "cluster", "c", "", "every broker (masters and slaves) of this cluster; without -b or -c, of every cluster, as mqadmin's")
	}
	return cmd
}

// queryCQCmd is mqadmin queryCq: ConsumeQueue units of one queue.
func queryCQCmd(g *globals) *cobra.Command {
	var topic, group string
	var queue int32
	var index int64
	var count int32
	cmd := &cobra.Command{
		Use:   "queryCq",
		Short: "print ConsumeQueue units of a queue: queue offset, CommitLog offset, size, tags code (QUERY_CONSUME_QUEUE)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ext := map[string]string{"topic": topic, "queueId": strconv.Itoa(int(queue)),
				"index": strconv.FormatInt(index, 10), "count": strconv.Itoa(int(count))}
			if group != "" {
				ext["consumerGroup"] = group
			}
			resp, err := g.invoke(cmd.Context(), g.broker, remoting.QueryConsumeQueue, ext, nil)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(resp.Body) == 0 {
				fmt.Fprintln(out, resp.Remark)
				return nil
			}
			var body adminbody.QueryConsumeQueue
			if err := json.Unmarshal(resp.Body, &body); err != nil {
				return fmt.Errorf("decode QUERY_CONSUME_QUEUE answer: %w", err)
			}
			fmt.Fprintf(out, "queue %d@%s: min index %d, max index %d\n", queue, topic, body.MinQueueIndex, body.MaxQueueIndex)
			if group != "" {
				sub := "-"
				if body.SubscriptionData != nil {
					sub = body.SubscriptionData.SubString
				}
				fmt.Fprintf(out, "subscription of %s: %s\nfilter data: %s\n", group, sub, body.FilterData)
			}
			tw := newTable(out)
			fmt.Fprintln(tw, "#index\t#commitLogOffset\t#size\t#tagsCode")
			for i, u := range body.QueueData {
				fmt.Fprintf(tw, "%d\t%d\t%d\t%d\n", index+int64(i), u.PhysicOffset, u.PhysicSize, u.TagsCode)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic")
	f.Int32VarP(&queue, "queue", "q", 0, "queue id")
	f.Int64VarP(&index, "index", "i", 0, "first queue offset")
	f.Int32VarP(&count, "count", "c", 10, "units to print")
	f.StringVarP(&group, "group", "g", "", "consumer group whose subscription to show")
	return cmd
}

// invokeEach sends a request of code with body to each address, printing
// "<what> success, addr" or "<what> failed, addr: why" for each, and
// fails naming the addresses that failed.
func (g *globals) invokeEach(cmd *cobra.Command, addrs []string, what string, code int32, body []byte) error {
	var failed []string
	for _, addr := range addrs {
		resp, err := g.invoke(cmd.Context(), addr, code, nil, body)
		if err != nil {
			fmt.Fprintf(cmd.OutOrStdout(), "%s failed, %s: %v\n", what, addr, err)
			failed = append(failed, addr)
			continue
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s success, %s\n", what, addr)
		printRemark(cmd.OutOrStdout(), resp.Remark)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s failed on %s", what, strings.Join(failed, ", "))
	}
	return nil
}

// printRemark prints the remark of a successful configuration update, an
// indented line under its success line, when the server gave one: the
// keys accepted without effect in rocketkv, or a change in force that
// could not be written back to the configuration file and so lasts until
// restart (mqadmin drops it).
func printRemark(w io.Writer, remark string) {
	if remark != "" {
		fmt.Fprintf(w, "  %s\n", remark)
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/controller"
	"github.com/rocketkv/rocketkv/remoting"
)

// The controller commands are mqadmin's (tools/command/controller and
// ha/GetSyncStateSetSubCommand): -a names the controller, or several
// separated by ';'. The commands that change or read the replicated state
// ask -a for the leader (CONTROLLER_GET_METADATA_INFO) and send the
// request there, as mqadmin's client does.

// controllerAddrs splits -a.
func controllerAddrs(a string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(a, ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-a: no controller address")
	}
	return out, nil
}

// controllerMetadata asks the controllers of -a in turn for the controller
// cluster's metadata; the first answer counts.
func (g *globals) controllerMetadata(ctx context.Context, a string) (string, map[string]string, error) {
	addrs, err := controllerAddrs(a)
	if err != nil {
		return "", nil, err
	}
	var errs []error
	for _, addr := range addrs {
		resp, err := g.invoke(ctx, addr, remoting.ControllerGetMetadataInfo, nil, nil)
		if err == nil {
			return addr, resp.ExtFields, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return "", nil, fmt.Errorf("no controller of %s answered: %w", a, errors.Join(errs...))
}

// controllerLeader returns the leader's address as the controllers of -a
// report it.
func (g *globals) controllerLeader(ctx context.Context, a string) (string, error) {
	_, md, err := g.controllerMetadata(ctx, a)
	if err != nil {
		return "", err
	}
	leader := md["controllerLeaderAddress"]
	if leader == "" {
		return "", fmt.Errorf("the controllers of %s have no leader now", a)
	}
	return leader, nil
}

// getControllerMetaDataCmd is mqadmin getControllerMetaData.
func getControllerMetaDataCmd(g *globals) *cobra.Command {
	var a string
	cmd := &cobra.Command{
		Use:   "getControllerMetaData",
		Short: "print the controller cluster's group, leader and peers (CONTROLLER_GET_METADATA_INFO)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, md, err := g.controllerMetadata(cmd.Context(), a)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "\n#ControllerGroup\t%s", javaNull(md, "group"))
			fmt.Fprintf(out, "\n#ControllerLeaderId\t%s", javaNull(md, "controllerLeaderId"))
			fmt.Fprintf(out, "\n#ControllerLeaderAddress\t%s", javaNull(md, "controllerLeaderAddress"))
			for _, p := range strings.Split(md["peers"], ";") {
				if p != "" {
					fmt.Fprintf(out, "\n#Peer:\t%s", p)
				}
			}
			fmt.Fprintln(out)
			return nil
		},
	}
	controllerFlag(cmd, &a)
	return cmd
}

// javaNull is a header field as Java prints it: "null" when absent.
func javaNull(ext map[string]string, key string) string {
	if v, ok := ext[key]; ok {
		return v
	}
	return "null"
}

func controllerFlag(cmd *cobra.Command, a *string) {
	cmd.Flags().StringVarP(a, "controllerAddress", "a", "", "controller address; several separated by ';'")
	_ = cmd.MarkFlagRequired("controllerAddress")
}

// getSyncStateSetCmd is mqadmin getSyncStateSet: the master, epochs and
// in-sync and other replicas of the -b broker group, or of every group of
// the -c cluster (names from the name server), from the controller leader.
func getSyncStateSetCmd(g *globals) *cobra.Command {
	var a, brokerName, cluster string
	var interval int
	cmd := &cobra.Command{
		Use:   "getSyncStateSet",
		Short: "print broker groups' masters and sync state sets as the controller keeps them (CONTROLLER_GET_SYNC_STATE_DATA)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if brokerName == "" && cluster == "" {
				return fmt.Errorf("give -b BROKER_NAME or -c CLUSTER")
			}
			return repeatEvery(cmd, interval, func() error { return g.printSyncStateSet(cmd, a, brokerName, cluster) })
		},
	}
	controllerFlag(cmd, &a)
	cmd.Flags().StringVarP(&brokerName, "brokerName", "b", "", "the broker group (broker name)")
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "every broker group of this cluster (without -b)")
	cmd.Flags().IntVarP(&interval, "interval", "i", 3, "print again every this many seconds, until interrupted")
	return cmd
}

func (g *globals) printSyncStateSet(cmd *cobra.Command, a, brokerName, cluster string) error {
	ctx := cmd.Context()
	names := []string{brokerName}
	if brokerName == "" {
		groups, err := g.clusterGroups(ctx, cluster)
		if err != nil {
			return err
		}
		names = names[:0]
		for _, grp := range groups {
			names = append(names, grp.name)
		}
		if len(names) == 0 {
			return nil
		}
	}
	leader, err := g.controllerLeader(ctx, a)
	if err != nil {
		return err
	}
	body, err := json.Marshal(names)
	if err != nil {
		return fmt.Errorf("encode broker names: %w", err)
	}
	resp, err := g.invoke(ctx, leader, remoting.ControllerGetSyncStateData, nil, body)
	if err != nil {
		return err
	}
	info, err := controller.DecodeBrokerReplicasInfo(resp.Body)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	for _, name := range slices.Sorted(maps.Keys(info.ReplicasInfoTable)) {
		ri := info.ReplicasInfoTable[name]
		master, addr := "null", "null"
		if ri.MasterBrokerID != nil {
			master = strconv.FormatInt(*ri.MasterBrokerID, 10)
		}
		if ri.MasterAddress != nil {
			addr = *ri.MasterAddress
		}
		fmt.Fprintf(out, "\n#brokerName\t%s\n#MasterBrokerId\t%s\n#MasterAddr\t%s\n#MasterEpoch\t%d\n#SyncStateSetEpoch\t%d\n#SyncStateSetNums\t%d\n",
			name, master, addr, ri.MasterEpoch, ri.SyncStateSetEpoch, len(ri.InSyncReplicas))
		for _, r := range ri.InSyncReplicas {
			fmt.Fprintf(out, "\nInSyncReplica:\t%s\n", replicaString(r))
		}
		for _, r := range ri.NotInSyncReplicas {
			fmt.Fprintf(out, "\nNotInSyncReplica:\t%s\n", replicaString(r))
		}
	}
	return nil
}

// replicaString is Java's ReplicaIdentity.toString.
func replicaString(r controller.ReplicaIdentity) string {
	return fmt.Sprintf("ReplicaIdentity{brokerName='%s', brokerId=%d, brokerAddress='%s', alive=%t}", r.BrokerName, r.BrokerID, r.BrokerAddress, r.Alive)
}

// electMasterCmd is mqadmin electMaster: make the -b broker (id) of the
// --bn group master, through the controller leader.
func electMasterCmd(g *globals) *cobra.Command {
	var a, brokerName, cluster string
	var brokerID int64
	cmd := &cobra.Command{
		Use:   "electMaster",
		Short: "elect the given broker (-b id, --bn group, -c cluster) master (CONTROLLER_ELECT_MASTER, designated)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			leader, err := g.controllerLeader(ctx, a)
			if err != nil {
				return err
			}
			resp, err := g.invoke(ctx, leader, remoting.ControllerElectMaster, map[string]string{
				"clusterName": cluster, "brokerName": brokerName, "brokerId": strconv.FormatInt(brokerID, 10),
				"designateElect": "true", "invokeTime": strconv.FormatInt(time.Now().UnixMilli(), 10),
			}, nil)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "\n#ClusterName\t%s", cluster)
			fmt.Fprintf(out, "\n#BrokerName\t%s", brokerName)
			fmt.Fprintf(out, "\n#BrokerMasterAddr\t%s", javaNull(resp.ExtFields, "masterAddress"))
			fmt.Fprintf(out, "\n#MasterEpoch\t%s", javaNull(resp.ExtFields, "masterEpoch"))
			fmt.Fprintf(out, "\n#SyncStateSetEpoch\t%s\n", javaNull(resp.ExtFields, "syncStateSetEpoch"))
			if body, err := controller.DecodeElectMasterResponseBody(resp.Body); err == nil && body.BrokerMemberGroup != nil {
				addrs := body.BrokerMemberGroup.BrokerAddrs
				for _, id := range slices.Sorted(maps.Keys(addrs)) {
					fmt.Fprintf(out, "\t#Broker\t%d\t%s\n", id, addrs[id])
				}
			}
			return nil
		},
	}
	controllerFlag(cmd, &a)
	f := cmd.Flags()
	f.Int64VarP(&brokerID, "brokerId", "b", 0, "the id of the broker to become master")
	f.StringVar(&brokerName, "bn", "", "the broker group (broker name); mqadmin's -bn")
	f.StringVarP(&cluster, "clusterName", "c", "", "the cluster of the group")
	for _, name := range []string{"brokerId", "bn", "clusterName"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// cleanBrokerMetadataCmd is mqadmin cleanBrokerMetadata: forget a broker
// group, or some of its ids (-b "1;2"), on the controllers.
func cleanBrokerMetadataCmd(g *globals) *cobra.Command {
	var a, brokerName, cluster, ids string
	var living bool
	cmd := &cobra.Command{
		Use:   "cleanBrokerMetadata",
		Short: "remove a broker group, or some of its ids, from the controller (CLEAN_BROKER_DATA)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ids != "" {
				for _, s := range strings.Split(ids, ";") {
					if _, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err != nil {
						return fmt.Errorf("-b %q: please set the option <brokerControllerIdsToClean> according to the format (1;2;3)", ids)
					}
				}
			}
			if !living && cluster == "" {
				return fmt.Errorf("cleanLivingBroker option is false, clusterName option can not be empty")
			}
			ctx := cmd.Context()
			leader, err := g.controllerLeader(ctx, a)
			if err != nil {
				return err
			}
			ext := map[string]string{"brokerName": brokerName, "isCleanLivingBroker": strconv.FormatBool(living),
				"invokeTime": strconv.FormatInt(time.Now().UnixMilli(), 10)}
			if cluster != "" {
				ext["clusterName"] = cluster
			}
			if ids != "" {
				ext["brokerControllerIdsToClean"] = ids
			}
			if _, err := g.invoke(ctx, leader, remoting.CleanBrokerData, ext, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "clear broker %s metadata from controller success! \n", brokerName)
			return nil
		},
	}
	controllerFlag(cmd, &a)
	f := cmd.Flags()
	f.StringVarP(&ids, "brokerControllerIdsToClean", "b", "", "the broker ids to remove, e.g. 1;2;3 (all of the group when absent)")
	f.StringVar(&brokerName, "bn", "", "the broker group (broker name); mqadmin's -bn")
	f.StringVarP(&cluster, "clusterName", "c", "", "the cluster of the group")
	f.BoolVarP(&living, "cleanLivingBroker", "l", false, "also remove brokers that are alive")
	_ = cmd.MarkFlagRequired("bn")
	return cmd
}

// getControllerConfigCmd is mqadmin getControllerConfig: each controller's
// settings under a line naming it.
func getControllerConfigCmd(g *globals) *cobra.Command {
	var a string
	cmd := &cobra.Command{
		Use:   "getControllerConfig",
		Short: "print the controllers' settings (GET_CONTROLLER_CONFIG)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addrs, err := controllerAddrs(a)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, addr := range addrs {
				resp, err := g.invoke(cmd.Context(), addr, remoting.GetControllerConfig, nil, nil)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "============%s============\n", addr)
				for _, line := range strings.Split(string(resp.Body), "\n") {
					if k, v, ok := strings.Cut(line, "="); ok {
						fmt.Fprintf(out, "%-50s=  %s\n", k, v)
					}
				}
			}
			return nil
		},
	}
	controllerFlag(cmd, &a)
	return cmd
}

// updateControllerConfigCmd is mqadmin updateControllerConfig: set a key on
// every controller of -a (each keeps its own settings).
func updateControllerConfigCmd(g *globals) *cobra.Command {
	var a string
	var in settingsInput
	cmd := &cobra.Command{
		Use:   "updateControllerConfig",
		Short: "change the controllers' settings (UPDATE_CONTROLLER_CONFIG), e.g. -k enableElectUncleanMaster -v true",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := in.body()
			if err != nil {
				return err
			}
			addrs, err := controllerAddrs(a)
			if err != nil {
				return err
			}
			var errs []error
			for _, addr := range addrs {
				if _, err := g.invoke(cmd.Context(), addr, remoting.UpdateControllerConfig, nil, body); err != nil {
					errs = append(errs, err)
				}
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "update controller config success!%v\n%s", addrs, strings.ReplaceAll(string(body), "=", " : "))
			return nil
		},
	}
	controllerFlag(cmd, &a)
	in.flags(cmd)
	return cmd
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/ha/autoswitch"
	"github.com/rocketkv/rocketkv/remoting"
)

// getBrokerEpochCmd is mqadmin getBrokerEpoch: the epoch entries of every
// broker (master and slaves) of the -b broker group, or of every broker of
// the -c cluster, as each keeps them (GET_BROKER_EPOCH_CACHE, controller
// mode only), in mqadmin's layout: the last epoch ends at the broker's
// CommitLog end. As mqadmin's, -b names the broker group, not a broker
// address, and -i repeats every -i seconds until interrupted. A broker
// that fails to answer is reported and the others are still printed
// (mqadmin stops at it).
func getBrokerEpochCmd(g *globals) *cobra.Command {
	var brokerName, cluster string
	var interval int
	cmd := &cobra.Command{
		Use:   "getBrokerEpoch",
		Short: "print the epochs of a broker group's brokers, or of a cluster's, as each keeps them (GET_BROKER_EPOCH_CACHE, controller mode)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if brokerName == "" && cluster == "" {
				return fmt.Errorf("give -b BROKER_NAME or -c CLUSTER")
			}
			return repeatEvery(cmd, interval, func() error {
				addrs, err := g.epochBrokers(cmd, brokerName, cluster)
				if err != nil {
					return err
				}
				// A broker that does not answer (one the name server
				// still lists after its death) does not hide the others.
				var errs []error
				for _, addr := range addrs {
					errs = append(errs, g.printBrokerEpoch(cmd, addr))
				}
				return errors.Join(errs...)
			})
		},
	}
	cmd.Flags().StringVarP(&brokerName, "brokerName", "b", "", "the broker group (brokerName), as mqadmin's -b")
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "every broker of this cluster (without -b)")
	cmd.Flags().IntVarP(&interval, "interval", "i", 3, "print again every this many seconds, until interrupted")
	return cmd
}

// epochBrokers returns the addresses getBrokerEpoch asks: every broker of
// the group brokerName, or, without it, of cluster, as the name servers
// know them, by group and broker id.
func (g *globals) epochBrokers(cmd *cobra.Command, brokerName, cluster string) ([]string, error) {
	if brokerName == "" {
		groups, err := g.clusterGroups(cmd.Context(), cluster)
		if err != nil {
			return nil, err
		}
		var addrs []string
		for _, grp := range groups {
			if grp.master != "" {
				addrs = append(addrs, grp.master)
			}
			addrs = append(addrs, grp.slaves...)
		}
		return addrs, nil
	}
	info, err := g.clusterInfo(cmd.Context())
	if err != nil {
		return nil, err
	}
	bd, ok := info.BrokerAddrTable[brokerName]
	if !ok || len(bd.BrokerAddrs) == 0 {
		return nil, fmt.Errorf("the name server %s knows no broker of the group %q", g.namesrv, brokerName)
	}
	var addrs []string
	for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
		addrs = append(addrs, bd.BrokerAddrs[id])
	}
	return addrs, nil
}

// printBrokerEpoch prints the epochs of the broker at addr as mqadmin
// getBrokerEpoch does, the last one ending at the broker's CommitLog end.
func (g *globals) printBrokerEpoch(cmd *cobra.Command, addr string) error {
	resp, err := g.invoke(cmd.Context(), addr, remoting.GetBrokerEpochCache, nil, nil)
	if err != nil {
		return fmt.Errorf("epochs of %s: %w", addr, err)
	}
	var cache autoswitch.EpochEntryCache
	if err := json.Unmarshal(resp.Body, &cache); err != nil {
		return fmt.Errorf("decode the epochs of %s: %w", addr, err)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "\n#clusterName\t%s\n#brokerName\t%s\n#brokerAddr\t%s\n#brokerId\t%d",
		cache.ClusterName, cache.BrokerName, addr, cache.BrokerID)
	for i, e := range cache.EpochList {
		if i == len(cache.EpochList)-1 {
			e.EndOffset = cache.MaxOffset
		}
		fmt.Fprintf(out, "\n#Epoch: EpochEntry{epoch=%d, startOffset=%d, endOffset=%d}", e.Epoch, e.StartOffset, e.EndOffset)
	}
	fmt.Fprint(out, "\n")
	return nil
}

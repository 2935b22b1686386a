package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/ha"
	"github.com/rocketkv/rocketkv/remoting"
)

// haStatusCmd is mqadmin haStatus: a master's slaves and how far behind
// each is, or a slave's master; of the -b broker or, with -c and without
// -b, of every master of the cluster. With -i it prints again every -i
// seconds until interrupted, as mqadmin's.
func haStatusCmd(g *globals) *cobra.Command {
	var cluster string
	var interval int
	cmd := &cobra.Command{
		Use:   "haStatus",
		Short: "print a broker's replication state (GET_BROKER_HA_STATUS): a master's slaves, or a slave's master",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return repeatEvery(cmd, interval, func() error {
				addrs := []string{g.broker}
				if !cmd.Flags().Changed("broker") && cluster != "" {
					var err error
					if addrs, err = g.clusterMasters(cmd.Context(), cluster); err != nil {
						return err
					}
				}
				for _, addr := range addrs {
					if err := g.printHAStatus(cmd, addr); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster (without -b)")
	cmd.Flags().IntVarP(&interval, "interval", "i", 3, "print again every this many seconds, until interrupted")
	return cmd
}

// printHAStatus prints the replication state of the broker at addr.
func (g *globals) printHAStatus(cmd *cobra.Command, addr string) error {
	resp, err := g.invoke(cmd.Context(), addr, remoting.GetBrokerHAStatus, nil, nil)
	if err != nil {
		return err
	}
	var info ha.RuntimeInfo
	if err := json.Unmarshal(resp.Body, &info); err != nil {
		return fmt.Errorf("decode the HA status of %s: %w", addr, err)
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	if info.Master {
		fmt.Fprintf(w, "#MasterAddr\t%s\n#MasterCommitLogMaxOffset\t%d\n#SlaveNum\t%d\n#InSyncSlaveNum\t%d\n\n",
			addr, info.MasterCommitLogMaxOffset, len(info.HAConnectionInfo), info.InSyncSlaveNums)
		fmt.Fprintln(w, "#SlaveAddr\t#SlaveAckOffset\t#Diff\t#TransferSpeed(KB/s)\t#Status\t#TransferFromWhere")
		for _, c := range info.HAConnectionInfo {
			status := "OK"
			if !c.InSync {
				status = "Fall Behind"
			}
			fmt.Fprintf(w, "%s\t%d\t%d\t%.2f\t%s\t%d\n", c.Addr, c.SlaveAckOffset, c.Diff,
				float64(c.TransferredByteInSecond)/1024, status, c.TransferFromWhere)
		}
		return w.Flush()
	}
	c := info.HAClientRuntimeInfo
	fmt.Fprintf(w, "#MasterAddr\t%s\n#CommitLogMaxOffset\t%d\n#TransferSpeed(KB/s)\t%.2f\n#LastReadTime\t%s\n#LastWriteTime\t%s\n#MasterFlushOffset\t%d\n",
		c.MasterAddr, c.MaxOffset, float64(c.TransferredByteInSecond)/1024, millisTime(c.LastReadTimestamp), millisTime(c.LastWriteTimestamp),
		c.MasterFlushOffset)
	return w.Flush()
}

// millisTime formats a Unix time in milliseconds; "-" for none.
func millisTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).Format("2006-01-02 15:04:05.000")
}

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
// each is, or a slave's master.
func haStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "haStatus",
		Short: "print a broker's replication state (GET_BROKER_HA_STATUS): a master's slaves, or a slave's master",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := g.invoke(cmd.Context(), g.broker, remoting.GetBrokerHAStatus, nil, nil)
			if err != nil {
				return err
			}
			var info ha.RuntimeInfo
			if err := json.Unmarshal(resp.Body, &info); err != nil {
				return fmt.Errorf("decode the HA status of %s: %w", g.broker, err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			if info.Master {
				fmt.Fprintf(w, "#MasterAddr\t%s\n#MasterCommitLogMaxOffset\t%d\n#SlaveNum\t%d\n#InSyncSlaveNum\t%d\n\n",
					g.broker, info.MasterCommitLogMaxOffset, len(info.HAConnectionInfo), info.InSyncSlaveNums)
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
			fmt.Fprintf(w, "#MasterAddr\t%s\n#CommitLogMaxOffset\t%d\n#TransferSpeed(KB/s)\t%.2f\n#LastReadTime\t%s\n#LastWriteTime\t%s\n",
				c.MasterAddr, c.MaxOffset, float64(c.TransferredByteInSecond)/1024, millisTime(c.LastReadTimestamp), millisTime(c.LastWriteTimestamp))
			return w.Flush()
		},
	}
}

// millisTime formats a Unix time in milliseconds; "-" for none.
func millisTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).Format("2006-01-02 15:04:05.000")
}

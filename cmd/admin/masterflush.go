package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/remoting"
)

// resetMasterFlushOffsetCmd is mqadmin resetMasterFlushOffset: it tells the
// -b broker, a slave, how far its master's CommitLog is flushed
// (RESET_MASTER_FLUSH_OFFSET). The slave keeps the offset in its checkpoint
// file and haStatus shows it; a master answers success and ignores it, as
// RocketMQ's does.
func resetMasterFlushOffsetCmd(g *globals) *cobra.Command {
	var offset int64
	cmd := &cobra.Command{
		Use:   "resetMasterFlushOffset",
		Short: "set a slave's note of its master's flushed CommitLog offset (RESET_MASTER_FLUSH_OFFSET); a master ignores it",
		Long: `resetMasterFlushOffset sets the masterFlushOffset a slave (-b, brokerId not 0)
keeps in its checkpoint file and reports in haStatus, as mqadmin
resetMasterFlushOffset. A master answers success and changes nothing. Neither
RocketMQ's slave nor rocketkv's reads the value back for recovery or
replication: it is the operator's record of where the master's log was
flushed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h := remoting.Header{}
			h.SetInt64("masterFlushOffset", offset)
			if _, err := g.invoke(cmd.Context(), strings.TrimSpace(g.broker), remoting.ResetMasterFlushOffset, h, nil); err != nil {
				return fmt.Errorf("reset master flush offset: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "reset master flush offset to %d success\n", offset)
			return nil
		},
	}
	cmd.Flags().Int64VarP(&offset, "offset", "o", 0, "the master's flushed CommitLog offset to record")
	_ = cmd.MarkFlagRequired("offset")
	return cmd
}

package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// repeatEvery runs print once, or, when the command's -i (--interval)
// was given, every interval seconds until the command is interrupted, as
// mqadmin's watching commands (haStatus, getSyncStateSet,
// getBrokerEpoch) do. While repeating, a failed round is reported on
// stderr and the next round still runs; an interrupt ends the command
// without an error.
func repeatEvery(cmd *cobra.Command, interval int, print func() error) error {
	if interval <= 0 {
		return fmt.Errorf("-i must be a positive number of seconds, not %d", interval)
	}
	ctx := cmd.Context()
	repeat := cmd.Flags().Changed("interval")
	for {
		err := print()
		if !repeat {
			return err
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", cmd.Name(), err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(interval) * time.Second):
		}
	}
}

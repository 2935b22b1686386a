package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/remoting"
)

// errLayoutsDiffer is returned (exit status 1) when a broker's two
// ConsumeQueue layouts do not agree.
var errLayoutsDiffer = errors.New("the ConsumeQueue layouts differ")

func checkCQWriteProgressCmd(g *globals) *cobra.Command {
	var topic string
	var from int64
	cmd := &cobra.Command{
		Use:   "checkRocksdbCqWriteProgress",
		Short: "compare a double-writing broker's Pebble and file ConsumeQueues and print the result (CHECK_ROCKSDB_CQ_WRITE_PROGRESS)",
		Long: `Asks the broker (rocksdbCQDoubleWriteEnable=true) to compare its two
ConsumeQueue layouts, queue by queue, entries stored from --cf on, and
waits for the result: a summary and the first differences. The exit
status is 1 when they differ. Run it before switching storeType, or
before turning double-write off. mqadmin's command of the same name
starts the same check and leaves the result in the broker's log.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ext := remoting.Header{"topic": topic, "checkStoreTime": strconv.FormatInt(from, 10), "rocketkvWait": "true"}
			resp, err := g.invoke(cmd.Context(), g.broker, remoting.CheckRocksdbCqWriteProgress, ext, nil)
			if err != nil {
				return err
			}
			var r struct {
				CheckResult string `json:"checkResult"`
				CheckStatus int    `json:"checkStatus"`
			}
			if err := json.Unmarshal(resp.Body, &r); err != nil {
				return fmt.Errorf("decode the check result: %w", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), r.CheckResult)
			switch r.CheckStatus {
			case 0:
				return nil
			case 1:
				return errLayoutsDiffer
			case 2:
				return errors.New("the check did not finish here: " + r.CheckResult)
			default:
				return errors.New("the check failed: " + r.CheckResult)
			}
		},
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "only this topic (default: every topic)")
	cmd.Flags().Int64Var(&from, "cf", time.Now().Add(-30*24*time.Hour).UnixMilli(),
		"check entries stored from this time on (ms since the epoch; mqadmin's default, 30 days ago)")
	return cmd
}

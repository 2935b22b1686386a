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

// checkStatusInProgress is CheckRocksdbCqWriteResult.CheckStatus
// CHECK_IN_PROGRESS: an Apache RocketMQ broker answers it at once, having
// started the check, whose result goes to its log.
const checkStatusInProgress = 2

func checkCQWriteProgressCmd(g *globals) *cobra.Command {
	var topic, cluster string
	var from int64
	cmd := &cobra.Command{
		Use:   "checkRocksdbCqWriteProgress",
		Short: "compare a double-writing broker's Pebble and file ConsumeQueues and print the result (CHECK_ROCKSDB_CQ_WRITE_PROGRESS)",
		Long: `Asks the broker (rocksdbCQDoubleWriteEnable=true), or with -c every master of
the cluster, to compare its two ConsumeQueue layouts, queue by queue,
entries stored from --cf on, and waits for the result: a summary and the
first differences. The exit status is 1 when they differ. Run it before
switching storeType, or before turning double-write off. mqadmin's command
of the same name starts the same check and leaves the result in the
broker's log; an Apache RocketMQ broker answers so at once (CHECK_IN_PROGRESS),
which is printed as mqadmin prints it and is no failure.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			targets, err := g.groupTargets(cmd.Context(), cluster)
			if err != nil {
				return err
			}
			var errs []error
			for _, addr := range targets {
				if len(targets) > 1 {
					fmt.Fprintf(cmd.OutOrStdout(), "============%s============\n", addr)
				}
				if err := g.checkCQWriteProgress(cmd, addr, topic, from); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", addr, err))
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "only this topic (default: every topic)")
	cmd.Flags().StringVarP(&cluster, "cluster", "c", "", "every master of this cluster instead of -b")
	cmd.Flags().Int64Var(&from, "cf", time.Now().Add(-30*24*time.Hour).UnixMilli(),
		"check entries stored from this time on (ms since the epoch; mqadmin's default, 30 days ago)")
	return cmd
}

// checkCQWriteProgress runs the check on one broker and prints its result.
func (g *globals) checkCQWriteProgress(cmd *cobra.Command, addr, topic string, from int64) error {
	ext := remoting.Header{"topic": topic, "checkStoreTime": strconv.FormatInt(from, 10), "rocketkvWait": "true"}
	resp, err := g.invoke(cmd.Context(), addr, remoting.CheckRocksdbCqWriteProgress, ext, nil)
	if err != nil {
		return err
	}
	var r struct {
		CheckResult string `json:"checkResult"`
		CheckStatus int    `json:"checkStatus"`
	}
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		return fmt.Errorf("decode the check result of %s: %w", addr, err)
	}
	if r.CheckStatus == checkStatusInProgress {
		fmt.Fprintf(cmd.OutOrStdout(), "%s check doing, please wait and get the result from log... (%s)\n", addr, r.CheckResult)
		return nil
	}
	fmt.Fprintln(cmd.OutOrStdout(), r.CheckResult)
	switch r.CheckStatus {
	case 0:
		return nil
	case 1:
		return errLayoutsDiffer
	default:
		return errors.New("the check failed: " + r.CheckResult)
	}
}

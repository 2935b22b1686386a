package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/remoting"
)

// setConsumeModeCmd is mqadmin setConsumeMode: SET_MESSAGE_REQUEST_MODE
// with a SetMessageRequestModeRequestBody, to the -b broker or every
// master of the -c cluster. The broker keeps the mode of the group on the
// topic and answers it to the group's clients' QUERY_ASSIGNMENT: with POP
// they pop rather than pull, popShareQueueNum clients sharing each queue.
// A broker refuses a retry topic (NO_PERMISSION), a topic or group it
// does not have (TOPIC_NOT_EXIST, SUBSCRIPTION_GROUP_NOT_EXIST).
func setConsumeModeCmd(g *globals) *cobra.Command {
	var cluster, mode string
	var body rmqconfig.RequestMode
	cmd := &cobra.Command{
		Use:   "setConsumeMode",
		Short: "Set consume message mode. pull/pop etc. (SET_MESSAGE_REQUEST_MODE, to -b or every master of -c)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body.Topic = strings.TrimSpace(body.Topic)
			body.ConsumerGroup = strings.TrimSpace(body.ConsumerGroup)
			// mqadmin reads -m with MessageRequestMode.valueOf: the
			// names exactly.
			body.Mode = strings.TrimSpace(mode)
			if body.Mode != "PULL" && body.Mode != "POP" {
				return fmt.Errorf("-m %q: the consume mode is PULL or POP", mode)
			}
			// mqadmin takes -b over -c when both are given.
			if cmd.Flags().Changed("broker") {
				cluster = ""
			}
			targets, err := g.groupTargets(cmd.Context(), strings.TrimSpace(cluster))
			if err != nil {
				return err
			}
			// As mqadmin's, a master that fails does not stop the others.
			var errs []error
			for _, addr := range targets {
				if err := g.invokeJSON(cmd.Context(), addr, remoting.SetMessageRequestMode, nil, body); err != nil {
					errs = append(errs, fmt.Errorf("set the consume mode of %s on %s: %w", body.ConsumerGroup, body.Topic, err))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "set consume mode to %s success.\n", addr)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "topic[%s] group[%s] consume mode[%s] popShareQueueNum[%d]\n",
				body.Topic, body.ConsumerGroup, body.Mode, body.PopShareQueueNum)
			return errors.Join(errs...)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster instead of -b")
	f.StringVarP(&body.Topic, "topicName", "t", "", "topic name")
	f.StringVarP(&body.ConsumerGroup, "groupName", "g", "", "consumer group name")
	f.StringVarP(&mode, "mode", "m", "", "consume mode. PULL/POP")
	f.IntVarP(&body.PopShareQueueNum, "popShareQueueNum", "q", 0, "num of queue which share in pop mode")
	for _, name := range []string{"topicName", "groupName", "mode"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/remoting"
)

// cloneGroupOffsetCmd is mqadmin cloneGroupOffset, done as RocketMQ's
// admin API does it: CLONE_GROUP_OFFSET to every master broker of the
// topic's route (or to the one given with -b), each of which copies the
// source group's committed offsets of the topic to the destination group.
func cloneGroupOffsetCmd(g *globals) *cobra.Command {
	var src, dest, topic string
	var offline bool
	cmd := &cobra.Command{
		Use:   "cloneGroupOffset",
		Short: "copy a consumer group's committed offsets of a topic to another group (CLONE_GROUP_OFFSET)",
		Long: `cloneGroupOffset copies the source group's committed offsets of a topic, queue
by queue, to the destination group on every master broker of the topic (from
the name server's route; -b names one broker instead), replacing the ones the
destination group had there. While the source group has consumers online, a
broker skips the topic unless they subscribe to it or -o (offline) is given.
The destination group's consumers should be stopped: a running one commits
the offsets it holds over the copied ones.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			targets := []brokerTarget{{addr: g.broker}}
			if !cmd.Flags().Changed("broker") {
				var err error
				if targets, err = g.namedMasters(cmd.Context(), topic); err != nil {
					return err
				}
			}
			h := remoting.Header{"srcGroup": src, "destGroup": dest, "topic": topic}
			h.SetBool("offline", offline)
			failed := 0
			for _, t := range targets {
				if _, err := g.invoke(cmd.Context(), t.addr, remoting.CloneGroupOffset, h, nil); err != nil {
					failed++
					fmt.Fprintf(cmd.OutOrStdout(), "%s: clone of %s offsets to %s on %s failed: %v\n", t, src, dest, topic, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: offsets of %s on %s cloned to %s\n", t, src, topic, dest)
			}
			if failed > 0 {
				return fmt.Errorf("clone group offset of %s to %s on %s: failed on %d of %d brokers", src, dest, topic, failed, len(targets))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&src, "srcGroup", "s", "", "source consumer group")
	f.StringVarP(&dest, "destGroup", "d", "", "destination consumer group")
	f.StringVarP(&topic, "topic", "t", "", "topic")
	f.VarP(javaBool{&offline}, "offline", "o", "true: clone even while the source group's online consumers do not subscribe to the topic (-o true|false, as mqadmin's)")
	for _, name := range []string{"srcGroup", "destGroup", "topic"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

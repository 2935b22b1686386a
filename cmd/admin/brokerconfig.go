package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/remoting"
)

// updateBrokerConfigCmd is mqadmin updateBrokerConfig: set keys of a
// running broker (written back into its configuration file).
func updateBrokerConfigCmd(g *globals) *cobra.Command {
	var key, value string
	var pairs []string
	cmd := &cobra.Command{
		Use:   "updateBrokerConfig",
		Short: "change a running broker's settings (UPDATE_BROKER_CONFIG), e.g. -k brokerPermission -v 4 to stop sends to it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var body strings.Builder
			if key != "" {
				fmt.Fprintf(&body, "%s=%s\n", key, value)
			}
			for _, p := range pairs {
				if !strings.Contains(p, "=") {
					return fmt.Errorf("--set %q: want key=value", p)
				}
				body.WriteString(p)
				body.WriteByte('\n')
			}
			if body.Len() == 0 {
				return fmt.Errorf("nothing to set: give -k and -v, or --set key=value")
			}
			if _, err := g.invoke(cmd.Context(), g.broker, remoting.UpdateBrokerConfig, nil, []byte(body.String())); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "update broker config success, %s\n", g.broker)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&key, "key", "k", "", "key to set")
	f.StringVarP(&value, "value", "v", "", "value of --key")
	f.StringArrayVar(&pairs, "set", nil, "key=value to set (repeatable)")
	return cmd
}

// getBrokerConfigCmd is mqadmin getBrokerConfig.
func getBrokerConfigCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "getBrokerConfig",
		Short: "print a running broker's settings (GET_BROKER_CONFIG)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := g.invoke(cmd.Context(), g.broker, remoting.GetBrokerConfig, nil, nil)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(resp.Body)
			return err
		},
	}
}

// writePermCmd is mqadmin wipeWritePerm or addWritePerm: change the write
// permission of a broker group's routes on every name server of -n
// (addresses separated by ';').
func writePermCmd(g *globals, use string, code int32, countField, verb string) *cobra.Command {
	var brokerName string
	cmd := &cobra.Command{
		Use:   use,
		Short: fmt.Sprintf("%s the write permission of a broker group's routes on the name servers", verb),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if brokerName == "" {
				return fmt.Errorf("--broker-name is required")
			}
			var addrs []string
			for _, a := range strings.Split(g.namesrv, ";") {
				if a = strings.TrimSpace(a); a != "" {
					addrs = append(addrs, a)
				}
			}
			sort.Strings(addrs)
			var failed []string
			for _, addr := range addrs {
				resp, err := g.invoke(cmd.Context(), addr, code, map[string]string{"brokerName": brokerName}, nil)
				if err != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "%s write perm of broker[%s] in name server[%s] failed: %v\n", verb, brokerName, addr, err)
					failed = append(failed, addr)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s write perm of broker[%s] in name server[%s] OK, %s topics\n",
					verb, brokerName, addr, resp.ExtFields[countField])
			}
			if len(failed) > 0 {
				return fmt.Errorf("%s write perm failed on %s", verb, strings.Join(failed, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&brokerName, "broker-name", "", "the broker group (brokerName)")
	return cmd
}

// deleteExpiredCommitLogCmd is mqadmin deleteExpiredCommitLog.
func deleteExpiredCommitLogCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "deleteExpiredCommitLog",
		Short: "make the broker delete CommitLog segments older than fileReservedTime now rather than at deleteWhen (DELETE_EXPIRED_COMMITLOG)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := g.invoke(cmd.Context(), g.broker, remoting.DeleteExpiredCommitLog, nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "success: %s deletes its expired CommitLog segments within its next cleaner passes\n", g.broker)
			return nil
		},
	}
}

package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/configs"
)

// newRootCommand builds the kvdump command tree writing to stdout and
// stderr.
func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &globalOptions{}
	root := &cobra.Command{
		Use:   "kvdump",
		Short: "Inspect a rocketkv store: index keyspaces, queues, offsets, configs, key index; verify the index against the CommitLog",
		Long: `kvdump prints what a rocketkv store's index holds and checks it against the CommitLog.

It never modifies a store. It reads a stopped store read-only (refusing a
store a running broker holds), or, with --broker, a consistent checkpoint of
a running broker's index; run it on the broker's machine then.

Exit status: 0 on success, 1 when verify or compare-cq finds differences or
check-rocketmq finds a store a broker would refuse, 2 on errors.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			o.storeSet = cmd.Flags().Changed("store")
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&o.store, "store", configs.DefaultStoreRoot(), "store root (storePathRootDir) of a stopped broker")
	pf.StringVar(&o.commitLog, "commitlog", "", "CommitLog segment directory (storePathCommitLog) when it is not <store>/commitlog")
	pf.StringVar(&o.broker, "broker", "", "read a checkpoint of the running broker at host:port (kvdump must run on its machine)")
	pf.BoolVar(&o.tls, "tls", false, "with --broker: connect with TLS (for tls.server.mode=enforcing)")
	pf.StringVar(&o.tlsConfigFile, "tls-config-file", configs.DefaultTLSConfigFile,
		"with --tls: a properties file (tls.config.file) whose tls.client.* keys give the certificate to present and tls.client.authServer; skipped when absent")
	pf.StringVar(&o.accessKey, "access-key", "", "with --broker and the ACL on: the account to sign as (default $"+acl.EnvAccessKey+")")
	pf.StringVar(&o.secretKey, "secret-key", "", "with --broker: the account's secret key (default $"+acl.EnvSecretKey+")")
	pf.StringVar(&o.checkpointDir, "checkpoint-dir", "", "with --broker: directory the broker writes the checkpoint to, inside its indexCheckpointDir (default: a new one there)")
	pf.BoolVar(&o.keepCheckpoint, "keep-checkpoint", false, "with --broker: keep the checkpoint instead of deleting it afterwards")
	pf.BoolVar(&o.json, "json", false, "print one JSON object per line instead of tables")
	pf.DurationVar(&o.timeout, "timeout", 30*time.Second, "with --broker: how long the checkpoint request may take")
	root.AddCommand(
		summaryCommand(o),
		cqCommand(o),
		offsetsCommand(o),
		topicsCommand(o),
		groupsCommand(o),
		forbiddenCommand(o),
		usersCommand(o),
		aclsCommand(o),
		keysCommand(o),
		rawCommand(o),
		verifyCommand(o),
		compareCQCommand(o),
		popCommand(o),
		txnCommand(o),
		timerCommand(o),
		exportCommand(o),
		importDLedgerCommand(o),
		rocketmqCheckCommand(o),
		rocksDBCommand(o),
	)
	return root
}

// storeFunc is the body of a command that reads a store.
type storeFunc func(ctx context.Context, s *store, out *output) error

// withStore opens the store for a command body and closes it after.
func withStore(o *globalOptions, fn storeFunc) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) (err error) {
		s, err := openStore(cmd.Context(), o, cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		defer func() {
			if cerr := s.close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
		return fn(cmd.Context(), s, newOutput(cmd.OutOrStdout(), o.json))
	}
}

package main

import (
	"errors"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/migrate/dledger"
)

func importDLedgerCommand(o *globalOptions) *cobra.Command {
	var out, dataDir string
	cmd := &cobra.Command{
		Use:   "import-dledger --out DIR [--dledger-data DIR]",
		Short: "Move a RocketMQ store of DLedger mode (enableDLegerCommitLog=true) to a new rocketkv store",
		Long: `import-dledger reads the DLedger CommitLog of a stopped Apache RocketMQ
broker that ran with enableDLegerCommitLog=true (--store, its
storePathRootDir, holding dledger-<selfId>/data; --dledger-data names the
data directory when storePathDLedgerCommitLog moved it) and writes a new
rocketkv store at --out (which must not exist or be empty):

  commitlog/     every message as RocketMQ stored it (topic, queue id,
                 queue offset, store time, properties, body), in RocketMQ's
                 plain CommitLog format, segments of DLedger's file size
                 (mappedFileSizeCommitLog), starting where DLedger's first
                 file starts; each message gets a new physical offset
  consumequeue/  RocketMQ's consumequeue files with the new offsets
  config/        a copy of the store's config/ (topics, subscription
                 groups, consumer offsets, delay progress, ...)

Start a broker on --out with the same mappedFileSizeCommitLog and without
enableDLegerCommitLog: its first open imports config/ and rebuilds the
queues from the CommitLog, every message at the queue offset it had, so
the consumer offsets stay valid. The source store is not changed.

Physical offsets change (a DLedger entry's 48-byte header is gone), and so
do the message ids of the offset form (the msgId a send returned, not the
client's UNIQ_KEY): a query by such an old id finds nothing.

The import stops at a torn tail (the last entry unfinished, as a broker
killed mid-write leaves it) and says so; damage elsewhere (a bad magic, an
entry out of place, a message whose body CRC fails) stops it with an error
naming the file and the byte. Entries past the committedIndex of DLedger's
checkpoint are imported and counted in a warning: import the store of the
group's leader, stopped after its followers caught up.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.broker != "" {
				return errors.New("import-dledger reads a stopped RocketMQ store (--store), not a running broker")
			}
			if out == "" {
				return errors.New("import-dledger needs --out, the new store's directory")
			}
			res, err := dledger.Import(cmd.Context(), dledger.ImportOptions{
				Root: o.store, DataDir: dataDir, Out: out,
				Logger: zerolog.Nop(), // the warnings are printed below
			})
			if err != nil {
				return err
			}
			w := newOutput(cmd.OutOrStdout(), o.json)
			if o.json {
				return w.object(struct {
					Kind string `json:"kind"`
					Out  string `json:"out"`
					dledger.ImportResult
				}{"import-dledger", out, res})
			}
			if err := w.line("imported %d messages of %s (entries %d to %d) into %s: commitlog [%d, %d), %d consumequeue files, %d config files",
				res.Messages, res.DataDir, res.FirstIndex, res.LastIndex, out, res.MinOffset, res.MaxOffset, res.QueueFiles, res.ConfigFiles); err != nil {
				return err
			}
			if err := w.line("start the broker on it with storePathRootDir=%s and mappedFileSizeCommitLog=%d", out, res.FileSize); err != nil {
				return err
			}
			for _, m := range res.Warnings {
				if err := w.line("warning: %s", m); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory of the new rocketkv store (must not exist or be empty)")
	cmd.Flags().StringVar(&dataDir, "dledger-data", "", "DLedger's data directory (default: <store>/dledger-*/data, when there is one)")
	return cmd
}

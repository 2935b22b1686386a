// Command namesrv runs a RocketMQ-compatible name server.
//
//	namesrv --listen :9876 --log-level info
//
// It stops cleanly on SIGINT or SIGTERM: connections are closed and every
// goroutine is awaited before it exits.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/logging"
	"github.com/rocketkv/rocketkv/namesrv"
)

// options are the command-line flags.
type options struct {
	listen       string
	logLevel     string
	logFormat    string
	kvConfig     string
	orderMessage bool
	shutdownWait time.Duration
}

func main() {
	if err := newCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "namesrv:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:           "namesrv",
		Short:         "RocketMQ-compatible name server",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return run(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", ":9876", "listen address")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: trace, debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", string(logging.Auto), "log format: auto, console or json")
	f.StringVar(&o.kvConfig, "kv-config", "", "file persisting the KV configuration (Java's kvConfig.json); empty keeps it in memory")
	f.BoolVar(&o.orderMessage, "order-message-enable", false, "add orderTopicConf from the ORDER_TOPIC_CONFIG namespace to routes")
	f.DurationVar(&o.shutdownWait, "shutdown-timeout", 10*time.Second, "how long a shutdown may take")
	return cmd
}

// run serves until ctx is done, then shuts down.
func run(ctx context.Context, o options) error {
	log, err := logging.New(os.Stderr, o.logLevel, logging.Format(o.logFormat))
	if err != nil {
		return err
	}
	log = log.With().Str("component", "namesrv").Logger()
	cfg := namesrv.DefaultConfig()
	cfg.Remoting.Addr = o.listen
	cfg.KVConfigPath = o.kvConfig
	cfg.OrderMessageEnable = o.orderMessage
	srv, err := namesrv.NewServer(cfg, log)
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownWait)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Command proxy serves RocketMQ 5's gRPC protocol in front of rocketkv
// brokers, as RocketMQ's proxy does in cluster mode (mqproxy): RocketMQ 5
// clients (Java 5.x, Go v5, C++, .NET, Node.js, Python, Rust) connect to
// it on port 8081, and it finds brokers through the name servers: those
// -n or namesrvAddr names, or, with namesrvDomain, those an HTTP address
// server names (asked again every 2 minutes).
//
//	proxy [-c rmq-proxy.json] [-n 127.0.0.1:9876] [--listen :8081]
//
// -c reads RocketMQ proxy's rmq-proxy.json (or the same keys as properties
// or YAML; configs/proxy.yaml documents them); flags win over the file.
// -p prints the configuration that would run and exits. It stops cleanly
// on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/grpcproxy"
	"github.com/rocketkv/rocketkv/internal/cliflags"
	"github.com/rocketkv/rocketkv/internal/logging"
)

// options are the command-line flags.
type options struct {
	config string
	print  bool
	// shutdownWait, when positive, replaces grpcShutdownTimeSeconds.
	shutdownWait time.Duration
	// defaults give way to the file, overrides win over it; a later
	// source wins over an earlier one.
	defaults, overrides []configs.Source
}

func main() {
	if err := newCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "proxy:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	var (
		o    options
		sets []string
	)
	cmd := &cobra.Command{
		Use:           "proxy",
		Short:         "RocketMQ 5 gRPC proxy for rocketkv brokers",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.defaults, o.overrides, err = sources(cmd, sets, os.Getenv); err != nil {
				return err
			}
			if o.print {
				return printConfig(cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return run(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.config, "config", "c", "", "rmq-proxy.json, properties or YAML configuration (RocketMQ proxy's keys, see configs/proxy.yaml)")
	f.BoolVarP(&o.print, "print-config", "p", false, "print the configuration that would run, then exit")
	f.String("listen", ":8081", "gRPC listen address (overrides bindAddress and grpcServerPort)")
	f.StringP("namesrv", "n", "127.0.0.1:9876", "name server addresses, separated by ';' or ',' (overrides namesrvAddr; without either, NAMESRV_ADDR; not used with namesrvDomain)")
	f.String("log-level", "info", "log level: trace, debug, info, warn or error (overrides logLevel)")
	f.String("log-format", string(logging.Auto), "log format: auto, console or json (overrides logFormat)")
	f.StringArrayVar(&sets, "set", nil, "override one configuration key: --set key=value (repeatable)")
	f.DurationVar(&o.shutdownWait, "shutdown-timeout", 0, "how long a shutdown may wait for calls in progress (overrides grpcShutdownTimeSeconds, 30 s)")
	return cmd
}

// sources are the settings the flags (and, without -n, NAMESRV_ADDR)
// give, each named for the errors in it: the defaults, which give way to
// the file, and the overrides (cliflags.Overrides).
func sources(cmd *cobra.Command, sets []string, getenv func(string) string) (defaults, overrides []configs.Source, err error) {
	f := cmd.Flags()
	overrides, err = cliflags.Overrides(f, sets, cliflags.Listen{BindKey: "bindAddress", PortKey: "grpcServerPort"},
		cliflags.KeyFlag{Flag: "namesrv", Key: "namesrvAddr"},
		cliflags.KeyFlag{Flag: "log-level", Key: "logLevel"}, cliflags.KeyFlag{Flag: "log-format", Key: "logFormat"})
	if err != nil {
		return nil, nil, err
	}
	if env := getenv("NAMESRV_ADDR"); env != "" && !f.Changed("namesrv") {
		// RocketMQ's proxy starts from NAMESRV_ADDR; its file's
		// namesrvAddr, when it has one, wins.
		defaults = []configs.Source{{Name: "environment variable NAMESRV_ADDR", Values: map[string]string{"namesrvAddr": env}}}
	}
	return defaults, overrides, nil
}

// printConfig writes the configuration that would run as key=value lines
// to w, and the warnings of its keys to warnings.
func printConfig(w, warnings io.Writer, o options) error {
	loaded, err := configs.LoadProxyFrom(o.config, o.defaults, o.overrides)
	if err != nil {
		return err
	}
	// What the start would refuse is refused here too.
	if err := grpcproxy.CheckConfig(loaded.Proxy); err != nil {
		return err
	}
	return logging.PrintConfig(w, warnings, logging.Format(loaded.Proxy.LogFormat), o.config,
		loaded.UnknownKeys, loaded.InertKeys, loaded.Proxy.Settings())
}

// run serves until ctx is done, then shuts down.
func run(ctx context.Context, o options) (err error) {
	loaded, err := configs.LoadProxyFrom(o.config, o.defaults, o.overrides)
	if err != nil {
		return err
	}
	set := loaded.Proxy
	log, out, err := logging.Start("proxy", set.Log, set.LogLevel, logging.Format(set.LogFormat), os.Stderr)
	if err != nil {
		return err
	}
	// The file, when logDir names one, gets the error the run ends with
	// and is closed last.
	defer func() { out.Finish(log, err) }()
	logging.IgnoredKeys(log, o.config, loaded.UnknownKeys, loaded.InertKeys)
	pc, err := grpcproxy.ConfigFrom(set, log)
	if err != nil {
		return err
	}
	if o.shutdownWait > 0 {
		pc.ShutdownTimeout = o.shutdownWait
	}
	srv, err := grpcproxy.New(pc)
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	log.Info().Dur("wait", pc.ShutdownTimeout).Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), pc.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

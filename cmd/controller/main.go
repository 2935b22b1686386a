// Command controller runs a RocketMQ 5 controller, the service brokers in
// controller mode (enableControllerMode=true) get their ids, masters and
// sync state sets from, as RocketMQ's ControllerStartup (mqcontroller) does.
//
//	controller -c controller.properties
//	controller --set controllerDLegerPeers=n0-127.0.0.1:9878 --set controllerDLegerSelfId=n0
//
// -c reads RocketMQ's controller.properties keys (or the same keys in
// YAML; configs/controller.yaml documents them); --set and the other
// flags win over the file. -p prints the configuration that would run and
// exits, as mqcontroller -p does; mqcontroller's long forms (--configFile,
// --printConfigItem) work too. As RocketMQ's DLedger controller, it serves
// brokers on the port of its own controllerDLegerPeers entry (raft runs
// between the peers on the port after it); controllerDLegerPeers and
// controllerDLegerSelfId are required. It stops cleanly on SIGINT or
// SIGTERM.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/controller"
	"github.com/rocketkv/rocketkv/internal/certwatch"
	"github.com/rocketkv/rocketkv/internal/cliflags"
	"github.com/rocketkv/rocketkv/internal/listenconf"
	"github.com/rocketkv/rocketkv/internal/logging"
	"github.com/rocketkv/rocketkv/internal/tlsconf"
	"github.com/rocketkv/rocketkv/remoting"
)

// options are the command-line flags.
type options struct {
	config       string
	print        bool
	shutdownWait time.Duration
	// overrides are the keys set on the command line; they win over the
	// file.
	overrides []configs.Source
}

func main() {
	cmd := newCommand()
	cmd.SetArgs(rocketmqArgs(os.Args[1:]))
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	var (
		o    options
		sets []string
	)
	cmd := &cobra.Command{
		Use:           "controller",
		Short:         "RocketMQ-compatible controller (brokers in controller mode)",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			o.overrides, err = cliflags.Overrides(cmd.Flags(), sets, cliflags.Listen{},
				cliflags.KeyFlag{Flag: "log-level", Key: "logLevel"}, cliflags.KeyFlag{Flag: "log-format", Key: "logFormat"},
				cliflags.KeyFlag{Flag: "peers", Key: "controllerDLegerPeers"}, cliflags.KeyFlag{Flag: "self-id", Key: "controllerDLegerSelfId"},
				cliflags.KeyFlag{Flag: "store", Key: "controllerStorePath"})
			if err != nil {
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
	f.StringVarP(&o.config, "config", "c", "", "controller.properties or YAML configuration file (RocketMQ's keys, see configs/controller.yaml)")
	f.BoolVarP(&o.print, "print-config", "p", false, "print the configuration that would run, then exit")
	f.String("log-level", "info", "log level: trace, debug, info, warn or error (overrides logLevel)")
	f.String("log-format", string(logging.Auto), "log format: auto, console or json (overrides logFormat)")
	f.String("peers", "", "the controllers, n0-host:port;n1-host:port (overrides controllerDLegerPeers)")
	f.String("self-id", "", "this controller's id among the peers (overrides controllerDLegerSelfId)")
	f.String("store", "", "directory of the raft log and snapshots (overrides controllerStorePath; empty: ~/controller/store)")
	f.StringArrayVar(&sets, "set", nil, "override one configuration key: --set key=value (repeatable)")
	f.DurationVar(&o.shutdownWait, "shutdown-timeout", 10*time.Second, "how long a shutdown may take")
	return cmd
}

// rocketmqLongFlags are mqcontroller's long option names.
var rocketmqLongFlags = map[string]string{
	"--configFile":      "--config",
	"--printConfigItem": "--print-config",
}

// rocketmqArgs rewrites mqcontroller's long option names into this
// command's flags.
func rocketmqArgs(args []string) []string {
	return cliflags.RocketMQArgs(args, rocketmqLongFlags)
}

// printConfig writes the configuration that would run as key=value lines.
func printConfig(w, warnings io.Writer, o options) error {
	loaded, err := configs.LoadControllerFrom(o.config, o.overrides)
	if err != nil {
		return err
	}
	// A TLS certificate or key that cannot be loaded stops the start:
	// it is refused here too.
	if _, _, err := tlsconf.Listener("controller", loaded.Controller.TLS, zerolog.Nop()); err != nil {
		return err
	}
	if _, err := tlsconf.Client("controller", loaded.Controller.DialTLS(), loaded.Controller.TLS, zerolog.Nop()); err != nil {
		return err
	}
	return logging.PrintConfig(w, warnings, logging.Format(loaded.Controller.LogFormat), o.config,
		loaded.UnknownKeys, loaded.InertKeys, loaded.Controller.Settings())
}

// run serves until ctx is done, then shuts down.
func run(ctx context.Context, o options) (err error) {
	loaded, err := configs.LoadControllerFrom(o.config, o.overrides)
	if err != nil {
		return err
	}
	set := loaded.Controller
	log, out, err := logging.Start("controller", set.Log, set.LogLevel, logging.Format(set.LogFormat), os.Stderr)
	if err != nil {
		return err
	}
	// The file, when logDir names one, gets the error the run ends with
	// and is closed last.
	defer func() { out.Finish(log, err) }()
	logging.IgnoredKeys(log, o.config, loaded.UnknownKeys, loaded.InertKeys)
	var rs remoting.ServerConfig
	listenconf.Apply(&rs, set.Listener, set.ProxyProtocol)
	var tlsWatch *certwatch.Watcher
	if rs.TLSMode, rs.TLS, tlsWatch, err = tlsconf.WatchedListener("controller", set.TLS, log); err != nil {
		return err
	}
	// tls.enable (useTLS) and tls.client.*, as RocketMQ's
	// ControllerStartup fills its NettyClientConfig from the same file.
	clientTLS, err := tlsconf.Client("controller", set.DialTLS(), set.TLS, log)
	if err != nil {
		return err
	}
	opts := controller.Options{
		Config:        controller.ConfigFrom(set.Controller, set.ScanNotActiveBrokerInterval, set.ConfigBlackList),
		Settings:      configs.StandaloneControllerSettings(set),
		Log:           log,
		Metrics:       controller.MetricsFrom(set.Controller, log),
		ExtraSettings: controller.MetricsSettings(set.Controller),
		ClientTLS:     clientTLS,
		TLSWatch:      tlsWatch,
	}
	if o.config != "" {
		opts.Persist = func(m map[string]string) error { return configs.PersistControllerSettings(o.config, m) }
	}
	h, err := controller.StartHost(ctx, opts, rs)
	if err != nil {
		return err
	}
	<-ctx.Done()
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownWait)
	defer cancel()
	return h.Shutdown(sctx)
}

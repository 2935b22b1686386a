// Command namesrv runs a RocketMQ-compatible name server.
//
//	namesrv [-c namesrv.properties] [--listen :9876] [--log-level info]
//	namesrv --set tls.server.mode=enforcing --set tls.server.certPath=...
//
// -c reads RocketMQ's namesrv.properties keys (or the same keys in YAML;
// configs/namesrv.yaml documents them); flags given on the command line win
// over the file. -p prints the configuration that would run and exits, as
// mqnamesrv -p does. mqnamesrv's long forms (--configFile,
// --printConfigItem) work too, and its -n (--namesrvAddr) is accepted and
// ignored, as mqnamesrv ignores it. With enableControllerInNamesrv=true it
// also runs a RocketMQ 5 controller from the same keys (package
// controller; configs/controller.yaml), on the port of the controller's
// own controllerDLegerPeers entry, as RocketMQ's NamesrvStartup does. It
// stops cleanly on SIGINT or SIGTERM: connections are
// closed and every goroutine is awaited before it exits.
package main

import (
	"context"
	"crypto/tls"
	"errors"
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
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// options are the command-line flags.
type options struct {
	config string
	print  bool
	// namesrvAddr is -n's value, which a name server has no use for;
	// mqnamesrv accepts and ignores it, so scripts pass it.
	namesrvAddr  string
	shutdownWait time.Duration
	// overrides are the configuration keys set by flags given on the
	// command line, each flag's named for its errors; they win over the
	// file.
	overrides []configs.Source
}

func main() {
	cmd := newCommand()
	cmd.SetArgs(rocketmqArgs(os.Args[1:]))
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "namesrv:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	var (
		o    options
		sets []string
	)
	cmd := &cobra.Command{
		Use:           "namesrv",
		Short:         "RocketMQ-compatible name server",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			o.overrides, err = cliflags.Overrides(cmd.Flags(), sets, cliflags.Listen{BindKey: "bindAddress", PortKey: "listenPort"},
				cliflags.KeyFlag{Flag: "log-level", Key: "logLevel"}, cliflags.KeyFlag{Flag: "log-format", Key: "logFormat"},
				cliflags.KeyFlag{Flag: "kv-config", Key: "kvConfigPath"}, cliflags.KeyFlag{Flag: "order-message-enable", Key: "orderMessageEnable"})
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
	f.StringVarP(&o.config, "config", "c", "", "namesrv.properties or YAML configuration file (RocketMQ's keys, see configs/namesrv.yaml)")
	f.BoolVarP(&o.print, "print-config", "p", false, "print the configuration that would run, then exit")
	f.String("listen", ":9876", "listen address (overrides bindAddress and listenPort)")
	f.String("log-level", "info", "log level: trace, debug, info, warn or error (overrides logLevel)")
	f.String("log-format", string(logging.Auto), "log format: auto, console or json (overrides logFormat)")
	f.String("kv-config", "", "file persisting the KV configuration, Java's kvConfig.json (overrides kvConfigPath; empty keeps it in memory)")
	f.Bool("order-message-enable", false, "add orderTopicConf from the ORDER_TOPIC_CONFIG namespace to routes (overrides orderMessageEnable)")
	f.StringVarP(&o.namesrvAddr, "namesrv-addr", "n", "", "ignored, as mqnamesrv ignores its -n: a name server registers with no name server")
	f.StringArrayVar(&sets, "set", nil, "override one configuration key: --set key=value (repeatable), e.g. --set tls.server.mode=enforcing")
	f.DurationVar(&o.shutdownWait, "shutdown-timeout", 10*time.Second, "how long a shutdown may take, after the wait of enableShutdownGracefully")
	return cmd
}

// rocketmqLongFlags are mqnamesrv's long option names, as its scripts
// and operators write them, with the flag each one is here.
var rocketmqLongFlags = map[string]string{
	"--configFile":      "--config",
	"--printConfigItem": "--print-config",
	"--namesrvAddr":     "--namesrv-addr",
}

// rocketmqArgs rewrites mqnamesrv's long option names, in "--name value"
// or "--name=value" form, into this command's flags.
func rocketmqArgs(args []string) []string {
	return cliflags.RocketMQArgs(args, rocketmqLongFlags)
}

// ignoredNamesrvAddr is the line that tells -n's value is not used.
const ignoredNamesrvAddr = "-n (--namesrvAddr) is ignored, as mqnamesrv ignores it: a name server registers with no name server"

// printConfig writes the configuration that would run as key=value lines
// to w, and the warnings of its keys to warnings.
func printConfig(w, warnings io.Writer, o options) error {
	loaded, err := configs.LoadNamesrvFrom(o.config, o.overrides)
	if err != nil {
		return err
	}
	// A TLS certificate or key that cannot be loaded stops the start:
	// it is refused here too.
	if _, _, err := tlsconf.Listener("name server", loaded.Namesrv.TLS, zerolog.Nop()); err != nil {
		return err
	}
	if _, err := tlsconf.Client("name server", loaded.Namesrv.DialTLS(), loaded.Namesrv.TLS, zerolog.Nop()); err != nil {
		return err
	}
	if o.namesrvAddr != "" {
		fmt.Fprintln(warnings, "namesrv:", ignoredNamesrvAddr)
	}
	return logging.PrintConfig(w, warnings, logging.Format(loaded.Namesrv.LogFormat), o.config,
		loaded.UnknownKeys, loaded.InertKeys, loaded.Namesrv.Settings())
}

// run serves until ctx is done, then shuts down.
func run(ctx context.Context, o options) (err error) {
	loaded, err := configs.LoadNamesrvFrom(o.config, o.overrides)
	if err != nil {
		return err
	}
	set := loaded.Namesrv
	log, out, err := logging.Start("namesrv", set.Log, set.LogLevel, logging.Format(set.LogFormat), os.Stderr)
	if err != nil {
		return err
	}
	// The file, when logDir names one, gets the error the run ends with
	// and is closed last.
	defer func() { out.Finish(log, err) }()
	log = log.With().Str("component", "namesrv").Logger()
	logging.IgnoredKeys(log, o.config, loaded.UnknownKeys, loaded.InertKeys)
	if o.namesrvAddr != "" {
		log.Info().Str("namesrvAddr", o.namesrvAddr).Msg(ignoredNamesrvAddr)
	}
	srv, err := namesrv.NewServer(namesrv.ConfigFrom(set, o.config), log)
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	var ctl *controller.Host
	if set.EnableControllerInNamesrv {
		// As RocketMQ's NamesrvStartup: the controller runs beside the
		// name server, from the same keys, on its own port.
		var rs remoting.ServerConfig
		listenconf.Apply(&rs, set.Listener, set.ProxyProtocol)
		// RocketMQ's TLS settings are the process's: the controller's
		// listener takes the name server's.
		var clientTLS *tls.Config
		var tlsWatch *certwatch.Watcher
		if rs.TLSMode, rs.TLS, tlsWatch, err = tlsconf.WatchedListener("controller", set.TLS, log); err == nil {
			// The name server's tls.enable (useTLS) and tls.client.*:
			// RocketMQ hands the name server's NettyClientConfig to its
			// controller.
			clientTLS, err = tlsconf.Client("controller", set.DialTLS(), set.TLS, log)
		}
		if err == nil {
			opts := controller.Options{
				Config:   controller.ConfigFrom(set.Controller, set.ScanNotActiveBrokerInterval, set.ConfigBlackList),
				Settings: configs.NamesrvControllerSettings(set),
				Log:      log,
				// RocketMQ's name server has no metrics of its own: the
				// metrics keys of its file are the embedded controller's.
				Metrics:       controller.MetricsFrom(set.Controller, log),
				ExtraSettings: controller.MetricsSettings(set.Controller),
				ClientTLS:     clientTLS,
				TLSWatch:      tlsWatch,
			}
			if o.config != "" {
				opts.Persist = func(m map[string]string) error { return configs.PersistNamesrvSettings(o.config, m) }
			}
			ctl, err = controller.StartHost(ctx, opts, rs)
		}
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), o.shutdownWait)
			defer cancel()
			return errors.Join(fmt.Errorf("enableControllerInNamesrv: %w", err), srv.Shutdown(sctx))
		}
	}
	<-ctx.Done()
	log.Info().Msg("shutting down")
	// enableShutdownGracefully's wait comes on top of the stop's own time.
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownWait+set.Listener.GoAwayWait())
	defer cancel()
	var errs []error
	if ctl != nil {
		errs = append(errs, ctl.Shutdown(sctx))
	}
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.Canceled) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

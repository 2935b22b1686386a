// Command broker runs a rocketkv broker: a RocketMQ-compatible broker whose
// CommitLog is RocketMQ's and whose indexes live in Pebble.
//
//	broker -c broker.conf [-n 'host:port;host:port']
//	broker -c broker.yaml --set listenPort=10921
//	broker -c broker.conf --pprof 127.0.0.1:6060   # profiles at http://127.0.0.1:6060/debug/pprof/
//	broker -c broker.conf -p                        # print the configuration that would run, as mqbroker -p
//	broker -c broker.conf -m                        # only its important keys, as mqbroker -m
//	broker -c broker.conf --enable-proxy [-pc rmq-proxy.json]   # also serve RocketMQ 5's gRPC clients on :8081, as mqbroker --enable-proxy
//
// The configuration file is RocketMQ's broker.conf (key=value) or YAML with
// the same keys (see configs/broker.yaml). When neither the file nor -n
// names the name servers, the NAMESRV_ADDR environment variable does, as
// for RocketMQ's mqbroker, or failing it an HTTP address server
// (fetchNamesrvAddrByAddressServer). It stops cleanly on SIGINT or
// SIGTERM, so the next start is a normal recovery.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/broker"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/grpcproxy"
	"github.com/rocketkv/rocketkv/internal/cliflags"
	"github.com/rocketkv/rocketkv/internal/logging"
)

type options struct {
	config  string
	namesrv string
	// namesrvEnv is NAMESRV_ADDR's value: namesrvAddr unless the file or
	// -n names one.
	namesrvEnv   string
	store        string
	sets         []string
	shutdownWait time.Duration
	pprofAddr    string
	print        bool
	// printImportant prints RocketMQ's important keys only (mqbroker -m).
	printImportant bool
	// enableProxy also runs the gRPC proxy (bin/proxy) in the broker's
	// process, configured by proxyConfig (rmq-proxy.json), finding
	// brokers through the broker's name servers.
	enableProxy bool
	proxyConfig string
	// cutCommitLogAt is where a slave's CommitLog is cut at start (0: not
	// cut).
	cutCommitLogAt int64
}

func main() {
	cmd := newCommand()
	cmd.SetArgs(rocketmqArgs(os.Args[1:]))
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "broker:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:           "broker",
		Short:         "RocketMQ-compatible broker with a Pebble index",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.namesrvEnv = os.Getenv(namesrvAddrEnv)
			if o.print || o.printImportant {
				return printConfig(cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return run(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.config, "config", "c", "", "broker.conf (properties) or YAML configuration file")
	f.StringVarP(&o.namesrv, "namesrv-addr", "n", "", "name servers, host:port separated by ';' (overrides namesrvAddr; without either, NAMESRV_ADDR)")
	f.StringVar(&o.store, "store", "", "store root directory (overrides storePathRootDir)")
	f.StringArrayVar(&o.sets, "set", nil, "override one configuration key: --set key=value (repeatable)")
	f.DurationVar(&o.shutdownWait, "shutdown-timeout", 30*time.Second, "how long a clean shutdown may take, after the wait of enableShutdownGracefully")
	f.BoolVarP(&o.print, "print-config", "p", false, "print the configuration that would run (every key, key=value), then exit")
	f.BoolVarP(&o.printImportant, "print-important", "m", false, "print the important keys of the configuration that would run (those mqbroker -m prints), then exit")
	f.StringVar(&o.pprofAddr, "pprof", "", "serve Go's profiling endpoints (/debug/pprof/) on this address, e.g. 127.0.0.1:6060; off when empty")
	f.BoolVar(&o.enableProxy, "enable-proxy", false, "also serve RocketMQ 5's gRPC clients (the proxy of bin/proxy, on grpcServerPort 8081), as mqbroker --enable-proxy")
	f.StringVar(&o.proxyConfig, "proxy-config", "", "the proxy's rmq-proxy.json (also -pc, as RocketMQ's); namesrvAddr defaults to the broker's")
	f.Int64Var(&o.cutCommitLogAt, "cut-commitlog-at", 0, "a slave only, once: remove its CommitLog records from this offset on (the cutAt its log gives when they are not its master's) before it starts (a restart asked for the same offset does not cut again)")
	return cmd
}

// rocketmqLongFlags are mqbroker's options, as its scripts and
// operators write them, with the flag each one is here.
var rocketmqLongFlags = map[string]string{
	"--configFile":           "--config",
	"--namesrvAddr":          "--namesrv-addr",
	"--printConfigItem":      "--print-config",
	"--printImportantConfig": "--print-important",
	"-pc":                    "--proxy-config",
}

// rocketmqArgs rewrites the flags of RocketMQ's mqbroker that a flag
// parser would read otherwise, or not at all: "-pc FILE" (the proxy's
// configuration), which would be -p and -c, and mqbroker's long option
// names (--configFile, --namesrvAddr, --printConfigItem,
// --printImportantConfig).
func rocketmqArgs(args []string) []string {
	return cliflags.RocketMQArgs(args, rocketmqLongFlags)
}

// importantKeys are the keys RocketMQ 5.3 marks @ImportantField, which
// mqbroker -m prints, less those rocketkv does not have.
var importantKeys = []string{
	"namesrvAddr", "listenPort", "brokerIP1", "brokerIP2", "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
	"msgTraceTopicName", "traceTopicEnable", "rejectTransactionMessage", "transactionTimeOut", "transactionCheckMax",
	"transactionCheckInterval", "aclEnable", "storePathRootDir", "storePathCommitLog", "storeType", "flushIntervalCommitLog",
	"deleteWhen", "diskMaxUsedSpaceRatio", "fileReservedTime", "maxTransferBytesOnMessageInMemory",
	"maxTransferCountOnMessageInMemory", "accessMessageInMemoryMaxRatio", "messageIndexEnable", "haListenPort",
	"haMasterAddress", "haMaxGapNotInSync", "brokerRole", "flushDiskType", "cleanFileForciblyEnable",
	"wakeFlushWhenPutMessage", "inSyncReplicas", "minInSyncReplicas", "haFlowControlEnable",
}

// printConfig writes the configuration that would run as key=value lines
// to w, and the warnings of its keys to warnings. What the start would
// refuse before it opens the store is refused here too
// (broker.Preflight: the ACL file, the TLS certificate, brokerIP1's host
// name; with --enable-proxy, the proxy's configuration), and the values
// the start derives (brokerIP1, brokerId, haListenPort, ...) are printed
// as it derives them, as mqbroker -p prints them.
func printConfig(w, warnings io.Writer, o options) error {
	loaded, err := loadConfig(o)
	if err != nil {
		return err
	}
	cfg, err := broker.Preflight(loaded.Broker)
	if err != nil {
		return err
	}
	if o.enableProxy {
		if err := checkProxyConfig(o.proxyConfig, cfg); err != nil {
			return err
		}
	}
	settings := cfg.Settings()
	if o.printImportant && !o.print {
		important := make(map[string]string, len(importantKeys))
		for _, k := range importantKeys {
			if v, ok := settings[k]; ok {
				important[k] = v
			}
		}
		settings = important
	}
	return logging.PrintConfig(w, warnings, logging.Format(cfg.LogFormat), o.config,
		loaded.UnknownKeys, loaded.InertKeys, settings)
}

// namesrvAddrEnv is the environment variable RocketMQ's broker takes its
// namesrvAddr from when neither its file nor -n names one
// (BrokerConfig's default, MixAll.NAMESRV_ADDR_ENV).
const namesrvAddrEnv = "NAMESRV_ADDR"

// loadConfig reads the configuration file with the flags' overrides, and
// namesrvAddr from NAMESRV_ADDR (o.namesrvEnv) when neither names it. An
// error in a value names where it came from: the flag, the environment
// variable, or the file's line.
func loadConfig(o options) (configs.Loaded, error) {
	sets := map[string]string{}
	if err := cliflags.AddSets(o.sets, sets); err != nil {
		return configs.Loaded{}, err
	}
	var defaults []configs.Source
	if o.namesrvEnv != "" {
		defaults = append(defaults, configs.Source{Name: "environment variable " + namesrvAddrEnv,
			Values: map[string]string{"namesrvAddr": o.namesrvEnv}})
	}
	// The dedicated flags come last: they win over --set.
	overrides := []configs.Source{{Name: "flag --set", Values: sets}}
	if o.namesrv != "" {
		overrides = append(overrides, configs.Source{Name: "flag -n (--namesrv-addr)", Values: map[string]string{"namesrvAddr": o.namesrv}})
	}
	if o.store != "" {
		overrides = append(overrides, configs.Source{Name: "flag --store", Values: map[string]string{"storePathRootDir": o.store}})
	}
	return configs.LoadBrokerFrom(o.config, defaults, overrides)
}

func run(ctx context.Context, o options) (err error) {
	loaded, err := loadConfig(o)
	if err != nil {
		return err
	}
	cfg := loaded.Broker
	log, out, err := logging.Start("broker", cfg.LogFile(), cfg.LogLevel, logging.Format(cfg.LogFormat), os.Stderr)
	if err != nil {
		return err
	}
	// The file, when logDir names one, gets the error the run ends with
	// and is closed last.
	defer func() { out.Finish(log, err) }()
	logging.IgnoredKeys(log, o.config, loaded.UnknownKeys, loaded.InertKeys)
	gcPercent, memoryLimit := applyGCSettings(cfg, os.Getenv)
	gcLog := log.Info().Int("gcPercent", gcPercent)
	if memoryLimit != math.MaxInt64 {
		gcLog = gcLog.Int64("memoryLimitMiB", memoryLimit>>20)
	}
	gcLog.Msg("garbage collector settings")
	log.Info().Int("goMaxProcs", applyMaxProcs(cfg, os.Getenv)).Int("cpus", runtime.NumCPU()).Msg("scheduler processors")
	if o.pprofAddr != "" {
		stopPprof, err := servePprof(o.pprofAddr)
		if err != nil {
			return err
		}
		defer stopPprof()
		log.Info().Str("addr", o.pprofAddr).Msg("serving /debug/pprof/")
	}
	b, err := newRunner(cfg, log)
	if err != nil {
		return err
	}
	if o.config != "" {
		b.SetConfigFile(o.config)
	}
	if o.cutCommitLogAt > 0 {
		b.CutCommitLogAt(o.cutCommitLogAt)
	}
	if err := b.Start(ctx); err != nil {
		return err
	}
	var px *grpcproxy.Server
	if o.enableProxy {
		if px, err = startProxy(ctx, o.proxyConfig, cfg, log); err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), o.shutdownWait)
			defer cancel()
			return errors.Join(err, b.Shutdown(sctx))
		}
	}
	<-ctx.Done()
	// enableShutdownGracefully's waits come on top of the stop's own time.
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownWait+b.GoAwayWait())
	defer cancel()
	var pxErr error
	if px != nil {
		pxErr = px.Shutdown(sctx)
	}
	return errors.Join(pxErr, b.Shutdown(sctx))
}

// runner is what bin/broker runs: a Broker, or in controller mode
// (enableControllerMode) the Supervisor that runs the Broker in the role
// its controller gives it.
type runner interface {
	SetConfigFile(path string)
	CutCommitLogAt(offset int64)
	Start(ctx context.Context) error
	Shutdown(ctx context.Context) error
	GoAwayWait() time.Duration
}

// newRunner returns the runner for cfg.
func newRunner(cfg configs.Broker, log zerolog.Logger) (runner, error) {
	if cfg.EnableControllerMode {
		return broker.NewSupervisor(cfg, log)
	}
	return broker.New(cfg, log)
}

// startProxy starts the gRPC proxy next to the broker: its configuration
// from path (RocketMQ's rmq-proxy.json, or none), its name servers the
// broker's, or the broker's address server, unless the file names others
// (see loadProxyConfig). Unlike RocketMQ's local mode it
// reaches this broker (and the others) through the name servers.
func startProxy(ctx context.Context, path string, cfg configs.Broker, log zerolog.Logger) (*grpcproxy.Server, error) {
	loaded, err := loadProxyConfig(path, cfg)
	if err != nil {
		return nil, err
	}
	plog := log.With().Str("component", "grpcproxy").Logger()
	logging.IgnoredKeys(plog, path, loaded.UnknownKeys, loaded.InertKeys)
	if loaded.Proxy.Log.Dir != "" {
		plog.Warn().Str("logDir", loaded.Proxy.Log.Dir).Str("file", path).
			Msg("the proxy's logDir has no effect with --enable-proxy: its lines go to the broker's log")
	}
	pc, err := grpcproxy.ConfigFrom(loaded.Proxy, log)
	if err != nil {
		return nil, err
	}
	px, err := grpcproxy.New(pc)
	if err != nil {
		return nil, err
	}
	if err := px.Start(ctx); err != nil {
		return nil, err
	}
	return px, nil
}

// loadProxyConfig reads the proxy's configuration at path (RocketMQ's
// rmq-proxy.json, or none), its name servers the broker's unless the
// file names others: the broker's namesrvAddr, or, for a broker that asks
// an address server for them (fetchNamesrvAddrByAddressServer without
// namesrvAddr), that address server as the proxy's namesrvDomain and
// namesrvDomainSubgroup, so that the proxy follows the list the broker
// follows. A file's namesrvDomain (even empty) wins over the broker's;
// as in RocketMQ a namesrvDomain wins over namesrvAddr. The proxy dials
// with TLS as the broker does (brokerDialTLS) unless the file sets
// tls.enable or tls.client.* itself.
func loadProxyConfig(path string, cfg configs.Broker) (configs.LoadedProxy, error) {
	var defaults []configs.Source
	switch {
	case cfg.NamesrvAddr != "":
		// Unless the file names its own.
		defaults = []configs.Source{{Name: "the broker's namesrvAddr", Values: map[string]string{"namesrvAddr": cfg.NamesrvAddr}}}
	case cfg.FetchNamesrvAddrByAddressServer:
		defaults = []configs.Source{{Name: "the broker's address server (rmqAddressServerDomain, rmqAddressServerSubGroup)",
			Values: map[string]string{"namesrvDomain": cfg.RmqAddressServerDomain, "namesrvDomainSubgroup": cfg.RmqAddressServerSubGroup}}}
	}
	dial, err := brokerDialTLS(cfg)
	if err != nil {
		return configs.LoadedProxy{}, err
	}
	defaults = append(defaults, dial)
	loaded, err := configs.LoadProxyFrom(path, defaults, nil)
	if err != nil {
		return configs.LoadedProxy{}, fmt.Errorf("proxy configuration: %w", err)
	}
	return loaded, nil
}

// brokerDialTLS is how the broker of cfg dials with TLS, as defaults of
// its proxy's keys: whether it does (tls.enable, or its tls.server.mode)
// and its tls.client.* keys, those of its tls.config.file applied. In
// RocketMQ the proxy that --enable-proxy embeds shares the broker's JVM
// and so its TLS system properties: its clients dial with TLS when the
// broker's tls.enable (or tls.server.mode) says so, with the broker's
// client certificate.
func brokerDialTLS(cfg configs.Broker) (configs.Source, error) {
	t, _, err := cfg.TLS.WithConfigFile()
	if err != nil {
		return configs.Source{}, fmt.Errorf("proxy configuration: the broker's TLS: %w", err)
	}
	return configs.Source{Name: "the broker's tls.enable and tls.client.*", Values: map[string]string{
		"tls.enable":               strconv.FormatBool(cfg.DialNamesrvTLS()),
		"tls.client.certPath":      t.ClientCertPath,
		"tls.client.keyPath":       t.ClientKeyPath,
		"tls.client.keyPassword":   t.ClientKeyPassword,
		"tls.client.authServer":    strconv.FormatBool(t.ClientAuthServer),
		"tls.client.trustCertPath": t.ClientTrustCertPath,
	}}, nil
}

// checkProxyConfig returns the error --enable-proxy's start would refuse
// the proxy's configuration with, without starting it.
func checkProxyConfig(path string, cfg configs.Broker) error {
	loaded, err := loadProxyConfig(path, cfg)
	if err != nil {
		return err
	}
	if _, err := grpcproxy.ConfigFrom(loaded.Proxy, zerolog.Nop()); err != nil {
		return fmt.Errorf("proxy configuration: %w", err)
	}
	return nil
}

// servePprof serves net/http/pprof's handlers on addr from a goroutine; the
// returned function closes the listener and waits for that goroutine.
func servePprof(addr string) (func(), error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "broker: pprof server:", err)
		}
	}()
	return func() {
		_ = srv.Close()
		<-done
	}, nil
}

// applyMaxProcs sets the Go scheduler's processor count from the
// configuration unless the GOMAXPROCS environment variable is set and so
// already in force, and returns the count in force. goMaxProcs 0 adds one
// processor to the runtime's default: see goMaxProcs in
// configs/broker.yaml for why.
func applyMaxProcs(cfg configs.Broker, getenv func(string) string) int {
	if getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	n := cfg.GoMaxProcs
	if n == 0 {
		n = runtime.GOMAXPROCS(0) + 1
	}
	runtime.GOMAXPROCS(n)
	return n
}

// applyGCSettings sets the Go runtime's GC target and soft memory limit
// from the configuration, each unless its environment variable (GOGC,
// GOMEMLIMIT) is set and so already in force, and returns the settings in
// force (a memory limit of math.MaxInt64 is none).
func applyGCSettings(cfg configs.Broker, getenv func(string) string) (gcPercent int, memoryLimit int64) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.GCPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		limit := int64(math.MaxInt64)
		if cfg.MemoryLimitMiB > 0 {
			limit = int64(cfg.MemoryLimitMiB) << 20
		}
		debug.SetMemoryLimit(limit)
	}
	gcPercent = debug.SetGCPercent(-1)
	debug.SetGCPercent(gcPercent)
	return gcPercent, debug.SetMemoryLimit(-1)
}

package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/certwatch"
	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/remoting"
)

// ConfigFrom turns the loaded controller keys into a Config:
// scanNotActiveBrokerInterval and configBlackList come from the hosting
// configuration (the standalone controller's file, or the name server's,
// which RocketMQ reads for both), an empty controllerStorePath becomes
// configs.DefaultControllerStorePath.
func ConfigFrom(c configs.Controller, scanNotActiveBrokerInterval time.Duration, configBlackList string) Config {
	cfg := DefaultConfig()
	cfg.Group = c.Group
	cfg.Peers = c.Peers
	cfg.SelfID = c.SelfID
	cfg.StorePath = c.StorePathOrDefault()
	cfg.ScanNotActiveBrokerInterval = scanNotActiveBrokerInterval
	cfg.ScanInactiveMasterInterval = c.ScanInactiveMasterInterval
	cfg.ElectMasterMaxRetryCount = c.ElectMasterMaxRetryCount
	cfg.EnableElectUncleanMaster = c.EnableElectUncleanMaster
	cfg.NotifyBrokerRoleChanged = c.NotifyBrokerRoleChanged
	cfg.ProcessReadEvent = c.ProcessReadEvent
	cfg.ConfigBlackList = configBlackList
	return cfg
}

// Host is a Controller with the Remoting server brokers reach it on, and
// the exporter of its metrics when Options.Metrics is set.
type Host struct {
	// Controller is the hosted controller.
	Controller *Controller
	srv        *remoting.Server
	// exp is nil unless Options.Metrics is set.
	exp *metrics.Exporter
	// stopWatch ends Options.TLSWatch's run, watchDone is closed when it
	// returned (both nil without one).
	stopWatch context.CancelFunc
	watchDone chan struct{}
}

// StartHost starts a controller and serves it on rs (rs.Addr empty: every
// interface at the port of its own controllerDLegerPeers entry, where
// RocketMQ's controller listens), its raft port (with several peers) with
// rs's TLS too, and its metrics on opts.Metrics.Addr when opts.Metrics is
// set; an address the exporter cannot listen on stops the start, as it
// stops RocketMQ's. Shutdown stops them all.
//
// A single peer at port 0 ("n0-127.0.0.1:0", for tests) is served on a
// free port of that host, which then becomes its peer address (the leader
// address GET_METADATA_INFO reports).
func StartHost(ctx context.Context, opts Options, rs remoting.ServerConfig) (*Host, error) {
	// The raft port serves with the listener's TLS, as RocketMQ's DLedger
	// controller serves brokers and peers on one Remoting server.
	opts.RaftTLSMode, opts.RaftTLS = rs.TLSMode, rs.TLS
	if peers, err := ParsePeers(opts.Config.Peers); err == nil && len(peers) == 1 && peers[0].ID == opts.Config.SelfID {
		if host, port, _ := net.SplitHostPort(peers[0].Addr); port == "0" {
			return startOnFreePort(ctx, opts, rs, peers[0].ID, host)
		}
	}
	c, err := New(opts)
	if err != nil {
		return nil, err
	}
	if rs.Addr == "" {
		if rs.Addr, err = opts.Config.ListenAddr(); err != nil {
			return nil, err
		}
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	srv := remoting.NewServer(rs, c.Handler(), opts.Log.With().Str("component", "controller").Logger())
	if err := srv.Start(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("controller listener on %s: %w", rs.Addr, err), c.Close())
	}
	return serveHost(ctx, opts, c, srv)
}

// startOnFreePort listens first, then starts the controller with the
// address it got as its peer address.
func startOnFreePort(ctx context.Context, opts Options, rs remoting.ServerConfig, id, host string) (*Host, error) {
	mux := remoting.NewMux()
	rs.Addr = net.JoinHostPort(host, "0")
	srv := remoting.NewServer(rs, mux, opts.Log.With().Str("component", "controller").Logger())
	if err := srv.Start(ctx); err != nil {
		return nil, fmt.Errorf("controller listener on %s: %w", rs.Addr, err)
	}
	opts.Config.Peers = id + "-" + srv.Addr().String()
	c, err := New(opts)
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		return nil, errors.Join(err, srv.Shutdown(ctx))
	}
	c.Register(mux)
	return serveHost(ctx, opts, c, srv)
}

// serveHost starts the metrics exporter of a started controller served
// on srv, stopping both when it cannot.
func serveHost(ctx context.Context, opts Options, c *Controller, srv *remoting.Server) (*Host, error) {
	h := &Host{Controller: c, srv: srv}
	if opts.Metrics != nil {
		exp, err := metrics.Serve(opts.Metrics.Addr, c.Metrics(), c.log)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("controller metrics (metricsExporterType=PROM): %w", err), srv.Shutdown(ctx), c.Close())
		}
		h.exp = exp
	}
	if w := opts.TLSWatch; w != nil {
		var wctx context.Context
		wctx, h.stopWatch = context.WithCancel(context.Background())
		h.watchDone = make(chan struct{})
		go func() {
			defer close(h.watchDone)
			w.Run(wctx, certwatch.DefaultInterval)
		}()
	}
	opts.Log.Info().Str("addr", srv.Addr().String()).Str("self", c.self.ID).Msg("controller serving")
	return h, nil
}

// MetricsAddr is the address the metrics are served on, nil when they
// are not.
func (h *Host) MetricsAddr() net.Addr {
	if h.exp == nil {
		return nil
	}
	return h.exp.Addr()
}

// Addr is the address the controller serves on.
func (h *Host) Addr() string { return h.srv.Addr().String() }

// Shutdown stops the metrics exporter and the listener, then the
// controller.
func (h *Host) Shutdown(ctx context.Context) error {
	if h.stopWatch != nil {
		h.stopWatch()
		<-h.watchDone
	}
	var errs []error
	if h.exp != nil {
		errs = append(errs, h.exp.Close(ctx))
	}
	return errors.Join(append(errs, h.srv.Shutdown(ctx), h.Controller.Close())...)
}

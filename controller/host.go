package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rocketkv/rocketkv/configs"
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

// Host is a Controller with the Remoting server brokers reach it on.
type Host struct {
	// Controller is the hosted controller.
	Controller *Controller
	srv        *remoting.Server
}

// StartHost starts a controller and serves it on rs (rs.Addr empty: every
// interface at the port of its own controllerDLegerPeers entry, where
// RocketMQ's controller listens). Shutdown stops both.
func StartHost(ctx context.Context, opts Options, rs remoting.ServerConfig) (*Host, error) {
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
	opts.Log.Info().Str("addr", srv.Addr().String()).Str("self", c.self.ID).Msg("controller serving")
	return &Host{Controller: c, srv: srv}, nil
}

// Addr is the address the controller serves on.
func (h *Host) Addr() string { return h.srv.Addr().String() }

// Shutdown stops the listener, then the controller.
func (h *Host) Shutdown(ctx context.Context) error {
	return errors.Join(h.srv.Shutdown(ctx), h.Controller.Close())
}

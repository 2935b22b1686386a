package autoswitch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rocketkv/rocketkv/ha"
)

// ServiceConfig configures a Service.
type ServiceConfig struct {
	// Epochs is the broker's epoch file.
	Epochs *EpochCache
	// Server is the template of the master's configuration: Addr, the
	// intervals, SyncStateSetChanged, AllAckInSyncStateSet, Logger.
	// ChangeToMaster fills Log, Epochs, BrokerID and SyncStateSet.
	Server ServerConfig
	// Client is the template of the slave's configuration: the
	// intervals, SyncFromLastFile, AsyncLearner, Logger. ChangeToSlave
	// fills MasterAddr, BrokerID, Log and Epochs.
	Client ClientConfig
	// OnCut is called, from the slave's goroutine, when the slave's
	// CommitLog holds records past the consistent point with its master:
	// the broker restarts its store with the CommitLog cut at e.At. The
	// slave stops replicating until the next ChangeToSlave. It must not
	// call the Service's methods itself (they wait for the goroutine it
	// runs on): hand the cut to another goroutine.
	OnCut func(e *CutError)
}

// Service is a broker's AutoSwitch HA in the role the controller gives it
// (RocketMQ's AutoSwitchHAService): a Server as master, a Client as
// slave, switched by ChangeToMaster and ChangeToSlave. The broker reopens
// its CommitLog for the role (a replica for a slave) and passes it in.
//
// Goroutines: the Server's, or the Client's Run; Close and each change
// stop the previous role's and wait for them.
type Service struct {
	cfg        ServiceConfig
	masterAddr atomic.Pointer[string]

	mu     sync.Mutex
	server *Server
	client *Client
	cancel context.CancelFunc
	done   chan struct{}
}

// NewService returns a service in no role.
func NewService(cfg ServiceConfig) *Service {
	s := &Service{cfg: cfg}
	empty := ""
	s.masterAddr.Store(&empty)
	return s
}

// ChangeToMaster makes the broker its group's master in epoch: it stops
// the slave (or the previous master, dropping its slaves), records the
// epoch at the log's end (BecomeMaster) and serves slaves on the
// configured address. syncStateSet is the group's set as the controller
// gave it.
func (s *Service) ChangeToMaster(log ha.Source, brokerID int64, epoch int32, syncStateSet []int64) error {
	if last := s.cfg.Epochs.LastEpoch(); epoch < last {
		return fmt.Errorf("change to master in epoch %d: the epoch file holds epoch %d already", epoch, last)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
	if err := BecomeMaster(s.cfg.Epochs, epoch, log.MaxOffset(), s.cfg.Server.Logger); err != nil {
		return err
	}
	cfg := s.cfg.Server
	cfg.Log, cfg.Epochs, cfg.BrokerID, cfg.SyncStateSet = log, s.cfg.Epochs, brokerID, syncStateSet
	srv := NewServer(cfg)
	if err := srv.Start(); err != nil {
		return err
	}
	s.server = srv
	return nil
}

// ChangeToSlave makes the broker a slave of the master of masterEpoch: it
// stops the master (or the previous slave) and follows the master at
// masterHAAddr ("" while unknown: SetMasterHAAddress gives it later, as
// RocketMQ's broker learns it from EXCHANGE_BROKER_HA_INFO).
func (s *Service) ChangeToSlave(log Replica, masterHAAddr string, masterEpoch int32, brokerID int64) error {
	if err := BecomeSlave(s.cfg.Epochs, masterEpoch); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
	s.SetMasterHAAddress(masterHAAddr)
	cfg := s.cfg.Client
	cfg.MasterAddr = func() string { return *s.masterAddr.Load() }
	cfg.BrokerID, cfg.Log, cfg.Epochs = brokerID, log, s.cfg.Epochs
	c := NewClient(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := c.Run(ctx)
		var cut *CutError
		if errors.As(err, &cut) && s.cfg.OnCut != nil {
			s.cfg.OnCut(cut)
		}
	}()
	s.client, s.cancel, s.done = c, cancel, done
	return nil
}

// SetMasterHAAddress sets the master's HA address the slave dials (at its
// next connection).
func (s *Service) SetMasterHAAddress(addr string) {
	s.masterAddr.Store(&addr)
}

// Server returns the master's server, nil when the broker is not master.
func (s *Service) Server() *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.server
}

// Client returns the slave's client, nil when the broker is not a slave.
func (s *Service) Client() *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

// Epochs returns the epoch entries (GET_BROKER_EPOCH_CACHE).
func (s *Service) Epochs() []EpochEntry { return s.cfg.Epochs.Entries() }

// Close stops the current role.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

func (s *Service) stopLocked() error {
	var err error
	if s.server != nil {
		err = s.server.Close()
		s.server = nil
	}
	if s.client != nil {
		s.cancel()
		<-s.done
		s.client, s.cancel, s.done = nil, nil, nil
	}
	return err
}

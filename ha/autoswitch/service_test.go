package autoswitch

import (
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func serviceConfig(epochs *EpochCache, cuts chan *CutError) ServiceConfig {
	return ServiceConfig{Epochs: epochs,
		Server: ServerConfig{Addr: "127.0.0.1:0", HeartbeatInterval: 50 * time.Millisecond, HousekeepingInterval: 2 * time.Second,
			CheckSyncStateSetPeriod: 20 * time.Millisecond, Logger: zerolog.Nop()},
		Client: ClientConfig{HeartbeatInterval: 50 * time.Millisecond, HousekeepingInterval: 2 * time.Second,
			RetryInterval: 20 * time.Millisecond, Logger: zerolog.Nop()},
		OnCut: func(e *CutError) { cuts <- e },
	}
}

// Two brokers swap roles through their Services; the demoted master's
// orphan tail is reported through OnCut, and after the cut they agree.
func TestServiceSwitchesRoles(t *testing.T) {
	x, y := newBroker(t, 1), newBroker(t, 2)
	xCuts, yCuts := make(chan *CutError, 1), make(chan *CutError, 1)
	xs, ys := NewService(serviceConfig(x.epochs, xCuts)), NewService(serviceConfig(y.epochs, yCuts))
	defer xs.Close()
	defer ys.Close()

	x.open(t, false, 0)
	y.open(t, true, 0)
	if err := xs.ChangeToMaster(x.log, x.id, 1, []int64{1}); err != nil {
		t.Fatal(err)
	}
	appendN(t, x.log, 0, 40, 0)
	// The master's HA address comes later (EXCHANGE_BROKER_HA_INFO).
	if err := ys.ChangeToSlave(y.log, "", 1, y.id); err != nil {
		t.Fatal(err)
	}
	ys.SetMasterHAAddress(xs.Server().Addr().String())
	waitFor(t, "y to catch up", func() bool { return y.log.MaxOffset() == x.log.MaxOffset() })
	if xs.Client() != nil || ys.Server() != nil {
		t.Fatal("a broker in both roles")
	}
	waitFor(t, "y acknowledged", func() bool {
		sl := xs.Server().Slaves()
		return len(sl) == 1 && sl[0].BrokerID == 2 && sl[0].AckOffset == x.log.MaxOffset()
	})

	// x takes records y never gets, then y is elected in epoch 2.
	if err := ys.Close(); err != nil {
		t.Fatal(err)
	}
	appendN(t, x.log, 40, 10, 0)
	if err := xs.Close(); err != nil {
		t.Fatal(err)
	}
	y.open(t, false, 0)
	epoch2 := y.log.MaxOffset()
	if err := ys.ChangeToMaster(y.log, y.id, 2, []int64{2}); err != nil {
		t.Fatal(err)
	}
	appendN(t, y.log, 40, 15, 0x77)
	if err := xs.ChangeToSlave(x.log, ys.Server().Addr().String(), 0, x.id); err == nil {
		t.Fatal("x followed a master of an older epoch than its own")
	}
	x.open(t, true, 0)
	if err := xs.ChangeToSlave(x.log, ys.Server().Addr().String(), 2, x.id); err != nil {
		t.Fatal(err)
	}
	var cut *CutError
	select {
	case cut = <-xCuts:
	case <-time.After(20 * time.Second):
		t.Fatal("no cut reported")
	}
	if cut.At != epoch2 {
		t.Fatalf("cut at %d, want %d", cut.At, epoch2)
	}
	if err := xs.Close(); err != nil {
		t.Fatal(err)
	}
	x.open(t, true, cut.At)
	if err := xs.ChangeToSlave(x.log, ys.Server().Addr().String(), 2, x.id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "x to catch up", func() bool { return x.log.MaxOffset() == y.log.MaxOffset() })
	sameBytes(t, y.log, x.log, 0)
	if got, want := xs.Epochs(), entries(1, 0, 2, epoch2); !slices.Equal(got, want) || !slices.Equal(ys.Epochs(), want) {
		t.Fatalf("epochs x %v, y %v, want %v", got, ys.Epochs(), want)
	}
}

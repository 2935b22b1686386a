package autoswitch

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/ha"
)

// BenchmarkCatchUp copies a master's 16 MiB CommitLog to an empty slave
// over loopback, with the classic protocol (package ha) and with
// AutoSwitch, in the same run; MB/s is the copy's throughput (the
// default haTransferBatchSize of 32 KiB for both). One segment holds it
// all, so both copy the same bytes (the classic master starts an empty
// slave at its newest segment).
func BenchmarkCatchUp(b *testing.B) {
	const size = 16 << 20
	open := func(replica bool) *commitlog.Log {
		cfg := commitlog.DefaultConfig(b.TempDir())
		cfg.SegmentSize = 64 << 20
		cfg.StoreHost = netip.MustParseAddrPort("10.0.0.1:10911")
		cfg.Replica = replica
		l, err := commitlog.Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		return l
	}
	m := open(false)
	body := make([]byte, 1000)
	for m.MaxOffset() < size {
		msg := &commitlog.Message{Topic: "TopicBench", Body: body, BornHost: netip.MustParseAddrPort("10.0.0.2:4000")}
		if _, err := m.Append(context.Background(), commitlog.AppendRequest{Message: msg}); err != nil {
			b.Fatal(err)
		}
	}
	end := m.MaxOffset()
	wait := func(r *commitlog.Log) {
		deadline := time.Now().Add(time.Minute)
		for r.MaxOffset() < end {
			if time.Now().After(deadline) {
				b.Fatalf("slave at %d of %d after a minute", r.MaxOffset(), end)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}

	b.Run("classic", func(b *testing.B) {
		s := ha.NewServer(ha.ServerConfig{Addr: "127.0.0.1:0", Log: m, Logger: zerolog.Nop()})
		if err := s.Start(); err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.SetBytes(end)
		for b.Loop() {
			r := open(true)
			c := ha.NewClient(ha.ClientConfig{MasterAddr: func() string { return s.Addr().String() }, Log: r, Logger: zerolog.Nop()})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); c.Run(ctx) }()
			wait(r)
			cancel()
			<-done
			r.Close()
		}
	})
	b.Run("autoswitch", func(b *testing.B) {
		epochs := NewEpochCache(nil)
		if err := BecomeMaster(epochs, 1, 0, zerolog.Nop()); err != nil {
			b.Fatal(err)
		}
		s := NewServer(ServerConfig{Addr: "127.0.0.1:0", Log: m, Epochs: epochs, BrokerID: 1, SyncStateSet: []int64{1}, Logger: zerolog.Nop()})
		if err := s.Start(); err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.SetBytes(end)
		for b.Loop() {
			r := open(true)
			c := NewClient(ClientConfig{MasterAddr: func() string { return s.Addr().String() }, BrokerID: 2, Log: r,
				Epochs: NewEpochCache(nil), Logger: zerolog.Nop()})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); c.Run(ctx) }()
			wait(r)
			cancel()
			<-done
			r.Close()
		}
	})
}

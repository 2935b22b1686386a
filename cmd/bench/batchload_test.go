package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// A batch load sends SEND_BATCH_MESSAGE requests of --batch messages, each
// with its own UNIQ_KEY, and counts every message of an answered batch.
func TestBatchLoadCountsEveryMessage(t *testing.T) {
	const batch = 8
	var (
		mu       sync.Mutex
		stored   int64
		problems []string
		uniq     = map[string]bool{}
	)
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.SendBatchMessage, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		items, err := commitlog.DecodeBatch(req.Body)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			problems = append(problems, err.Error())
		case len(items) != batch:
			problems = append(problems, fmt.Sprintf("%d items", len(items)))
		case req.ExtFields["m"] != "true" || req.ExtFields["b"] != "T":
			problems = append(problems, fmt.Sprintf("header %v", req.ExtFields))
		}
		for _, it := range items {
			key, ok := commitlog.LookupProperty(it.Properties, "UNIQ_KEY")
			if !ok || uniq[key] || len(it.Body) != 16 {
				problems = append(problems, fmt.Sprintf("item key %q (seen %v), body %d", key, uniq[key], len(it.Body)))
			}
			uniq[key] = true
		}
		stored += int64(len(items))
		_ = conn.Reply(req, remoting.NewResponse(req, remoting.Success, ""))
	})
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, mux, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })

	cfg := loadConfig{topic: "T", queues: 2, producers: 2, inflight: 4, bodySize: 16, batch: batch,
		warmup: 50 * time.Millisecond, duration: 200 * time.Millisecond}
	res, err := runLoad(context.Background(), srv.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("the server saw %d bad batches, first: %s", len(problems), problems[0])
	}
	if res.TotalAcked == 0 || res.TotalAcked != stored || res.TotalAcked%batch != 0 || res.Acked%batch != 0 {
		t.Fatalf("counted %d (measured %d), server stored %d; want equal, non-zero multiples of %d",
			res.TotalAcked, res.Acked, stored, batch)
	}
	if res.Failed != 0 {
		t.Fatalf("%d failed: %s", res.Failed, res.FirstError)
	}
	cfg.count = 100
	if _, err := runLoad(context.Background(), srv.Addr().String(), cfg); err == nil {
		t.Fatal("a batch load with a message count ran; it measures durations only")
	}
}

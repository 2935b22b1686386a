package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// heldBenchGroups is how many consumer groups hold a request in
// BenchmarkHeldOneTagOfMany, each on a tag of its own.
const heldBenchGroups = 32

// BenchmarkHeldOneTagOfMany holds one long-polling request (a pull, or a
// POP) for each of heldBenchGroups consumer groups, each subscribed to a
// tag of its own on one queue (kind pull-sql: a pull with the SQL92
// selector "tag = 't<i>'" on a user property), while b.N messages of yet
// another tag are sent one at a time. wake=every is the baseline measured in the same
// run: every dispatch re-runs every held request (wakeEveryHeld), as
// before held requests were checked against the dispatched tag codes;
// wake=matching leaves them held (a POP still wakes at every 800th
// offset, popLongPollingForceNotifyInterval). It reports the re-runs per
// message and the CPU time of the process per message (broker and client
// run in it; the client's share is the same in both).
func BenchmarkHeldOneTagOfMany(b *testing.B) {
	for _, kind := range []string{"pull", "pop", "pull-sql"} {
		for _, every := range []bool{true, false} {
			wake := "matching"
			if every {
				wake = "every"
			}
			b.Run(fmt.Sprintf("%s/wake=%s", kind, wake), func(b *testing.B) {
				benchHeldOneTagOfMany(b, kind == "pop", kind == "pull-sql", every)
			})
		}
	}
}

func benchHeldOneTagOfMany(b *testing.B, pops, sql, wakeEvery bool) {
	tb := startTestBrokerWith(b, b.TempDir(), map[string]string{"enablePropertyFilter": "true"}, func(br *Broker) { br.wakeEveryHeld = wakeEvery })
	ctx := context.Background()
	c := tb.client(nil)
	send := func(tag string) {
		resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.SendMessageV2, map[string]string{
			"a": "pg", "b": "BH", "c": "TBW102", "d": "1", "e": "0", "f": "0",
			"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": tagged(tag) + "tag\x01" + tag + "\x02"}, []byte("body")))
		if err != nil || resp.Code != remoting.Success {
			b.Fatalf("send: %v %v", err, resp)
		}
	}
	send("hot")
	if err := tb.disp.CatchUp(ctx); err != nil {
		b.Fatal(err)
	}

	// One consumer per group, which asks again whenever it is answered
	// (a woken pull that finds nothing new at all answers PULL_NOT_FOUND
	// at once), until the benchmark ends.
	stop, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer tb.stop()
	defer cancel()
	pc := popclient.New(c, tb.cfg.BrokerName)
	for i := range heldBenchGroups {
		group, tag := fmt.Sprintf("g%d", i), fmt.Sprintf("t%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			offset := int64(1)
			for stop.Err() == nil {
				if pops {
					if _, err := pc.Pop(stop, popclient.PopRequest{Group: group, Topic: "BH", QueueID: 0, MaxMsgNums: 32,
						InvisibleTime: time.Minute, PollTime: time.Hour, Exp: tag}); err != nil {
						return
					}
					continue
				}
				req := pullReq(group, "BH", 0, offset, pullSuspend, time.Hour, tag)
				if sql {
					req["subscription"], req["expressionType"] = "tag = '"+tag+"'", "SQL92"
				}
				resp, err := c.Invoke(stop, remoting.NewRequest(remoting.PullMessage, req, nil))
				if err != nil {
					return
				}
				if next, err := strconv.ParseInt(resp.ExtFields["nextBeginOffset"], 10, 64); err == nil {
					offset = next
				}
			}
		}()
	}
	held := func() int {
		if pops {
			tb.popHolds.mu.Lock()
			defer tb.popHolds.mu.Unlock()
			return tb.popHolds.total
		}
		return tb.holds.count()
	}
	// Every request held, and no re-run under way (a woken request is
	// not counted until it is held again).
	quiet := func() {
		if err := tb.disp.CatchUp(ctx); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); held() != heldBenchGroups; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%d requests held, want %d", held(), heldBenchGroups)
			}
		}
	}
	quiet()
	woken := func() int64 {
		if pops {
			return tb.popHolds.woken.Load()
		}
		return tb.holds.woken.Load()
	}

	w0, cpu0 := woken(), processCPU(b)
	b.ResetTimer()
	for range b.N {
		send("hot")
	}
	quiet()
	b.StopTimer()
	cpu := processCPU(b) - cpu0
	b.ReportMetric(float64(woken()-w0)/float64(b.N), "reruns/msg")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/msg")
}

// processCPU is the user and system CPU time the process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

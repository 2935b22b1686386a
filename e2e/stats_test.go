package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

const (
	codeViewBrokerStatsData = 315
	codeGetConsumeStats     = 208
	codeGetNamesrvConfig    = 319
)

// brokerStatsData is the part of a VIEW_BROKER_STATS_DATA body read here.
type brokerStatsData struct {
	StatsMinute struct {
		Sum int64   `json:"sum"`
		TPS float64 `json:"tps"`
	} `json:"statsMinute"`
}

// TestStatisticsOfRealClients: a name server started from a RocketMQ
// namesrv.properties, and a broker counting what the unchanged Go client's
// producer sends and push consumer receives, read back as mqadmin statsAll
// and consumerProgress read them (VIEW_BROKER_STATS_DATA once the broker's
// 10-second sampling has run, GET_CONSUME_STATS' consumeTps).
func TestStatisticsOfRealClients(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	conf := filepath.Join(t.TempDir(), "namesrv.properties")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("listenPort=%d\nbindAddress=127.0.0.1\nkvConfigPath=\nserverWorkerThreads=8\n", port)), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ns := &namesrv{proc: startProc(t, "namesrv", "-c", conf, "--log-format", "json"), addr: addr}
	waitListening(t, addr)
	r, err := rawInvoke(addr, codeGetNamesrvConfig, nil, nil)
	if err != nil || r.Code != respSuccess || !strings.Contains(string(r.Body), fmt.Sprintf("listenPort=%d\n", port)) {
		t.Fatalf("GET_NAMESRV_CONFIG: %v %v %s", r, err, r.Body)
	}

	b := startBroker(t, ns, brokerOpts{name: "broker-stats"})
	const topic, group, n = "E2EStats", "cg-stats", 20
	createTopic(t, b.addr, topic, 2)
	waitRoute(t, ns.addr, topic, b.name)
	p := newProducer(t, ns.addr, "pg-stats")
	for i := 0; i < n; i++ {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("stats-%d", i))))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %d: %v %v", i, res, err)
		}
	}
	got := newCollector()
	startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got)
	got.waitDistinct(t, n, 30*time.Second)

	stats := func(name, key string) (brokerStatsData, bool) {
		r, err := rawInvoke(b.addr, codeViewBrokerStatsData, map[string]string{"statsName": name, "statsKey": key}, nil)
		if err != nil {
			t.Fatalf("view %s %s: %v", name, key, err)
		}
		if r.Code != respSuccess {
			return brokerStatsData{}, false
		}
		var d brokerStatsData
		if err := json.Unmarshal(r.Body, &d); err != nil {
			t.Fatalf("decode %s %s %q: %v", name, key, r.Body, err)
		}
		return d, true
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		in, _ := stats("TOPIC_PUT_NUMS", topic)
		out, _ := stats("GROUP_GET_NUMS", topic+"@"+group)
		if in.StatsMinute.Sum == n && out.StatsMinute.Sum == n && in.StatsMinute.TPS > 0 && out.StatsMinute.TPS > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the statistics never showed %d in and out: put %+v, get %+v", n, in.StatsMinute, out.StatsMinute)
		}
		time.Sleep(500 * time.Millisecond)
	}
	r, err = rawInvoke(b.addr, codeGetConsumeStats, map[string]string{"consumerGroup": group, "topic": topic}, nil)
	if err != nil || r.Code != respSuccess {
		t.Fatalf("GET_CONSUME_STATS: %v %v", r, err)
	}
	// The offset table's keys are objects (fastjson): only consumeTps, the
	// first field, is read.
	_, rest, _ := strings.Cut(string(r.Body), `"consumeTps":`)
	num, _, _ := strings.Cut(rest, ",")
	if tps, err := strconv.ParseFloat(num, 64); err != nil || tps <= 0 {
		t.Fatalf("consumeTps of %s: %s", group, r.Body)
	}
}

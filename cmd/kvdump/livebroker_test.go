package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/broker"
	"github.com/rocketkv/rocketkv/internal/clustertest"
	"github.com/rocketkv/rocketkv/remoting"
)

// startBroker starts an in-process broker on store with the test
// defaults and settings, and a client of it; both are closed at the end
// of the test (the broker cleanly, unless the test shut it down).
func startBroker(t *testing.T, store string, settings map[string]string) (*broker.Broker, *remoting.Client) {
	t.Helper()
	o := map[string]string{"storePathRootDir": store}
	maps.Copy(o, settings)
	b, _ := clustertest.StartBroker(t, "", o)
	c, err := remoting.Dial(context.Background(), b.Addr(), remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return b, c
}

// kvdump --broker reads a running broker through the checkpoint the broker
// writes on request, while the store itself stays locked.
func TestLiveBrokerCheckpoint(t *testing.T) {
	store := t.TempDir()
	b, c := startBroker(t, store, nil)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.SendMessageV2, map[string]string{
			"a": "pg", "b": "Live", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1", "h": "0",
			"i": "TAGS\x01red\x02KEYS\x01k" + strconv.Itoa(i) + "\x02",
		}, []byte("payload")))
		if err != nil || resp.Code != remoting.Success {
			t.Fatalf("send: %v %+v", err, resp)
		}
	}
	// The broker holds the store: a direct read is refused.
	if _, _, err := runKvdump(t, "--store", store, "summary"); err == nil || !strings.Contains(err.Error(), "locked by a running broker") {
		t.Fatalf("direct read of a live store: %v", err)
	}
	// Through the broker: the checkpoint holds what was dispatched.
	var out string
	deadline := time.Now().Add(10 * time.Second)
	for {
		out = mustKvdump(t, "--broker", b.Addr(), "--json", "cq", "--topic", "Live", "--queue", "1")
		if strings.Count(out, `"queueOffset"`) >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if _, ok := m["queueOffset"]; ok {
			if m["tagsCode"] != float64(112785) { // Java "red".hashCode()
				t.Errorf("entry %v: tagsCode", m)
			}
			n++
		}
	}
	if n != 3 {
		t.Fatalf("kvdump --broker saw %d entries of Live/1, want 3:\n%s", n, out)
	}
}

// With the ACL on, kvdump --broker signs its checkpoint request as the
// account given.
func TestLiveBrokerCheckpointWithACL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(file, []byte("accounts:\n  - {accessKey: opsreader1, secretKey: ops-secret}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ROCKETKV_ACCESS_KEY", "")
	t.Setenv("ROCKETKV_SECRET_KEY", "")
	b, _ := startBroker(t, t.TempDir(), map[string]string{"aclEnable": "true", "plainAclFile": file})
	if _, _, err := runKvdump(t, "--broker", b.Addr(), "summary"); err == nil || !strings.Contains(err.Error(), "No accessKey is configured") {
		t.Fatalf("unsigned checkpoint request: %v", err)
	}
	out := mustKvdump(t, "--broker", b.Addr(), "--access-key", "opsreader1", "--secret-key", "ops-secret", "summary")
	if !strings.Contains(out, "dispatched") {
		t.Fatalf("signed checkpoint request: %s", out)
	}
}

// A broker that enforces TLS is read with --tls.
func TestLiveBrokerCheckpointWithTLS(t *testing.T) {
	b, _ := startBroker(t, t.TempDir(), map[string]string{"tls.server.mode": "enforcing"})
	if _, _, err := runKvdump(t, "--broker", b.Addr(), "--timeout", "5s", "summary"); err == nil {
		t.Fatal("a plaintext checkpoint request to an enforcing broker succeeded")
	}
	if out := mustKvdump(t, "--broker", b.Addr(), "--tls", "summary"); !strings.Contains(out, "dispatched") {
		t.Fatalf("with --tls: %s", out)
	}
}

package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rocketkv/rocketkv/configs"
)

// TestIdentityFilesRocketMQFormat reads identity files as a RocketMQ
// controller-mode broker writes them (BrokerMetadata, TempBrokerMetadata:
// fields joined by '#', no newline) and writes the same bytes back.
func TestIdentityFilesRocketMQFormat(t *testing.T) {
	dir := t.TempDir()
	cfg := configs.Broker{StorePathRootDir: dir}
	if got, want := identityPath(cfg), filepath.Join(dir, "brokerIdentity"); got != want {
		t.Fatalf("identity path %s, want RocketMQ's default %s", got, want)
	}
	if got, want := epochFilePath(cfg), filepath.Join(dir, "epochFileCheckpoint"); got != want {
		t.Fatalf("epoch file path %s, want RocketMQ's default %s", got, want)
	}
	if err := os.WriteFile(identityPath(cfg), []byte("DefaultCluster#broker-a#3"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tempIdentityPath(cfg), []byte("DefaultCluster#broker-a#4#10.0.0.1:10911;1700000000000"), 0o644); err != nil {
		t.Fatal(err)
	}
	id, ok, err := readIdentity(identityPath(cfg), false)
	if err != nil || !ok || id != (brokerIdentity{Cluster: "DefaultCluster", Broker: "broker-a", ID: 3}) {
		t.Fatalf("identity %+v ok=%v err=%v", id, ok, err)
	}
	tmp, ok, err := readIdentity(tempIdentityPath(cfg), true)
	if err != nil || !ok || tmp.ID != 4 || tmp.CheckCode != "10.0.0.1:10911;1700000000000" {
		t.Fatalf("temp identity %+v ok=%v err=%v", tmp, ok, err)
	}
	id.ID = 5
	if err := writeIdentity(identityPath(cfg), id, false); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(identityPath(cfg))
	if string(raw) != "DefaultCluster#broker-a#5" {
		t.Fatalf("written %q", raw)
	}
	bak, _ := os.ReadFile(identityPath(cfg) + ".bak")
	if string(bak) != "DefaultCluster#broker-a#3" {
		t.Fatalf("backup %q, want the previous content", bak)
	}
	if _, _, err := readIdentity(writeTemp(t, dir, "bad", "DefaultCluster#broker-a"), false); err == nil {
		t.Fatal("an identity of two fields read")
	}
	if _, _, err := readIdentity(writeTemp(t, dir, "bad2", "c#b#x"), false); err == nil {
		t.Fatal("an identity whose id is not a number read")
	}
	if _, ok, err := readIdentity(filepath.Join(dir, "none"), false); ok || err != nil {
		t.Fatalf("missing file: ok=%v err=%v", ok, err)
	}
}

func writeTemp(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

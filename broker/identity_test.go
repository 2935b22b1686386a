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

// TestEpochFileRocketMQFormat reads an epoch file laid out as RocketMQ's
// CheckpointFile writes it (count, CRC-32 masked to 31 bits, then
// epoch-startOffset lines; the CRC here computed apart, with Python's
// zlib) and appends as EpochFileCache does.
func TestEpochFileRocketMQFormat(t *testing.T) {
	dir := t.TempDir()
	path := writeTemp(t, dir, "epochFileCheckpoint", "2\n327520601\n1-0\n2-1024\n")
	f, err := openEpochFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Entries(); len(got) != 2 || got[1] != (epochEntry{Epoch: 2, StartOffset: 1024}) {
		t.Fatalf("entries %+v", got)
	}
	if f.LastEpoch() != 2 {
		t.Fatalf("last epoch %d", f.LastEpoch())
	}
	if err := f.Append(epochEntry{Epoch: 1, StartOffset: 4096}); err == nil {
		t.Fatal("an older epoch appended")
	}
	if err := f.Append(epochEntry{Epoch: 3, StartOffset: 100}); err == nil {
		t.Fatal("an epoch starting below the last one appended")
	}
	if err := f.Append(epochEntry{Epoch: 3, StartOffset: 2048}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if got, want := string(raw), string(formatEpochFile([]epochEntry{{1, 0}, {2, 1024}, {3, 2048}})); got != want {
		t.Fatalf("file %q, want %q", got, want)
	}
	if bak, _ := os.ReadFile(path + ".bak"); string(bak) != "2\n327520601\n1-0\n2-1024\n" {
		t.Fatalf("backup %q", bak)
	}
	again, err := openEpochFile(path)
	if err != nil || again.LastEpoch() != 3 {
		t.Fatalf("reopened: last %d, %v", again.LastEpoch(), err)
	}
	// A damaged file falls back to its backup, as RocketMQ's read.
	if err := os.WriteFile(path, []byte("3\n1\n1-0\n2-1024\n3-2048\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fb, err := openEpochFile(path)
	if err != nil || fb.LastEpoch() != 2 {
		t.Fatalf("with a bad checksum: last %d (want the backup's 2), %v", fb.LastEpoch(), err)
	}
	if _, err := parseEpochFile([]byte("2\n0\n1-0\n")); err == nil {
		t.Fatal("a file with fewer entries than its count read")
	}
}

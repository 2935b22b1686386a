package broker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/remoting"
)

// A key locked with configBlackList is refused in any spelling the update
// reads as that key (another case, an escaped trailing space): the black
// list used to be compared exactly and the key table in any case, so
// "DeleteWhen=05" changed a locked deleteWhen.
func TestTheConfigBlackListHoldsInAnySpelling(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(conf, []byte("deleteWhen=04\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{"configBlackList": "configBlackList;brokerConfigPath;deleteWhen;brokerPermission"},
		func(b *Broker) { b.SetConfigFile(conf) })
	c := b.client(nil)
	for _, body := range []string{"DeleteWhen=05", "BROKERPERMISSION=4", "deleteWhen\\ =06"} {
		r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte(body))
		if r.Code != remoting.NoPermission {
			raw, _ := os.ReadFile(conf)
			t.Errorf("black-listed key in another spelling %q: code %d %q, want NO_PERMISSION; deleteWhen=%v brokerPermission=%d; file:\n%s",
				body, r.Code, r.Remark, b.current().DeleteWhen, b.current().BrokerPermission, raw)
		}
	}
}

// A secret key (masked in GET_BROKER_CONFIG) changed at run time is
// refused as every other key fixed while the broker runs; it used to be
// answered SUCCESS with nothing changed, in force or in the file, because
// the change detection compared the masked texts.
func TestASecretKeyUpdateIsRefusedAsFixed(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(conf, []byte("tls.server.keyPassword=old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{
		"tls.server.keyPassword":               "old",
		"innerClientAuthenticationCredentials": `{"accessKey":"rocketmq2","secretKey":"old12345"}`,
	}, func(b *Broker) { b.SetConfigFile(conf) })
	c := b.client(nil)
	for _, body := range []string{
		"tls.server.keyPassword=new",
		`innerClientAuthenticationCredentials={"accessKey":"rocketmq2","secretKey":"new12345"}`,
	} {
		r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte(body))
		if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "cannot change while the broker runs") {
			raw, _ := os.ReadFile(conf)
			t.Errorf("update %q: code %d %q, want it refused as fixed (file:\n%s)", body, r.Code, r.Remark, raw)
		}
	}
}

// fileReservedTime=0 keeps no sealed segment (RocketMQ's 0 hours) both
// when an update sets it and after a restart from the file it was written
// back to; a start used to read the 0 as the 72-hour default.
func TestFileReservedTimeZeroMeansTheSameAfterARestart(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(conf, []byte("fileReservedTime=48\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	b := startTestBrokerWith(t, store, map[string]string{"fileReservedTime": "48"}, func(b *Broker) { b.SetConfigFile(conf) })
	c := b.client(nil)
	updateConfig(t, c, "fileReservedTime=0")
	live := b.clog.RetentionRules().FileReservedTime
	b.stop()

	loaded, err := configs.LoadBroker(conf, map[string]string{
		"storePathRootDir": store, "listenPort": "0", "brokerIP1": "127.0.0.1", "mappedFileSizeCommitLog": "4194304"})
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	b2, err := New(loaded.Broker, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b2.Shutdown(context.Background()) }()
	if got := b2.clog.RetentionRules().FileReservedTime; got != live {
		t.Fatalf("fileReservedTime in force: %v after the update, %v after a restart from the written-back file (settings say %v)",
			live, got, b2.current().FileReservedTime)
	}
}

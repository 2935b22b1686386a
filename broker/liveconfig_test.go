package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// startTestNameServer starts a name server on a loopback port.
func startTestNameServer(t *testing.T) *namesrv.Server {
	t.Helper()
	cfg := namesrv.DefaultConfig()
	cfg.Remoting.Addr = "127.0.0.1:0"
	cfg.Remoting.EventLoops = 1
	return startNameServerWith(t, cfg, zerolog.Nop())
}

// startNameServerWith starts a name server of cfg, shut down when the
// test ends.
func startNameServerWith(t *testing.T, cfg namesrv.Config, log zerolog.Logger) *namesrv.Server {
	t.Helper()
	s, err := namesrv.NewServer(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

// waitForRoutePerm waits until the name server routes topic to the broker
// with perm.
func waitForRoutePerm(t *testing.T, ns *namesrv.Server, topic string, perm int32) {
	t.Helper()
	waitForRoute(t, ns, topic, fmt.Sprintf("one broker group with perm %d", perm), func(r *namesrv.TopicRouteData) bool {
		return len(r.QueueDatas) == 1 && r.QueueDatas[0].Perm == perm
	})
}

// waitForRoute waits until the name server's route of topic satisfies ok
// (want says what that is, for the failure).
func waitForRoute(t *testing.T, ns *namesrv.Server, topic, want string, ok func(*namesrv.TopicRouteData) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last *namesrv.TopicRouteData
	for time.Now().Before(deadline) {
		if r, found := ns.Registry().Route(topic); found {
			if last = r; ok(r) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("route of %s: %+v, want %s", topic, last, want)
}

// brokerSettings reads GET_BROKER_CONFIG as a map and its version.
func brokerSettings(t *testing.T, c *remoting.Client) (map[string]string, meta.DataVersion) {
	t.Helper()
	r := call(t, c, remoting.GetBrokerConfig, nil, nil)
	if r.Code != remoting.Success {
		t.Fatalf("GET_BROKER_CONFIG: %d %s", r.Code, r.Remark)
	}
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(r.Body)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		out[k] = v
	}
	var v meta.DataVersion
	if err := json.Unmarshal([]byte(r.ExtFields["version"]), &v); err != nil {
		t.Fatalf("version %q: %v", r.ExtFields["version"], err)
	}
	return out, v
}

// An operator takes a broker out of service with mqadmin
// updateBrokerConfig -k brokerPermission -v 4 and puts it back with 6:
// sends are refused meanwhile, reads go on, the name server's routes
// follow at once, and the change is written into broker.conf.
func TestUpdateBrokerPermissionTakesTheBrokerOutOfService(t *testing.T) {
	ns := startTestNameServer(t)
	conf := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(conf, []byte("# broker-a\nbrokerPermission = 6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{"namesrvAddr": ns.Addr().String()},
		func(b *Broker) { b.SetConfigFile(conf) })
	c := b.client(nil)
	mustSend(t, c, "LiveT", 0, "before", "")
	createOrderTopic(t, c, "LiveOrderT")
	b.caughtUp()
	waitForRoutePerm(t, ns, "LiveT", 6)
	_, v0 := brokerSettings(t, c)

	if r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("brokerPermission=4\n")); r.Code != remoting.Success {
		t.Fatalf("UPDATE_BROKER_CONFIG: %d %s", r.Code, r.Remark)
	}
	// As RocketMQ's msgCheck: an order topic's sends are refused; a
	// producer of another topic whose route is not yet refreshed still
	// has its send stored.
	if r := sendV2(t, c, "LiveOrderT", 0, "during", ""); r.Code != remoting.NoPermission {
		t.Fatalf("send to an order topic of a read-only broker: %d %s, want NO_PERMISSION", r.Code, r.Remark)
	}
	mustSend(t, c, "LiveT", 0, "stale route", "")
	b.caughtUp()
	pulled := call(t, c, remoting.PullMessage, pullReq("g-live", "LiveT", 0, 0, 0, 0, "*"), nil)
	if pulled.Code != remoting.Success || len(decodeRecords(t, pulled.Body)) != 2 {
		t.Fatalf("pull from a read-only broker: %d %s", pulled.Code, pulled.Remark)
	}
	waitForRoutePerm(t, ns, "LiveT", 4)
	waitForRoutePerm(t, ns, "TBW102", 4) // 7 (inherit|read|write) masked
	settings, v1 := brokerSettings(t, c)
	if settings["brokerPermission"] != "4" || v1 == v0 {
		t.Fatalf("GET_BROKER_CONFIG after the update: brokerPermission=%s, version %+v -> %+v", settings["brokerPermission"], v0, v1)
	}
	if raw, _ := os.ReadFile(conf); string(raw) != "# broker-a\nbrokerPermission=4\n" {
		t.Fatalf("broker.conf after the update:\n%s", raw)
	}

	if r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("brokerPermission=6")); r.Code != remoting.Success {
		t.Fatalf("UPDATE_BROKER_CONFIG back: %d %s", r.Code, r.Remark)
	}
	mustSend(t, c, "LiveT", 0, "after", "")
	waitForRoutePerm(t, ns, "LiveT", 6)
	waitForRoutePerm(t, ns, "TBW102", 7)
}

// A broker started read only registers its topics read only.
func TestReadOnlyBrokerRegistersReadOnlyRoutes(t *testing.T) {
	ns := startTestNameServer(t)
	startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String(), "brokerPermission": "4"})
	waitForRoutePerm(t, ns, "TBW102", 4)
	waitForRoutePerm(t, ns, "SELF_TEST_TOPIC", 4)
}

func TestUpdateBrokerConfigRefusals(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "broker.yaml")
	const original = "brokerName: broker-a\n"
	if err := os.WriteFile(conf, []byte(original), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{"configBlackList": "configBlackList;brokerConfigPath;deleteWhen"},
		func(b *Broker) { b.SetConfigFile(conf) })
	c := b.client(nil)
	before, v0 := brokerSettings(t, c)
	for _, tc := range []struct {
		body   string
		code   int32
		remark string
	}{
		{"brokerPermission=4\nsecretKnob=1", remoting.SystemError, "unknown key secretKnob"},
		{"brokerPermission=4\nfileReservedTime=soon", remoting.SystemError, "key fileReservedTime"},
		{"brokerPermission=99", remoting.SystemError, "key brokerPermission"},
		{"brokerPermission=4\nlistenPort=1234", remoting.SystemError, "listenPort cannot change while the broker runs"},
		{"mapedFileSizeCommitLog=8192", remoting.SystemError, "mappedFileSizeCommitLog cannot change while the broker runs"},
		{"brokerPermission=4\nbrokerConfigPath=/etc/passwd", remoting.NoPermission, "Can not update config in black list."},
		{"configBlackList=", remoting.NoPermission, "Can not update config in black list."},
		{"rocketmqHome=/opt/rocketmq", remoting.NoPermission, "Can not update config in black list."},
		// A runtime key the operator locked with configBlackList.
		{"deleteWhen=05", remoting.NoPermission, "Can not update config in black list."},
	} {
		r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte(tc.body))
		if r.Code != tc.code || !strings.Contains(r.Remark, tc.remark) {
			t.Errorf("body %q: %d %q, want %d with %q", tc.body, r.Code, r.Remark, tc.code, tc.remark)
		}
	}
	// Nothing changed: not the settings, the version, the file or sends.
	after, v1 := brokerSettings(t, c)
	if after["brokerPermission"] != before["brokerPermission"] || after["fileReservedTime"] != before["fileReservedTime"] || v1 != v0 {
		t.Fatalf("a refused update changed the configuration: %v -> %v", before, after)
	}
	if raw, _ := os.ReadFile(conf); string(raw) != original {
		t.Fatalf("a refused update changed the file:\n%s", raw)
	}
	mustSend(t, c, "RefusedT", 0, "x", "")
	// Setting a fixed key to the value it has, or sending no body, is not a
	// change and succeeds (mqadmin sends every key it is given).
	for _, body := range []string{"brokerName=broker-a\nlistenPort=0", ""} {
		if r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte(body)); r.Code != remoting.Success {
			t.Fatalf("body %q: %d %s", body, r.Code, r.Remark)
		}
	}
	if _, v2 := brokerSettings(t, c); v2 != v0 {
		t.Fatal("an update without a change moved the version")
	}
}

// A RocketMQ key rocketkv accepts without effect (a thread pool size) is
// accepted by UPDATE_BROKER_CONFIG beside a real change, changes nothing
// itself, and the answer's remark names it with the reason. As RocketMQ,
// which writes every key an update set back to its -c file, the broker
// writes it into the file it started from (properties or YAML, an entry
// already there rewritten in place), alone or beside a real change, so a
// restart keeps what the operator set.
func TestUpdateBrokerConfigNamesInertKeys(t *testing.T) {
	for _, tc := range []struct {
		name, original string
		want           []string // substrings of the file after both updates
	}{
		{"broker.conf", "# broker-a\nuseReentrantLockWhenPutMessage = false\n",
			[]string{"# broker-a\nuseReentrantLockWhenPutMessage=true\n", "\nfileReservedTime=24\n", "\npullMessageThreadPoolNums=64\n"}},
		{"broker.yaml", "# broker-a\nuseReentrantLockWhenPutMessage: false\n",
			[]string{"# broker-a\nuseReentrantLockWhenPutMessage: true\n", "\nfileReservedTime: 24\n", "\npullMessageThreadPoolNums: 64\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := filepath.Join(t.TempDir(), tc.name)
			if err := os.WriteFile(conf, []byte(tc.original), 0o644); err != nil {
				t.Fatal(err)
			}
			b := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) { b.SetConfigFile(conf) })
			c := b.client(nil)
			_, v0 := brokerSettings(t, c)
			r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("pullMessageThreadPoolNums=64\nfileReservedTime=24"))
			if r.Code != remoting.Success || !strings.Contains(r.Remark, "pullMessageThreadPoolNums has no effect in rocketkv: ") {
				t.Fatalf("update with an inert key: %d %q", r.Code, r.Remark)
			}
			after, v1 := brokerSettings(t, c)
			if after["fileReservedTime"] != "24" || v1 == v0 {
				t.Fatalf("the real change beside the inert key was not made: %v (version %v -> %v)", after, v0, v1)
			}
			if _, listed := after["pullMessageThreadPoolNums"]; listed {
				t.Fatal("the inert key became a setting")
			}
			// Alone, it is still accepted, changes nothing in force, and
			// is written back.
			r = call(t, c, remoting.UpdateBrokerConfig, nil, []byte("useReentrantLockWhenPutMessage=true"))
			if r.Code != remoting.Success || !strings.Contains(r.Remark, "useReentrantLockWhenPutMessage has no effect in rocketkv: ") ||
				strings.Contains(r.Remark, "not written back") {
				t.Fatalf("update with an inert key alone: %d %q", r.Code, r.Remark)
			}
			if _, v2 := brokerSettings(t, c); v2 != v1 {
				t.Fatal("an update with only an inert key moved the version")
			}
			raw, err := os.ReadFile(conf)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.want {
				if !strings.Contains(string(raw), want) {
					t.Errorf("%s lacks %q:\n%s", tc.name, want, raw)
				}
			}
			// The broker restarted from the file loads it, with the inert
			// keys at the values set.
			loaded, err := configs.LoadBroker(conf, nil)
			if err != nil {
				t.Fatalf("loading the rewritten file: %v", err)
			}
			got := map[string]string{}
			for _, k := range loaded.InertKeys {
				got[k.Key] = k.Value
			}
			if got["pullMessageThreadPoolNums"] != "64" || got["useReentrantLockWhenPutMessage"] != "true" || loaded.Broker.FileReservedTime != 24*time.Hour {
				t.Fatalf("the rewritten file loads inert keys %v, fileReservedTime %v", got, loaded.Broker.FileReservedTime)
			}
		})
	}
}

// fileReservedTime, deleteWhen, diskMaxUsedSpaceRatio and
// cleanFileForciblyEnable reach the CommitLog's retention at once and the
// YAML file keeps them.
func TestUpdateBrokerConfigRetention(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(conf, []byte("# rocketkv\nfileReservedTime: 72\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) { b.SetConfigFile(conf) })
	c := b.client(nil)
	if rules := b.clog.RetentionRules(); rules.KeepUnexpiredWhenFull {
		t.Fatalf("CommitLog retention at start with cleanFileForciblyEnable's default (true): %+v", rules)
	}
	body := "fileReservedTime=6\ndeleteWhen=01;13\ndiskMaxUsedSpaceRatio=60\nautoCreateSubscriptionGroup=false\ncleanFileForciblyEnable=false\n"
	if r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte(body)); r.Code != remoting.Success {
		t.Fatalf("UPDATE_BROKER_CONFIG: %d %s", r.Code, r.Remark)
	}
	rules := b.clog.RetentionRules()
	if rules.FileReservedTime != 6*time.Hour || len(rules.DeleteWhen) != 2 || rules.DeleteWhen[1] != 13 || rules.DiskMaxUsedSpaceRatio != 60 || !rules.KeepUnexpiredWhenFull {
		t.Fatalf("CommitLog retention after the update: %+v", rules)
	}
	raw, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# rocketkv\n", "fileReservedTime: 6\n", "deleteWhen: \"01;13\"\n", "diskMaxUsedSpaceRatio: 60\n", "autoCreateSubscriptionGroup: false\n", "cleanFileForciblyEnable: false\n"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("broker.yaml lacks %q:\n%s", want, raw)
		}
	}
	// autoCreateSubscriptionGroup=false: a pull of an unknown group is
	// refused as RocketMQ refuses it.
	if r := call(t, c, remoting.PullMessage, pullReq("g-unknown", "RetT", 0, 0, 0, 0, "*"), nil); r.Code != remoting.SubscriptionGroupNotExist {
		t.Fatalf("pull of an unknown group with auto-create off: %d %s", r.Code, r.Remark)
	}
}

// startExpiringBroker starts a broker with 64 KiB CommitLog segments
// whose cleaner never sees a deleteWhen hour, sends 40 messages of 4 KiB
// to queue 0 of ExpireT and sets fileReservedTime=0: every full segment
// has expired, and only DELETE_EXPIRED_COMMITLOG (or the disk's use)
// deletes them.
func startExpiringBroker(t *testing.T, overrides map[string]string) (*testBroker, *remoting.Client) {
	t.Helper()
	settings := map[string]string{
		"mappedFileSizeCommitLog": "65536", "cleanResourceInterval": "20",
		"deleteWhen": strconv.Itoa((time.Now().Hour() + 12) % 24), "diskMaxUsedSpaceRatio": "95",
	}
	maps.Copy(settings, overrides)
	b := startTestBroker(t, settings)
	c := b.client(nil)
	body := strings.Repeat("x", 4096)
	for i := 0; i < 40; i++ {
		mustSend(t, c, "ExpireT", 0, body, "")
	}
	b.caughtUp()
	if r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("fileReservedTime=0")); r.Code != remoting.Success {
		t.Fatalf("UPDATE_BROKER_CONFIG: %d %s", r.Code, r.Remark)
	}
	return b, c
}

// mqadmin deleteExpiredCommitLog after lowering fileReservedTime frees the
// disk at once instead of at the next deleteWhen hour.
func TestDeleteExpiredCommitLog(t *testing.T) {
	b, c := startExpiringBroker(t, nil)
	// Every full segment has expired, but the hour is not a deleteWhen
	// hour: the cleaner's passes leave them.
	time.Sleep(200 * time.Millisecond)
	if b.clog.MinOffset() != 0 {
		t.Skip("the cleaner deleted segments on its own: the disk is above the usage thresholds")
	}
	if r := call(t, c, remoting.DeleteExpiredCommitLog, nil, nil); r.Code != remoting.Success {
		t.Fatalf("DELETE_EXPIRED_COMMITLOG: %d %s", r.Code, r.Remark)
	}
	// The segments go, and consumers see the new minimum of the queue
	// (retention tells the index after the CommitLog moved its minimum).
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := call(t, c, remoting.GetMinOffset, map[string]string{"topic": "ExpireT", "queueId": "0"}, nil)
		if r.Code != remoting.Success {
			t.Fatalf("GET_MIN_OFFSET: %d %s", r.Code, r.Remark)
		}
		if r.ExtFields["offset"] != "0" && b.clog.MinOffset() > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after DELETE_EXPIRED_COMMITLOG: CommitLog min %d, queue min %s", b.clog.MinOffset(), r.ExtFields["offset"])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A configuration file that cannot be rewritten (gone, or read-only as a
// mounted ConfigMap) does not keep an operator from draining the broker:
// the change takes effect and the answer says it lasts until restart.
func TestUpdateBrokerConfigWhenTheFileCannotBeWritten(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "broker.conf")
	b := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) { b.SetConfigFile(conf) }) // never created
	c := b.client(nil)
	createOrderTopic(t, c, "UnsavedT")
	_, v0 := brokerSettings(t, c)
	r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("brokerPermission=4"))
	if r.Code != remoting.Success || !strings.Contains(r.Remark, "lasts until restart") || !strings.Contains(r.Remark, "broker.conf") {
		t.Fatalf("UPDATE_BROKER_CONFIG with an unwritable file: %d %q", r.Code, r.Remark)
	}
	if settings, v1 := brokerSettings(t, c); settings["brokerPermission"] != "4" || v1 == v0 {
		t.Fatalf("the change is not in force: brokerPermission=%s, version %+v -> %+v", settings["brokerPermission"], v0, v1)
	}
	if r := sendV2(t, c, "UnsavedT", 0, "x", ""); r.Code != remoting.NoPermission {
		t.Fatalf("send to an order topic of the read-only broker: %d %s", r.Code, r.Remark)
	}
	if _, err := os.Stat(conf); !os.IsNotExist(err) {
		t.Fatalf("a configuration file appeared: %v", err)
	}
}

// randomAdvisedSegments counts the sealed CommitLog segments of b the
// process has mapped (those below the one being written), and those of
// them advised MADV_RANDOM ("rr" in the VmFlags of /proc/self/smaps).
func randomAdvisedSegments(t *testing.T, b *testBroker) (random, sealed int) {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	dir := filepath.Join(b.store, "commitlog") + string(filepath.Separator)
	end := b.clog.MaxOffset()
	active := fmt.Sprintf("%020d", end-end%b.clog.SegmentSize())
	rr := map[string]bool{}
	cur := ""
	for line := range strings.SplitSeq(string(raw), "\n") {
		if fields := strings.Fields(line); len(fields) >= 6 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			cur = ""
			if p := fields[len(fields)-1]; strings.HasPrefix(p, dir) {
				cur = p
				if _, seen := rr[p]; !seen {
					rr[p] = false
				}
			}
			continue
		}
		if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok && cur != "" {
			rr[cur] = rr[cur] || strings.Contains(flags+" ", " rr ")
		}
	}
	for p, isRandom := range rr {
		if filepath.Base(p) >= active {
			continue
		}
		sealed++
		if isRandom {
			random++
		}
	}
	return random, sealed
}

// mqadmin setCommitLogReadAheadMode -m 1 advises the CommitLog's sealed
// segments for random reads and -m 0 undoes it, with RocketMQ's answers;
// the mode is dataReadAheadEnable, written back into the configuration
// file.
func TestSetCommitLogReadMode(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(conf, []byte("# rocketkv\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{"mappedFileSizeCommitLog": "65536"}, func(b *Broker) { b.SetConfigFile(conf) })
	c := b.client(nil)
	body := strings.Repeat("x", 4096)
	for range 40 {
		mustSend(t, c, "ReadModeT", 0, body, "")
	}
	if random, sealed := randomAdvisedSegments(t, b); sealed < 2 || random != 0 {
		t.Fatalf("before any mode was set: %d of %d sealed segments advised random", random, sealed)
	}
	set := func(ext map[string]string) *remoting.Command {
		return call(t, c, remoting.SetCommitLogReadMode, ext, nil)
	}
	if r := set(nil); r.Code != remoting.SystemError || r.Remark != "set commitlog readahead mode param error" {
		t.Fatalf("without READ_AHEAD_MODE: %d %s", r.Code, r.Remark)
	}
	if r := set(map[string]string{"READ_AHEAD_MODE": "2"}); r.Code != remoting.InvalidParameter || r.Remark != "set commitlog readahead mode param value error" {
		t.Fatalf("READ_AHEAD_MODE 2: %d %s", r.Code, r.Remark)
	}
	if r := set(map[string]string{"READ_AHEAD_MODE": "1"}); r.Code != remoting.Success || r.Remark != "set commitlog readahead mode success, mode: 1" {
		t.Fatalf("READ_AHEAD_MODE 1: %d %s", r.Code, r.Remark)
	}
	if random, sealed := randomAdvisedSegments(t, b); random != sealed {
		t.Fatalf("random reads: %d of %d sealed segments advised random", random, sealed)
	}
	if !strings.Contains(string(call(t, c, remoting.GetBrokerConfig, nil, nil).Body), "dataReadAheadEnable=false\n") {
		t.Fatal("GET_BROKER_CONFIG does not report dataReadAheadEnable=false")
	}
	if raw, err := os.ReadFile(conf); err != nil || !strings.Contains(string(raw), "dataReadAheadEnable: false\n") {
		t.Fatalf("broker.yaml after the change (%v):\n%s", err, raw)
	}
	if r := set(map[string]string{"READ_AHEAD_MODE": "0"}); r.Code != remoting.Success {
		t.Fatalf("READ_AHEAD_MODE 0: %d %s", r.Code, r.Remark)
	}
	if random, sealed := randomAdvisedSegments(t, b); random != 0 {
		t.Fatalf("read-ahead again: %d of %d sealed segments advised random", random, sealed)
	}
}

// The body of UPDATE_BROKER_CONFIG is read as RocketMQ reads it
// (MixAll.string2Properties, that is java.util.Properties.load): lines
// continued over CRLF or a lone CR, a key continued on the next line, a
// backslash ending the body, escapes in keys and values, the last of a
// key given twice. The cases run in order on one broker, each moving the
// settings on from the one before; want is the settings after the case.
func TestUpdateBrokerConfigBodyReadAsJavaProperties(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for _, tc := range []struct {
		name   string
		body   string
		code   int32
		remark string // in the answer's remark
		want   map[string]string
	}{
		{"a value continued over CRLF", "deleteWhen=01;\\\r\n    13\r\nfileReservedTime=6\r\n", remoting.Success, "",
			map[string]string{"deleteWhen": "01;13", "fileReservedTime": "6"}},
		{"a value continued over a lone CR", "deleteWhen=02;\\\r 14\rfileReservedTime=7\r", remoting.Success, "",
			map[string]string{"deleteWhen": "02;14", "fileReservedTime": "7"}},
		{"a key continued on the next line", "fileReserved\\\n    Time=8\n", remoting.Success, "",
			map[string]string{"fileReservedTime": "8"}},
		{"a backslash ending the body", "fileReservedTime=9\\", remoting.Success, "",
			map[string]string{"fileReservedTime": "9"}},
		{"escapes in key and value", "file\\u0052eserved\\Time=1\\u0030\ndelete\\When=0\\u0033;2\\3\n", remoting.Success, "",
			map[string]string{"fileReservedTime": "10", "deleteWhen": "03;23"}},
		{"the last of a key given twice", "fileReservedTime=11\nfileReservedTime=12\n", remoting.Success, "",
			map[string]string{"fileReservedTime": "12"}},
		{"a comment ending in a backslash does not continue", "# fileReservedTime=1 \\\nfileReservedTime=13\n", remoting.Success, "",
			map[string]string{"fileReservedTime": "13"}},
		{"white space and ':' as separators", "fileReservedTime \t: 14\ndeleteWhen   05\n", remoting.Success, "",
			map[string]string{"fileReservedTime": "14", "deleteWhen": "05"}},
		{"an entry without a key", "=15\nfileReservedTime=15\n", remoting.SystemError, "an entry without a key",
			map[string]string{"fileReservedTime": "14"}},
		{"an entry without a key, ':' form", "  :15\nfileReservedTime=15\n", remoting.SystemError, "an entry without a key",
			map[string]string{"fileReservedTime": "14"}},
		{"an escaped ':' is part of the key", "fileReservedTime\\:x=15\n", remoting.SystemError, "unknown key fileReservedTime:x",
			map[string]string{"fileReservedTime": "14"}},
		{"a malformed \\u escape", "deleteWhen=06\nfileReservedTime=\\u00zz\n", remoting.SystemError, "not a properties text: line 2: key fileReservedTime",
			map[string]string{"fileReservedTime": "14", "deleteWhen": "05"}},
		{"only comments and blank lines", "# nothing\r\n\r\n   ! here\n", remoting.Success, "",
			map[string]string{"fileReservedTime": "14", "deleteWhen": "05"}},
	} {
		r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte(tc.body))
		if r.Code != tc.code || !strings.Contains(r.Remark, tc.remark) {
			t.Errorf("%s: body %q: %d %q, want %d with %q", tc.name, tc.body, r.Code, r.Remark, tc.code, tc.remark)
		}
		got, _ := brokerSettings(t, c)
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: body %q: %s=%q after it, want %q", tc.name, tc.body, k, got[k], v)
			}
		}
	}
}

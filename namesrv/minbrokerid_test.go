package namesrv

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/remoting"
)

// The registry reports a change of a group's smallest broker id as
// RocketMQ's RouteInfoManager notices one, with the members
// chooseBrokerAddrsToNotify picks.
func TestRegistryReportsMinBrokerIDChanges(t *testing.T) {
	var got []MinBrokerIDChange
	r := NewRegistry(RegistryOptions{OnMinBrokerIDChange: func(c MinBrokerIDChange) { got = append(got, c) }})
	acting := true
	reg := func(addr string, id int64) {
		t.Helper()
		if _, err := r.Register(RegisterRequest{ClusterName: "C", BrokerName: "a", BrokerAddr: addr, BrokerID: id,
			HAServerAddr: addr + "-ha", EnableActingMaster: &acting, Body: topicsBody(1, "T:1:1:6", "U:1:1:6")}); err != nil {
			t.Fatal(err)
		}
	}
	take := func() []MinBrokerIDChange { out := got; got = nil; return out }

	reg("s1", 1) // first member: the previous smallest counts as 0
	reg("s2", 2)
	if c := take(); len(c) != 0 {
		t.Fatalf("registrations above the smallest id: %+v", c)
	}
	r.Unregister("C", "s2", "a") // not the smallest
	reg("s2", 2)
	if c := take(); len(c) != 0 {
		t.Fatalf("a member above the smallest went: %+v", c)
	}
	reg("m", 0) // the master: the others are told, with its HA address
	want := []MinBrokerIDChange{{BrokerName: "a", MinBrokerID: 0, MinBrokerAddr: "m", HABrokerAddr: "m-ha", Notify: []string{"s1", "s2"}}}
	if c := take(); !reflect.DeepEqual(c, want) {
		t.Fatalf("master registered: %+v, want %+v", c, want)
	}
	r.Unregister("C", "m", "a") // the smallest went: every member left is told
	want = []MinBrokerIDChange{{BrokerName: "a", MinBrokerID: 1, MinBrokerAddr: "s1", OfflineBrokerAddr: "m", Notify: []string{"s1", "s2"}}}
	if c := take(); !reflect.DeepEqual(c, want) {
		t.Fatalf("master unregistered: %+v, want %+v", c, want)
	}
	// A group not registered with enableActingMaster tells nobody when
	// its smallest member goes (RocketMQ checks isEnableActingMaster on
	// that path only).
	acting = false
	reg("s1", 1)
	r.Unregister("C", "s1", "a")
	if c := take(); len(c) != 0 {
		t.Fatalf("smallest member of a group without acting master went: %+v", c)
	}
}

// startNoticeRecorder serves cfg as a slave broker that records the
// NOTIFY_MIN_BROKER_ID_CHANGE notices it gets; it returns its address.
func startNoticeRecorder(t *testing.T, cfg remoting.ServerConfig) (string, <-chan map[string]string) {
	t.Helper()
	got := make(chan map[string]string, 4)
	srv := remoting.NewServer(cfg, remoting.RespondFunc(
		func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
			if req.Code == remoting.NotifyMinBrokerIDChange {
				got <- req.ExtFields
			}
			return remoting.NewResponse(req, remoting.Success, "")
		}), zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return srv.Addr().String(), got
}

// registerActingPair starts a name server of cfg on a loopback port and
// registers group a's slave (id 1) at slaveAddr, then its master (id 0),
// both with enableActingMaster: the master's registration is the change
// of the group's smallest id the slave is told of.
func registerActingPair(t *testing.T, cfg Config, slaveAddr string) {
	t.Helper()
	cfg.Remoting.Addr = "127.0.0.1:0"
	ns, err := NewServer(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Shutdown(context.Background()) })
	acting := true
	for _, b := range []struct {
		addr string
		id   int64
	}{{slaveAddr, 1}, {"127.0.0.1:1", 0}} {
		if _, err := ns.Registry().Register(RegisterRequest{ClusterName: "C", BrokerName: "a", BrokerAddr: b.addr, BrokerID: b.id,
			HAServerAddr: "127.0.0.1:2", EnableActingMaster: &acting, Body: topicsBody(1, "T:1:1:6", "U:1:1:6")}); err != nil {
			t.Fatal(err)
		}
	}
}

// With notifyMinBrokerIdChanged the name server sends
// NOTIFY_MIN_BROKER_ID_CHANGE to the members chosen; without it, none.
func TestNameServerSendsMinBrokerIDChange(t *testing.T) {
	for _, on := range []bool{true, false} {
		slaveAddr, got := startNoticeRecorder(t, remoting.ServerConfig{Addr: "127.0.0.1:0"})
		set := configs.DefaultNamesrv()
		set.NotifyMinBrokerIdChanged = on
		cfg := DefaultConfig()
		cfg.Settings = &set
		registerActingPair(t, cfg, slaveAddr)
		select {
		case ext := <-got:
			if !on {
				t.Fatalf("notice sent with notifyMinBrokerIdChanged off: %v", ext)
			}
			want := map[string]string{"minBrokerId": "0", "minBrokerAddr": "127.0.0.1:1", "haBrokerAddr": "127.0.0.1:2"}
			for k, v := range want {
				if ext[k] != v {
					t.Fatalf("notice %v: %s %q, want %q", ext, k, ext[k], v)
				}
			}
		case <-time.After(3 * time.Second):
			if on {
				t.Fatal("no NOTIFY_MIN_BROKER_ID_CHANGE sent")
			}
		}
	}
}

// GET_BROKER_MEMBER_GROUP's body reads as this name server writes it and
// as a Java one does (fastjson's bare ids).
func TestDecodeMemberGroup(t *testing.T) {
	want := map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
	for _, body := range []string{
		string(appendMemberGroupJSON(nil, "C", "a", want)),
		`{"brokerMemberGroup":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"a","cluster":"C"}}`,
	} {
		got, err := DecodeMemberGroup([]byte(body))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %v %v, want %v", body, got, err, want)
		}
	}
	if got, err := DecodeMemberGroup([]byte(`{"brokerMemberGroup":{"brokerAddrs":{},"brokerName":"a","cluster":"C"}}`)); err != nil || len(got) != 0 {
		t.Fatalf("no member: %v %v", got, err)
	}
	if _, err := DecodeMemberGroup([]byte(`{"brokerMemberGroup":`)); err == nil {
		t.Fatal("a cut body decoded")
	}
}

// The name server's tls.enable (useTLS) makes its notices go over TLS, so
// that a broker enforcing TLS gets them; without it they go in
// plaintext, which that broker closes unread.
func TestMinBrokerIDChangeFollowsTLSEnable(t *testing.T) {
	for _, enable := range []string{"true", "false"} {
		t.Run("tls.enable="+enable, func(t *testing.T) {
			mode, tc, err := remoting.ServerTLS(configs.TLSModeEnforcing, remoting.TLSOptions{TestMode: true})
			if err != nil {
				t.Fatal(err)
			}
			slaveAddr, got := startNoticeRecorder(t, remoting.ServerConfig{Addr: "127.0.0.1:0", TLSMode: mode, TLS: tc})
			set := configs.DefaultNamesrv()
			if _, err := set.Apply(map[string]string{"notifyMinBrokerIdChanged": "true", "useTLS": enable, "tls.config.file": ""}); err != nil {
				t.Fatal(err)
			}
			registerActingPair(t, ConfigFrom(set, ""), slaveAddr)
			select {
			case ext := <-got:
				if enable != "true" || ext["minBrokerId"] != "0" {
					t.Fatalf("notice %v with tls.enable=%s", ext, enable)
				}
			case <-time.After(3 * time.Second):
				if enable == "true" {
					t.Fatal("no NOTIFY_MIN_BROKER_ID_CHANGE reached the broker enforcing TLS")
				}
			}
		})
	}
}

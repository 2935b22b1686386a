package namesrv

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/remoting"
)

// RocketMQ's BrokerOuterAPI.needRegister reads a QUERY_DATA_VERSION
// answer as "register" when its changed field says so (or is missing),
// when its body holds a data version other than the broker's, or when the
// request fails; a name server that answers with the broker's version and
// changed=false needs nothing.
func TestNeedRegisterReadsTheNameServersAnswer(t *testing.T) {
	dv := DataVersion{Counter: 7, Timestamp: 1700000000000}
	for _, tc := range []struct {
		name    string
		code    int32
		changed string // "" leaves the field out
		body    string
		need    bool
		fails   bool
	}{
		{"unchanged, no body", remoting.Success, "false", "", false, false},
		{"unchanged, same version", remoting.Success, "false", string(dv.appendJSON(nil)), false, false},
		{"changed", remoting.Success, "true", string(dv.appendJSON(nil)), true, false},
		{"changed field missing", remoting.Success, "", "", true, false},
		{"unchanged but another version", remoting.Success, "false", `{"counter":6,"stateVersion":0,"timestamp":1700000000000}`, true, false},
		{"unchanged but another state version", remoting.Success, "false", `{"counter":7,"stateVersion":1,"timestamp":1700000000000}`, true, false},
		{"version not JSON", remoting.Success, "false", "{", true, true},
		{"refused", remoting.SystemError, "false", "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startAnswering(t, func(req *remoting.Command) *remoting.Command {
				resp := remoting.NewResponse(req, tc.code, "")
				resp.ExtFields = map[string]string{}
				if tc.changed != "" {
					resp.ExtFields["changed"] = tc.changed
				}
				if tc.body != "" {
					resp.Body = []byte(tc.body)
				}
				return resp
			})
			pool := remoting.NewClientPool(remoting.ClientOptions{})
			t.Cleanup(func() { _ = pool.Close() })
			reg := NewRegistrar(pool, addr, zerolog.Nop())
			need, err := reg.NeedRegister(testCtx(t), brokerInfo("broker-a", "10.0.0.1:10911", 0), dv)
			if need != tc.need || (err != nil) != tc.fails {
				t.Fatalf("NeedRegister: %v, %v; want need %v and an error %v", need, err, tc.need, tc.fails)
			}
		})
	}
}

// NeedRegister asks only the name servers Register reaches: one whose
// connection attempt failed is not dialed again (RocketMQ's asks every
// configured name server and takes a failure for "register", which would
// make every periodic registration a full one while a name server is
// down, though the registration leaves that name server out). The first
// failed attempt marks it, as a registration's does.
func TestNeedRegisterLeavesOutANameServerThatCouldNotBeConnected(t *testing.T) {
	live, _ := startNameServer(t, nil)
	dead := &deadNameServer{addr: "192.0.2.1:9876", back: make(chan struct{})}
	pool := remoting.NewClientPool(remoting.ClientOptions{DialContext: dead.dial})
	t.Cleanup(func() { _ = pool.Close() })
	reg := NewRegistrar(pool, live.Addr().String()+";"+dead.addr, zerolog.Nop())
	info := brokerInfo("broker-a", "10.0.0.1:10911", 0)
	body := &RegisterBrokerBody{DataVersion: DataVersion{Counter: 1, Timestamp: 1}, TopicConfigTable: manyTopics(2)}
	if _, err := reg.Register(testCtx(t), info, body); err != nil {
		t.Fatal(err)
	}
	if n := dead.dials.Load(); n != 1 {
		t.Fatalf("the refused name server was dialed %d times by the registration, want 1", n)
	}
	for round := range 3 {
		need, err := reg.NeedRegister(testCtx(t), info, body.DataVersion)
		if err != nil || need {
			t.Fatalf("query %d with the live name server holding the version: need %v, %v; want no registration", round, need, err)
		}
	}
	if n := dead.dials.Load(); n != 1 {
		t.Fatalf("the name server known unreachable was dialed %d times, want once (by the registration)", n)
	}
	if need, err := reg.NeedRegister(testCtx(t), info, DataVersion{Counter: 2, Timestamp: 2}); err != nil || !need {
		t.Fatalf("query with a newer version: need %v, %v; want a registration", need, err)
	}

	// The first query is what finds a name server refused: it needs a
	// registration, and is left out from then on.
	fresh := &deadNameServer{addr: "192.0.2.2:9876", back: make(chan struct{})}
	pool2 := remoting.NewClientPool(remoting.ClientOptions{DialContext: fresh.dial})
	t.Cleanup(func() { _ = pool2.Close() })
	reg2 := NewRegistrar(pool2, live.Addr().String()+";"+fresh.addr, zerolog.Nop())
	if need, err := reg2.NeedRegister(testCtx(t), info, body.DataVersion); err == nil || !need {
		t.Fatalf("first query with a refused name server: need %v, %v; want a registration and the error", need, err)
	}
	if got := reg2.Available(); len(got) != 1 || got[0] != live.Addr().String() {
		t.Fatalf("available after a refused query: %v", got)
	}
	if need, err := reg2.NeedRegister(testCtx(t), info, body.DataVersion); err != nil || need {
		t.Fatalf("second query: need %v, %v; want none (the refused name server left out)", need, err)
	}

	// Every name server unreachable: register, so that the registration
	// reports it.
	reg2.SetNameServers(fresh.addr)
	reg2.setDown(fresh.addr, true)
	if need, err := reg2.NeedRegister(testCtx(t), info, body.DataVersion); err != nil || !need {
		t.Fatalf("query with no available name server: need %v, %v; want a registration", need, err)
	}
	if n := fresh.dials.Load(); n != 1 {
		t.Fatalf("the refused name server was dialed %d times, want 1", n)
	}
}

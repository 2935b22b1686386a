package broker

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// routeOtherGroup registers broker-z, a group of another broker, with the
// name server, serving topic with two queues (and a second topic: a
// first registration of one topic is refused).
func routeOtherGroup(t *testing.T, ns *namesrv.Server, topic string) {
	t.Helper()
	tc := func(name string) namesrv.TopicConfig {
		return namesrv.TopicConfig{TopicName: name, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6, TopicFilterType: namesrv.SingleTag}
	}
	body := &namesrv.RegisterBrokerBody{DataVersion: namesrv.DataVersion{Counter: 1, Timestamp: 1},
		TopicConfigTable: map[string]namesrv.TopicConfig{topic: tc(topic), "OtherGroupT": tc("OtherGroupT")}}
	if _, err := ns.Registry().Register(namesrv.RegisterRequest{ClusterName: "DefaultCluster", BrokerName: "broker-z",
		BrokerAddr: "10.9.9.9:10911", Body: body}); err != nil {
		t.Fatal(err)
	}
}

// RocketMQ's broker applies a namesrvAddr changed by UPDATE_BROKER_CONFIG
// to its BrokerOuterAPI (BrokerController.updateNamesrvAddr, every
// updateNameServerAddrPeriod, 120 s): registrations and route fetches
// go to the new name servers. rocketkv applies it at once and registers
// with the new list before it answers (a new name server knows no route
// of the broker), reports it in GET_BROKER_CONFIG and writes it back into
// the configuration file; the name server removed hears from it no more.
func TestUpdateBrokerConfigMovesTheBrokerToOtherNameServers(t *testing.T) {
	ns1 := startTestNameServer(t)
	ns2 := startTestNameServer(t)
	addr1, addr2 := ns1.Addr().String(), ns2.Addr().String()
	conf := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(conf, []byte("namesrvAddr="+addr1+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tb := startTestBrokerWith(t, t.TempDir(), map[string]string{"namesrvAddr": addr1, "loadBalancePollNameServerInterval": "1"},
		func(b *Broker) { b.SetConfigFile(conf) })
	c := tb.client(nil)
	mustSend(t, c, "MovedT", 0, "x", "")
	waitForRoute(t, ns1, "MovedT", "the broker's route", func(r *namesrv.TopicRouteData) bool { return len(r.QueueDatas) == 1 })
	routeOtherGroup(t, ns2, "MovedT")
	if got := queuesText(queryAssignment(t, c, "MovedT", "g", "c1")); strings.Contains(got, "broker-z") {
		t.Fatalf("assignment from the first name server holds the other one's group: %s", got)
	}

	// Refused changes leave the list as it is: an address that cannot be
	// dialled, and no name server at all.
	for body, remark := range map[string]string{
		"namesrvAddr=" + addr2 + ";" + "10.0.0.1":        "key namesrvAddr",
		"namesrvAddr=" + addr2 + ";" + "10.0.0.1:ninety": "key namesrvAddr",
		"namesrvAddr=" + addr2 + "," + "10.0.0.1:9876":   "key namesrvAddr",
		"namesrvAddr=":    "namesrvAddr cannot be emptied while the broker runs",
		"namesrvAddr= ; ": "namesrvAddr cannot be emptied while the broker runs",
		"brokerPermission=4\nnamesrvAddr=" + addr2 + ":1": "key namesrvAddr",
	} {
		r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte(body))
		if r.Code != remoting.SystemError || !strings.Contains(r.Remark, remark) {
			t.Errorf("update %q: %d %q, want SYSTEM_ERROR with %q", body, r.Code, r.Remark, remark)
		}
	}
	if got := tb.register.ns.NameServers(); !slices.Equal(got, []string{addr1}) || tb.permission() != 6 {
		t.Fatalf("after refused updates: name servers %v, brokerPermission %d", got, tb.permission())
	}

	updateConfig(t, c, "namesrvAddr="+addr2)
	// Answered once the new name server routes the broker.
	if r, ok := ns2.Registry().Route("MovedT"); !ok || len(r.QueueDatas) != 2 {
		t.Fatalf("route of the new name server when the update was answered: %+v, %v", r, ok)
	}
	settings, _ := brokerSettings(t, c)
	if settings["namesrvAddr"] != addr2 {
		t.Errorf("GET_BROKER_CONFIG namesrvAddr=%s, want %s", settings["namesrvAddr"], addr2)
	}
	if raw, _ := os.ReadFile(conf); string(raw) != "namesrvAddr="+addr2+"\n" {
		t.Errorf("broker.conf after the update:\n%s", raw)
	}
	// Route fetches (QUERY_ASSIGNMENT's) ask the new name server.
	if got := queuesText(queryAssignment(t, c, "MovedT", "g", "c1")); !strings.Contains(got, "broker-z/0 broker-z/1") {
		t.Errorf("assignment after the move lacks the new name server's other group: %s", got)
	}
	// A topic created now is registered with the new name server only.
	if r := call(t, c, remoting.UpdateAndCreateTopic, map[string]string{"topic": "AfterMoveT", "readQueueNums": "1",
		"writeQueueNums": "1", "perm": "6"}, nil); r.Code != remoting.Success {
		t.Fatalf("topic creation after the move: %d %s", r.Code, r.Remark)
	}
	if _, ok := ns2.Registry().Route("AfterMoveT"); !ok {
		t.Error("the new name server does not route a topic created after the move")
	}
	if _, ok := ns1.Registry().Route("AfterMoveT"); ok {
		t.Error("the removed name server routes a topic created after the move")
	}
}

// A broker started without name servers registers with none, as
// RocketMQ's, which re-reads namesrvAddr only when it started with one: a
// namesrvAddr set at run time is refused, with the reason, and changes
// nothing.
func TestNamesrvAddrCannotBeSetOnABrokerStartedWithoutNameServers(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(conf, []byte("brokerName=broker-a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tb := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) { b.SetConfigFile(conf) })
	c := tb.client(nil)
	r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("namesrvAddr=127.0.0.1:9876"))
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "namesrvAddr cannot be set while the broker runs") {
		t.Fatalf("namesrvAddr set on a broker without name servers: %d %q", r.Code, r.Remark)
	}
	if got := tb.register.ns.NameServers(); len(got) != 0 {
		t.Fatalf("name servers after the refusal: %v", got)
	}
	if raw, _ := os.ReadFile(conf); string(raw) != "brokerName=broker-a\n" {
		t.Fatalf("broker.conf after the refusal:\n%s", raw)
	}
}

// countingDeadNameServer is a dial seam for one name server address that
// counts the dials of it: they are refused at once until reach is set,
// then they reach the name server at reach.
type countingDeadNameServer struct {
	addr  string
	reach atomic.Pointer[string]
	dials atomic.Int32
}

func (d *countingDeadNameServer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var dialer net.Dialer
	if addr != d.addr {
		return dialer.DialContext(ctx, network, addr)
	}
	d.dials.Add(1)
	if to := d.reach.Load(); to != nil {
		return dialer.DialContext(ctx, network, *to)
	}
	return nil, errors.New("connection refused (test)")
}

// routeServer answers GET_ROUTEINFO_BY_TOPIC for topic with one queue
// data of broker, two queues, while failing is unset (SYSTEM_ERROR after);
// anything else is refused as by a server that is no name server.
func routeServer(t *testing.T, topic, broker string, failing *atomic.Bool) string {
	t.Helper()
	return startRemotingServer(t, remoting.RespondFunc(func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		if req.Code != remoting.GetRouteInfoByTopic || failing != nil && failing.Load() {
			return remoting.NewResponse(req, remoting.SystemError, "not answering (test)")
		}
		if req.ExtFields["topic"] != topic {
			return remoting.NewResponse(req, remoting.TopicNotExist, "no route")
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte(`{"brokerDatas":[],"queueDatas":[{"brokerName":"` + broker +
			`","perm":6,"readQueueNums":2,"writeQueueNums":2,"topicSysFlag":0}]}`)
		return resp
	}))
}

// QUERY_ASSIGNMENT's route fetches ask the name servers registrations
// reach first: a dead name server first in namesrvAddr, once a
// connection to it failed, costs them no dial (each used to dial it
// before asking the next). It is still asked when the available ones
// give no route.
func TestRouteFetchesAskTheAvailableNameServersFirst(t *testing.T) {
	var liveFails atomic.Bool
	live := routeServer(t, "FetchedT", "broker-z", &liveFails)
	fallback := routeServer(t, "FetchedT", "broker-y", nil)
	dead := &countingDeadNameServer{addr: "192.0.2.1:9876"}
	tb := startTestBrokerWith(t, t.TempDir(), map[string]string{"namesrvAddr": dead.addr + ";" + live,
		"loadBalancePollNameServerInterval": "1"},
		func(b *Broker) {
			b.namesrvDial = dead.dial
			b.namesrvScanEvery = time.Hour // no scan dials the dead one meanwhile
		})
	waitFor(t, "the dead name server left out of registrations", func() bool {
		return slices.Equal(tb.register.ns.Available(), []string{live})
	})
	c := tb.client(nil)
	mustSend(t, c, "FetchedT", 0, "x", "")
	before := dead.dials.Load()
	for i := range 5 {
		time.Sleep(2 * time.Millisecond) // past loadBalancePollNameServerInterval: fetched again
		if got := queuesText(queryAssignment(t, c, "FetchedT", "g", "c1")); !strings.Contains(got, "broker-z/0 broker-z/1") {
			t.Fatalf("assignment %d: %s, want the live name server's route", i, got)
		}
	}
	if n := dead.dials.Load() - before; n != 0 {
		t.Fatalf("five route fetches dialled the dead name server %d times, want none", n)
	}

	// The dead one answers again (no scan has found it) and the live one
	// gives no route: the fetch falls back to the one left out.
	dead.reach.Store(&fallback)
	liveFails.Store(true)
	time.Sleep(2 * time.Millisecond)
	if got := queuesText(queryAssignment(t, c, "FetchedT", "g", "c1")); !strings.Contains(got, "broker-y/0 broker-y/1") {
		t.Fatalf("assignment with the available name server failing: %s, want the route of the one left out", got)
	}
}

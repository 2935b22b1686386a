package main

import (
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// updateKvConfig, deleteKvConfig and updateOrderConf against a real name
// server: what is put is read back, and a route carries the order config
// once orderMessageEnable is on.
func TestKvConfigCommands(t *testing.T) {
	ns, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "OrderT", "-r", "4", "-w", "4"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "OrderT")
	out, err := run(t, "updateKvConfig", "-n", ns, "-s", "ORDER_TOPIC_CONFIG", "-k", "OrderT", "-v", "broker-a:2")
	if err != nil || out != "create or update kv config to namespace success.\n" {
		t.Fatalf("updateKvConfig: %q %v", out, err)
	}
	if out, err := run(t, "updateOrderConf", "-n", ns, "-t", "OrderT", "-m", "get"); err != nil || out != "get orderConf success. topic=[OrderT], orderConf=[broker-a:2]\n" {
		t.Fatalf("updateOrderConf -m get after updateKvConfig: %q %v", out, err)
	}
	out, err = run(t, "updateOrderConf", "-n", ns, "-t", "OrderT", "-m", "put", "-v", "broker-a:4")
	if err != nil || out != "update orderConf success. topic=[OrderT], orderConf=[broker-a:4]\n" {
		t.Fatalf("updateOrderConf -m put: %q %v", out, err)
	}
	if _, err := run(t, "updateNamesrvConfig", "-n", ns, "-k", "orderMessageEnable", "-v", "true"); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "topicRoute", "-n", ns, "-t", "OrderT"); err != nil || !strings.Contains(out, `"orderTopicConf":"broker-a:4"`) {
		t.Fatalf("route with the order config: %q %v", out, err)
	}
	out, err = run(t, "updateOrderConf", "-n", ns, "-t", "OrderT", "-m", "delete")
	if err != nil || out != "delete orderConf success. topic=[OrderT]\n" {
		t.Fatalf("updateOrderConf -m delete: %q %v", out, err)
	}
	if _, err := run(t, "updateOrderConf", "-n", ns, "-t", "OrderT", "-m", "get"); err == nil || !strings.Contains(err.Error(), "OrderT") {
		t.Fatalf("updateOrderConf -m get of a deleted config: %v", err)
	}
	if _, err := run(t, "updateKvConfig", "-n", ns, "-s", "NS1", "-k", "k", "-v", "v"); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "deleteKvConfig", "-n", ns, "-s", "NS1", "-k", "k"); err != nil || out != "delete kv config from namespace success.\n" {
		t.Fatalf("deleteKvConfig: %q %v", out, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"updateOrderConf", "-t", "OrderT", "-m", "put"}, "-v"},
		{[]string{"updateOrderConf", "-t", "OrderT", "-m", "post"}, "-m \"post\""},
		{[]string{"updateOrderConf", "-t", "OrderT"}, "method"},
		{[]string{"updateKvConfig", "-s", "NS1", "-k", "k"}, "value"},
		{[]string{"deleteKvConfig", "-k", "k"}, "namespace"},
	} {
		args := append(c.args, "-n", ns)
		if out, err := run(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q %v, want an error naming %q", strings.Join(args, " "), out, err, c.want)
		}
	}
}

// Writes and deletions go to every name server of -n with mqadmin's
// header fields; a read asks one.
func TestKvConfigRequests(t *testing.T) {
	get := func(req *remoting.Command) *remoting.Command {
		r := remoting.NewResponse(req, remoting.Success, "")
		r.ExtFields = map[string]string{"value": "bk:8"}
		return r
	}
	ns1, log1 := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{remoting.GetKVConfig: get})
	ns2, log2 := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{remoting.GetKVConfig: get})
	both := ns1 + ";" + ns2
	for _, c := range []struct {
		args []string
		code int32
		want map[string]string
	}{
		{[]string{"updateKvConfig", "-s", "NS", "-k", "K", "-v", " V "}, remoting.PutKVConfig, map[string]string{"namespace": "NS", "key": "K", "value": "V"}},
		{[]string{"deleteKvConfig", "-s", "NS", "-k", "K"}, remoting.DeleteKVConfig, map[string]string{"namespace": "NS", "key": "K"}},
		{[]string{"updateOrderConf", "-t", "T", "-m", "put", "-v", "bk:8"}, remoting.PutKVConfig, map[string]string{"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "bk:8"}},
		{[]string{"updateOrderConf", "-t", "T", "-m", "delete"}, remoting.DeleteKVConfig, map[string]string{"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}},
	} {
		if out, err := run(t, append(c.args, "-n", both)...); err != nil {
			t.Fatalf("%v: %q %v", c.args, out, err)
		}
		for i, log := range []*requestLog{log1, log2} {
			got := log.last(c.code)
			if len(got) != len(c.want) {
				t.Errorf("%v: name server %d got %v, want %v", c.args, i+1, got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%v: name server %d got %s=%q, want %q", c.args, i+1, k, got[k], v)
				}
			}
		}
	}
	out, err := run(t, "updateOrderConf", "-n", both, "-t", "T", "-m", "get")
	if err != nil || !strings.Contains(out, "orderConf=[bk:8]") {
		t.Fatalf("updateOrderConf -m get: %q %v", out, err)
	}
	if got := log1.last(remoting.GetKVConfig); got["namespace"] != "ORDER_TOPIC_CONFIG" || got["key"] != "T" || log2.last(remoting.GetKVConfig) != nil {
		t.Errorf("a read asks the first name server only: %v, %v", got, log2.last(remoting.GetKVConfig))
	}
	// One name server down: the other is still written, and the failure
	// is reported with its address.
	dead := deadAddr(t)
	if _, err := run(t, "updateKvConfig", "-n", dead+";"+ns2, "-s", "NS", "-k", "K2", "-v", "V", "--timeout", "3s"); err == nil || !strings.Contains(err.Error(), dead) {
		t.Errorf("updateKvConfig with a name server down: %v", err)
	}
	if got := log2.last(remoting.PutKVConfig); got["key"] != "K2" {
		t.Errorf("the live name server was not written: %v", got)
	}
}

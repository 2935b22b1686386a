package cliflags

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/rocketkv/rocketkv/configs"
)

// --set adds keys without replacing those a dedicated flag set, the later
// of two sets of a key winning (the e2e harness sets brokerIP1 and a test
// sets it again), and refuses a set that is not key=value.
func TestAddSets(t *testing.T) {
	o := map[string]string{"listenPort": "1"}
	if err := AddSets([]string{"listenPort=2", "a=b=c", "empty=", "brokerIP1=127.0.0.1", "brokerIP1=127.0.0.2"}, o); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"listenPort": "1", "a": "b=c", "empty": "", "brokerIP1": "127.0.0.2"}; !maps.Equal(o, want) {
		t.Fatalf("overrides %v, want %v", o, want)
	}
	for _, bad := range []string{"novalue", "=v"} {
		if err := AddSets([]string{bad}, map[string]string{}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("AddSets(%q) = %v, want an error quoting it", bad, err)
		}
	}
}

// --listen sets the bind address and the port; an empty host is every
// interface; a bad address is an error.
func TestAddListen(t *testing.T) {
	for _, tc := range []struct{ listen, host, port string }{
		{":8081", "0.0.0.0", "8081"},
		{"127.0.0.1:9876", "127.0.0.1", "9876"},
		{"[::1]:10911", "::1", "10911"},
	} {
		o := map[string]string{}
		if err := AddListen(tc.listen, "bind", "port", o); err != nil || o["bind"] != tc.host || o["port"] != tc.port {
			t.Errorf("AddListen(%q) = %v, %v; want %s and %s", tc.listen, o, err, tc.host, tc.port)
		}
	}
	if err := AddListen("8081", "bind", "port", map[string]string{}); err == nil {
		t.Error("AddListen of a port without a colon succeeded")
	}
}

// Overrides puts --set first and each flag given after it, so that the
// flags win; unchanged flags give nothing; each source is named after
// its flag, short form included; a bool flag gives its text.
func TestOverrides(t *testing.T) {
	f := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f.String("listen", ":9876", "")
	f.StringP("namesrv", "n", "127.0.0.1:9876", "")
	f.String("log-level", "info", "")
	f.Bool("order", false, "")
	if err := f.Parse([]string{"--listen", "127.0.0.1:1", "-n", "a:1;b:2", "--order"}); err != nil {
		t.Fatal(err)
	}
	got, err := Overrides(f, []string{"namesrvAddr=x:1", "logLevel=warn"}, Listen{BindKey: "bind", PortKey: "port"},
		KeyFlag{Flag: "namesrv", Key: "namesrvAddr"}, KeyFlag{Flag: "log-level", Key: "logLevel"}, KeyFlag{Flag: "order", Key: "orderOn"})
	if err != nil {
		t.Fatal(err)
	}
	want := []configs.Source{
		{Name: "flag --set", Values: map[string]string{"namesrvAddr": "x:1", "logLevel": "warn"}},
		{Name: "flag --listen", Values: map[string]string{"bind": "127.0.0.1", "port": "1"}},
		{Name: "flag -n (--namesrv)", Values: map[string]string{"namesrvAddr": "a:1;b:2"}},
		{Name: "flag --order", Values: map[string]string{"orderOn": "true"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Overrides:\n got %v\nwant %v", got, want)
	}
	if _, err := Overrides(f, []string{"novalue"}, Listen{}); err == nil || !strings.Contains(err.Error(), "novalue") {
		t.Errorf("a bad --set: %v", err)
	}
	g := pflag.NewFlagSet("t", pflag.ContinueOnError)
	g.String("listen", "", "")
	if err := g.Parse([]string{"--listen", "nowhere"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Overrides(g, nil, Listen{BindKey: "bind", PortKey: "port"}); err == nil || !strings.Contains(err.Error(), "--listen") {
		t.Errorf("a bad --listen: %v", err)
	}
}

func TestRocketMQArgs(t *testing.T) {
	long := map[string]string{"--configFile": "--config", "-pc": "--proxy-config"}
	for _, tc := range []struct {
		in, want []string
	}{
		{[]string{"--configFile", "b.conf", "-n", "x"}, []string{"--config", "b.conf", "-n", "x"}},
		{[]string{"--configFile=b.conf"}, []string{"--config=b.conf"}},
		{[]string{"-pc", "p.json", "-pc=q.json", "-p"}, []string{"--proxy-config", "p.json", "--proxy-config=q.json", "-p"}},
		{[]string{"--config=--configFile"}, []string{"--config=--configFile"}},
		{[]string{}, []string{}},
	} {
		if got := RocketMQArgs(tc.in, long); !slices.Equal(got, tc.want) {
			t.Errorf("RocketMQArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

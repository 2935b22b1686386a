package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A setting from a source other than the file (a flag, an environment
// variable) is refused with an error that starts with the source's name;
// a default is not read at all when the file (properties, YAML or JSON)
// or an override sets its key, so that one that would not parse is no
// error then, as RocketMQ reads its NAMESRV_ADDR default only as the
// value the rest leaves in place.
func TestLoadFromNamesTheSourceAndSkipsTakenDefaults(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	props := write("broker.conf", "namesrvAddr=10.0.0.1:9876\n")
	yaml := write("broker.yaml", "namesrvAddr: 10.0.0.1:9876\n")
	json := write("rmq-proxy.json", `{"namesrvAddr": "10.0.0.1:9876"}`)
	silent := write("silent.conf", "brokerName=broker-x\n")
	env := func(v string) []Source {
		return []Source{{Name: "environment variable NAMESRV_ADDR", Values: map[string]string{"namesrvAddr": v}}}
	}
	flag := func(k, v string) []Source { return []Source{{Name: "flag -n", Values: map[string]string{k: v}}} }
	for _, c := range []struct {
		name                string
		path                string
		defaults, overrides []Source
		want                string // namesrvAddr, or the error's start after "!"
	}{
		{"bad default alone", "", env("10.0.0.3"), nil, "!environment variable NAMESRV_ADDR: key namesrvAddr"},
		{"bad default, file without the key", silent, env("10.0.0.3"), nil, "!environment variable NAMESRV_ADDR: key namesrvAddr"},
		{"bad default under a properties file", props, env("10.0.0.3"), nil, "10.0.0.1:9876"},
		{"bad default under a YAML file", yaml, env("10.0.0.3"), nil, "10.0.0.1:9876"},
		{"bad default under a JSON file", json, env("10.0.0.3"), nil, "10.0.0.1:9876"},
		{"bad default under an override", "", env("10.0.0.3"), flag("namesrvAddr", "10.0.0.2:9876"), "10.0.0.2:9876"},
		{"bad default under an alias in another case", "", env("10.0.0.3"), flag("NAMESRVADDR", "10.0.0.2:9876"), "10.0.0.2:9876"},
		{"good default", silent, env("10.0.0.4:9876"), nil, "10.0.0.4:9876"},
		{"bad override", props, env("10.0.0.4:9876"), flag("namesrvAddr", "10.0.0.2"), "!flag -n: key namesrvAddr"},
		{"unknown override key", "", nil, flag("noSuchKey", "1"), "!flag -n: unknown key noSuchKey"},
	} {
		t.Run(c.name, func(t *testing.T) {
			broker, berr := LoadBrokerFrom(c.path, c.defaults, c.overrides)
			proxy, perr := LoadProxyFrom(c.path, c.defaults, c.overrides)
			for _, r := range []struct {
				what string
				got  string
				err  error
			}{{"broker", broker.Broker.NamesrvAddr, berr}, {"proxy", proxy.Proxy.NamesrvAddr, perr}} {
				if start, ok := strings.CutPrefix(c.want, "!"); ok {
					if r.err == nil || !strings.HasPrefix(r.err.Error(), start) {
						t.Errorf("%s: error %v, want one starting %q", r.what, r.err, start)
					}
					continue
				}
				if r.err != nil || r.got != c.want {
					t.Errorf("%s: namesrvAddr %q, %v; want %q", r.what, r.got, r.err, c.want)
				}
			}
		})
	}
}

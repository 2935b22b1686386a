package logging

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
)

func TestJSONWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "info", Auto)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug().Msg("hidden")
	log.Info().Str("component", "test").Msg("shown")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line at info level, got %q", buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if m["message"] != "shown" || m["level"] != "info" || m["component"] != "test" || m["time"] == nil {
		t.Errorf("unexpected fields %v", m)
	}
	// Milliseconds, as RocketMQ's logs: seconds cannot order a
	// failover's steps.
	if ts, ok := m["time"].(string); !ok || !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$`).MatchString(ts) {
		t.Errorf("time %v, want RFC 3339 with milliseconds", m["time"])
	} else if at, err := time.Parse(time.RFC3339, ts); err != nil || time.Since(at) > time.Minute || time.Since(at) < -time.Minute {
		t.Errorf("time %s (%v), want now", ts, err)
	}
	// A component logger made from it keeps the field.
	buf.Reset()
	child := log.With().Str("component", "child").Logger()
	child.Warn().Msg("again")
	if !strings.Contains(buf.String(), `"time":"`) {
		t.Errorf("a derived logger's line %q has no time", buf.String())
	}
}

func TestConsoleFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "debug", Console)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug().Msg("hello")
	if out := buf.String(); !strings.Contains(out, "hello") || strings.HasPrefix(out, "{") {
		t.Errorf("console output %q", out)
	}
}

func TestBadSettings(t *testing.T) {
	if _, err := New(&bytes.Buffer{}, "loud", JSON); err == nil {
		t.Error("bad level accepted")
	}
	if _, err := New(&bytes.Buffer{}, "info", "xml"); err == nil {
		t.Error("bad format accepted")
	}
}

// A key accepted without effect is logged once at info level with its
// reason, from the file or from an override (--set); an unknown key is
// still a warning (broker and name server).
func TestIgnoredKeysLogLevels(t *testing.T) {
	file := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(file, []byte("sendMessageThreadPoolNums=16\nnoSuchKey=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := configs.LoadBroker(file, map[string]string{"pullMessageThreadPoolNums": "8"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	IgnoredKeys(zerolog.New(&out), file, loaded.UnknownKeys, loaded.InertKeys)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 log lines, got:\n%s", out.String())
	}
	for _, l := range lines {
		switch {
		case strings.Contains(l, `"key":"sendMessageThreadPoolNums"`):
			if !strings.Contains(l, `"level":"info"`) || !strings.Contains(l, "no effect in rocketkv: ") ||
				!strings.Contains(l, `"file":`) {
				t.Errorf("inert key of the file logged as %s", l)
			}
		case strings.Contains(l, `"key":"pullMessageThreadPoolNums"`):
			if !strings.Contains(l, `"level":"info"`) || !strings.Contains(l, `"source":"override"`) ||
				!strings.Contains(l, `"value":"8"`) || strings.Contains(l, `"file":`) {
				t.Errorf("inert override logged as %s", l)
			}
		case strings.Contains(l, `"key":"noSuchKey"`): // the file's spelling
			if !strings.Contains(l, `"level":"warn"`) || !strings.Contains(l, "unknown configuration key ignored") {
				t.Errorf("unknown key logged as %s", l)
			}
		default:
			t.Errorf("unexpected line %s", l)
		}
	}
}

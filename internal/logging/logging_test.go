package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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

package repeatlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// line is one logged line, decoded.
type line struct {
	Level      string `json:"level"`
	Message    string `json:"message"`
	Suppressed int    `json:"suppressed"`
}

func lines(t *testing.T, buf *bytes.Buffer) []line {
	t.Helper()
	var out []line
	for _, s := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if s == "" {
			continue
		}
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("line %q: %v", s, err)
		}
		out = append(out, l)
	}
	buf.Reset()
	return out
}

// A failure repeated every 100 ms for two minutes is logged the first
// time and then once per interval, each line counting the rounds held
// back before it; the success after it is one info line, and the next
// failure is logged at once.
func TestARepeatedFailureIsLoggedOncePerInterval(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(1_700_000_000, 0)
	l := New(zerolog.New(&buf), 15*time.Second, func() time.Time { return clock })
	err := errors.New("disk full")
	const rounds = 1200 // two minutes of 100 ms rounds
	for range rounds {
		l.Failed().Err(err).Msg("deliver")
		clock = clock.Add(100 * time.Millisecond)
	}
	got := lines(t, &buf)
	// At 0, 15, 30, ..., 105 s: 8 lines.
	if len(got) != 8 {
		t.Fatalf("%d lines over %d failing rounds, want 8: %+v", len(got), rounds, got)
	}
	if got[0].Level != "warn" || got[0].Suppressed != 0 {
		t.Errorf("first line %+v, want a warning without suppressed", got[0])
	}
	total := 0
	for i, g := range got {
		total += 1 + g.Suppressed
		if i > 0 && g.Suppressed != 149 {
			t.Errorf("line %d counts %d suppressed, want the 149 rounds of 15 s after the previous one", i, g.Suppressed)
		}
	}
	held := rounds - total // the rounds after the last line
	if held != 149 {
		t.Fatalf("%d failures after the last line, want 149", held)
	}

	l.Recovered().Msg("delivering again")
	got = lines(t, &buf)
	if len(got) != 1 || got[0].Level != "info" || got[0].Suppressed != held {
		t.Fatalf("recovery logged %+v, want one info line counting the %d held back", got, held)
	}
	l.Recovered().Msg("delivering again")
	if got := lines(t, &buf); len(got) != 0 {
		t.Fatalf("a second success logged %+v", got)
	}

	// A new run of failures is logged at once, however soon.
	clock = clock.Add(time.Second)
	l.FailedError().Err(err).Msg("deliver")
	l.Failed().Err(err).Msg("deliver")
	got = lines(t, &buf)
	if len(got) != 1 || got[0].Level != "error" || got[0].Suppressed != 0 {
		t.Fatalf("a new failure after the recovery logged %+v, want one error line", got)
	}
}

// Without failures, Recovered logs nothing.
func TestRecoveredWithoutFailureLogsNothing(t *testing.T) {
	var buf bytes.Buffer
	l := New(zerolog.New(&buf), 0, nil)
	l.Recovered().Msg("ok")
	if buf.Len() != 0 {
		t.Fatalf("logged %q", buf.String())
	}
}

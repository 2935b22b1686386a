package broker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
)

// logLines returns the JSON log lines of logs whose message is msg.
func logLines(logs *testutil.SyncBuffer, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// A start that indexes a long CommitLog tail (here: the index removed, as
// at the first open of a moved RocketMQ store) says so when it begins,
// reports its progress while it lasts, and says when it is done, with the
// bytes of the tail; a short tail is indexed without a word.
func TestStartReportsALongDispatch(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	c := b.client(nil)
	items := make([]batchItem, 64)
	for i := range items {
		items[i] = batchItem{body: strings.Repeat("x", 1024)}
	}
	for range 100 {
		mustSendBatch(t, c, "CatchUp", items)
	}
	b.caughtUp()
	end := b.clog.MaxOffset()
	b.stop()
	if err := os.RemoveAll(filepath.Join(store, kvindex.DirName)); err != nil {
		t.Fatal(err)
	}

	logs := &testutil.SyncBuffer{}
	b = startTestBrokerWith(t, store, nil, func(b *Broker) {
		b.log = zerolog.New(logs)
		b.catchUpFrom = 1 << 20
		b.catchUpEvery = time.Microsecond
	})
	began := logLines(logs, "indexing the CommitLog tail before serving")
	if len(began) != 1 || began[0]["tailBytes"] != float64(end) {
		t.Fatalf("start of the dispatch logged %v, want one line with tailBytes %d", began, end)
	}
	if progress := logLines(logs, "indexing the CommitLog tail"); len(progress) == 0 {
		t.Fatal("no progress logged while the tail was indexed")
	} else if p := progress[len(progress)-1]; p["tailBytes"] != float64(end) || p["percent"] == nil || p["elapsed"] == nil {
		t.Fatalf("progress line %v", p)
	}
	ended := logLines(logs, "indexed the CommitLog tail")
	if len(ended) != 1 || ended[0]["dispatchedBytes"] != float64(end) || ended[0]["percent"] != float64(100) {
		t.Fatalf("end of the dispatch logged %v, want one line with dispatchedBytes %d and percent 100", ended, end)
	}
	if got := b.disp.Dispatched(); got != end {
		t.Fatalf("dispatched to %d after the start, want the log's end %d", got, end)
	}

	// A restart with nothing to index logs none of it.
	b.stop()
	quiet := &testutil.SyncBuffer{}
	startTestBrokerWith(t, store, nil, func(b *Broker) {
		b.log = zerolog.New(quiet)
		b.catchUpFrom = 1 << 20
		b.catchUpEvery = time.Microsecond
	})
	for _, msg := range []string{"indexing the CommitLog tail before serving", "indexing the CommitLog tail", "indexed the CommitLog tail"} {
		if l := logLines(quiet, msg); len(l) != 0 {
			t.Fatalf("a start with nothing to index logged %q: %v", msg, l)
		}
	}
}

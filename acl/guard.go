package acl

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/periodic"
)

// Guard checks requests against an ACL file and picks up edits of the file
// while it runs, as RocketMQ's broker does.
type Guard struct {
	path string
	log  zerolog.Logger
	cur  atomic.Pointer[Config]

	mu   sync.Mutex // serializes Reload
	raw  []byte     // the bytes cur was parsed from
	seen []byte     // changed bytes read by the last settled reload
	// hasSeen tells an empty seen from none.
	hasSeen bool
}

// Open loads the ACL file at path. A missing or invalid file is an error:
// a broker asked to check access does not start without its accounts.
func Open(path string, log zerolog.Logger) (*Guard, error) {
	g := &Guard{path: path, log: log}
	if _, err := g.Reload(); err != nil {
		return nil, err
	}
	return g, nil
}

// Path returns the ACL file's path.
func (g *Guard) Path() string { return g.path }

// Check decides r against the accounts loaded last.
func (g *Guard) Check(r *Request) error { return g.cur.Load().Check(r) }

// Reload reads the file again and, when its bytes changed and parse, puts
// it in force. It reports whether the accounts changed. On an error the
// accounts in force stay.
func (g *Guard) Reload() (bool, error) { return g.reload(false) }

// reload is Reload; with settled, changed bytes are put in force only when
// the previous call read the same bytes, so that a file caught in the
// middle of being written (cut where it still parses) is not, and an
// empty file never is: an editor that truncates and rewrites the file in
// place, held up between the two, would otherwise put "no accounts" in
// force for good if what it then writes does not parse. Reload (an
// administrator's) takes an empty file.
func (g *Guard) reload(settled bool) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	raw, err := os.ReadFile(g.path)
	if err != nil {
		return false, fmt.Errorf("read ACL file: %w", err)
	}
	if settled && len(raw) == 0 && g.cur.Load() != nil {
		g.seen, g.hasSeen = nil, false
		return false, nil
	}
	if g.cur.Load() != nil && bytes.Equal(raw, g.raw) {
		g.seen, g.hasSeen = nil, false
		return false, nil
	}
	if settled && (!g.hasSeen || !bytes.Equal(raw, g.seen)) {
		// Changed since the last look: wait until it settles.
		g.seen, g.hasSeen = raw, true
		return false, nil
	}
	g.seen, g.hasSeen = nil, false
	cfg, err := Parse(raw)
	if err != nil {
		return false, fmt.Errorf("ACL file %s: %w", g.path, err)
	}
	g.cur.Store(cfg)
	g.raw = raw
	return true, nil
}

// Run reloads the file every interval until ctx ends; an edit is put in
// force once two reads in a row found the same bytes (within two
// intervals). A file that stops parsing is logged once per change and the
// accounts in force stay.
func (g *Guard) Run(ctx context.Context, every time.Duration) {
	var lastErr string
	periodic.Run(ctx, every, func(context.Context) {
		changed, err := g.reload(true)
		switch {
		case err != nil:
			if err.Error() != lastErr {
				g.log.Error().Err(err).Msg("ACL file not reloaded; the accounts loaded before stay in force")
			}
			lastErr = err.Error()
		case changed:
			lastErr = ""
			g.log.Info().Str("file", g.path).Int("accounts", len(g.cur.Load().Accounts)).Msg("ACL file reloaded")
		default:
			lastErr = ""
		}
	})
}

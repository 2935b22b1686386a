package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// A slave copies its master's POP in-flight state in pages (GetPopState
// with popCopyFieldPaged), all read from one snapshot the master keeps for
// the copy: a state of any size arrives whole and consistent, where one
// answer was refused past maxPopStateCopy (some 100,000 checkpoints) and
// a promoted slave then popped every message again from the committed
// offsets. A master keeps a copy's snapshot until its last page is read,
// or popCopyIdle after the page before; a slave whose pages stop keeps
// its previous copy until the next sync.
//
//	slave -> master   GetPopState paged=true                    (the first page)
//	master -> slave   SUCCESS session=<id> done=false  body: page 1
//	slave -> master   GetPopState paged=true session=<id>       (the next page)
//	master -> slave   SUCCESS session=<id> done=true   body: page n
//
// A page is kvindex.PopStateReader.Page's; the slave joins them with
// kvindex.AppendPopStatePage. A master of an earlier version answers the
// first request with the whole copy and no done field.

// Ext fields of a paged GetPopState.
const (
	popCopyFieldPaged   = "paged"
	popCopyFieldSession = "session"
	popCopyFieldDone    = "done"
)

const (
	// popCopyPageBytes is the size of a page (a little more: whole
	// pairs), well under a frame's limit.
	popCopyPageBytes = 4 << 20
	// popCopyIdle is how long a master keeps a copy's snapshot after its
	// last page was asked for.
	popCopyIdle = 30 * time.Second
	// maxPopCopies bounds the copies a master serves at once (one per
	// slave, a slave's abandoned ones until they expire); past it the
	// oldest is dropped.
	maxPopCopies = 8
	// maxPopStateJoined bounds what a slave takes in one copy.
	maxPopStateJoined = 1 << 30
)

// popCopies are the paged copies a master is serving.
//
// Goroutines: each copy has a timer that closes it popCopyIdle after its
// last page was asked for (a slave that stops reading pins a snapshot of
// the index, which keeps Pebble from dropping what was overwritten since);
// closing a copy stops it.
type popCopies struct {
	// idle is how long a copy outlives its last page (popCopyIdle when 0).
	idle     time.Duration
	mu       sync.Mutex
	sessions map[string]*popCopy
	closed   bool // closeAll ran: the index is closing, no copy may start
}

// popCopy is one paged copy: its reader and when a page was last asked.
type popCopy struct {
	used  time.Time   // guarded by popCopies.mu
	timer *time.Timer // closes the copy once idle; guarded by popCopies.mu

	mu     sync.Mutex // serialises the reader's pages with its closing
	reader *kvindex.PopStateReader
	closed bool
}

// page reads the copy's next page.
func (c *popCopy) page(max int) ([]byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false, errors.New("the POP state copy was closed")
	}
	page, _, done, err := c.reader.Page(nil, max)
	return page, done, err
}

// close releases the copy's snapshot.
func (c *popCopy) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		_ = c.reader.Close()
	}
}

// start opens a copy on db's current state and returns its id.
func (p *popCopies) start(db *kvindex.DB, now time.Time) (string, *popCopy, error) {
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, fmt.Errorf("name a POP state copy: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		// A request that outlived the server's shutdown: a snapshot
		// taken now would outlive the index.
		return "", nil, errors.New("the broker is shutting down")
	}
	c := &popCopy{reader: db.NewPopStateReader(), used: now}
	p.expireLocked(now)
	if len(p.sessions) >= maxPopCopies {
		oldest := ""
		for k, s := range p.sessions {
			if oldest == "" || s.used.Before(p.sessions[oldest].used) {
				oldest = k
			}
		}
		p.closeLocked(oldest)
	}
	if p.sessions == nil {
		p.sessions = map[string]*popCopy{}
	}
	p.sessions[id] = c
	c.timer = time.AfterFunc(p.idleAfter(), func() { p.expireIdle(id) })
	return id, c, nil
}

func (p *popCopies) idleAfter() time.Duration {
	if p.idle > 0 {
		return p.idle
	}
	return popCopyIdle
}

// expireIdle closes the copy id names if no page was asked for since
// idleAfter, else waits for the rest of that time again.
func (p *popCopies) expireIdle(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.sessions[id]
	if !ok {
		return
	}
	if left := p.idleAfter() - time.Since(c.used); left > 0 {
		c.timer.Reset(left)
		return
	}
	p.closeLocked(id)
}

// get returns the copy id names, nil when it ended or expired.
func (p *popCopies) get(id string, now time.Time) *popCopy {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(now)
	c := p.sessions[id]
	if c != nil {
		c.used = now
	}
	return c
}

// end closes the copy id names.
func (p *popCopies) end(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked(id)
}

// closeAll closes every copy, and refuses new ones (the index is
// closing).
func (p *popCopies) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for id := range p.sessions {
		p.closeLocked(id)
	}
}

func (p *popCopies) expireLocked(now time.Time) {
	for id, c := range p.sessions {
		if now.Sub(c.used) > p.idleAfter() {
			p.closeLocked(id)
		}
	}
}

func (p *popCopies) closeLocked(id string) {
	if c, ok := p.sessions[id]; ok {
		c.timer.Stop()
		c.close()
		delete(p.sessions, id)
	}
}

// processPopStatePage answers a paged GetPopState: the first page of a
// new copy, or the next page of the copy the request names.
func (b *Broker) processPopStatePage(req *remoting.Command) *remoting.Command {
	now := time.Now()
	id := req.ExtFields[popCopyFieldSession]
	var c *popCopy
	if id == "" {
		var err error
		if id, c, err = b.popCopies.start(b.db, now); err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
	} else if c = b.popCopies.get(id, now); c == nil {
		return remoting.NewResponse(req, remoting.SystemError,
			fmt.Sprintf("POP state copy %s ended or expired (a copy's pages must come within %s of each other)", id, b.popCopies.idleAfter()))
	}
	page, done, err := c.page(b.popCopyPage)
	if err != nil || done {
		b.popCopies.end(id)
	}
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{popCopyFieldSession: id, popCopyFieldDone: strconv.FormatBool(done)}
	resp.Body = page
	return resp
}

// askMasterPopState copies the master's POP in-flight state page by page
// and returns it joined.
func askMasterPopState(ctx context.Context, c masterClient) ([]byte, error) {
	var joined []byte
	session := ""
	for {
		ext := map[string]string{popCopyFieldPaged: "true"}
		if session != "" {
			ext[popCopyFieldSession] = session
		}
		resp, err := invokeMaster(ctx, c, remoting.GetPopState, ext)
		if err != nil {
			return nil, err
		}
		done, paged := resp.ExtFields[popCopyFieldDone]
		if !paged {
			return resp.Body, nil // a master that answers the whole copy at once
		}
		before := len(joined)
		if joined, err = kvindex.AppendPopStatePage(joined, resp.Body); err != nil {
			return nil, err
		}
		if done == "true" {
			return joined, nil
		}
		if len(joined) == before {
			// A master's page holds at least one pair unless it is the
			// last: without this a broken one would keep the sync here.
			return nil, errors.New("a page of the POP state copy that is not the last held nothing")
		}
		if len(joined) > maxPopStateJoined {
			return nil, fmt.Errorf("the POP state copy passed %d bytes", maxPopStateJoined)
		}
		if session = resp.ExtFields[popCopyFieldSession]; session == "" {
			return nil, errors.New("a page of the POP state copy named no session")
		}
	}
}

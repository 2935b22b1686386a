package grpcproxy

import (
	"context"
	"sync"
	"time"
)

// renewer keeps the messages a client received with auto_renew (push
// consumers) invisible while the client works on them: shortly before a
// handle expires it is renewed for the default invisible time, until the
// client acknowledges or nacks the message, goes away, or the message has
// been renewed for the maximum time. The client keeps the handle it was
// given; acks and nacks use the latest renewal's.
type renewer struct {
	s  *Server
	mu sync.Mutex
	// byClient holds each client's renewals by message id.
	byClient map[string]map[string]*renewal
}

// renewal is one message being kept invisible.
type renewal struct {
	p       popped
	first   time.Time // when it was received
	expires time.Time // when the current handle's invisible time ends
	// busy is open while a renewal of the handle is on its way; an ack
	// or nack waits for it, so that it uses the handle the renewal
	// produces, not one the renewal replaced.
	busy chan struct{}
}

func newRenewer(s *Server) *renewer {
	return &renewer{s: s, byClient: map[string]map[string]*renewal{}}
}

// add starts renewing a received message.
func (r *renewer) add(clientID, msgID string, p popped, invisible time.Duration) {
	if clientID == "" || msgID == "" {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.byClient[clientID]
	if m == nil {
		m = map[string]*renewal{}
		r.byClient[clientID] = m
	}
	m[msgID] = &renewal{p: p, first: now, expires: now.Add(invisible)}
}

// remove stops renewing a message and returns its latest handle, after
// waiting for a renewal on its way.
func (r *renewer) remove(clientID, msgID string) (Handle, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.byClient[clientID]
	rn, ok := m[msgID]
	for ok && rn.busy != nil {
		busy := rn.busy
		r.mu.Unlock()
		<-busy
		r.mu.Lock()
		m = r.byClient[clientID]
		rn, ok = m[msgID]
	}
	if !ok {
		return Handle{}, false
	}
	delete(m, msgID)
	if len(m) == 0 {
		delete(r.byClient, clientID)
	}
	return rn.p.handle, true
}

// dropClient stops renewing a client's messages: they become visible
// again when their current invisible time ends.
func (r *renewer) dropClient(clientID string) {
	r.mu.Lock()
	delete(r.byClient, clientID)
	r.mu.Unlock()
}

// due is a renewal picked for renewing.
type due struct {
	clientID, msgID string
	rn              *renewal
}

// renewDue renews every handle that expires within the renew-ahead time,
// and gives up those renewed for the maximum time.
func (r *renewer) renewDue(ctx context.Context, now time.Time) {
	var work []due
	r.mu.Lock()
	for cid, m := range r.byClient {
		for mid, rn := range m {
			switch {
			case now.Sub(rn.first) >= r.s.cfg.RenewMax:
				delete(m, mid) // left to expire: the client has had it long enough
			case rn.expires.Sub(now) <= r.s.cfg.RenewAhead:
				rn.busy = make(chan struct{})
				work = append(work, due{cid, mid, rn})
			}
		}
		if len(m) == 0 {
			delete(r.byClient, cid)
		}
	}
	r.mu.Unlock()
	for i, d := range work {
		if ctx.Err() != nil {
			r.release(work[i:])
			return
		}
		nh, _, err := r.s.changeInvisible(ctx, d.rn.p.addr, d.rn.p.group, d.rn.p.topic, d.rn.p.handle, r.s.cfg.DefaultInvisible)
		r.mu.Lock()
		if err != nil {
			r.s.log.Warn().Err(err).Str("client", d.clientID).Str("msgId", d.msgID).Msg("handle renewal failed; the message is delivered again after its invisible time")
			if m := r.byClient[d.clientID]; m[d.msgID] == d.rn {
				delete(m, d.msgID)
			}
		} else {
			d.rn.p.handle = nh
			d.rn.expires = time.Now().Add(r.s.cfg.DefaultInvisible)
		}
		close(d.rn.busy)
		d.rn.busy = nil
		r.mu.Unlock()
	}
}

// release lets waiters of renewals that were not sent go on.
func (r *renewer) release(work []due) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range work {
		close(d.rn.busy)
		d.rn.busy = nil
	}
}

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
// given; acks and nacks use the latest renewal's. Renewals are keyed by
// the handle the client was given, which names one delivery (a message id
// may come twice, when a producer sent it again).
type renewer struct {
	s  *Server
	mu sync.Mutex
	// byClient holds each client's renewals by the handle it was given.
	byClient map[string]map[string]*renewal
}

// renewWorkers bounds the renewals sent at once, so that a broker that
// does not answer delays the others by a request timeout at most.
const renewWorkers = 8

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

// add starts renewing a received message, under the handle the client
// was given.
func (r *renewer) add(clientID, handle string, p popped, invisible time.Duration) {
	if clientID == "" || handle == "" {
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
	m[handle] = &renewal{p: p, first: now, expires: now.Add(invisible)}
}

// remove stops renewing the delivery the client holds handle of and
// returns its latest handle, after waiting for a renewal on its way (until
// ctx ends: then the handle the client holds is used).
func (r *renewer) remove(ctx context.Context, clientID, handle string) (Handle, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.byClient[clientID]
	rn, ok := m[handle]
	for ok && rn.busy != nil {
		busy := rn.busy
		r.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			r.mu.Lock()
			return Handle{}, false
		}
		r.mu.Lock()
		m = r.byClient[clientID]
		rn, ok = m[handle]
	}
	if !ok {
		return Handle{}, false
	}
	delete(m, handle)
	if len(m) == 0 {
		delete(r.byClient, clientID)
	}
	return rn.p.handle, true
}

// clearInvisible is the invisible time left to the messages of a client
// that went away (RocketMQ proxy's invisibleTimeMillisWhenClear): they
// are delivered to another consumer a second later, not when the renewed
// time would have ended.
const clearInvisible = time.Second

// dropClient stops renewing a client's messages and makes them visible
// again after clearInvisible (those whose renewal is on its way keep the
// time it gives them).
func (r *renewer) dropClient(ctx context.Context, clientID string) {
	r.mu.Lock()
	m := r.byClient[clientID]
	delete(r.byClient, clientID)
	var clear []popped
	for _, rn := range m {
		if rn.busy == nil {
			clear = append(clear, rn.p)
		}
	}
	r.mu.Unlock()
	for _, p := range clear {
		if _, _, err := r.s.changeInvisible(ctx, p.addr, p.group, p.topic, p.handle, clearInvisible); err != nil {
			r.s.log.Warn().Err(err).Str("client", clientID).Str("group", p.group).Msg("message of a client gone away not made visible again; it is after its invisible time")
		}
	}
}

// due is a renewal picked for renewing; msgID is the key it is kept
// under (the handle the client was given).
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
	sem := make(chan struct{}, renewWorkers)
	var wg sync.WaitGroup
	for i, d := range work {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			r.release(work[i:])
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.renewOne(ctx, d)
		}()
	}
	wg.Wait()
}

// renewOne sends one renewal and records its outcome.
func (r *renewer) renewOne(ctx context.Context, d due) {
	nh, _, err := r.s.changeInvisible(ctx, d.rn.p.addr, d.rn.p.group, d.rn.p.topic, d.rn.p.handle, r.s.cfg.DefaultInvisible)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.s.log.Warn().Err(err).Str("client", d.clientID).Str("handle", d.msgID).Msg("handle renewal failed; the message is delivered again after its invisible time")
		if m := r.byClient[d.clientID]; m[d.msgID] == d.rn {
			delete(m, d.msgID)
		}
	} else {
		d.rn.p.handle = nh
		d.rn.expires = time.Now().Add(r.s.cfg.DefaultInvisible)
	}
	close(d.rn.busy)
	d.rn.busy = nil
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

package grpcproxy

import (
	"context"
	"errors"
	"sync"
	"time"
)

// renewer keeps the messages a client received with auto_renew (push
// consumers) invisible while the client works on them: shortly before a
// handle expires it is renewed, for longer each time (Config.RenewPolicy),
// until the client acknowledges or nacks the message, goes away, or the
// message has been renewed for the maximum time; it is then given back,
// visible again after its group's retry pause, as RocketMQ's proxy does.
// The client keeps the handle it was given; acks and nacks use the latest
// renewal's. Renewals are keyed by the handle the client was given, which
// names one delivery (a message id may come twice, when a producer sent
// it again).
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
	// renewed counts the renewals made, failed the renewals in a row that
	// did not reach the broker.
	renewed, failed int
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

// due is a renewal picked for renewing (or, once renewed for the maximum
// time, for giving back); msgID is the key it is kept under (the handle
// the client was given).
type due struct {
	clientID, msgID string
	rn              *renewal
	giveBack        bool
}

// renewDue renews every handle that expires within the renew-ahead time,
// or gives it back when it has been renewed for the maximum time.
func (r *renewer) renewDue(ctx context.Context, now time.Time) {
	var work []due
	r.mu.Lock()
	for cid, m := range r.byClient {
		for mid, rn := range m {
			if rn.expires.Sub(now) <= r.s.cfg.RenewAhead {
				// Due: renewed again, or, once it has been renewed for
				// the maximum time, given back (as RocketMQ's proxy, when
				// its handle is about to expire).
				rn.busy = make(chan struct{})
				work = append(work, due{cid, mid, rn, now.Sub(rn.first) >= r.s.cfg.RenewMax})
			}
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
			if d.giveBack {
				r.giveBack(ctx, d)
			} else {
				r.renewOne(ctx, d)
			}
		}()
	}
	wg.Wait()
}

// renewTime is the invisible time of a message's renewal after renewed
// earlier ones.
func (r *renewer) renewTime(renewed int) time.Duration {
	p := r.s.cfg.RenewPolicy
	return p[min(renewed, len(p)-1)]
}

// renewOne sends one renewal and records its outcome. A renewal that did
// not reach the broker is tried again at the next round, up to
// MaxRenewRetry times; one the broker refused is not (the message was
// acknowledged meanwhile, or its handle is no longer the broker's).
func (r *renewer) renewOne(ctx context.Context, d due) {
	r.mu.Lock()
	invisible := r.renewTime(d.rn.renewed)
	r.mu.Unlock()
	nh, _, err := r.s.changeInvisible(ctx, d.rn.p.addr, d.rn.p.group, d.rn.p.topic, d.rn.p.handle, invisible)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		d.rn.p.handle = nh
		d.rn.expires = time.Now().Add(invisible)
		d.rn.renewed++
		d.rn.failed = 0
	case !brokerVerdict(err) && d.rn.failed < r.s.cfg.MaxRenewRetry:
		d.rn.failed++
		r.s.log.Warn().Err(err).Str("client", d.clientID).Str("handle", d.msgID).Int("retry", d.rn.failed).Msg("handle renewal did not reach the broker; trying again at the next round")
	default:
		r.s.log.Warn().Err(err).Str("client", d.clientID).Str("handle", d.msgID).Msg("handle renewal failed; the message is delivered again after its invisible time")
		r.forget(d)
	}
	close(d.rn.busy)
	d.rn.busy = nil
}

// giveBack ends the renewals of a message renewed for the maximum time:
// it becomes visible again after its group's retry pause for its next
// delivery (RocketMQ proxy's STOP_RENEW), as if the client had nacked it.
func (r *renewer) giveBack(ctx context.Context, d due) {
	p := d.rn.p
	reconsumed := 0
	if p.proto != nil {
		reconsumed = int(p.proto.GetSystemProperties().GetDeliveryAttempt()) - 1
	}
	pause := r.s.groupPolicyAt(ctx, []string{p.addr}, p.group).retry.NextDelay(reconsumed)
	if _, _, err := r.s.changeInvisible(ctx, p.addr, p.group, p.topic, p.handle, pause); err != nil {
		r.s.log.Warn().Err(err).Str("client", d.clientID).Str("group", p.group).Msg("message renewed for the maximum time not given back; it is delivered again after its invisible time")
	} else {
		r.s.log.Info().Str("client", d.clientID).Str("group", p.group).Str("handle", d.msgID).Dur("after", pause).
			Msg("message renewed for the maximum time (renewMaxTimeMillis) given back: delivered again after its group's retry pause")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget(d)
	close(d.rn.busy)
	d.rn.busy = nil
}

// forget drops a renewal, if it is still the one kept under its key
// (r.mu held).
func (r *renewer) forget(d due) {
	m := r.byClient[d.clientID]
	if m[d.msgID] == d.rn {
		delete(m, d.msgID)
		if len(m) == 0 {
			delete(r.byClient, d.clientID)
		}
	}
}

// brokerVerdict reports whether err is a broker's answer (or the proxy's
// verdict on a handle), which a retry would not change, rather than a
// request that did not get through.
func brokerVerdict(err error) bool {
	var se *statusError
	return errors.As(err, &se)
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

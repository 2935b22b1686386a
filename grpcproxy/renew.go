package grpcproxy

import (
	"context"
	"errors"
	"slices"
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
//
// The housekeeping loop only finds the renewals that are due and queues
// them, by broker, for workers of the proxy's background work, as
// RocketMQ's proxy submits them to a pool (scheduleRenewTask): it never
// waits for a broker, and a broker that does not answer holds up at most
// renewWorkersPerBroker workers for a request timeout each, not the
// renewals to other brokers.
type renewer struct {
	s  *Server
	mu sync.Mutex
	// byClient holds each client's renewals by the handle it was given.
	byClient map[string]map[string]*renewal
	// lanes holds the work waiting for a worker by broker address; order
	// lists them in the turn workers serve them in, from turn on.
	lanes map[string]*lane
	order []*lane
	turn  int
	// workers counts the workers running.
	workers int
}

// renewWorkers bounds the renewals, give-backs and clears sent at once,
// renewWorkersPerBroker those sent to one broker.
const (
	renewWorkers          = 32
	renewWorkersPerBroker = 8
)

// lane is the renewal work for one broker.
type lane struct {
	addr    string
	waiting []renewJob
	// running counts the workers on the lane's work.
	running int
}

// renewJob is a renewal waiting for a worker, under the key it is kept
// under (the handle the client was given).
type renewJob struct {
	clientID, msgID string
	rn              *renewal
}

// held is what renewing a received message needs of it: its handle,
// where it is held and how often it was consumed before (for the retry
// pause of a give-back). The message itself, its body above all, is not
// kept while the client works on it.
type held struct {
	handle Handle
	group  string
	topic  string // the real topic: the retry topic for retried messages
	// routeTopic is the topic received from, whose route names the
	// master of the handle's broker group: a master demoted since the
	// message was popped answers as a slave, and the renewals follow
	// the group's master to where the route names it then, as
	// RocketMQ's proxy resolves the broker of a handle by its name at
	// every renewal.
	routeTopic string
	addr       string
	reconsumed int
}

// renewal is one message being kept invisible.
type renewal struct {
	p       held
	first   time.Time // when it was received
	expires time.Time // when the current handle's invisible time ends
	// renewed counts the renewals made, failed the renewals in a row that
	// did not reach the broker.
	renewed, failed int
	// queued is set while the renewal waits in a lane for a worker.
	queued bool
	// busy is open while a worker sends the renewal's request; an ack or
	// nack waits for it, so that it uses the handle a renewal produces,
	// not one the renewal replaced. A renewal only waiting in a lane
	// does not hold up an ack.
	busy chan struct{}
	// dropped is set when its client went away: the worker makes the
	// message visible again instead of renewing it.
	dropped bool
}

func newRenewer(s *Server) *renewer {
	return &renewer{s: s, byClient: map[string]map[string]*renewal{}, lanes: map[string]*lane{}}
}

// add starts renewing a received message, under the handle the client
// was given.
func (r *renewer) add(clientID, handle string, p held, invisible time.Duration) {
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
// returns its latest handle, after waiting for a renewal being sent
// (until ctx ends: then the handle the client holds is used). A renewal
// waiting for a worker is not waited for: it is not sent.
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

// dropClient stops renewing a client's messages and has workers make
// them visible again after Config.ClearInvisible, not when the renewed
// time would have ended (those whose renewal is being
// sent keep the time it gives them). It does not wait for the brokers.
func (r *renewer) dropClient(clientID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.byClient[clientID]
	delete(r.byClient, clientID)
	for msgID, rn := range m {
		if rn.busy != nil {
			continue
		}
		rn.dropped = true
		if !rn.queued {
			r.enqueue(renewJob{clientID, msgID, rn})
		}
	}
}

// renewDue queues every renewal whose handle expires within the
// renew-ahead time and is not on its way already, for renewing or, once
// it has been renewed for the maximum time, for giving back. It does not
// wait for the brokers.
func (r *renewer) renewDue(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for cid, m := range r.byClient {
		for mid, rn := range m {
			if !rn.queued && rn.busy == nil && rn.expires.Sub(now) <= r.s.cfg.RenewAhead {
				r.enqueue(renewJob{cid, mid, rn})
			}
		}
	}
}

// enqueue puts a renewal in its broker's lane and starts a worker for
// the lane when it and the proxy have one to spare; otherwise a worker
// running takes it when it is done with its renewal (r.mu held).
func (r *renewer) enqueue(q renewJob) {
	q.rn.queued = true
	l := r.lanes[q.rn.p.addr]
	if l == nil {
		l = &lane{addr: q.rn.p.addr}
		r.lanes[l.addr] = l
		r.order = append(r.order, l)
	}
	l.waiting = append(l.waiting, q)
	if l.running >= renewWorkersPerBroker || r.workers >= renewWorkers {
		return
	}
	l.running++
	r.workers++
	if !r.s.bg.start(func(ctx context.Context) { r.work(ctx, l) }) {
		// Shut down: the renewals end with the proxy.
		l.running--
		r.workers--
	}
}

// work is one worker: it sends a renewal waiting in lane l, then one of
// the next lane in turn that has work waiting and a worker to spare, and
// so on until no lane has or ctx ends. It starts holding one of l's
// workers.
func (r *renewer) work(ctx context.Context, l *lane) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ctx.Err() == nil && len(l.waiting) > 0 {
		q := l.waiting[0]
		l.waiting[0] = renewJob{}
		l.waiting = l.waiting[1:]
		r.mu.Unlock()
		r.process(ctx, q)
		r.mu.Lock()
		// Take turns with the other lanes waiting for a worker.
		l.running--
		r.tidy(l)
		if l = r.nextLane(); l == nil {
			r.workers--
			return
		}
		l.running++
	}
	l.running--
	r.tidy(l)
	r.workers--
}

// nextLane returns the next lane in turn with work waiting and a worker
// to spare, or nil (r.mu held).
func (r *renewer) nextLane() *lane {
	for i := range r.order {
		l := r.order[(r.turn+i)%len(r.order)]
		if len(l.waiting) > 0 && l.running < renewWorkersPerBroker {
			r.turn = (r.turn + i + 1) % len(r.order)
			return l
		}
	}
	return nil
}

// tidy forgets a lane with no work and no worker (r.mu held).
func (r *renewer) tidy(l *lane) {
	if len(l.waiting) > 0 || l.running > 0 || r.lanes[l.addr] != l {
		return
	}
	delete(r.lanes, l.addr)
	i := slices.Index(r.order, l)
	r.order = slices.Delete(r.order, i, i+1)
	if r.turn > i {
		r.turn--
	}
	if r.turn >= len(r.order) {
		r.turn = 0
	}
}

// process does what a queued renewal needs now: a message of a client
// gone away is made visible again, one acknowledged meanwhile is left
// alone, one renewed for the maximum time is given back, any other is
// renewed.
func (r *renewer) process(ctx context.Context, q renewJob) {
	r.mu.Lock()
	rn := q.rn
	rn.queued = false
	kept := r.byClient[q.clientID][q.msgID] == rn
	if !rn.dropped && !kept {
		r.mu.Unlock()
		return
	}
	rn.busy = make(chan struct{})
	p, invisible := rn.p, r.renewTime(rn.renewed)
	dropped, giveBack := rn.dropped, time.Since(rn.first) >= r.s.cfg.RenewMax
	r.mu.Unlock()
	switch {
	case dropped:
		r.clear(ctx, q.clientID, p)
	case giveBack:
		// Renewed for the maximum time: given back when its handle is
		// about to expire, as RocketMQ's proxy does.
		r.giveBack(ctx, q, p)
	default:
		r.renewOne(ctx, q, p, invisible)
	}
	r.mu.Lock()
	close(rn.busy)
	rn.busy = nil
	r.mu.Unlock()
}

// clear makes a message of a client gone away visible again after
// Config.ClearInvisible (RocketMQ proxy's invisibleTimeMillisWhenClear).
func (r *renewer) clear(ctx context.Context, clientID string, p held) {
	if _, _, err := r.s.changeInvisibleAt(ctx, p.routeTopic, p.addr, p.group, p.topic, p.handle, r.s.cfg.ClearInvisible); err != nil {
		r.s.log.Warn().Err(err).Str("client", clientID).Str("group", p.group).Msg("message of a client gone away not made visible again; it is after its invisible time")
	}
}

// renewTime is the invisible time of a message's renewal after renewed
// earlier ones.
func (r *renewer) renewTime(renewed int) time.Duration {
	p := r.s.cfg.RenewPolicy
	return p[min(renewed, len(p)-1)]
}

// renewOne sends one renewal of p and records its outcome. A renewal
// that did not reach the broker is tried again at the next round, up to
// MaxRenewRetry times; one the broker refused is not (the message was
// acknowledged meanwhile, or its handle is no longer the broker's).
func (r *renewer) renewOne(ctx context.Context, q renewJob, p held, invisible time.Duration) {
	nh, addr, err := r.s.changeInvisibleAt(ctx, p.routeTopic, p.addr, p.group, p.topic, p.handle, invisible)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		q.rn.p.handle, q.rn.p.addr = nh, addr
		q.rn.expires = time.Now().Add(invisible)
		q.rn.renewed++
		q.rn.failed = 0
	case !brokerVerdict(err) && q.rn.failed < r.s.cfg.MaxRenewRetry:
		q.rn.failed++
		r.s.log.Warn().Err(err).Str("client", q.clientID).Str("handle", q.msgID).Int("retry", q.rn.failed).Msg("handle renewal did not reach the broker; trying again at the next round")
	default:
		r.s.log.Warn().Err(err).Str("client", q.clientID).Str("handle", q.msgID).Msg("handle renewal failed; the message is delivered again after its invisible time")
		r.forget(q)
	}
}

// giveBack ends the renewals of a message renewed for the maximum time:
// it becomes visible again after its group's retry pause for its next
// delivery (RocketMQ proxy's STOP_RENEW), as if the client had nacked it.
func (r *renewer) giveBack(ctx context.Context, q renewJob, p held) {
	pause := r.s.groupPolicyAt(ctx, []string{p.addr}, p.group).retry.NextDelay(p.reconsumed)
	if _, _, err := r.s.changeInvisibleAt(ctx, p.routeTopic, p.addr, p.group, p.topic, p.handle, pause); err != nil {
		r.s.log.Warn().Err(err).Str("client", q.clientID).Str("group", p.group).Msg("message renewed for the maximum time not given back; it is delivered again after its invisible time")
	} else {
		r.s.log.Info().Str("client", q.clientID).Str("group", p.group).Str("handle", q.msgID).Dur("after", pause).
			Msg("message renewed for the maximum time (renewMaxTimeMillis) given back: delivered again after its group's retry pause")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget(q)
}

// forget drops a renewal, if it is still the one kept under its key
// (r.mu held).
func (r *renewer) forget(q renewJob) {
	m := r.byClient[q.clientID]
	if m[q.msgID] == q.rn {
		delete(m, q.msgID)
		if len(m) == 0 {
			delete(r.byClient, q.clientID)
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

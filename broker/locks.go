package broker

import (
	"context"
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/internal/periodic"
)

// messageQueue is RocketMQ's MessageQueue as JSON.
type messageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

// lockManager is RocketMQ's RebalanceLockManager: orderly consumers lock the
// queues they consume so that one client of a group consumes a queue at a
// time. A lock lapses ttl after its last renewal (clients renew every
// 20 s). Only live locks are kept: an expiry sweep drops lapsed ones.
type lockManager struct {
	ttl    time.Duration
	mu     sync.Mutex
	groups map[string]map[messageQueue]*queueLock
	now    func() time.Time
}

type queueLock struct {
	clientID string
	last     time.Time
}

func newLockManager(ttl time.Duration) *lockManager {
	return &lockManager{ttl: ttl, groups: map[string]map[messageQueue]*queueLock{}, now: time.Now}
}

// tryLock locks (or renews) each queue for clientID and returns those it
// holds afterwards.
func (l *lockManager) tryLock(group, clientID string, mqs []messageQueue) []messageQueue {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	g := l.groups[group]
	if g == nil {
		g = map[messageQueue]*queueLock{}
		l.groups[group] = g
	}
	locked := make([]messageQueue, 0, len(mqs))
	for _, mq := range mqs {
		cur := g[mq]
		if cur == nil || cur.clientID == clientID || now.Sub(cur.last) > l.ttl {
			g[mq] = &queueLock{clientID: clientID, last: now}
			locked = append(locked, mq)
		}
	}
	return locked
}

// unlock releases the queues clientID holds.
func (l *lockManager) unlock(group, clientID string, mqs []messageQueue) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.groups[group]
	for _, mq := range mqs {
		if cur := g[mq]; cur != nil && cur.clientID == clientID {
			delete(g, mq)
		}
	}
	if len(g) == 0 {
		delete(l.groups, group)
	}
}

// lockedBy returns the client holding a queue's lock, or "".
func (l *lockManager) lockedBy(group string, mq messageQueue) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.groups[group][mq]; cur != nil && l.now().Sub(cur.last) <= l.ttl {
		return cur.clientID
	}
	return ""
}

// anyLive reports whether some queue lock of the group has not expired:
// the group consumes orderly (RocketMQ's !isLockAllExpired).
func (l *lockManager) anyLive(group string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for _, cur := range l.groups[group] {
		if now.Sub(cur.last) <= l.ttl {
			return true
		}
	}
	return false
}

// sweep drops lapsed locks and empty groups.
func (l *lockManager) sweep() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for name, g := range l.groups {
		for mq, cur := range g {
			if now.Sub(cur.last) > l.ttl {
				delete(g, mq)
			}
		}
		if len(g) == 0 {
			delete(l.groups, name)
		}
	}
}

func (l *lockManager) expireLoop(ctx context.Context) {
	periodic.Run(ctx, l.ttl/2, func(context.Context) { l.sweep() })
}

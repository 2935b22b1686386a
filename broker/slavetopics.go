package broker

import (
	"context"
	"sync"
	"time"
)

// A slave copies its master's topic table every slaveSyncIntervalMillis,
// a minute by default (slaveSyncLoop), as RocketMQ's does. A topic
// created on the master in between is unknown to the slave although its
// messages are replicated and indexed: pulls from the slave are refused
// with TOPIC_NOT_EXIST, and a slave promoted in between (by its
// controller, or restarted as the master) would not serve the topic at
// all (it takes the topics it never copied at that start only from what
// it indexed: uncopiedtopics.go).
//
// So a slave watches the topics its dispatcher meets (kvindex's NewTopic
// hook): a replicated record of a topic the slave has no config for
// makes it copy the master's topic and subscription-group tables at once,
// not at the next minute. The hook only notes the name (topicSightings);
// the slave's sync loop looks the names up in the topic table and asks
// the master, at most once per topicSightingGap, so a burst of new topics
// costs one copy. A topic the master has no config for either (one it
// deleted) costs a lookup and a copy, which the tables' data versions
// keep small when nothing changed. (Light message queues are not record
// topics: a record names them in a property, and the hook never sees
// them.) Queues a master adds to a topic bring no new name: a client's
// pull of a queue past the slave's copy of the read queue count that the
// slave holds messages of (the master's route gave the client the new
// queues) makes the next look copy the tables too (noteStaleQueue),
// unless a copy that ended since (one under way when the client pulled)
// already gave the queue.

// topicSightingGap is the least time between two copies of the master's
// tables made for topics the slave did not have.
const topicSightingGap = time.Second

// maxTopicSightings bounds the names a topicSightings holds between two
// looks; past it, the look copies the master's tables without a lookup.
const maxTopicSightings = 1024

// topicSightings collects the topics a slave's dispatcher met for the
// first time, for its sync loop to look up. note runs on the dispatcher's
// goroutine and never blocks.
type topicSightings struct {
	mu       sync.Mutex
	names    map[string]struct{}
	overflow bool       // more names came than maxTopicSightings
	stale    staleQueue // the last queue a client showed past the copied config
	kick     chan struct{}
}

// staleQueue names a queue a client pulled past the slave's copy of its
// topic's read queue count; topic is "" when none.
type staleQueue struct {
	topic   string
	queueID int32
}

func newTopicSightings() *topicSightings {
	return &topicSightings{names: map[string]struct{}{}, kick: make(chan struct{}, 1)}
}

// note records that the dispatcher met topic, and wakes the sync loop.
func (s *topicSightings) note(topic string) {
	s.mu.Lock()
	if len(s.names) < maxTopicSightings {
		s.names[topic] = struct{}{}
	} else {
		s.overflow = true
	}
	s.mu.Unlock()
	s.wake()
}

// noteStale records that a client's request showed the slave's copy of
// topic's config out of date (a pull of a queue past its read queue
// count, which the master's route gave the client), and wakes the sync
// loop: the next look copies the master's tables without a lookup.
func (s *topicSightings) noteStale(topic string, queueID int32) {
	s.mu.Lock()
	s.stale = staleQueue{topic: topic, queueID: queueID}
	s.mu.Unlock()
	s.wake()
}

func (s *topicSightings) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// take returns the names noted since the last take, whether some were
// left out, and the last queue noted stale, and forgets them.
func (s *topicSightings) take() (names []string, overflow bool, stale staleQueue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n := range s.names {
		names = append(names, n)
	}
	clear(s.names)
	overflow, s.overflow = s.overflow, false
	stale, s.stale = s.stale, staleQueue{}
	return names, overflow, stale
}

// giveBack returns what a take handed out to a look whose copy failed,
// keeping what was noted since (a newer stale queue wins), and wakes the
// sync loop: the next look, after earlyCopyGap, tries again.
func (s *topicSightings) giveBack(names []string, overflow bool, stale staleQueue) {
	s.mu.Lock()
	for _, n := range names {
		if len(s.names) < maxTopicSightings {
			s.names[n] = struct{}{}
		} else {
			s.overflow = true
		}
	}
	s.overflow = s.overflow || overflow
	if s.stale.topic == "" {
		s.stale = stale
	}
	s.mu.Unlock()
	s.wake()
}

// newTopicHook is the dispatcher's NewTopic hook: nil on a master, which
// owns its topic table.
func (b *Broker) newTopicHook() func(string) {
	if !b.isSlave() {
		return nil
	}
	b.repl.sightings = newTopicSightings()
	return b.repl.sightings.note
}

// noteStaleQueue kicks, on a slave, an early copy of the master's tables
// when a client pulled a queue past the slave's copy of the topic's read
// queue count that the slave holds messages of: the master gave the topic
// more queues since the last copy, and its route gave them to the client.
func (b *Broker) noteStaleQueue(topic string, queueID int32) {
	if b.repl.sightings == nil || queueID < 0 {
		return
	}
	if end, err := b.cqs.MaxOffset(topic, queueID); err != nil || end == 0 {
		return
	}
	b.repl.sightings.noteStale(topic, queueID)
}

// stillStale reports whether the slave's copy of q's topic config still
// has too few read queues for q: a copy that ended after the pull (one
// under way then) may have given it, and a second copy would be for
// nothing. A failed lookup counts as stale.
func (b *Broker) stillStale(q staleQueue) bool {
	tc, ok, err := b.topics.get(q.topic)
	return err != nil || !ok || int(q.queueID) >= tc.ReadQueueNums
}

// earlyCopy is what a look at the sightings did (copyTablesForSightings).
type earlyCopy int

const (
	earlyCopyNoMaster  earlyCopy = iota // no master known: the names wait
	earlyCopyNotNeeded                  // every topic met has a config, no queue stale
	earlyCopyDone                       // the master's tables were copied
	earlyCopyFailed                     // the copy failed (the master is down?)
)

// earlyCopyGap is the least time between two looks at the sightings after
// failed early copies in a row: topicSightingGap doubled per failure, up to
// the full sync's interval, so that a slave whose master is down, pulled
// by clients for queues past its copy, does not ask the dead master, and
// log that it failed, every second.
func earlyCopyGap(failed int, interval time.Duration) time.Duration {
	return min(topicSightingGap<<min(failed, 20), max(interval, topicSightingGap))
}

// copyTablesForSightings looks up the topics the dispatcher met since the
// last look and, when one of them (or, after an overflow, possibly one)
// has no config here, or a client showed a config that is still out of
// date, copies the master's topic and subscription-group tables from the
// master at addr. While no master is known it takes nothing: the names
// wait for the next look; a copy that fails gives them back for the look
// after the next gap.
func (b *Broker) copyTablesForSightings(ctx context.Context, addr string) earlyCopy {
	if addr == "" {
		return earlyCopyNoMaster
	}
	names, overflow, stale := b.repl.sightings.take()
	unknown := ""
	for _, n := range names {
		if _, ok, err := b.topics.get(n); err != nil || !ok {
			unknown = n
			break
		}
	}
	switch {
	case unknown != "" || overflow:
		b.log.Info().Str("topic", unknown).Bool("overflow", overflow).Str("master", addr).
			Msg("a replicated record names a topic this slave has no config for: copying the master's topics and groups now")
	case stale.topic != "" && b.stillStale(stale):
		b.log.Info().Str("topic", stale.topic).Int32("queueId", stale.queueID).Str("master", addr).
			Msg("a client pulled a queue past this slave's copy of the topic's config: copying the master's topics and groups now")
	default:
		return earlyCopyNotNeeded
	}
	if err := b.runSyncSteps(ctx, addr, []syncStep{b.topicsStep(), b.groupsStep()}); err != nil {
		if ctx.Err() == nil {
			b.log.Warn().Err(err).Str("master", addr).Msg("copy the master's topics for a new topic")
			b.repl.sightings.giveBack(names, overflow, stale)
		}
		return earlyCopyFailed
	}
	return earlyCopyDone
}

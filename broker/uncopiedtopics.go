package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// A slave copies its master's topic table every minute, and at once when
// a replicated record names a topic it has no config for (slavetopics.go).
// A master that dies after it created a topic and acknowledged its
// messages (a SYNC_MASTER waits until its slave holds them), but before
// it answered the slave's copy, leaves the slave with the messages and no
// config: promoted, it neither routes nor serves the topic, and no client
// reaches the acknowledged messages. (Apache RocketMQ's slave has the same
// window, a minute wide.)
//
// So a slave records how far its topic table covers its CommitLog
// (kvindex.DB.SlaveTopicsAt: the log end before it asked for the last
// master's table it took), and a broker that starts as the master on a
// store that last served as a slave gives each topic with entries at or
// past that offset and no config a config of its own: read-write, with
// as many queues as its highest queue id needs. The master wrote those
// records, so it had the topic then. A topic whose entries all lie below
// the offset was missing from a table the master gave after it wrote
// them: the master deleted it, and it stays unserved, as there. The same
// holds for the queues a master added to a topic (updateTopic with more
// queues): a queue past the copied count with an entry at or past the
// offset raises the topic's count to cover it; one whose entries all lie
// below it was cut off by the master before the copy, and stays so.
//
//	slave's log: ... A/0 ... B/1 ... | topics at ... C/0 ... C/3 ... A/5 (master dies)
//	             the table taken at "topics at" has A (2 queues), not B (deleted);
//	             C never copied: promoted, C gets 4 queues, A 6, B stays unserved

// slaveTopicsAtStart keeps the record of how far the topic table covers
// the log (see above). A slave's first start records the log's end (the
// table covers what the store held before it served as a slave), and
// lowers a record past the end (a controller cut the log back); a
// master's start on a store that served as a slave takes the topics the
// slave never copied in the background (takeUncopiedLoop), then forgets
// the record.
func (b *Broker) slaveTopicsAtStart() error {
	at, ok, err := b.db.SlaveTopicsAt()
	if err != nil {
		return err
	}
	if b.isSlave() {
		if end := b.clog.MaxOffset(); !ok || at > end {
			return b.db.SetSlaveTopicsAt(end)
		}
		return nil
	}
	if ok {
		b.takingUncopied.Store(true)
		b.goBackground("take the topics a slave never copied", func(ctx context.Context) {
			b.takeUncopiedLoop(ctx, at, b.takeUncopiedTopics, uncopiedRetry)
		})
	}
	return nil
}

// uncopiedRetry is how long a failed take of the topics a promoted slave
// never copied waits before it is tried again.
const uncopiedRetry = 5 * time.Second

// takeUncopiedLoop takes the topics a promoted slave never copied (take:
// takeUncopiedTopics) and forgets the record, trying again retry after
// an error until it succeeds or ctx ends. It runs beside the broker's
// service, not before it: at a million queues the walk takes about a
// second, which a controller's switch would otherwise add to the time no
// master serves (sends wait at the gate a second at most). Until it
// ends, the topics it takes are not routed, as before the master died,
// and a clean of unused topics is refused (it would drop their queues).
func (b *Broker) takeUncopiedLoop(ctx context.Context, at int64, take func(context.Context, int64) error, retry time.Duration) {
	defer b.takingUncopied.Store(false)
	for {
		began := time.Now()
		err := take(ctx, at)
		if err == nil {
			err = b.db.ClearSlaveTopicsAt()
		}
		if err == nil {
			b.log.Info().Int64("topicsCopiedAt", at).Dur("took", time.Since(began)).
				Msg("took the topics and queues this broker's master had given no copy of when it died")
			return
		}
		if ctx.Err() != nil {
			return
		}
		b.log.Error().Err(err).Int64("topicsCopiedAt", at).Dur("retryIn", retry).
			Msg("take the topics this broker's master had given no copy of when it died: their messages stay unserved until it succeeds")
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

// slaveTopicsCopied records, on a slave, that its topic table holds
// every topic its master had when the slave's log ended at logEnd (its
// copy found the master's table unchanged). A record that says so
// already is not written again (a synced write at every copy of an idle
// master's table).
func (b *Broker) slaveTopicsCopied(logEnd int64) error {
	if !b.isSlave() {
		return nil
	}
	if at, ok, err := b.db.SlaveTopicsAt(); err == nil && ok && at == logEnd {
		return nil
	}
	if err := b.db.SetSlaveTopicsAt(logEnd); err != nil {
		return fmt.Errorf("record how far the master's topics were copied: %w", err)
	}
	return nil
}

// slaveTopicsCopiedWrite is slaveTopicsCopied as a write of the table's
// Replace, so that a crash cannot part the table taken and the record of
// how far it covers the log: none on a broker that is not a slave.
func (b *Broker) slaveTopicsCopiedWrite(logEnd int64) []kvindex.ReplaceAlso {
	if !b.isSlave() {
		return nil
	}
	return []kvindex.ReplaceAlso{kvindex.RecordSlaveTopicsAt(logEnd)}
}

// uncoveredTopic names the queues of a topic the ConsumeQueue holds while
// the topic table does not cover them: every queue of a topic without a
// config, the queues past the queue count of a topic with one.
type uncoveredTopic struct {
	topic     string
	hasConfig bool
	queues    []int32 // in order
}

// takeUncopiedTopics gives every topic with an entry naming a record at
// or past at, and no config, a read-write config with as many queues as
// its highest queue id needs, and raises the queue count of a topic with
// a config to cover its queues past it that hold such an entry (the
// master added queues after the slave's last copy). Light message queues
// are left alone.
//
// The walk (walkUncopied) runs while the broker serves, without a lock;
// what it found is checked again under the topic table's get-or-create
// lock (coverUncopied), one read per topic, so that a topic deleted
// meanwhile (its queues dropped) or being deleted is not brought back,
// and a config created or grown meanwhile is kept (only raised).
func (b *Broker) takeUncopiedTopics(ctx context.Context, at int64) error {
	found, err := b.walkUncopied(ctx, at)
	if err != nil {
		return err
	}
	return b.coverUncopied(at, found)
}

// uncopiedTopic is a topic the walk found with queues its config, if it
// has one, does not cover, one of which holds an entry at or past the
// record.
type uncopiedTopic struct {
	topic  string
	recent int32 // the highest such queue with an entry at or past the record
	last   int32 // the highest queue id of the topic
}

// walkUncopied lists the topics takeUncopiedTopics gives configs to or
// raises, as the ConsumeQueue and the topic table stand now.
func (b *Broker) walkUncopied(ctx context.Context, at int64) ([]uncopiedTopic, error) {
	uncovered, err := b.uncoveredQueues(ctx, b.cqs)
	if err != nil {
		return nil, err
	}
	var found []uncopiedTopic
	for _, u := range uncovered {
		recent := int32(-1)
		for _, qid := range u.queues {
			last, ok, err := cq.LastEntry(b.cqs, u.topic, qid)
			if err != nil {
				return nil, fmt.Errorf("read the last entry of %s/%d, which its config does not cover: %w", u.topic, qid, err)
			}
			if ok && last.PhyOffset >= at {
				recent = qid
			}
		}
		if recent >= 0 {
			found = append(found, uncopiedTopic{u.topic, recent, u.queues[len(u.queues)-1]})
		}
	}
	return found, nil
}

// coverUncopied gives the topics walkUncopied found the configs they
// need, checking each again under the get-or-create lock: skipped while
// its deletion is under way or once its entry at or past at is gone (a
// deletion that ended since the walk), and its config read again.
func (b *Broker) coverUncopied(at int64, found []uncopiedTopic) error {
	if len(found) == 0 {
		return nil
	}
	m := b.topics
	m.create.Lock()
	defer m.create.Unlock()
	var taken []meta.TopicConfig
	for _, u := range found {
		if m.deleting[u.topic] > 0 {
			continue
		}
		last, ok, err := cq.LastEntry(b.cqs, u.topic, u.recent)
		if err != nil {
			return fmt.Errorf("read the last entry of %s/%d again: %w", u.topic, u.recent, err)
		}
		if !ok || last.PhyOffset < at {
			continue // deleted since the walk
		}
		tc, ok, err := m.table.Get(u.topic)
		if err != nil {
			return fmt.Errorf("read the config of %s to cover its queues: %w", u.topic, err)
		}
		if !ok {
			tc := meta.NewTopicConfig(u.topic, int(u.last)+1)
			taken = append(taken, tc)
			b.log.Warn().Str("topic", u.topic).Int("queues", tc.WriteQueueNums).Int64("topicsCopiedAt", at).
				Msg("the master died before this broker, its slave then, copied the topic's config: the topic is served with a config made from its queues; check its queue count and attributes")
			continue
		}
		was := tc.QueueCount()
		if int(u.recent) < was {
			continue // grown meanwhile
		}
		tc.ReadQueueNums, tc.WriteQueueNums = max(tc.ReadQueueNums, int(u.recent)+1), max(tc.WriteQueueNums, int(u.recent)+1)
		taken = append(taken, tc)
		b.log.Warn().Str("topic", u.topic).Int("queues", tc.WriteQueueNums).Int("copied", was).Int64("topicsCopiedAt", at).
			Msg("the master died before this broker, its slave then, copied the topic's new queue count: the queues it wrote past the copied count are served")
	}
	if len(taken) == 0 {
		return nil
	}
	if err := m.put(taken...); err != nil {
		return fmt.Errorf("store the topic configs the slave never copied: %w", err)
	}
	return nil
}

// uncoveredQueues lists, in topic name order, the queues some of stores
// (nil ones skipped) holds that the topic table does not cover (see
// uncoveredTopic), light message queues left out. It stops with ctx's
// error when ctx ends.
func (b *Broker) uncoveredQueues(ctx context.Context, stores ...cq.Store) ([]uncoveredTopic, error) {
	type known struct {
		queues int  // the config's queue count; -1: no config
		skip   bool // a light message queue
	}
	topics := map[string]known{}
	byTopic := map[string]map[int32]bool{}
	for _, s := range stores {
		if s == nil {
			continue
		}
		var lookErr error
		visited := 0
		err := s.Queues(func(topic string, queueID int32) bool {
			if visited++; visited%4096 == 0 && ctx.Err() != nil {
				lookErr = ctx.Err()
				return false
			}
			k, seen := topics[topic]
			if !seen {
				k.skip, k.queues = meta.IsLMQ(topic), -1
				if !k.skip {
					tc, ok, err := b.topics.table.Get(topic)
					if err != nil {
						lookErr = err
						return false
					}
					if ok {
						k.queues = tc.QueueCount()
					}
				}
				topics[topic] = k
			}
			if k.skip || int(queueID) < k.queues {
				return true
			}
			if byTopic[topic] == nil {
				byTopic[topic] = map[int32]bool{}
			}
			byTopic[topic][queueID] = true
			return true
		})
		if err = errors.Join(err, lookErr); err != nil {
			return nil, fmt.Errorf("list the ConsumeQueue's queues the topic table does not cover: %w", err)
		}
	}
	out := make([]uncoveredTopic, 0, len(byTopic))
	for name, queues := range byTopic {
		out = append(out, uncoveredTopic{name, topics[name].queues >= 0, slices.Sorted(maps.Keys(queues))})
	}
	slices.SortFunc(out, func(a, b uncoveredTopic) int { return strings.Compare(a.topic, b.topic) })
	return out, nil
}

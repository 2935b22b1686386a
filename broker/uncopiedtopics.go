package broker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rocketkv/rocketkv/cq"
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
// them: the master deleted it, and it stays unserved, as there.
//
//	slave's log: ... A/0 ... B/1 ... | topics at ... C/0 ... C/3 (master dies)
//	             A in the table; B deleted (not in the table taken at "topics at");
//	             C never copied: promoted, C gets 4 queues, B stays unserved

// slaveTopicsAtStart keeps the record of how far the topic table covers
// the log (see above). A slave's first start records the log's end (the
// table covers what the store held before it served as a slave), and
// lowers a record past the end (a controller cut the log back); a
// master's start on a store that served as a slave takes the topics the
// slave never copied, then forgets the record.
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
	if !ok {
		return nil
	}
	if err := b.takeUncopiedTopics(at); err != nil {
		return err
	}
	return b.db.ClearSlaveTopicsAt()
}

// slaveTopicsCopied records, on a slave, that its topic table now holds
// every topic its master had when the slave's log ended at logEnd.
func (b *Broker) slaveTopicsCopied(logEnd int64) error {
	if err := b.db.SetSlaveTopicsAt(logEnd); err != nil {
		return fmt.Errorf("record how far the master's topics were copied: %w", err)
	}
	return nil
}

// uncopiedTopic is a topic the ConsumeQueue holds queues of while the
// topic table has no config for it.
type uncopiedTopic struct {
	name   string
	queues []int32
}

// takeUncopiedTopics gives every topic with an entry naming a record at
// or past at, and no config, a read-write config with as many queues as
// its highest queue id needs. Light message queues are left alone.
func (b *Broker) takeUncopiedTopics(at int64) error {
	topics, err := b.topicsWithoutConfig(b.cqs)
	if err != nil {
		return err
	}
	var taken []meta.TopicConfig
	for _, t := range topics {
		recent := false
		for _, qid := range t.queues {
			last, ok, err := cq.LastEntry(b.cqs, t.name, qid)
			if err != nil {
				return fmt.Errorf("read the last entry of %s/%d, which has no config: %w", t.name, qid, err)
			}
			if ok && last.PhyOffset >= at {
				recent = true
				break
			}
		}
		if !recent {
			continue
		}
		tc := meta.NewTopicConfig(t.name, int(slices.Max(t.queues))+1)
		taken = append(taken, tc)
		b.log.Warn().Str("topic", t.name).Int("queues", tc.WriteQueueNums).Int64("topicsCopiedAt", at).
			Msg("the master died before this broker, its slave then, copied the topic's config: the topic is served with a config made from its queues; check its queue count and attributes")
	}
	if len(taken) == 0 {
		return nil
	}
	if err := b.topics.put(taken...); err != nil {
		return fmt.Errorf("store the configs of the topics the slave never copied: %w", err)
	}
	return nil
}

// topicsWithoutConfig lists, in name order, the topics some of stores
// (nil ones skipped) holds queues of while the topic table has no config
// for them, light message queues left out, each with its queue ids.
func (b *Broker) topicsWithoutConfig(stores ...cq.Store) ([]uncopiedTopic, error) {
	known := map[string]bool{}
	byTopic := map[string]map[int32]bool{}
	for _, s := range stores {
		if s == nil {
			continue
		}
		var lookErr error
		err := s.Queues(func(topic string, queueID int32) bool {
			has, seen := known[topic]
			if !seen {
				has = meta.IsLMQ(topic)
				if !has {
					var err error
					if _, has, err = b.topics.table.Get(topic); err != nil {
						lookErr = err
						return false
					}
				}
				known[topic] = has
			}
			if !has {
				if byTopic[topic] == nil {
					byTopic[topic] = map[int32]bool{}
				}
				byTopic[topic][queueID] = true
			}
			return true
		})
		if err = errors.Join(err, lookErr); err != nil {
			return nil, fmt.Errorf("list the ConsumeQueue's topics without a config: %w", err)
		}
	}
	topics := make([]uncopiedTopic, 0, len(byTopic))
	for name, queues := range byTopic {
		topics = append(topics, uncopiedTopic{name, slices.Sorted(maps.Keys(queues))})
	}
	slices.SortFunc(topics, func(a, b uncopiedTopic) int { return strings.Compare(a.name, b.name) })
	return topics, nil
}

package txn

import (
	"context"
	"fmt"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// OpenByTopic counts the open transactions by the topic their message is
// sent to (the half's REAL_TOPIC), for RocketMQ's rocketmq_half_messages
// gauge: the halves the index holds open, less those whose end is
// recorded but not yet swept from the open ones (a commit the dispatcher
// indexed, an op message's end on a slave) and those retention took.
// It reads every open half from the CommitLog, so its cost grows with
// the transactions open; the caller spaces its calls.
func (s *Service) OpenByTopic(ctx context.Context) (map[string]int64, error) {
	counts := map[string]int64{}
	var cerr error
	err := s.state.OpenHalves(func(h kvindex.TxnHalf) bool {
		topic, open, err := s.openTopic(h.PhyOffset)
		if err != nil {
			cerr = err
			return false
		}
		if open {
			counts[topic]++
		}
		return ctx.Err() == nil
	})
	if err == nil {
		err = cerr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("count open transactions by topic: %w", err)
	}
	return counts, nil
}

// openTopic returns the REAL_TOPIC of the half at phy and whether its
// transaction is open: no end recorded, the half still in the CommitLog,
// no op message ending it, a REAL_TOPIC named.
func (s *Service) openTopic(phy int64) (string, bool, error) {
	if _, ended, err := s.state.Ended(phy); err != nil || ended {
		return "", false, err
	}
	half, ok, err := s.store.Read(phy)
	if commitlog.NoRecordAt(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read half at %d: %w", phy, err)
	}
	if !ok || half.Topic != meta.TransHalfTopic {
		return "", false, nil
	}
	if byOp, err := s.endedByOp(&half); err != nil || byOp {
		return "", false, err
	}
	topic, _ := commitlog.LookupProperty(half.Properties, commitlog.PropertyRealTopic)
	return topic, topic != "", nil
}

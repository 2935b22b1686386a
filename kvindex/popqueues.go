package kvindex

import (
	"context"
	"fmt"
	"math/bits"
)

// PopQueue sums up what the POP state says of one group's queue: where
// its next pop starts and how many popped messages are still in flight.
// It feeds the broker's consumer metrics (rocketmq_consumer_ready_messages
// and rocketmq_consumer_inflight_messages).
type PopQueue struct {
	Group   string
	Topic   string
	QueueID int32
	// Position is where the group's next pop of the queue reads: its pop
	// position (0x52), or the offset after the last message of its
	// orderly batch (0x53); -1 when neither is stored.
	Position int64
	// InFlight counts the messages popped and neither acknowledged nor
	// revived: the offsets the queue's checkpoints (0x56) hold and the
	// unacknowledged messages of its orderly batch.
	InFlight int64
}

// SkippedError reports the records a scan left out because they did not
// decode; the rest of the scan's result stands.
type SkippedError struct {
	// Count is how many records were left out.
	Count int
	// First is the decoding error of the first of them.
	First error
}

// Error counts the records left out and gives the first one's error.
func (e *SkippedError) Error() string {
	return fmt.Sprintf("%d undecodable records left out, the first: %v", e.Count, e.First)
}

// Unwrap returns the first record's error.
func (e *SkippedError) Unwrap() error { return e.First }

// popQueuesCheckEvery is how many records Queues reads between two
// checks of its context.
const popQueuesCheckEvery = 1024

// Queues returns the POP state of every queue with a pop position, a
// checkpoint or an orderly batch, in no particular order. A record that
// does not decode is left out of the sums and the others are returned with
// a *SkippedError, so one damaged record does not hide every queue's state
// from the broker's metrics; a failed scan returns nil and its error.
//
// Cost: one scan each of the position (0x52), order (0x53) and checkpoint
// (0x56) keyspaces, so it grows with the queues groups popped and the
// checkpoints in flight (and the tombstones of acknowledged checkpoints
// not yet compacted), not with the messages stored; it holds one PopQueue
// per popped queue. The scans check ctx every popQueuesCheckEvery records
// and stop with its error once it ended (a role switch detaching the
// metrics that asked).
func (s *PopStore) Queues(ctx context.Context) ([]PopQueue, error) {
	var out []PopQueue
	index := map[string]int{} // the key without its prefix byte -> out[i]
	queue := func(k []byte, prefix byte) (int, error) {
		g, t, q, rest, err := decodeGroupTopicQueue(k, prefix)
		if err != nil {
			return 0, err
		}
		name := k[1 : len(k)-len(rest)]
		i, ok := index[string(name)]
		if !ok {
			i = len(out)
			index[string(name)] = i
			out = append(out, PopQueue{Group: g, Topic: t, QueueID: q, Position: -1})
		}
		return i, nil
	}
	var skipped SkippedError
	var stopped error // ctx's, once a scan saw it end
	rows := 0
	scan := func(prefix byte, fn func(i int, k, v []byte) error) error {
		err := s.db.Scan([]byte{prefix}, func(k, v []byte) bool {
			if rows++; rows%popQueuesCheckEvery == 0 {
				if stopped = ctx.Err(); stopped != nil {
					return false
				}
			}
			i, err := queue(k, prefix)
			if err == nil {
				err = fn(i, k, v)
			}
			if err != nil {
				if skipped.Count == 0 {
					skipped.First = fmt.Errorf("key %x: %w", k, err)
				}
				skipped.Count++
			}
			return true
		})
		if err == nil {
			err = stopped
		}
		return err
	}
	err := scan(prefixPopPosition, func(i int, _, v []byte) error {
		next, err := getInt64(v)
		if err != nil {
			return err
		}
		out[i].Position = max(out[i].Position, next)
		return nil
	})
	if err == nil {
		err = scan(prefixPopOrder, func(i int, k, v []byte) error {
			st, err := decodeOrderState(k, v)
			if err != nil || len(st.Messages) == 0 {
				return err
			}
			n := len(st.Messages)
			acked := bits.OnesCount64(st.Acked & (1<<n - 1))
			out[i].InFlight += int64(n - acked)
			out[i].Position = max(out[i].Position, st.Messages[n-1].QueueOffset+1)
			return nil
		})
	}
	if err == nil {
		err = scan(prefixPopCK, func(i int, k, v []byte) error {
			c, err := decodeCheckpoint(k, v)
			if err != nil {
				return err
			}
			out[i].InFlight += int64(len(c.Offsets))
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("read the pop state of every queue: %w", err)
	}
	if skipped.Count > 0 {
		return out, fmt.Errorf("read the pop state of every queue: %w", &skipped)
	}
	return out, nil
}

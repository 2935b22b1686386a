package broker

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// processQueryCorrectionOffset answers QUERY_CORRECTION_OFFSET
// (MQClientAPIImpl.queryCorrectionOffset) as RocketMQ's broker does: for
// each queue of topic, the smallest offset committed on it by a group not
// in filterGroups (a comma-separated list), counting only offsets not
// below the queue's minimum; then, for each queue compareGroup has
// committed on, math.MaxInt64 where that smallest offset is above
// compareGroup's. The body is QueryCorrectionOffsetBody,
// {"correctionOffsets":{<queueId>:<offset>}}, queue ids unquoted and
// ascending as fastjson writes a HashMap of them.
//
// Two differences from RocketMQ 5.3.3, whose query deletes what it
// filters: its ConsumerOffsetManager removes the committed offsets of the
// filterGroups, on every topic, while it leaves them out; rocketkv leaves
// them out and keeps them (a query does not lose consumer progress). What
// a client sees stays the same: when compareGroup is one of the
// filterGroups RocketMQ has just deleted its offsets and compares
// nothing, and so does rocketkv. A queue compareGroup committed on that
// no other group counts fails RocketMQ's query (a null unboxed) and is
// left out here.
func (b *Broker) processQueryCorrectionOffset(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	f, bad := requiredFields(req, "topic", "compareGroup")
	if bad != nil {
		return bad
	}
	topic, compareGroup := f[0], f[1]
	filtered := map[string]bool{}
	if fg := req.ExtFields["filterGroups"]; !meta.IsBlank(fg) {
		for _, g := range strings.Split(fg, ",") {
			filtered[g] = true
		}
	}
	mins, err := b.correctionOffsets(topic, filtered)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if !filtered[compareGroup] {
		err := b.offsets.Each(compareGroup, func(u kvindex.OffsetUpdate) bool {
			if m, ok := mins[u.QueueID]; u.Topic == topic && ok && m > u.Offset {
				mins[u.QueueID] = math.MaxInt64
			}
			return true
		})
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("read the offsets of group %s: %v", compareGroup, err))
		}
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = encodeCorrectionOffsets(mins)
	return resp
}

// correctionOffsets returns, per queue of topic, the smallest offset a
// group outside filtered committed on it that is not below the queue's
// minimum.
func (b *Broker) correctionOffsets(topic string, filtered map[string]bool) (map[int32]int64, error) {
	mins := map[int32]int64{}
	queueMins := map[int32]int64{}
	var qerr error
	err := b.offsets.Each("", func(u kvindex.OffsetUpdate) bool {
		if u.Topic != topic || filtered[u.Group] {
			return true
		}
		qmin, ok := queueMins[u.QueueID]
		if !ok {
			if qmin, qerr = b.cqs.MinOffset(topic, u.QueueID); qerr != nil {
				qerr = fmt.Errorf("min offset of %s/%d: %w", topic, u.QueueID, qerr)
				return false
			}
			queueMins[u.QueueID] = qmin
		}
		if u.Offset < qmin {
			return true
		}
		if m, ok := mins[u.QueueID]; !ok || u.Offset < m {
			mins[u.QueueID] = u.Offset
		}
		return true
	})
	if err == nil {
		err = qerr
	}
	if err != nil {
		return nil, fmt.Errorf("scan consumer offsets for topic %s: %w", topic, err)
	}
	return mins, nil
}

// encodeCorrectionOffsets writes QueryCorrectionOffsetBody as fastjson
// does: queue ids unquoted, ascending.
func encodeCorrectionOffsets(offsets map[int32]int64) []byte {
	ids := make([]int32, 0, len(offsets))
	for q := range offsets {
		ids = append(ids, q)
	}
	slices.Sort(ids)
	out := []byte(`{"correctionOffsets":{`)
	for i, q := range ids {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, int64(q), 10)
		out = append(out, ':')
		out = strconv.AppendInt(out, offsets[q], 10)
	}
	return append(out, "}}"...)
}

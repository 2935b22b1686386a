package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// forbiddenGroups keeps what consumer groups may not do on topics
// (RocketMQ's forbiddenTable): set by UPDATE_AND_GET_GROUP_FORBIDDEN,
// carried over from a RocketMQ store's subscriptionGroup.json, enforced
// on pulls. Changes of the table are serialised, so two updates of one
// group never lose each other's bits.
type forbiddenGroups struct {
	table *kvindex.GroupForbiddens
	mu    sync.Mutex
	// entries counts the groups with an entry (the table is written only
	// here once the broker runs), so that the pulls of a broker that
	// forbids nothing, nearly every one, skip the table's cache.
	entries atomic.Int64
}

// newForbiddenGroups wraps the opened table.
func newForbiddenGroups(table *kvindex.GroupForbiddens) (*forbiddenGroups, error) {
	n, err := table.Count()
	if err != nil {
		return nil, fmt.Errorf("count the groups' forbidden entries: %w", err)
	}
	f := &forbiddenGroups{table: table}
	f.entries.Store(int64(n))
	return f, nil
}

// readForbidden reports whether group may not read topic.
func (f *forbiddenGroups) readForbidden(group, topic string) (bool, error) {
	if f.entries.Load() == 0 {
		return false, nil
	}
	gf, ok, err := f.table.Get(group)
	if err != nil || !ok {
		return false, err
	}
	return gf.Forbidden(topic, meta.ForbidReadIndex), nil
}

// set sets (on) or clears bit index of group's topic and reports whether
// that changed anything.
func (f *forbiddenGroups) set(group, topic string, index int, on bool) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, had, err := f.table.Get(group)
	if err != nil {
		return false, err
	}
	cur.Group = group
	next, changed := cur.With(topic, index, on)
	switch {
	case !changed:
		return false, nil
	case len(next.Topics) == 0:
		err = f.table.Delete(group)
	default:
		err = f.table.Put(next)
	}
	if err != nil {
		return false, fmt.Errorf("forbid group %s on topic %s: %w", group, topic, err)
	}
	switch has := len(next.Topics) > 0; {
	case has && !had:
		f.entries.Add(1)
	case !has && had:
		f.entries.Add(-1)
	}
	return true, nil
}

// drop forgets everything group was forbidden (the group was deleted).
func (f *forbiddenGroups) drop(group string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok, err := f.table.Get(group); err != nil || !ok {
		return err
	}
	if err := f.table.Delete(group); err != nil {
		return fmt.Errorf("drop what group %s was forbidden: %w", group, err)
	}
	f.entries.Add(-1)
	return nil
}

// all returns the table as RocketMQ's forbiddenTable: group -> topic ->
// bits.
func (f *forbiddenGroups) all(ctx context.Context) (map[string]map[string]int, error) {
	entries, err := f.table.All(ctx)
	out := make(map[string]map[string]int, len(entries))
	for _, gf := range entries {
		out[gf.Group] = gf.Topics
	}
	return out, err
}

// processGroupForbidden answers UPDATE_AND_GET_GROUP_FORBIDDEN: with a
// readable field it forbids (false) or allows (true) the group to read
// the topic; either way it answers whether the group may read it now.
func (b *Broker) processGroupForbidden(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	names, bad := requiredFields(req, "group", "topic")
	if bad != nil {
		return bad
	}
	group, topic := names[0], names[1]
	h := remoting.Header(req.ExtFields)
	if h.Has("readable") {
		readable, _ := h.Bool("readable") // present, so no error: Java's Boolean.parseBoolean
		changed, err := b.forbidden.set(group, topic, meta.ForbidReadIndex, !readable)
		if err != nil {
			b.log.Error().Err(err).Str("group", group).Str("topic", topic).Msg("group forbidden not updated")
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		if changed {
			b.log.Info().Str("group", group).Str("topic", topic).Bool("readable", readable).
				Stringer("by", conn.RemoteAddr()).Msg("group read permission on topic changed")
		}
	}
	forbidden, err := b.forbidden.readForbidden(group, topic)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	return jsonResponse(req, adminbody.GroupForbidden{Group: group, Readable: !forbidden, Topic: topic})
}

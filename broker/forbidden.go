package broker

import (
	"context"
	"fmt"
	"sync"

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
}

// readForbidden reports whether group may not read topic.
func (f *forbiddenGroups) readForbidden(group, topic string) (bool, error) {
	gf, ok, err := f.table.Get(group)
	if err != nil || !ok {
		return false, err
	}
	return gf.Forbidden(topic, meta.ForbidReadIndex), nil
}

// set sets (on) or clears bit index of group's topic and returns the
// group's entry afterwards and whether it changed.
func (f *forbiddenGroups) set(group, topic string, index int, on bool) (meta.GroupForbidden, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, _, err := f.table.Get(group)
	if err != nil {
		return cur, false, err
	}
	cur.Group = group
	next, changed := cur.With(topic, index, on)
	switch {
	case !changed:
	case len(next.Topics) == 0:
		err = f.table.Delete(group)
	default:
		err = f.table.Put(next)
	}
	if err != nil {
		return cur, false, fmt.Errorf("forbid group %s on topic %s: %w", group, topic, err)
	}
	return next, changed, nil
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
	return nil
}

// all returns the table as RocketMQ's forbiddenTable: group -> topic ->
// bits.
func (f *forbiddenGroups) all() (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	err := f.table.Each(func(gf meta.GroupForbidden) bool {
		out[gf.Group] = gf.Topics
		return true
	})
	return out, err
}

// groupForbiddenBody is RocketMQ's GroupForbidden, the answer to
// UPDATE_AND_GET_GROUP_FORBIDDEN (fields in fastjson's order).
type groupForbiddenBody struct {
	Group    string `json:"group"`
	Readable bool   `json:"readable"`
	Topic    string `json:"topic"`
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
		_, changed, err := b.forbidden.set(group, topic, meta.ForbidReadIndex, !readable)
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
	return jsonResponse(req, groupForbiddenBody{Group: group, Readable: !forbidden, Topic: topic})
}

package meta

import "maps"

// ForbidReadIndex is the bit of a group's forbidden set that stops it
// reading a topic: the index of PermRead in RocketMQ's PermName
// (INDEX_PERM_READ), so the bit's value is PermRead.
const ForbidReadIndex = 2

// GroupForbidden is what one consumer group may not do, topic by topic:
// the group's entry of RocketMQ's forbiddenTable (subscriptionGroup.json),
// a bit set per topic whose bit i forbids the permission of PermName
// index i. Only ForbidReadIndex is enforced (pulls without a posted
// subscription are refused, as RocketMQ refuses them). An entry exists
// independently of the group's SubscriptionGroupConfig.
type GroupForbidden struct {
	Group string `json:"group"`
	// Topics maps a topic to its forbidden bits; a topic with none is
	// absent.
	Topics map[string]int `json:"topics"`
}

// Forbidden reports whether bit index is set for topic.
func (f GroupForbidden) Forbidden(topic string, index int) bool {
	bit := 1 << index
	return f.Topics[topic]&bit == bit
}

// With returns f with bit index of topic set (on) or cleared, and whether
// that changed anything; f itself is not modified. A topic left with no
// bit is dropped from Topics. RocketMQ clears the whole group's entry
// when one topic's bits fall to zero, dropping what it forbade on other
// topics; only the topic's entry goes here.
func (f GroupForbidden) With(topic string, index int, on bool) (GroupForbidden, bool) {
	bits := f.Topics[topic]
	if bits < 0 {
		bits = 0 // RocketMQ reads a negative value as none
	}
	next := bits &^ (1 << index)
	if on {
		next = bits | 1<<index
	}
	if next == f.Topics[topic] {
		return f, false
	}
	out := GroupForbidden{Group: f.Group, Topics: maps.Clone(f.Topics)}
	if out.Topics == nil {
		out.Topics = map[string]int{}
	}
	if next == 0 {
		delete(out.Topics, topic)
	} else {
		out.Topics[topic] = next
	}
	return out, true
}

package meta

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Topic and group attributes are changed by modifications, as RocketMQ
// 5.3's AttributeParser and AttributeUtil apply them: "+key" (with a
// value) adds or changes an attribute, "-key" removes one; a new topic or
// group takes "+" only. A topic's modifications come as one header string
// ("+key1=value1,-key2"), a group's as its config's attribute map with the
// signs in the keys. The refusals below are RocketMQ's exception messages,
// which its broker answers as remarks.

// Attribute is one attribute a topic or group may carry.
type Attribute struct {
	// Changeable is false for an attribute only a create may set.
	Changeable bool
	// Verify returns why a value is refused ("" when it is accepted).
	Verify func(value string) string
}

// enumAttribute accepts the values of a set (RocketMQ's EnumAttribute),
// except those of unsupported, which RocketMQ accepts and rocketkv refuses
// with the remark given: taking them would promise behaviour the store
// does not have.
func enumAttribute(changeable bool, values []string, unsupported map[string]string) Attribute {
	set := strings.Join(values, ", ")
	return Attribute{Changeable: changeable, Verify: func(v string) string {
		if !slices.Contains(values, v) {
			return "value is not in set: [" + set + "]"
		}
		return unsupported[v]
	}}
}

// longRangeAttribute accepts integers in [lo, hi] (LongRangeAttribute).
func longRangeAttribute(changeable bool, lo, hi int64) Attribute {
	return Attribute{Changeable: changeable, Verify: func(v string) string {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Sprintf("For input string: %q", v)
		}
		if n < lo || n > hi {
			return fmt.Sprintf("value is not in range(%d, %d)", lo, hi)
		}
		return ""
	}}
}

// Topic attribute names (RocketMQ's TopicAttributes).
const (
	AttrQueueType     = "queue.type"
	AttrCleanupPolicy = "cleanup.policy"
	AttrMessageType   = "message.type"
	AttrReserveTime   = "reserve.time"
)

// TopicAttributes are the attributes RocketMQ 5.3 knows for a topic
// (TopicAttributes.ALL), with the values rocketkv cannot honour refused.
var TopicAttributes = map[string]Attribute{
	AttrQueueType: enumAttribute(false, []string{"BatchCQ", "SimpleCQ"}, map[string]string{
		"BatchCQ": "queue.type=BatchCQ is not supported by rocketkv: its ConsumeQueue holds one entry per message (SimpleCQ)"}),
	AttrCleanupPolicy: enumAttribute(false, []string{"COMPACTION", "DELETE"}, nil),
	AttrMessageType:   enumAttribute(true, []string{"DELAY", "FIFO", "MIXED", "NORMAL", "TRANSACTION", "UNSPECIFIED"}, nil),
	AttrReserveTime:   longRangeAttribute(true, -1, 1<<63-1),
}

// GroupAttributes are the attributes RocketMQ 5.3 knows for a
// subscription group: none (SubscriptionGroupAttributes.ALL is empty).
var GroupAttributes = map[string]Attribute{}

// ParseAttributeModifications reads a topic's modifications header
// ("+key1=value1,+key2=value2,-key3") into a map keyed with the signs, as
// RocketMQ's AttributeParser.parseToMap; refusal is its message for a
// malformed one ("" when it parses).
func ParseAttributeModifications(s string) (mods map[string]string, refusal string) {
	mods = map[string]string{}
	if s == "" {
		return mods, ""
	}
	parts := strings.Split(s, ",")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1] // Java's split drops trailing empty strings
	}
	for _, kv := range parts {
		var key, value string
		if strings.Contains(kv, "=") {
			fields := strings.Split(kv, "=")
			if len(fields) < 2 || fields[1] == "" {
				return nil, "add/alter attribute format is wrong: " + kv
			}
			key, value = fields[0], fields[1]
			if !strings.Contains(key, "+") {
				return nil, "add/alter attribute format is wrong: " + key
			}
		} else {
			key = kv
			if !strings.Contains(key, "-") {
				return nil, "delete attribute format is wrong: " + key
			}
		}
		if _, dup := mods[key]; dup {
			return nil, "key duplication: " + key
		}
		mods[key] = value
	}
	return mods, ""
}

// AlterAttributes applies modifications to the current attributes of a
// topic or group (create: it does not exist yet) under the rules of all,
// as RocketMQ's AttributeUtil.alterCurrentAttributes: it returns the new
// attributes, or the refusal of the first modification it cannot apply
// (keys in name order where RocketMQ's are in hash order). The current
// map is not changed.
func AlterAttributes(create bool, all map[string]Attribute, current, mods map[string]string) (map[string]string, string) {
	var set, changed, removed []string // real keys: created, added or updated, deleted
	seen := map[string]bool{}
	for _, key := range slices.Sorted(maps.Keys(mods)) {
		if key == "" {
			return nil, "kv string format wrong."
		}
		real := key[1:]
		if real == "" || strings.ContainsAny(real, "+-") {
			return nil, "kv string format wrong."
		}
		if seen[real] {
			return nil, "alter duplication key. key: " + real
		}
		seen[real] = true
		switch {
		case create && key[0] == '+':
			set = append(set, real)
		case create:
			return nil, "only add attribute is supported while creating topic. key: " + real
		case key[0] == '+':
			changed = append(changed, real)
		case key[0] == '-':
			if _, ok := current[real]; !ok {
				return nil, "attempt to delete a nonexistent key: " + real
			}
			removed = append(removed, real)
		default:
			return nil, "wrong format key: " + real
		}
	}
	for _, step := range []struct {
		keys           []string
		create, delete bool
	}{{set, true, false}, {changed, false, false}, {removed, false, true}} {
		for _, real := range step.keys {
			a, ok := all[real]
			if !ok {
				return nil, "unsupported key: " + real
			}
			if !step.create && !a.Changeable {
				return nil, "attempt to update an unchangeable attribute. key: " + real
			}
			if !step.delete {
				if refusal := a.Verify(mods["+"+real]); refusal != "" {
					return nil, refusal
				}
			}
		}
	}
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	for _, real := range append(set, changed...) {
		out[real] = mods["+"+real]
	}
	for _, real := range removed {
		delete(out, real)
	}
	return out, ""
}

package broker

import (
	"strings"

	"github.com/rocketkv/rocketkv/meta"
)

// groupConfig returns a subscription group's config. A missing group is
// created with RocketMQ's defaults when create is set and
// autoCreateSubscriptionGroup is on, or, with enableCreateSysGroup, when
// it is a system group (CID_RMQ_SYS_...); otherwise the zero config
// (empty GroupName) says it does not exist.
func (b *Broker) groupConfig(group string, create bool) (meta.SubscriptionGroupConfig, error) {
	if b.lmqName(group) {
		return meta.NewSubscriptionGroupConfig(group), nil
	}
	gc, ok, err := b.groups.Get(group)
	if err != nil || ok {
		return gc, err
	}
	cur := b.current()
	if !create || !(cur.AutoCreateSubscriptionGroup || cur.EnableCreateSysGroup && isSysGroup(group)) {
		return meta.SubscriptionGroupConfig{}, nil
	}
	if !validGroupName(group) {
		// RocketMQ's findSubscriptionGroupConfig creates none either
		// (TopicValidator.validateGroup): its retry topic would not be a
		// valid topic name.
		return meta.SubscriptionGroupConfig{}, nil
	}
	gc = meta.NewSubscriptionGroupConfig(group)
	if err := b.groups.Put(gc); err != nil {
		return meta.SubscriptionGroupConfig{}, err
	}
	b.log.Info().Str("group", group).Msg("subscription group auto-created")
	return gc, nil
}

// maxGroupNameLength is the longest group name RocketMQ's clients accept
// (Validators.CHARACTER_MAX_LENGTH).
const maxGroupNameLength = 255

// validGroupName reports whether a group may be auto-created: RocketMQ's
// topic characters (^[%|a-zA-Z0-9_-]+$, which its clients check group
// names against too), at most maxGroupNameLength bytes.
func validGroupName(group string) bool {
	return len(group) <= maxGroupNameLength && meta.ValidTopicChars(group)
}

// lmqName reports whether a topic or group name is a light message
// queue's under enableLmq: its config is RocketMQ's fixed one, never
// stored however many there are, and an update of it is answered and
// dropped (LmqTopicConfigManager, LmqSubscriptionGroupManager).
func (b *Broker) lmqName(name string) bool {
	return b.cfg.EnableLMQ && meta.IsLMQ(name)
}

// isSysGroup reports whether group is one of RocketMQ's system consumer
// groups, named CID_RMQ_SYS_... (MixAll.isSysConsumerGroup).
func isSysGroup(group string) bool { return strings.HasPrefix(group, "CID_RMQ_SYS_") }

package broker

import (
	"fmt"
	"strings"

	"github.com/rocketkv/rocketkv/meta"
)

// groupConfig returns a subscription group's config. A missing group is
// created with RocketMQ's defaults when create is set and
// autoCreateSubscriptionGroup is on, or, with enableCreateSysGroup, when
// it is a system group (CID_RMQ_SYS_...); otherwise the zero config
// (empty GroupName) says it does not exist.
//
// A slave answers with such a group's defaults and stores nothing: its
// group table is its master's copy (slave sync). RocketMQ's slave stores
// the group in its own table, which moves its data version off its
// master's, and its next sync replaces the table and drops the group; in
// rocketkv that was a synced write per group and sync interval, the
// whole table copied again at each sync, and the group's metrics dropped
// with it, for answers that are the same without them.
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
	if b.isSlave() {
		return gc, nil
	}
	if err := b.groups.Put(gc); err != nil {
		return meta.SubscriptionGroupConfig{}, err
	}
	b.log.Info().Str("group", group).Msg("subscription group auto-created")
	return gc, nil
}

// maxGroupNameLength is the longest group name RocketMQ 5.3.4's broker
// takes (TopicValidator.GROUP_MAX_LENGTH).
const maxGroupNameLength = 120

// validGroupName reports whether a group may be auto-created (see
// validateGroupName).
func validGroupName(group string) bool { return validateGroupName(group) == "" }

// validateGroupName applies RocketMQ's group rules (TopicValidator.
// validateGroup, in its order and with its remarks): not blank, the
// characters ^[%|a-zA-Z0-9_-]+$, at most maxGroupNameLength bytes. It
// returns the remark of the refusal, or "".
func validateGroupName(group string) string {
	switch {
	case strings.TrimSpace(group) == "":
		return "The specified group is blank."
	case !meta.ValidTopicChars(group):
		return "The specified group: " + group + ", contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
	case len(group) > maxGroupNameLength:
		return fmt.Sprintf("The specified group: %s, is longer than group max length: %d", group, maxGroupNameLength)
	}
	return ""
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

// systemGroups are the subscription groups RocketMQ's broker always has
// (SubscriptionGroupManager.init), with its defaults: its admin tools
// pull as TOOLS_CONSUMER, and GET_ALL_SUBSCRIPTIONGROUP_CONFIG lists them.
var systemGroups = []string{"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
	"CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_RMQ_SYS_TRANS"}

// ensureSystemGroups creates the system groups that are missing; one
// already there (changed by an administrator, or copied from a master)
// is kept.
func (b *Broker) ensureSystemGroups() error {
	var missing []meta.SubscriptionGroupConfig
	for _, g := range systemGroups {
		_, ok, err := b.groups.Get(g)
		if err != nil {
			return fmt.Errorf("system group %s: %w", g, err)
		}
		if !ok {
			missing = append(missing, meta.NewSubscriptionGroupConfig(g))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := b.groups.Put(missing...); err != nil {
		return fmt.Errorf("create the system groups: %w", err)
	}
	return nil
}

package auth

import (
	"fmt"
	"strings"
)

// ResourceType is the kind of a resource (RocketMQ's ResourceType).
type ResourceType uint8

// The resource types. Namespace is accepted in policies, as RocketMQ
// does, though no request of a broker names one.
const (
	TypeAny ResourceType = iota + 1
	TypeCluster
	TypeNamespace
	TypeTopic
	TypeGroup
)

var typeNames = map[ResourceType]string{TypeAny: "Any", TypeCluster: "Cluster", TypeNamespace: "Namespace",
	TypeTopic: "Topic", TypeGroup: "Group"}

// String returns the type's name as resource keys spell it.
func (t ResourceType) String() string { return typeNames[t] }

// Pattern is how a policy's resource name matches a request's
// (RocketMQ's ResourcePattern).
type Pattern uint8

// The patterns: "Topic:*" is Any, "Topic:pre*" Prefixed, "Topic:t"
// Literal.
const (
	PatternAny Pattern = iota + 1
	PatternLiteral
	PatternPrefixed
)

// Resource is a resource a policy entry covers or a request acts on.
// Requests name Literal resources only.
type Resource struct {
	Type    ResourceType
	Name    string // empty for PatternAny
	Pattern Pattern
}

// Retry and dead-letter topic prefixes: a group's retry topic names the
// group.
const (
	RetryTopicPrefix = "%RETRY%"
	DLQTopicPrefix   = "%DLQ%"
)

// Topic returns the resource of a topic.
func Topic(name string) Resource {
	return Resource{Type: TypeTopic, Name: name, Pattern: PatternLiteral}
}

// Group returns the resource of a consumer group. A group's retry or
// dead-letter topic names the group, as RocketMQ's Resource.ofGroup reads
// it; a namespace before the group is kept.
func Group(name string) Resource {
	if IsRetryTopic(name) || strings.HasPrefix(name, DLQTopicPrefix) {
		name = strings.TrimPrefix(strings.TrimPrefix(name, RetryTopicPrefix), DLQTopicPrefix)
	}
	return Resource{Type: TypeGroup, Name: name, Pattern: PatternLiteral}
}

// Cluster returns the resource of a cluster.
func Cluster(name string) Resource {
	return Resource{Type: TypeCluster, Name: name, Pattern: PatternLiteral}
}

// IsRetryTopic reports whether topic is a group's retry topic.
func IsRetryTopic(topic string) bool { return strings.HasPrefix(topic, RetryTopicPrefix) }

// ParseResource reads a resource key as mqadmin writes it: "*" (every
// resource), "<Type>:*" (every resource of the type), "<Type>:<prefix>*"
// or "<Type>:<name>", the type one of Cluster, Namespace, Topic, Group
// (any case), as RocketMQ's Resource.of reads it.
func ParseResource(key string) (Resource, error) {
	if strings.TrimSpace(key) == "" {
		return Resource{}, fmt.Errorf("the resource is empty")
	}
	if key == "*" {
		return Resource{Type: TypeAny, Pattern: PatternAny}, nil
	}
	typ, name, _ := strings.Cut(key, ":")
	var t ResourceType
	for rt, n := range typeNames {
		if rt != TypeAny && strings.EqualFold(n, typ) {
			t = rt
		}
	}
	if t == 0 {
		return Resource{}, fmt.Errorf("resource %q: the type %q is not Cluster, Namespace, Topic or Group", key, typ)
	}
	switch {
	case name == "*":
		return Resource{Type: t, Pattern: PatternAny}, nil
	case strings.HasSuffix(name, "*"):
		// As RocketMQ's Resource.of: a name ending in '*' is the prefix
		// before its first '*' ("Topic:*secret*" is every topic, so a
		// Deny of it denies them all; "Topic:ab*c*" the prefix ab). A
		// name with a '*' that does not end in one is literal
		// ("Topic:*-prod" names one topic, not every one). An empty
		// prefix is every name, kept as "Topic:*" (RocketMQ writes its
		// key so too).
		before, _, _ := strings.Cut(name, "*")
		if before == "" {
			return Resource{Type: t, Pattern: PatternAny}, nil
		}
		return Resource{Type: t, Name: before, Pattern: PatternPrefixed}, nil
	case name == "":
		return Resource{}, fmt.Errorf("resource %q has no name (write %s:* for every one)", key, t)
	}
	return Resource{Type: t, Name: name, Pattern: PatternLiteral}, nil
}

// Key returns the resource as ParseResource reads it ("Topic:t",
// "Group:g*", "Cluster:*", "*").
func (r Resource) Key() string {
	if r.Type == TypeAny {
		return "*"
	}
	switch r.Pattern {
	case PatternAny:
		return r.Type.String() + ":*"
	case PatternPrefixed:
		return r.Type.String() + ":" + r.Name + "*"
	}
	return r.Type.String() + ":" + r.Name
}

// Matches reports whether r, a policy's resource, covers req, a
// request's.
func (r Resource) Matches(req Resource) bool {
	if r.Type == TypeAny {
		return true
	}
	if r.Type != req.Type {
		return false
	}
	switch r.Pattern {
	case PatternAny:
		return true
	case PatternPrefixed:
		return strings.HasPrefix(req.Name, r.Name)
	}
	return req.Name == r.Name
}

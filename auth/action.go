package auth

import (
	"fmt"
	"strings"
)

// Action is what a request does to a resource (RocketMQ's Action).
type Action uint8

// The actions. All, in a policy, covers every action; Any, in a request,
// is met by any action a policy lists (no request of a broker asks for
// it, and a policy may not list it).
const (
	ActionAll Action = iota + 1
	ActionAny
	ActionPub
	ActionSub
	ActionCreate
	ActionUpdate
	ActionDelete
	ActionGet
	ActionList
)

var actionNames = [...]string{ActionAll: "All", ActionAny: "Any", ActionPub: "Pub", ActionSub: "Sub",
	ActionCreate: "Create", ActionUpdate: "Update", ActionDelete: "Delete", ActionGet: "Get", ActionList: "List"}

// String returns the action's name as policies spell it.
func (a Action) String() string {
	if int(a) < len(actionNames) && actionNames[a] != "" {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// ParseAction reads an action name, in any case.
func ParseAction(s string) (Action, error) {
	for a, n := range actionNames {
		if n != "" && strings.EqualFold(n, strings.TrimSpace(s)) {
			return Action(a), nil
		}
	}
	return 0, fmt.Errorf("action %q is not one of Pub, Sub, Create, Update, Delete, Get, List, All", s)
}

// Decision is a policy entry's verdict.
type Decision uint8

// The decisions.
const (
	Allow Decision = iota + 1
	Deny
)

// String returns the decision's name as policies spell it.
func (d Decision) String() string {
	if d == Deny {
		return "Deny"
	}
	return "Allow"
}

// ParseDecision reads Allow or Deny, in any case.
func ParseDecision(s string) (Decision, error) {
	switch {
	case strings.EqualFold(s, "Allow"):
		return Allow, nil
	case strings.EqualFold(s, "Deny"):
		return Deny, nil
	}
	return 0, fmt.Errorf("decision %q is not Allow or Deny", s)
}

// PolicyType tells custom policies from default ones: a Default entry is
// consulted only when no Custom entry matches a request.
type PolicyType uint8

// The policy types.
const (
	Custom PolicyType = iota + 1
	Default
)

// String returns the type's name as policies spell it.
func (t PolicyType) String() string {
	if t == Default {
		return "Default"
	}
	return "Custom"
}

// ParsePolicyType reads Custom or Default, in any case; empty is Custom,
// as RocketMQ fills it in.
func ParsePolicyType(s string) (PolicyType, error) {
	switch {
	case s == "", strings.EqualFold(s, "Custom"):
		return Custom, nil
	case strings.EqualFold(s, "Default"):
		return Default, nil
	}
	return 0, fmt.Errorf("policy type %q is not Custom or Default", s)
}

package controller

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// FirstBrokerID is the id the controller hands to the first broker of a
// group (RocketMQ's MixAll.FIRST_BROKER_CONTROLLER_ID); ids grow from it.
const FirstBrokerID int64 = 1

// Replica is one broker of a group as the controller knows it.
type Replica struct {
	// Addr is the broker's "ip:port" (the part of its registerCheckCode
	// before ';', then whatever CONTROLLER_REGISTER_BROKER reported).
	Addr string `json:"addr"`
	// CheckCode is the registerCheckCode the broker applied for its id
	// with ("addr;timestamp"); the same broker re-applying with it keeps
	// its id.
	CheckCode string `json:"checkCode"`
}

// Replicas is a broker group's membership: RocketMQ's BrokerReplicaInfo.
type Replicas struct {
	// Cluster is the cluster the group registered under.
	Cluster string `json:"cluster"`
	// BrokerName names the group.
	BrokerName string `json:"brokerName"`
	// NextBrokerID is the id CONTROLLER_GET_NEXT_BROKER_ID proposes; it
	// grows by one with every id applied.
	NextBrokerID int64 `json:"nextBrokerId"`
	// Brokers maps broker id to the broker.
	Brokers map[int64]Replica `json:"brokers"`
}

// SyncState is a broker group's master and in-sync replicas: RocketMQ's
// SyncStateInfo.
type SyncState struct {
	// Cluster is the cluster the group registered under.
	Cluster string `json:"cluster"`
	// BrokerName names the group.
	BrokerName string `json:"brokerName"`
	// MasterEpoch grows by one with every election, also one that left
	// the group without a master; 0 means no master was ever elected.
	MasterEpoch int32 `json:"masterEpoch"`
	// SyncStateSetEpoch grows by one with every change of SyncStateSet.
	SyncStateSetEpoch int32 `json:"syncStateSetEpoch"`
	// SyncStateSet holds the ids of the replicas in sync with the master
	// (the master included), ascending.
	SyncStateSet []int64 `json:"syncStateSet"`
	// HasMaster says whether MasterID names a master.
	HasMaster bool `json:"hasMaster"`
	// MasterID is the master's broker id when HasMaster.
	MasterID int64 `json:"masterId"`
}

// State is everything the controller replicates: per broker name (RocketMQ
// keys both tables by broker name alone) the membership and the sync state.
// The two tables can disagree after a CLEAN_BROKER_DATA of some ids, as in
// RocketMQ; a group counts as known only when it is in both.
type State struct {
	// Replicas maps broker name to its membership.
	Replicas map[string]*Replicas `json:"replicas"`
	// SyncStates maps broker name to its master and sync state set.
	SyncStates map[string]*SyncState `json:"syncStates"`
}

// NewState returns an empty State.
func NewState() *State {
	return &State{Replicas: map[string]*Replicas{}, SyncStates: map[string]*SyncState{}}
}

// known reports whether both tables hold brokerName (RocketMQ's
// isContainsBroker).
func (s *State) known(brokerName string) bool {
	_, r := s.Replicas[brokerName]
	_, ss := s.SyncStates[brokerName]
	return r && ss
}

// clone returns a deep copy of s.
func (s *State) clone() *State {
	out := NewState()
	for name, r := range s.Replicas {
		c := *r
		c.Brokers = maps.Clone(r.Brokers)
		out.Replicas[name] = &c
	}
	for name, ss := range s.SyncStates {
		c := *ss
		c.SyncStateSet = slices.Clone(ss.SyncStateSet)
		out.SyncStates[name] = &c
	}
	return out
}

// inSync reports whether id is in the group's sync state set.
func (ss *SyncState) inSync(id int64) bool { return slices.Contains(ss.SyncStateSet, id) }

// EventType names a state change.
type EventType string

// The state changes, RocketMQ's EventType values.
const (
	// EventAlterSyncStateSet replaces a group's sync state set and bumps
	// its epoch.
	EventAlterSyncStateSet EventType = "ALTER_SYNC_STATE_SET_EVENT"
	// EventApplyBrokerID adds a broker id to a group, creating the group
	// on its first id.
	EventApplyBrokerID EventType = "APPLY_BROKER_ID_EVENT"
	// EventElectMaster records a new master (the sync state set becomes
	// just it) or, with NewMasterElected false, that the group lost its
	// master; either bumps the master epoch.
	EventElectMaster EventType = "ELECT_MASTER_EVENT"
	// EventCleanBrokerData forgets a group, or some of its ids.
	EventCleanBrokerData EventType = "CLEAN_BROKER_DATA_EVENT"
	// EventUpdateBrokerAddress changes the address of a known broker id.
	EventUpdateBrokerAddress EventType = "UPDATE_BROKER_ADDRESS"
)

// Event is one state change, as it travels in the replicated log (JSON).
// Which fields count depends on Type.
type Event struct {
	// Type says which change this is.
	Type EventType `json:"type"`
	// Cluster is the group's cluster (apply and address update).
	Cluster string `json:"cluster,omitempty"`
	// BrokerName names the group; every event has one.
	BrokerName string `json:"brokerName"`
	// BrokerID is the id applied for, elected or readdressed.
	BrokerID int64 `json:"brokerId,omitempty"`
	// Addr is the broker address of an apply or an address update.
	Addr string `json:"addr,omitempty"`
	// CheckCode is the registerCheckCode of an apply.
	CheckCode string `json:"checkCode,omitempty"`
	// NewMasterElected is false for an election that found no master.
	NewMasterElected bool `json:"newMasterElected,omitempty"`
	// SyncStateSet is the new set of an alter.
	SyncStateSet []int64 `json:"syncStateSet,omitempty"`
	// BrokerIDs are the ids a clean removes; empty removes the group.
	BrokerIDs []int64 `json:"brokerIds,omitempty"`
}

// encodeEvent returns the log entry of e.
func encodeEvent(e *Event) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", e.Type, err)
	}
	return b, nil
}

// decodeEvent reads a log entry written by encodeEvent.
func decodeEvent(data []byte) (*Event, error) {
	var e Event
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("decode controller event: %w", err)
	}
	if e.BrokerName == "" {
		return nil, fmt.Errorf("decode controller event %s: no broker name", e.Type)
	}
	return &e, nil
}

// Apply changes s by e, as RocketMQ's ReplicasInfoManager.applyEvent does.
// It never fails: an event about a group s does not know changes nothing
// (the checks that produced it ran against the same state, so that only
// happens to an event replayed over a newer snapshot).
func (s *State) Apply(e *Event) {
	switch e.Type {
	case EventAlterSyncStateSet:
		if s.known(e.BrokerName) {
			ss := s.SyncStates[e.BrokerName]
			ss.SyncStateSet = sortedIDs(e.SyncStateSet)
			ss.SyncStateSetEpoch++
		}
	case EventApplyBrokerID:
		if s.known(e.BrokerName) {
			r := s.Replicas[e.BrokerName]
			if _, ok := r.Brokers[e.BrokerID]; !ok {
				r.Brokers[e.BrokerID] = Replica{Addr: e.Addr, CheckCode: e.CheckCode}
				r.NextBrokerID++
			}
			return
		}
		s.Replicas[e.BrokerName] = &Replicas{
			Cluster:      e.Cluster,
			BrokerName:   e.BrokerName,
			NextBrokerID: FirstBrokerID + 1,
			Brokers:      map[int64]Replica{e.BrokerID: {Addr: e.Addr, CheckCode: e.CheckCode}},
		}
		s.SyncStates[e.BrokerName] = &SyncState{Cluster: e.Cluster, BrokerName: e.BrokerName, SyncStateSet: []int64{}}
	case EventElectMaster:
		if !s.known(e.BrokerName) {
			return
		}
		ss := s.SyncStates[e.BrokerName]
		ss.MasterEpoch++
		if e.NewMasterElected {
			ss.HasMaster, ss.MasterID = true, e.BrokerID
			ss.SyncStateSet = []int64{e.BrokerID}
			ss.SyncStateSetEpoch++
		} else {
			ss.HasMaster, ss.MasterID = false, 0
		}
	case EventCleanBrokerData:
		if len(e.BrokerIDs) == 0 {
			delete(s.Replicas, e.BrokerName)
			delete(s.SyncStates, e.BrokerName)
			return
		}
		if !s.known(e.BrokerName) {
			return
		}
		r, ss := s.Replicas[e.BrokerName], s.SyncStates[e.BrokerName]
		for _, id := range e.BrokerIDs {
			delete(r.Brokers, id)
			ss.SyncStateSet = slices.DeleteFunc(ss.SyncStateSet, func(x int64) bool { return x == id })
		}
		if len(r.Brokers) == 0 {
			delete(s.Replicas, e.BrokerName)
		}
		if len(ss.SyncStateSet) == 0 {
			delete(s.SyncStates, e.BrokerName)
		}
	case EventUpdateBrokerAddress:
		if r, ok := s.Replicas[e.BrokerName]; ok {
			if b, ok := r.Brokers[e.BrokerID]; ok {
				b.Addr = e.Addr
				r.Brokers[e.BrokerID] = b
			}
		}
	}
}

// sortedIDs returns a sorted copy of ids without duplicates.
func sortedIDs(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

// memberAddrs returns the group's broker id -> address table.
func (r *Replicas) memberAddrs() map[int64]string {
	m := make(map[int64]string, len(r.Brokers))
	for id, b := range r.Brokers {
		m[id] = b.Addr
	}
	return m
}

// addr returns the address of broker id, "" when unknown.
func (r *Replicas) addr(id int64) string { return r.Brokers[id].Addr }

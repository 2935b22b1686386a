package controller

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// twoBrokerGroup is a group with brokers 1 and 2 (check codes "a;1", "b;1"),
// master 1 at master epoch 1, sync state set {1, 2} at epoch 2.
func twoBrokerGroup(t *testing.T) *State {
	t.Helper()
	st := NewState()
	for _, e := range []*Event{
		{Type: EventApplyBrokerID, Cluster: "c1", BrokerName: "g", BrokerID: 1, Addr: "a", CheckCode: "a;1"},
		{Type: EventApplyBrokerID, Cluster: "c1", BrokerName: "g", BrokerID: 2, Addr: "b", CheckCode: "b;1"},
		{Type: EventElectMaster, BrokerName: "g", BrokerID: 1, NewMasterElected: true, Expect: &Expect{}},
		{Type: EventAlterSyncStateSet, BrokerName: "g", SyncStateSet: []int64{1, 2}, Expect: &Expect{MasterID: 1, MasterEpoch: 1, SyncStateSetEpoch: 1}},
	} {
		if rej := st.Apply(e); rej != nil {
			t.Fatalf("setting up: %s refused: %v", e.Type, rej)
		}
	}
	return st
}

func stateJSON(t *testing.T, st *State) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestApplyRefusesWhatTheStateNoLongerAdmits: an event whose request was
// checked against another state (it landed after something it did not
// see) changes nothing and is refused with the code and remark RocketMQ's
// check gives against the state it landed on; the same event on the state
// it was checked against applies.
func TestApplyRefusesWhatTheStateNoLongerAdmits(t *testing.T) {
	cases := []struct {
		name   string
		event  Event
		code   int32
		remark string
	}{
		{"apply an id held with another check code",
			Event{Type: EventApplyBrokerID, Cluster: "c1", BrokerName: "g", BrokerID: 2, Addr: "x", CheckCode: "x;9"},
			remoting.ControllerBrokerIDInvalid, "Fail to apply brokerId: 2 in broker-set: g"},
		{"apply a first id other than 1",
			Event{Type: EventApplyBrokerID, Cluster: "c1", BrokerName: "new", BrokerID: 3, Addr: "x", CheckCode: "x;9"},
			remoting.ControllerBrokerIDInvalid, "Broker-set: new hasn't been registered in controller, but broker try to apply brokerId: 3"},
		{"alter with a stale sync state set epoch",
			Event{Type: EventAlterSyncStateSet, BrokerName: "g", SyncStateSet: []int64{1}, Expect: &Expect{MasterID: 1, MasterEpoch: 1, SyncStateSetEpoch: 1}},
			remoting.ControllerFencedSyncStateSetEpoch, "Rejecting alter syncStateSet request because the current syncStateSet epoch is:{2}, not {1}"},
		{"alter by a master of an older epoch",
			Event{Type: EventAlterSyncStateSet, BrokerName: "g", SyncStateSet: []int64{1}, Expect: &Expect{MasterID: 1, MasterEpoch: 0, SyncStateSetEpoch: 2}},
			remoting.ControllerFencedMasterEpoch, "Rejecting alter syncStateSet request because the current master epoch is:{1}, not {0}"},
		{"alter by another master",
			Event{Type: EventAlterSyncStateSet, BrokerName: "g", SyncStateSet: []int64{2}, Expect: &Expect{MasterID: 2, MasterEpoch: 1, SyncStateSetEpoch: 2}},
			remoting.ControllerInvalidMaster, "Rejecting alter syncStateSet request because the current leader is:{1}, not {2}"},
		{"alter to a removed replica",
			Event{Type: EventAlterSyncStateSet, BrokerName: "g", SyncStateSet: []int64{1, 7}, Expect: &Expect{MasterID: 1, MasterEpoch: 1, SyncStateSetEpoch: 2}},
			remoting.ControllerInvalidReplicas, "Rejecting alter syncStateSet request because the replicas {7} don't exist"},
		{"alter of an unknown group",
			Event{Type: EventAlterSyncStateSet, BrokerName: "gone", SyncStateSet: []int64{1}},
			remoting.ControllerAlterSyncStateSetFailed, "Broker metadata is not existed"},
		{"an election run before the last change",
			Event{Type: EventElectMaster, BrokerName: "g", BrokerID: 2, NewMasterElected: true, Expect: &Expect{MasterEpoch: 1, SyncStateSetEpoch: 1}},
			remoting.ControllerElectMasterFailed, "Failed to elect a new master: the election ran at master epoch 1, sync state set epoch 1; the group is at 1, 2"},
		{"a masterless election run before the last change",
			Event{Type: EventElectMaster, BrokerName: "g", Expect: &Expect{MasterEpoch: 0, SyncStateSetEpoch: 0}},
			remoting.ControllerElectMasterFailed, "Failed to elect a new master: the election ran at master epoch 0, sync state set epoch 0; the group is at 1, 2"},
		{"an election in an unknown group",
			Event{Type: EventElectMaster, BrokerName: "gone", BrokerID: 1, NewMasterElected: true},
			remoting.ControllerBrokerNeedToBeRegistered, "Broker hasn't been registered"},
		{"an address update of an unknown id",
			Event{Type: EventUpdateBrokerAddress, Cluster: "c1", BrokerName: "g", BrokerID: 5, Addr: "y"},
			remoting.ControllerBrokerNeedToBeRegistered, "BrokerId: 5 hasn't been registered in broker-set: g"},
		{"an address update in an unknown group",
			Event{Type: EventUpdateBrokerAddress, Cluster: "c1", BrokerName: "gone", BrokerID: 1, Addr: "y"},
			remoting.ControllerBrokerNeedToBeRegistered, "Broker-set: gone hasn't been registered in controller"},
		{"a clean of an unknown group",
			Event{Type: EventCleanBrokerData, BrokerName: "gone", BrokerIDs: []int64{1}},
			remoting.ControllerInvalidCleanBrokerMetadata, "Broker gone is not existed,clean broker data failure."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := twoBrokerGroup(t)
			before := stateJSON(t, st)
			e := tc.event
			rej := st.Apply(&e)
			if rej == nil {
				t.Fatalf("applied; state now %s", stateJSON(t, st))
			}
			if rej.Code != tc.code || rej.Remark != tc.remark {
				t.Fatalf("refused with %d %q, want %d %q", rej.Code, rej.Remark, tc.code, tc.remark)
			}
			if after := stateJSON(t, st); after != before {
				t.Fatalf("a refused event changed the state:\n%s\nwas\n%s", after, before)
			}
		})
	}

	// What each check admits applies.
	st := twoBrokerGroup(t)
	for _, e := range []*Event{
		{Type: EventApplyBrokerID, Cluster: "c1", BrokerName: "g", BrokerID: 2, Addr: "b", CheckCode: "b;1"},
		{Type: EventApplyBrokerID, Cluster: "c1", BrokerName: "g", BrokerID: 3, Addr: "c", CheckCode: "c;1"},
		{Type: EventAlterSyncStateSet, BrokerName: "g", SyncStateSet: []int64{1, 2, 3}, Expect: &Expect{MasterID: 1, MasterEpoch: 1, SyncStateSetEpoch: 2}},
		{Type: EventUpdateBrokerAddress, Cluster: "c1", BrokerName: "g", BrokerID: 3, Addr: "c2"},
		{Type: EventElectMaster, BrokerName: "g", BrokerID: 3, NewMasterElected: true, Expect: &Expect{MasterEpoch: 1, SyncStateSetEpoch: 3}},
		// An alter written before events recorded Expect applies as it did.
		{Type: EventAlterSyncStateSet, BrokerName: "g", SyncStateSet: []int64{2, 3}},
	} {
		if rej := st.Apply(e); rej != nil {
			t.Fatalf("%s %+v refused: %v", e.Type, e, rej)
		}
	}
	ss, reps := st.SyncStates["g"], st.Replicas["g"]
	if !ss.HasMaster || ss.MasterID != 3 || ss.MasterEpoch != 2 || ss.SyncStateSetEpoch != 5 || !slices.Equal(ss.SyncStateSet, []int64{2, 3}) ||
		reps.NextBrokerID != 4 || reps.Brokers[3].Addr != "c2" || reps.Brokers[2].CheckCode != "b;1" {
		t.Fatalf("state %s", stateJSON(t, st))
	}
}

// TestStaleCheckAnsweredByApply: a request checked against a state that
// misses an event committed meanwhile (what a raft apply that timed out
// and committed later leaves behind) is answered with RocketMQ's refusal,
// not SUCCESS, and changes nothing. Each check below runs against a copy
// of the state taken before another broker's change.
func TestStaleCheckAnsweredByApply(t *testing.T) {
	c := startController(t, testConfig(""), true)
	b1 := &broker{t: t, cl: dial(t, c.srv.Addr().String()), addr: "10.0.0.1:30911"}
	b2 := &broker{t: t, cl: dial(t, c.srv.Addr().String()), addr: "10.0.0.2:30911"}
	b1.applyID()

	// Broker 10.0.0.9 asked for id 2 when it was free; b2 took it first.
	stale := c.State()
	b2.applyID()
	res := c.propose(true, func(_ *State, ch checks) result {
		return ch.applyBrokerID(stale, ApplyBrokerIDHeader{ClusterName: "c1", BrokerName: "broker-a", AppliedBrokerID: 2, RegisterCheckCode: "10.0.0.9:30911;1"})
	})
	if res.code != remoting.ControllerBrokerIDInvalid || res.remark != "Fail to apply brokerId: 2 in broker-set: broker-a" ||
		res.ext["brokerName"] != "broker-a" || res.ext["clusterName"] != "c1" {
		t.Fatalf("apply of an id taken meanwhile: code %d %q ext %v", res.code, res.remark, res.ext)
	}
	if got := c.State().Replicas["broker-a"]; got.Brokers[2].CheckCode != b2.addr+";1700000000000" || got.NextBrokerID != 3 {
		t.Fatalf("id 2 is now %+v, next id %d; want b2's", got.Brokers[2], got.NextBrokerID)
	}

	wantCode(t, "register 1", b1.register(), remoting.Success)
	wantCode(t, "register 2", b2.register(), remoting.Success)
	b1.heartbeat(60000, 0, 10)
	b2.heartbeat(60000, 0, 10)
	wantCode(t, "first election", b1.elect(), remoting.Success)

	// The controller found no master to elect, while broker 1's election
	// committed: the master must stay.
	stale = c.State()
	stale.SyncStates["broker-a"].MasterEpoch, stale.SyncStates["broker-a"].HasMaster = 0, false
	stale.SyncStates["broker-a"].SyncStateSetEpoch = 0
	res = c.propose(true, func(_ *State, ch checks) result {
		ch.policy.alive = func(string, string, int64) bool { return false }
		return ch.electMaster(stale, ElectMasterHeader{BrokerName: "broker-a", BrokerID: -1}, true)
	})
	if res.code != remoting.ControllerElectMasterFailed {
		t.Fatalf("masterless election over a newer master: code %d %q", res.code, res.remark)
	}
	if ss := c.State().SyncStates["broker-a"]; !ss.HasMaster || ss.MasterID != 1 || ss.MasterEpoch != 1 {
		t.Fatalf("a stale masterless election changed the group: %+v", ss)
	}

	// The master's alter checked before another alter committed.
	stale = c.State()
	wantCode(t, "alter", alter(t, b1.cl, 1, 1, []int64{1, 2}, 1), remoting.Success)
	res = c.propose(true, func(_ *State, ch checks) result {
		return ch.alterSyncStateSet(stale, AlterSyncStateSetHeader{BrokerName: "broker-a", MasterBrokerID: 1, MasterEpoch: 1},
			SyncStateSetBody{SyncStateSet: []int64{1, 2}, SyncStateSetEpoch: 1})
	})
	if res.code != remoting.ControllerAlterSyncStateSetFailed {
		t.Fatalf("alter checked against an older set: code %d %q", res.code, res.remark)
	}
	if ss := c.State().SyncStates["broker-a"]; ss.SyncStateSetEpoch != 2 || !slices.Equal(ss.SyncStateSet, []int64{1, 2}) {
		t.Fatalf("a stale alter changed the group: %+v", ss)
	}

	// A registration checked before the id was cleaned.
	stale = c.State()
	resp := invoke(t, b1.cl, remoting.CleanBrokerData, map[string]string{"clusterName": "c1", "brokerName": "broker-a", "isCleanLivingBroker": "true"}, nil)
	wantCode(t, "clean the group", resp, remoting.Success)
	res = c.propose(true, func(_ *State, ch checks) result {
		return ch.registerBroker(stale, RegisterBrokerHeader{ClusterName: "c1", BrokerName: "broker-a", BrokerID: 2, BrokerAddress: "10.0.0.7:30911"})
	})
	if res.code != remoting.ControllerBrokerNeedToBeRegistered || res.remark != "Broker-set: broker-a hasn't been registered in controller" || res.ext["brokerName"] != "broker-a" {
		t.Fatalf("registration into a cleaned group: code %d %q ext %v", res.code, res.remark, res.ext)
	}
	if _, ok := c.State().Replicas["broker-a"]; ok {
		t.Fatalf("a stale registration brought the group back: %s", stateJSON(t, c.State()))
	}
}

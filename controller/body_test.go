package controller

import (
	"slices"
	"testing"
)

// The bodies read as RocketMQ's fastjson writes them (bare Map<Long, ...>
// keys, fields in name order) and are written with RocketMQ's field names.
func TestBodiesRocketMQForm(t *testing.T) {
	b, err := DecodeElectMasterResponseBody([]byte(`{"brokerMemberGroup":{"brokerAddrs":{1:"10.0.0.1:30911",2:"10.0.0.2:30911"},"brokerName":"broker-a","cluster":"DefaultCluster"},"syncStateSet":[1]}`))
	if err != nil || b.BrokerMemberGroup.BrokerAddrs[2] != "10.0.0.2:30911" || b.BrokerMemberGroup.Cluster != "DefaultCluster" || !slices.Equal(b.SyncStateSet, []int64{1}) {
		t.Fatalf("elect body %+v %v", b, err)
	}
	got := string(ElectMasterResponseBody{
		BrokerMemberGroup: &BrokerMemberGroup{BrokerAddrs: map[int64]string{1: "a:1"}, BrokerName: "b", Cluster: "c"},
		SyncStateSet:      []int64{1},
	}.Encode())
	if want := `{"brokerMemberGroup":{"brokerAddrs":{"1":"a:1"},"brokerName":"b","cluster":"c"},"syncStateSet":[1]}`; got != want {
		t.Errorf("elect body %s, want %s", got, want)
	}
	if got, want := string(SyncStateSetBody{SyncStateSet: []int64{1, 2}, SyncStateSetEpoch: 3}.Encode()), `{"syncStateSet":[1,2],"syncStateSetEpoch":3}`; got != want {
		t.Errorf("sync state set %s, want %s", got, want)
	}
	if got, want := string(SyncStateSetBody{}.Encode()), `{"syncStateSet":[],"syncStateSetEpoch":0}`; got != want {
		t.Errorf("empty sync state set %s, want %s", got, want)
	}
	set, err := DecodeSyncStateSet([]byte(`{"syncStateSet":[2,1,2],"syncStateSetEpoch":7}`))
	if err != nil || !slices.Equal(set.SyncStateSet, []int64{1, 2}) || set.SyncStateSetEpoch != 7 {
		t.Errorf("decoded %+v %v", set, err)
	}
	if _, err := DecodeSyncStateSet([]byte(`{"syncStateSetEpoch":7}`)); err == nil {
		t.Error("a body without syncStateSet decoded")
	}
	id := int64(1)
	addr := "a:1"
	info := encodeJSON(BrokerReplicasInfo{ReplicasInfoTable: map[string]ReplicasInfo{"b": {
		InSyncReplicas: []ReplicaIdentity{{Alive: true, BrokerAddress: "a:1", BrokerID: 1, BrokerName: "b"}},
		MasterAddress:  &addr, MasterBrokerID: &id, MasterEpoch: 2, NotInSyncReplicas: []ReplicaIdentity{}, SyncStateSetEpoch: 3,
	}}})
	want := `{"replicasInfoTable":{"b":{"inSyncReplicas":[{"alive":true,"brokerAddress":"a:1","brokerId":1,"brokerName":"b"}],"masterAddress":"a:1","masterBrokerId":1,"masterEpoch":2,"notInSyncReplicas":[],"syncStateSetEpoch":3}}}`
	if string(info) != want {
		t.Errorf("replicas info %s, want %s", info, want)
	}
}

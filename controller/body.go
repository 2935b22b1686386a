package controller

import (
	"encoding/json"
	"fmt"

	"github.com/rocketkv/rocketkv/internal/adminbody"
)

// The bodies below are RocketMQ's, with its JSON field names. Java writes
// them with fastjson (fields in name order, Map<Long, String> keys bare:
// {1:"ip:port"}); rocketkv writes the keys quoted, which fastjson reads,
// and reads either form.

// SyncStateSetBody is RocketMQ's SyncStateSet: the body of
// CONTROLLER_ALTER_SYNC_STATE_SET (request and response), of
// CONTROLLER_REGISTER_BROKER's and CONTROLLER_GET_REPLICA_INFO's responses
// and of NOTIFY_BROKER_ROLE_CHANGED.
//
//	{"syncStateSet":[1,2],"syncStateSetEpoch":3}
type SyncStateSetBody struct {
	SyncStateSet      []int64 `json:"syncStateSet"`
	SyncStateSetEpoch int32   `json:"syncStateSetEpoch"`
}

// Encode returns the JSON of b; a nil set is written as [].
func (b SyncStateSetBody) Encode() []byte {
	if b.SyncStateSet == nil {
		b.SyncStateSet = []int64{}
	}
	out, _ := json.Marshal(b) // cannot fail: plain fields
	return out
}

// DecodeSyncStateSet reads a SyncStateSet body; a missing or null
// syncStateSet is an error, as RocketMQ's controller fails on it.
func DecodeSyncStateSet(data []byte) (SyncStateSetBody, error) {
	var raw struct {
		SyncStateSet      *[]int64 `json:"syncStateSet"`
		SyncStateSetEpoch int32    `json:"syncStateSetEpoch"`
	}
	if len(data) == 0 {
		return SyncStateSetBody{}, fmt.Errorf("sync state set body: empty")
	}
	if err := adminbody.UnmarshalFastjson(data, &raw); err != nil {
		return SyncStateSetBody{}, fmt.Errorf("sync state set body: %w", err)
	}
	if raw.SyncStateSet == nil {
		return SyncStateSetBody{}, fmt.Errorf("sync state set body: no syncStateSet")
	}
	return SyncStateSetBody{SyncStateSet: sortedIDs(*raw.SyncStateSet), SyncStateSetEpoch: raw.SyncStateSetEpoch}, nil
}

// BrokerMemberGroup is RocketMQ's BrokerMemberGroup: a group's members by
// broker id.
type BrokerMemberGroup struct {
	BrokerAddrs map[int64]string `json:"brokerAddrs"`
	BrokerName  string           `json:"brokerName"`
	Cluster     string           `json:"cluster"`
}

// ElectMasterResponseBody is RocketMQ's ElectMasterResponseBody, the body
// of a CONTROLLER_ELECT_MASTER answer:
//
//	{"brokerMemberGroup":{"brokerAddrs":{"1":"10.0.0.1:30911"},"brokerName":"broker-a","cluster":"c"},"syncStateSet":[1]}
//
// brokerMemberGroup is absent when the old master stayed.
type ElectMasterResponseBody struct {
	BrokerMemberGroup *BrokerMemberGroup `json:"brokerMemberGroup,omitempty"`
	SyncStateSet      []int64            `json:"syncStateSet"`
}

// Encode returns the JSON of b.
func (b ElectMasterResponseBody) Encode() []byte {
	if b.SyncStateSet == nil {
		b.SyncStateSet = []int64{}
	}
	out, _ := json.Marshal(b) // cannot fail: plain fields
	return out
}

// DecodeElectMasterResponseBody reads an ElectMasterResponseBody, with
// fastjson's bare map keys or quoted ones.
func DecodeElectMasterResponseBody(data []byte) (ElectMasterResponseBody, error) {
	var b ElectMasterResponseBody
	if err := adminbody.UnmarshalFastjson(data, &b); err != nil {
		return b, fmt.Errorf("elect master body: %w", err)
	}
	return b, nil
}

// ReplicaIdentity is RocketMQ's BrokerReplicasInfo.ReplicaIdentity.
type ReplicaIdentity struct {
	Alive         bool   `json:"alive"`
	BrokerAddress string `json:"brokerAddress"`
	BrokerID      int64  `json:"brokerId"`
	BrokerName    string `json:"brokerName"`
}

// ReplicasInfo is RocketMQ's BrokerReplicasInfo.ReplicasInfo: one group in
// a CONTROLLER_GET_SYNC_STATE_DATA answer. masterAddress and
// masterBrokerId are absent while the group has no master.
type ReplicasInfo struct {
	InSyncReplicas    []ReplicaIdentity `json:"inSyncReplicas"`
	MasterAddress     *string           `json:"masterAddress,omitempty"`
	MasterBrokerID    *int64            `json:"masterBrokerId,omitempty"`
	MasterEpoch       int32             `json:"masterEpoch"`
	NotInSyncReplicas []ReplicaIdentity `json:"notInSyncReplicas"`
	SyncStateSetEpoch int32             `json:"syncStateSetEpoch"`
}

// BrokerReplicasInfo is RocketMQ's BrokerReplicasInfo, the body of a
// CONTROLLER_GET_SYNC_STATE_DATA answer:
//
//	{"replicasInfoTable":{"broker-a":{"inSyncReplicas":[{"alive":true,"brokerAddress":"10.0.0.1:30911","brokerId":1,"brokerName":"broker-a"}],
//	 "masterAddress":"10.0.0.1:30911","masterBrokerId":1,"masterEpoch":1,"notInSyncReplicas":[],"syncStateSetEpoch":1}}}
type BrokerReplicasInfo struct {
	ReplicasInfoTable map[string]ReplicasInfo `json:"replicasInfoTable"`
}

// DecodeBrokerReplicasInfo reads a BrokerReplicasInfo body.
func DecodeBrokerReplicasInfo(data []byte) (BrokerReplicasInfo, error) {
	var b BrokerReplicasInfo
	if err := adminbody.UnmarshalFastjson(data, &b); err != nil {
		return b, fmt.Errorf("broker replicas info body: %w", err)
	}
	return b, nil
}

// DecodeBrokerNames reads the body of CONTROLLER_GET_SYNC_STATE_DATA: a
// JSON list of broker names.
func DecodeBrokerNames(data []byte) ([]string, error) {
	var names []string
	if err := json.Unmarshal(data, &names); err != nil {
		return nil, fmt.Errorf("broker name list body: %w", err)
	}
	return names, nil
}

// encodeJSON marshals a body of plain fields.
func encodeJSON(v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		// Only the bodies above pass here; they hold nothing that fails.
		return []byte("{}")
	}
	return out
}

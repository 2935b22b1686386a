package controller

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// FuzzHeaders feeds arbitrary ext fields to every header decoder: each
// returns a value or an error, never panics.
func FuzzHeaders(f *testing.F) {
	f.Add("brokerName", "a", "brokerId", "1", "masterEpoch", "x")
	f.Add("clusterName", "c", "epoch", "99999999999", "heartbeatTimeoutMills", "-5")
	f.Add("brokerControllerIdsToClean", "1;2", "isCleanLivingBroker", "TRUE", "registerCheckCode", "a;b")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3 string) {
		ext := map[string]string{k1: v1, k2: v2, k3: v3}
		_, _ = DecodeAlterSyncStateSetHeader(ext)
		_, _ = DecodeElectMasterHeader(ext)
		_, _ = DecodeBrokerNameHeader(ext)
		_, _ = DecodeBrokerIdentityHeader(ext)
		_, _ = DecodeApplyBrokerIDHeader(ext)
		_, _ = DecodeRegisterBrokerHeader(ext)
		_, _ = DecodeCleanBrokerDataHeader(ext)
		_, _ = DecodeHeartbeatHeader(ext)
		_, _ = parseProperties(v1)
	})
}

// FuzzBodies feeds arbitrary bytes to the body decoders, the event decoder
// and the snapshot restore; a decoded event is applied to a state with a
// group in it, and a SyncStateSet that decodes encodes to one that decodes
// the same.
func FuzzBodies(f *testing.F) {
	f.Add([]byte(`{"syncStateSet":[1,2],"syncStateSetEpoch":3}`))
	f.Add([]byte(`{"brokerMemberGroup":{"brokerAddrs":{1:"a:1"},"brokerName":"b","cluster":"c"},"syncStateSet":[1]}`))
	f.Add([]byte(`{"replicasInfoTable":{"b":{"inSyncReplicas":[],"masterEpoch":1}}}`))
	f.Add([]byte(`["a","b"]`))
	f.Add([]byte(`{"type":"ELECT_MASTER_EVENT","brokerName":"b","brokerId":1,"newMasterElected":true}`))
	f.Add([]byte(`{"type":"CLEAN_BROKER_DATA_EVENT","brokerName":"b","brokerIds":[1,1,2]}`))
	f.Add([]byte(`{"replicas":{"b":{"brokers":null}},"syncStates":{}}`))
	f.Add([]byte(`{"replicas":{"b":null},"syncStates":{"b":null}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if set, err := DecodeSyncStateSet(data); err == nil {
			again, err := DecodeSyncStateSet(set.Encode())
			if err != nil || again.SyncStateSetEpoch != set.SyncStateSetEpoch || len(again.SyncStateSet) != len(set.SyncStateSet) {
				t.Fatalf("%s: re-decoded %+v (%v), want %+v", data, again, err, set)
			}
		}
		_, _ = DecodeElectMasterResponseBody(data)
		_, _ = DecodeBrokerReplicasInfo(data)
		_, _ = DecodeBrokerNames(data)
		st := NewState()
		st.Apply(&Event{Type: EventApplyBrokerID, Cluster: "c", BrokerName: "b", BrokerID: 1, Addr: "a:1", CheckCode: "a:1;1"})
		if e, err := decodeEvent(data); err == nil {
			st.Apply(e)
			_ = st.clone()
		}
		fm := &fsm{st: NewState()}
		if err := fm.Restore(io.NopCloser(bytes.NewReader(data))); err == nil {
			fm.st.Apply(&Event{Type: EventApplyBrokerID, BrokerName: strings.Repeat("b", 1), BrokerID: 2})
			fm.st.Apply(&Event{Type: EventCleanBrokerData, BrokerName: "b", BrokerIDs: []int64{1}})
		}
	})
}

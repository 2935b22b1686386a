package controller

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/remoting"
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

// FuzzServe sends arbitrary requests of every controller code, with
// arbitrary header values and bodies, to a running controller: each gets
// an answer, never a panic, and the state stays consistent (a master only
// after an election, sync state sets sorted without duplicates). A master
// may leave its own set: RocketMQ's CLEAN_BROKER_DATA of a dead master's
// id does that too.
func FuzzServe(f *testing.F) {
	f.Add(uint8(0), "broker-a", "1", "1", []byte(`{"syncStateSet":[1],"syncStateSetEpoch":1}`))
	f.Add(uint8(11), "broker-a", "1", "a:1;1", []byte(nil))
	f.Add(uint8(1), "broker-a", "1", "false", []byte(nil))
	f.Add(uint8(6), "broker-a", "-1", "x", []byte(`["broker-a"]`))
	f.Add(uint8(9), "broker-a", "1;2", "true", []byte(nil))
	f.Add(uint8(7), "k", "v", "", []byte("enableElectUncleanMaster=true\nx"))
	cfg := testConfig("")
	c, err := New(Options{Config: cfg, Log: zerolog.Nop()})
	if err != nil {
		f.Fatal(err)
	}
	if err := c.Start(); err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for !c.IsLeader() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	f.Fuzz(func(t *testing.T, code uint8, name, v1, v2 string, body []byte) {
		ext := map[string]string{
			"clusterName": "c", "brokerName": name, "brokerId": v1, "appliedBrokerId": v1, "masterBrokerId": v1,
			"masterEpoch": v1, "registerCheckCode": v2, "brokerAddress": v2, "brokerAddr": v2, "designateElect": v2,
			"brokerControllerIdsToClean": v1, "isCleanLivingBroker": v2, "heartbeatTimeoutMills": v1, "epoch": v1,
		}
		req := remoting.NewRequest(Codes[int(code)%len(Codes)], ext, body)
		res := c.serve(nil, req)
		if res.code == remoting.Success && res.remark != "" && req.Code != remoting.BrokerHeartbeat && req.Code != remoting.UpdateControllerConfig {
			t.Fatalf("code %d answered SUCCESS with remark %q", req.Code, res.remark)
		}
		for n, ss := range c.State().SyncStates {
			if ss.HasMaster && ss.MasterEpoch < 1 || !slices.Equal(ss.SyncStateSet, sortedIDs(ss.SyncStateSet)) {
				t.Fatalf("group %s: %+v", n, ss)
			}
		}
	})
}

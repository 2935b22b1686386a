package broker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/ha"
	"github.com/rocketkv/rocketkv/remoting"
)

// haStatusMasterFlush is the masterFlushOffset a slave's
// GET_BROKER_HA_STATUS shows.
func haStatusMasterFlush(t *testing.T, slave *testBroker) int64 {
	t.Helper()
	r := call(t, slave.client(nil), remoting.GetBrokerHAStatus, nil, nil)
	var info ha.RuntimeInfo
	if r.Code != remoting.Success || json.Unmarshal(r.Body, &info) != nil {
		t.Fatalf("GET_BROKER_HA_STATUS: %d %s %q", r.Code, r.Remark, r.Body)
	}
	return info.HAClientRuntimeInfo.MasterFlushOffset
}

// EXCHANGE_BROKER_HA_INFO naming a master's HA address gives a slave with
// syncMasterFlushOffsetWhenStartup the request's masterFlushOffset as its
// masterFlushedOffset when its checkpoint holds none, as RocketMQ's
// AdminBrokerProcessor does: kept in the checkpoint, shown by haStatus,
// not replaced by a later one; a slave without the switch keeps 0 until
// UPDATE_BROKER_CONFIG turns it on; a masterFlushOffset that is not an
// integer is SYSTEM_ERROR.
func TestExchangeHAInfoSyncsMasterFlushOffset(t *testing.T) {
	master := startTestBroker(t, fastHA)
	slave := startSlaveOf(t, master, map[string]string{"syncMasterFlushOffsetWhenStartup": "true"})
	plain := startSlaveOf(t, master, map[string]string{"brokerId": "2"})
	exchange := func(tb *testBroker, flush string) *remoting.Command {
		t.Helper()
		return call(t, tb.client(nil), remoting.ExchangeBrokerHAInfo, map[string]string{
			"masterHaAddress": master.haServerAddr(), "masterAddress": master.Addr(), "masterFlushOffset": flush}, nil)
	}
	if r := exchange(slave, "x1"); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "masterFlushOffset") {
		t.Fatalf("a masterFlushOffset that is not an integer: %d %s, want SYSTEM_ERROR naming it", r.Code, r.Remark)
	}
	if got := slave.clog.Checkpoint().MasterFlushedOffset; got != 0 {
		t.Fatalf("a refused request set masterFlushedOffset %d", got)
	}
	if r := exchange(slave, "1234"); r.Code != remoting.Success {
		t.Fatalf("exchange: %d %s", r.Code, r.Remark)
	}
	if got := slave.clog.Checkpoint().MasterFlushedOffset; got != 1234 {
		t.Fatalf("slave's masterFlushedOffset %d, want 1234", got)
	}
	if got := haStatusMasterFlush(t, slave); got != 1234 {
		t.Fatalf("haStatus masterFlushOffset %d, want 1234", got)
	}
	// Set once: RocketMQ takes it only while the slave holds none.
	if r := exchange(slave, "99"); r.Code != remoting.Success || slave.clog.Checkpoint().MasterFlushedOffset != 1234 {
		t.Fatalf("a second exchange: %d %s, masterFlushedOffset %d, want 1234 kept", r.Code, r.Remark, slave.clog.Checkpoint().MasterFlushedOffset)
	}

	if r := exchange(plain, "1234"); r.Code != remoting.Success || plain.clog.Checkpoint().MasterFlushedOffset != 0 {
		t.Fatalf("without syncMasterFlushOffsetWhenStartup: %d %s, masterFlushedOffset %d, want 0", r.Code, r.Remark, plain.clog.Checkpoint().MasterFlushedOffset)
	}
	if r := call(t, plain.client(nil), remoting.UpdateBrokerConfig, nil, []byte("syncMasterFlushOffsetWhenStartup=true\n")); r.Code != remoting.Success {
		t.Fatalf("update: %d %s", r.Code, r.Remark)
	}
	if r := exchange(plain, "77"); r.Code != remoting.Success || plain.clog.Checkpoint().MasterFlushedOffset != 77 {
		t.Fatalf("after the update: %d %s, masterFlushedOffset %d, want 77", r.Code, r.Remark, plain.clog.Checkpoint().MasterFlushedOffset)
	}
}

// Under enableSlaveActingMaster, a slave with
// syncMasterFlushOffsetWhenStartup whose master comes back
// (NOTIFY_MIN_BROKER_ID_CHANGE naming broker 0) asks it with
// EXCHANGE_BROKER_HA_INFO and takes its masterFlushOffset (the master's
// CommitLog end at its start), as RocketMQ's onMasterOnline does.
func TestMasterOnlineSyncsMasterFlushOffset(t *testing.T) {
	first := startTestBroker(t, fastHA)
	mustSend(t, first.client(nil), "TopicMFO", 0, "before the restart", "")
	first.stop()
	master := startTestBrokerAt(t, first.store, fastHA)
	if master.initMaxOffset == 0 {
		t.Fatal("the restarted master starts empty")
	}
	slave := startSlaveOf(t, master, map[string]string{"enableSlaveActingMaster": "true", "syncMasterFlushOffsetWhenStartup": "true"})
	notice := func(minID, minAddr string) {
		t.Helper()
		if r := call(t, slave.client(nil), remoting.NotifyMinBrokerIDChange, map[string]string{
			"minBrokerId": minID, "minBrokerAddr": minAddr, "brokerName": slave.cfg.BrokerName}, nil); r.Code != remoting.Success {
			t.Fatalf("notice: %d %s", r.Code, r.Remark)
		}
	}
	notice("1", slave.Addr())
	if got := slave.clog.Checkpoint().MasterFlushedOffset; got != 0 {
		t.Fatalf("masterFlushedOffset %d before the master is back", got)
	}
	notice("0", master.Addr())
	deadline := time.Now().Add(10 * time.Second)
	for slave.clog.Checkpoint().MasterFlushedOffset != master.initMaxOffset {
		if time.Now().After(deadline) {
			t.Fatalf("slave's masterFlushedOffset %d, want the master's end at start %d", slave.clog.Checkpoint().MasterFlushedOffset, master.initMaxOffset)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := haStatusMasterFlush(t, slave); got != master.initMaxOffset {
		t.Fatalf("haStatus masterFlushOffset %d, want %d", got, master.initMaxOffset)
	}
}

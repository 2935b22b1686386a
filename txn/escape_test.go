package txn

import (
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
)

// An escaped half is the prepared message of its real topic, as
// RocketMQ's buildTransactionalMessageFromHalfMessage builds it: the
// half's properties with TRAN_MSG=true, REAL_TOPIC kept, REAL_QID and
// TRAN_PREPARED_QUEUE_OFFSET dropped, sysFlag PREPARED.
func TestEscapedHalf(t *testing.T) {
	half := &commitlog.Message{Topic: "RMQ_SYS_TRANS_HALF_TOPIC", Body: []byte("b"), Flag: 7, BornTimestamp: 42,
		SysFlag: commitlog.FlagCompressed,
		Properties: commitlog.FormatProperties(map[string]string{"REAL_TOPIC": "T", "REAL_QID": "3", "PGROUP": "pg",
			"UNIQ_KEY": "U", "TRAN_PREPARED_QUEUE_OFFSET": "9", "TRAN_MSG": "true"})}
	m, err := escapedHalf(half)
	if err != nil {
		t.Fatal(err)
	}
	props := commitlog.ParseProperties(m.Properties)
	if m.Topic != "T" || m.QueueID != 3 || string(m.Body) != "b" || m.Flag != 7 || m.BornTimestamp != 42 {
		t.Fatalf("escaped half %+v", m)
	}
	if m.SysFlag != commitlog.FlagCompressed|commitlog.TransactionPrepared {
		t.Errorf("sysFlag %#x, want compressed and PREPARED", m.SysFlag)
	}
	if props["TRAN_MSG"] != "true" || props["REAL_TOPIC"] != "T" || props["PGROUP"] != "pg" || props["UNIQ_KEY"] != "U" {
		t.Errorf("properties %v", props)
	}
	if _, ok := props["REAL_QID"]; ok {
		t.Error("REAL_QID kept")
	}
	if _, ok := props["TRAN_PREPARED_QUEUE_OFFSET"]; ok {
		t.Error("TRAN_PREPARED_QUEUE_OFFSET kept")
	}
	if _, err := escapedHalf(&commitlog.Message{Properties: "PGROUP\x01pg\x02"}); err == nil {
		t.Error("a half without REAL_TOPIC escaped")
	}
}

package broker

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// startAcceptSendRequestTimeStamp holds producers off until its time:
// sends and recalls are refused, the runtime info shows it, and setting it
// back to 0 while the broker runs lets them in.
func TestSendsRefusedUntilStartAcceptSendRequestTimeStamp(t *testing.T) {
	from := time.Now().Add(time.Hour).UnixMilli()
	b := startTestBroker(t, map[string]string{"startAcceptSendRequestTimeStamp": strconv.FormatInt(from, 10), "recallMessageEnable": "true"})
	c := b.client(nil)
	until := time.UnixMilli(from).Format("2006-01-02 15:04:05,000")
	if r := sendV2(t, c, "Held", 0, "early", ""); r.Code != remoting.SystemError || r.Remark != "broker unable to service, until "+until {
		t.Fatalf("send before the time: %d %q", r.Code, r.Remark)
	}
	handle := recallHandle{"Held", b.cfg.BrokerName, strconv.FormatInt(from+1000, 10), "K"}.encode()
	if r := call(t, c, remoting.RecallMessage, recallReq("Held", handle), nil); r.Code != remoting.ServiceNotAvailable {
		t.Fatalf("recall before the time: %d %q", r.Code, r.Remark)
	}
	r := call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil)
	var info struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(r.Body, &info); err != nil || info.Table["startAcceptSendRequestTimeStamp"] != strconv.FormatInt(from, 10) {
		t.Fatalf("runtime info %s: %v", r.Body, err)
	}
	if r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("startAcceptSendRequestTimeStamp=0")); r.Code != remoting.Success {
		t.Fatalf("UPDATE_BROKER_CONFIG: %d %s", r.Code, r.Remark)
	}
	if r := sendV2(t, c, "Held", 0, "now", ""); r.Code != remoting.Success || strings.Contains(r.Remark, "unable") {
		t.Fatalf("send after the update: %d %q", r.Code, r.Remark)
	}
}

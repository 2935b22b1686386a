package broker

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// coldInfo asks GET_COLD_DATA_FLOW_CTR_INFO and decodes its JSON.
func coldInfo(t *testing.T, c *remoting.Client) coldInfoJSON {
	t.Helper()
	r := call(t, c, remoting.GetColdDataFlowCtrInfo, nil, nil)
	if r.Code != remoting.Success {
		t.Fatalf("get cold-data flow control info: %d %s", r.Code, r.Remark)
	}
	var info coldInfoJSON
	if err := json.Unmarshal(r.Body, &info); err != nil {
		t.Fatalf("info body %q: %v", r.Body, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"runtimeTable", "configTable", "cgColdReadThreshold", "globalColdReadThreshold", "globalAcc"} {
		if _, ok := raw[k]; !ok {
			t.Fatalf("info body %s lacks %s", r.Body, k)
		}
	}
	return info
}

// mqadmin's three cold-data flow control requests through a connection:
// thresholds set from a properties body, shown by the info request's
// JSON, one removed by its group's name; a body with a threshold that is
// not a number is refused and changes nothing.
func TestColdCtrAdminRequests(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	info := coldInfo(t, c)
	if len(info.ConfigTable) != 0 || len(info.RuntimeTable) != 0 || info.CgColdReadThreshold != 3<<20 ||
		info.GlobalColdReadThreshold != 100<<20 || info.GlobalAcc != 0 {
		t.Fatalf("fresh broker: %+v", info)
	}
	if r := call(t, c, remoting.UpdateColdDataFlowCtrConfig, nil, []byte("g1=100\ng2=200\n")); r.Code != remoting.Success {
		t.Fatalf("update: %d %s", r.Code, r.Remark)
	}
	if got := coldInfo(t, c).ConfigTable; !reflect.DeepEqual(got, map[string]int64{"g1": 100, "g2": 200}) {
		t.Fatalf("config table %v", got)
	}
	r := call(t, c, remoting.UpdateColdDataFlowCtrConfig, nil, []byte("g1=5\ng3=lots\n"))
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "g3") {
		t.Fatalf("a threshold that is not a number: %d %q", r.Code, r.Remark)
	}
	if r := call(t, c, remoting.RemoveColdDataFlowCtrConfig, nil, []byte("g1")); r.Code != remoting.Success {
		t.Fatalf("remove: %d %s", r.Code, r.Remark)
	}
	if r := call(t, c, remoting.RemoveColdDataFlowCtrConfig, nil, nil); r.Code != remoting.Success {
		t.Fatalf("remove without a body: %d %s", r.Code, r.Remark)
	}
	if got := coldInfo(t, c).ConfigTable; !reflect.DeepEqual(got, map[string]int64{"g2": 200}) {
		t.Fatalf("config table after the refused update and the removal %v", got)
	}
	updateConfig(t, c, "cgColdReadThreshold=4096\nglobalColdReadThreshold=8192")
	if info := coldInfo(t, c); info.CgColdReadThreshold != 4096 || info.GlobalColdReadThreshold != 8192 {
		t.Fatalf("thresholds after updateBrokerConfig: %+v", info)
	}
}

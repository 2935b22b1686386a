package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// coldConfigTable reads the thresholds set per group on a broker.
func coldConfigTable(t *testing.T, c *remoting.Client) map[string]int64 {
	t.Helper()
	var info struct {
		ConfigTable map[string]int64 `json:"configTable"`
	}
	if err := json.Unmarshal(request(t, c, remoting.GetColdDataFlowCtrInfo, nil, nil).Body, &info); err != nil {
		t.Fatal(err)
	}
	return info.ConfigTable
}

// The three cold-data flow control commands as mqadmin's: a threshold set
// through -b and through -c lands in the broker's config table, the info
// command prints it pretty under the broker's title line, and remove
// drops it; a threshold the broker refuses fails the command and changes
// nothing, and an unknown cluster is an error naming it.
func TestColdDataFlowCtrCommands(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	c := client(t, b.Addr())
	out, err := run(t, "updateColdDataFlowCtrGroupConfig", "-b", b.Addr(), "-g", " GA ", "-v", "1024")
	if err != nil || out != "updateColdDataFlowCtrGroupConfig success, "+b.Addr()+"\n" {
		t.Fatalf("update -b: %q %v", out, err)
	}
	waitClusterMember(t, ns, b.Addr())
	if out, err := run(t, "updateColdDataFlowCtrGroupConfig", "-n", ns, "-c", "DefaultCluster", "-g", "GB", "-v", "2048"); err != nil || !strings.Contains(out, "success, "+b.Addr()) {
		t.Fatalf("update -c: %q %v", out, err)
	}
	if got := coldConfigTable(t, c); len(got) != 2 || got["GA"] != 1024 || got["GB"] != 2048 {
		t.Fatalf("config table after the updates: %v", got)
	}

	out, err = run(t, "getColdDataFlowCtrInfo", "-b", b.Addr())
	if err != nil || !strings.HasPrefix(out, " ============"+b.Addr()+"============\n{\n") || !strings.Contains(out, "\t\"configTable\": {\n\t\t\"GA\": 1024,\n\t\t\"GB\": 2048\n\t}") ||
		!strings.Contains(out, `"cgColdReadThreshold": 3145728`) {
		t.Fatalf("getColdDataFlowCtrInfo -b:\n%s (%v)", out, err)
	}
	out, err = run(t, "getColdDataFlowCtrInfo", "-n", ns, "-c", "DefaultCluster")
	if err != nil || !strings.HasPrefix(out, " ============Master: "+b.Addr()+"============\n{") {
		t.Fatalf("getColdDataFlowCtrInfo -c:\n%s (%v)", out, err)
	}

	if out, err := run(t, "updateColdDataFlowCtrGroupConfig", "-b", b.Addr(), "-g", "GA", "-v", "lots"); err == nil || !strings.Contains(out, "lots") {
		t.Errorf("a threshold that is not a number: %q %v", out, err)
	}
	if out, err := run(t, "removeColdDataFlowCtrGroupConfig", "-b", b.Addr(), "-g", "GA"); err != nil || out != "remove broker cold read threshold success, "+b.Addr()+"\n" {
		t.Fatalf("remove -b: %q %v", out, err)
	}
	if got := coldConfigTable(t, c); len(got) != 1 || got["GB"] != 2048 {
		t.Fatalf("config table after removing GA: %v", got)
	}
	if _, err := run(t, "removeColdDataFlowCtrGroupConfig", "-n", ns, "-c", "NoSuchCluster", "-g", "GB"); err == nil || !strings.Contains(err.Error(), "NoSuchCluster") {
		t.Errorf("remove from an unknown cluster: %v", err)
	}
	if _, err := run(t, "removeColdDataFlowCtrGroupConfig", "-b", b.Addr(), "-g", " "); err == nil {
		t.Error("remove of a blank group succeeded")
	}
	if _, err := run(t, "getColdDataFlowCtrInfo", "-b", deadAddr(t)); err == nil {
		t.Error("getColdDataFlowCtrInfo of a broker that is not there succeeded")
	}
}

// mqadmin prints the runtimeTable's times as local dates in the fields
// lastColdReadTimeFormat and createTimeFormat instead of the ms; a time
// that is not a number is an error naming the group.
func TestWriteColdCtrInfoFormatsTimes(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 5, 0, time.UTC)
	body := `{"runtimeTable":{"GA":{"coldAcc":77,"lastColdReadTimeMills":` + strconv.FormatInt(at.UnixMilli(), 10) + `,"createTimeMills":` + strconv.FormatInt(at.Add(-time.Hour).UnixMilli(), 10) +
		`}},"configTable":{},"cgColdReadThreshold":1,"globalColdReadThreshold":2,"globalAcc":3}`
	var out bytes.Buffer
	if err := writeColdCtrInfo(&out, []byte(body), time.UTC); err != nil {
		t.Fatal(err)
	}
	want := "{\n\t\"cgColdReadThreshold\": 1,\n\t\"configTable\": {},\n\t\"globalAcc\": 3,\n\t\"globalColdReadThreshold\": 2,\n\t\"runtimeTable\": {\n\t\t\"GA\": {\n" +
		"\t\t\t\"coldAcc\": 77,\n\t\t\t\"createTimeFormat\": \"2026-11-30 11:00:05\",\n\t\t\t\"lastColdReadTimeFormat\": \"2026-11-30 12:00:05\"\n\t\t}\n\t}\n}\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
	if err := writeColdCtrInfo(&out, []byte(`{"runtimeTable":{"GA":{"lastColdReadTimeMills":"x","createTimeMills":1}}}`), time.UTC); err == nil || !strings.Contains(err.Error(), "GA") {
		t.Errorf("a time that is not a number: %v", err)
	}
	if err := writeColdCtrInfo(&out, []byte(`not json`), time.UTC); err == nil {
		t.Error("a body that is not JSON was printed")
	}
}

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/remoting"
)

// setConsumeMode stores the group's mode on the -b broker, or every master
// of a -c cluster, as GET_ALL_MESSAGE_REQUEST_MODE then answers it; the
// broker refuses a retry topic and a topic or group it does not have.
func TestSetConsumeMode(t *testing.T) {
	ns, b := startClusterWith(t, map[string]string{"autoCreateSubscriptionGroup": "false"})
	c := client(t, b.Addr())
	modes := func() map[string]map[string]rmqconfig.RequestMode {
		t.Helper()
		var all struct {
			MessageRequestModeMap map[string]map[string]rmqconfig.RequestMode `json:"messageRequestModeMap"`
		}
		resp := request(t, c, remoting.GetAllMessageRequestMode, nil, nil)
		if err := json.Unmarshal(resp.Body, &all); err != nil {
			t.Fatal(err)
		}
		return all.MessageRequestModeMap
	}
	for _, args := range [][]string{{"updateTopic", "-t", "MT", "-r", "2", "-w", "2"}, {"updateSubGroup", "-g", "MG"}} {
		if out, err := run(t, append(args, "-b", b.Addr())...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}

	out, err := run(t, "setConsumeMode", "-b", b.Addr(), "-t", "MT", "-g", "MG", "-m", "POP", "-q", "2")
	want := "set consume mode to " + b.Addr() + " success.\ntopic[MT] group[MG] consume mode[POP] popShareQueueNum[2]\n"
	if err != nil || out != want {
		t.Fatalf("setConsumeMode -b: %v\n%q\nwant %q", err, out, want)
	}
	if got := modes()["MT"]["MG"]; got != (rmqconfig.RequestMode{Topic: "MT", ConsumerGroup: "MG", Mode: "POP", PopShareQueueNum: 2}) {
		t.Fatalf("mode of MG on MT after setConsumeMode POP: %+v", got)
	}
	out, err = run(t, "setConsumeMode", "-n", ns, "-c", "DefaultCluster", "-t", "MT", "-g", "MG", "-m", "PULL")
	if err != nil || !strings.Contains(out, "set consume mode to "+b.Addr()+" success.") {
		t.Fatalf("setConsumeMode -c: %v\n%s", err, out)
	}
	if got := modes()["MT"]["MG"]; got.Mode != "PULL" || got.PopShareQueueNum != 0 {
		t.Fatalf("mode of MG on MT after setConsumeMode -c PULL: %+v", got)
	}

	// What the broker refuses, with RocketMQ's codes and remarks; none of
	// it is stored.
	for _, tc := range []struct {
		topic, group, want string
	}{
		{meta.RetryTopic("MG"), "MG", "code 16: retry topic is not allowed to set mode"},
		{"NoSuchTopic", "MG", "code 17: topic[NoSuchTopic] not exist"},
		{"MT", "NoSuchGroup", "code 26: subscription group does not exist"},
	} {
		_, err := run(t, "setConsumeMode", "-b", b.Addr(), "-t", tc.topic, "-g", tc.group, "-m", "POP")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("setConsumeMode -t %s -g %s: %v, want %q", tc.topic, tc.group, err, tc.want)
		}
	}
	if all := modes(); len(all) != 1 || len(all["MT"]) != 1 {
		t.Errorf("refused requests stored modes: %v", all)
	}
	// What mqadmin refuses before sending anything.
	for _, args := range [][]string{
		{"-t", "MT", "-g", "MG", "-m", "pop"},
		{"-t", "MT", "-g", "MG", "-m", "POP", "-q", "two"},
		{"-t", "MT", "-m", "POP"},
	} {
		if _, err := run(t, append([]string{"setConsumeMode", "-b", b.Addr()}, args...)...); err == nil {
			t.Errorf("setConsumeMode %v: no error", args)
		}
	}
	if _, err := run(t, "setConsumeMode", "-n", ns, "-c", "NoSuchCluster", "-t", "MT", "-g", "MG", "-m", "POP"); err == nil || !strings.Contains(err.Error(), "NoSuchCluster") {
		t.Errorf("setConsumeMode -c of an unknown cluster: %v", err)
	}
	if got := modes()["MT"]["MG"]; got.Mode != "PULL" {
		t.Errorf("a refused setConsumeMode changed the mode: %+v", got)
	}
}

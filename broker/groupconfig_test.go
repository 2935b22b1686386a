package broker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// AdminBrokerProcessor.updateAndCreateSubscriptionGroup (RocketMQ 5.3.4):
// TopicValidator.validateGroup refuses the name with INVALID_PARAMETER; it
// used to be stored.
func TestCreatingAGroupOfAnInvalidNameIsRefused(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for _, name := range []string{"bad/name", strings.Repeat("a", 121)} {
		r := call(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+name+`"}`))
		if r.Code != remoting.InvalidParameter {
			t.Errorf("create %.20q...: code %d %q, RocketMQ answers INVALID_PARAMETER (29)", name, r.Code, r.Remark)
		}
	}
}

// updateAndCreateSubscriptionGroupList validates each name the same way.
func TestAGroupListWithAnInvalidNameIsRefused(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	body := `{"groupConfigList":[{"groupName":"okGroup"},{"groupName":"bad/name"}]}`
	r := call(t, c, remoting.UpdateAndCreateSubscriptionGroupList, nil, []byte(body))
	if r.Code != remoting.InvalidParameter {
		t.Errorf("create list with bad/name: code %d %q, RocketMQ answers INVALID_PARAMETER (29)", r.Code, r.Remark)
	}
}

// The name of a light message queue's group is held to the same rules:
// RocketMQ validates it before its LMQ manager drops the update.
func TestALightQueueGroupOfAnInvalidNameIsRefused(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enableLmq": "true"})
	c := b.client(nil)
	name := "%LMQ%" + strings.Repeat("g", 116)
	r := call(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+name+`"}`))
	want := "The specified group: " + name + ", is longer than group max length: 120"
	if r.Code != remoting.InvalidParameter || r.Remark != want {
		t.Errorf("create %s: code %d %q, RocketMQ answers INVALID_PARAMETER (29) %q", name, r.Code, r.Remark, want)
	}
	r = call(t, c, remoting.UpdateAndCreateSubscriptionGroupList, nil, []byte(`{"groupConfigList":[{"groupName":"`+name+`"}]}`))
	if r.Code != remoting.InvalidParameter || r.Remark != want {
		t.Errorf("create list with %s: code %d %q, RocketMQ answers INVALID_PARAMETER (29) %q", name, r.Code, r.Remark, want)
	}
	ok := "%LMQ%" + strings.Repeat("g", 115)
	if r := call(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+ok+`"}`)); r.Code != remoting.Success {
		t.Errorf("create %s (120 long): code %d %q", ok, r.Code, r.Remark)
	}
}

// A missing group is answered with RocketMQ's remark, "No group in this
// broker" (RocketMQ creates it first under autoCreateSubscriptionGroup;
// rocketkv does not create a group one only looks at).
func TestGettingAMissingGroupAnswersRocketMQsRemark(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	r := call(t, c, remoting.GetSubscriptionGroupConfig, map[string]string{"group": "neverSeen"}, nil)
	if r.Code != remoting.SubscriptionGroupNotExist || r.Remark != "No group in this broker" {
		t.Errorf("GET of a missing group: code %d %q, want 26 \"No group in this broker\"", r.Code, r.Remark)
	}
}

// TopicValidator.GROUP_MAX_LENGTH is 120: findSubscriptionGroupConfig does
// not auto-create a longer name, so a pull gets SUBSCRIPTION_GROUP_NOT_EXIST.
func TestAGroupNameOver120IsNotAutoCreated(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "GrpLen", 0, "x", "")
	b.caughtUp()
	group := strings.Repeat("g", 121)
	r := call(t, c, remoting.PullMessage, pullReq(group, "GrpLen", 0, 0, 0, 0, "*"), nil)
	if r.Code != remoting.SubscriptionGroupNotExist {
		t.Errorf("pull by a 121-char group: code %d %q, RocketMQ answers SUBSCRIPTION_GROUP_NOT_EXIST", r.Code, r.Remark)
	}
	if gc, _ := b.groupConfig(group, false); gc.GroupName != "" {
		t.Errorf("a 121-char group was auto-created")
	}
}

// SubscriptionGroupManager.init puts eight system groups in every broker's
// table (TOOLS_CONSUMER, FILTERSRV_CONSUMER, SELF_TEST_C_GROUP,
// CID_ONS-HTTP-PROXY, CID_ONSAPI_PULL, CID_ONSAPI_PERMISSION,
// CID_ONSAPI_OWNER, CID_RMQ_SYS_TRANS): they exist even with
// autoCreateSubscriptionGroup off.
func TestTheSystemGroupsExistFromTheStart(t *testing.T) {
	b := startTestBroker(t, map[string]string{"autoCreateSubscriptionGroup": "false"})
	c := b.client(nil)
	r := call(t, c, remoting.GetSubscriptionGroupConfig, map[string]string{"group": "TOOLS_CONSUMER"}, nil)
	if r.Code != remoting.Success {
		t.Errorf("GET TOOLS_CONSUMER: code %d %q, RocketMQ has it from SubscriptionGroupManager.init", r.Code, r.Remark)
	}
	all := call(t, c, remoting.GetAllSubscriptionGroupConfig, nil, nil)
	var w struct {
		SubscriptionGroupTable map[string]json.RawMessage `json:"subscriptionGroupTable"`
	}
	_ = json.Unmarshal(all.Body, &w)
	for _, g := range []string{"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
		"CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_RMQ_SYS_TRANS"} {
		if _, ok := w.SubscriptionGroupTable[g]; !ok {
			t.Errorf("GET_ALL lacks system group %s", g)
		}
	}
	// mqadmin's tools pull as TOOLS_CONSUMER.
	mustSend(t, c, "GrpSys", 0, "x", "")
	b.caughtUp()
	p := call(t, c, remoting.PullMessage, pullReq("TOOLS_CONSUMER", "GrpSys", 0, 0, 0, 0, "*"), nil)
	if p.Code != remoting.Success {
		t.Errorf("pull as TOOLS_CONSUMER with auto-creation off: code %d %q", p.Code, p.Remark)
	}
}

// PullMessageProcessor: consumeEnable false answers NO_PERMISSION with
// forbiddenType GROUP_FORBIDDEN (2) in the response header.
func TestAPullOfADisabledGroupTellsGroupForbidden(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "GrpOff", 0, "x", "")
	b.caughtUp()
	if r := call(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"gOff","consumeEnable":false}`)); r.Code != remoting.Success {
		t.Fatalf("create: %d %s", r.Code, r.Remark)
	}
	r := call(t, c, remoting.PullMessage, pullReq("gOff", "GrpOff", 0, 0, 0, 0, "*"), nil)
	if r.Code != remoting.NoPermission || !strings.HasPrefix(r.Remark, "subscription group no permission") {
		t.Fatalf("pull: %d %q", r.Code, r.Remark)
	}
	if got := r.ExtFields["forbiddenType"]; got != "2" {
		t.Errorf("forbiddenType %q, RocketMQ sets GROUP_FORBIDDEN (2)", got)
	}
}

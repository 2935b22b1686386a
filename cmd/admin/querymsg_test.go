package main

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// queryAnswer is a fake broker's QUERY_MESSAGE answer holding msgs.
func queryAnswer(t *testing.T, msgs ...commitlog.Message) func(*remoting.Command) *remoting.Command {
	t.Helper()
	var body []byte
	for i := range msgs {
		m := &msgs[i]
		m.Magic, m.StoreHost, m.BornHost = commitlog.MagicV2, netip.MustParseAddrPort("10.0.0.1:10911"), netip.MustParseAddrPort("10.0.0.2:5000")
		m.PhyOffset = int64(i) * 1000
		var err error
		if body, err = commitlog.AppendRecord(body, m); err != nil {
			t.Fatal(err)
		}
	}
	return withBody(string(body))
}

// keyedMsg is a message of topic with the properties KEYS and UNIQ_KEY.
func keyedMsg(topic, keys, uniq string) commitlog.Message {
	return commitlog.Message{Topic: topic, Body: []byte("x"), Properties: "KEYS\x01" + keys + "\x02UNIQ_KEY\x01" + uniq + "\x02"}
}

// The message queries ask a group without a master through its slave,
// skip a broker that fails (saying so), fail only when every one does,
// and leave out what the index answered that does not match: another
// topic's message, or one whose keys or id only share the hash, as
// RocketMQ's MQAdminImpl.queryMessage.
func TestQueryMessagesAsMQAdminImpl(t *testing.T) {
	a, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.QueryMessage: queryAnswer(t, keyedMsg("QT", "k1 x", "UNIQ-A"), keyedMsg("QT", "k10", "UNIQ-COLLIDING"), keyedMsg("Other", "k1", "UNIQ-OTHER")),
	})
	slave, slaveLog := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.QueryMessage: queryAnswer(t, keyedMsg("QT", "k1", "UNIQ-B")),
	})
	dead := deadAddr(t)
	route := `{"brokerDatas":[` +
		`{"brokerAddrs":{"0":"` + a + `"},"brokerName":"a","cluster":"C"},` +
		`{"brokerAddrs":{"1":"` + slave + `","2":"` + dead + `"},"brokerName":"b","cluster":"C"},` +
		`{"brokerAddrs":{"0":"` + dead + `"},"brokerName":"c","cluster":"C"}],` +
		`"queueDatas":[{"brokerName":"a","perm":6,"readQueueNums":1,"writeQueueNums":1}]}`
	ns := fakeNamesrv(t, route)

	var errOut strings.Builder
	root := newRoot(&strings.Builder{})
	root.SetErr(&errOut)
	var out strings.Builder
	root.SetOut(&out)
	root.SetArgs([]string{"queryMsgByKey", "-n", ns, "-t", "QT", "-k", "k1", "--timeout", "2s"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "UNIQ-A") || !strings.Contains(out.String(), "UNIQ-B") ||
		strings.Contains(out.String(), "UNIQ-COLLIDING") || strings.Contains(out.String(), "UNIQ-OTHER") {
		t.Errorf("queryMsgByKey -k k1:\n%s", out.String())
	}
	if !strings.Contains(errOut.String(), "query of "+dead+" skipped") {
		t.Errorf("the failing broker was not reported: %q", errOut.String())
	}
	if slaveLog.count(remoting.QueryMessage) != 1 {
		t.Errorf("the masterless group's slave was asked %d times", slaveLog.count(remoting.QueryMessage))
	}

	out0ID := out0(t, "queryMsgByUniqueKey", "-n", ns, "-t", "QT", "-i", "UNIQ-A", "-a", "--timeout", "2s")
	if strings.Count(out0ID, "OffsetID:") != 1 || !strings.Contains(out0ID, "UNIQ_KEY=UNIQ-A") {
		t.Errorf("queryMsgByUniqueKey -i UNIQ-A -a: only the message with the id:\n%s", out0ID)
	}

	deadOnly := fakeNamesrv(t, `{"brokerDatas":[{"brokerAddrs":{"0":"`+dead+`"},"brokerName":"c","cluster":"C"}],"queueDatas":[]}`)
	if _, err := run(t, "queryMsgByKey", "-n", deadOnly, "-t", "QT", "-k", "k1", "--timeout", "2s"); err == nil || !strings.Contains(err.Error(), "every broker failed") {
		t.Errorf("every broker failing: %v", err)
	}
}

package broker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// fuzzCodes are the request codes whose processors decode client bytes.
var fuzzCodes = []int32{
	remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage, remoting.PullMessage,
	remoting.HeartBeat, remoting.LockBatchMQ, remoting.UnlockBatchMQ, remoting.ConsumerSendMsgBack,
	remoting.QueryMessage, remoting.ViewMessageByID, remoting.UpdateAndCreateTopic,
	remoting.UpdateAndCreateTopicList, remoting.UpdateAndCreateSubscriptionGroup, remoting.QueryConsumerOffset,
	remoting.UpdateConsumerOffset, remoting.SearchOffsetByTimestamp, remoting.GetConsumerListByGroup,
	remoting.InvokeBrokerToResetOffset,
	remoting.GetTopicStatsInfo, remoting.GetConsumeStats, remoting.GetConsumerConnectionList,
	remoting.GetProducerConnectionList, remoting.QueryTopicConsumeByWho, remoting.EndTransaction,
	remoting.QueryTopicsByConsumer, remoting.GetConsumerRunningInfo, remoting.SendReplyMessage,
	remoting.ConsumeMessageDirectly, remoting.ResumeCheckHalfMessage, remoting.UpdateAndCreateSubscriptionGroupList,
	remoting.QuerySubscriptionByConsumer, remoting.QueryConsumeTimeSpan, remoting.InvokeBrokerToGetConsumerStatus,
	remoting.UpdateBrokerConfig, remoting.QueryConsumeQueue, remoting.CheckClientConfig,
	remoting.RecallMessage, remoting.CheckRocksdbCqWriteProgress, remoting.ViewBrokerStatsData,
	remoting.UpdateAndCreateACLConfig, remoting.DeleteACLConfig, remoting.UpdateGlobalWhiteAddrsConfig,
	remoting.GetBrokerClusterACLInfo, remoting.GetAllConsumerOffset, remoting.GetAllDelayOffset, remoting.GetBrokerHAStatus, remoting.GetTimerWatermark, remoting.GetTimerCheckPoint, remoting.GetTimerMetrics,
	remoting.AuthCreateUser, remoting.AuthUpdateUser, remoting.AuthDeleteUser, remoting.AuthGetUser, remoting.AuthListUser,
	remoting.AuthCreateACL, remoting.AuthUpdateACL, remoting.AuthDeleteACL, remoting.AuthGetACL, remoting.AuthListACL,
	remoting.UpdateAndGetGroupForbidden, remoting.CloneGroupOffset, remoting.GetAllProducerInfo,
	remoting.ExportRocksDBConfigToJSON, remoting.QueryAssignment, remoting.SetMessageRequestMode, remoting.DeleteTopicInBroker,
	remoting.ResetMasterFlushOffset,
}

// fuzzACLFile admits every address (so every processor is reached) and
// gives the ACL edits an account to change.
// fuzzChannelExpiry is the channelExpiredTimeout of the fuzzed brokers: a
// day, longer than any fuzzing run.
const fuzzChannelExpiry = "86400000"

const fuzzACLFile = "globalWhiteRemoteAddresses: ['*']\naccounts:\n  - {accessKey: fuzzuser1, secretKey: fuzzsecret1}\n"

// FuzzRequests sends arbitrary header fields and bodies to every processor
// that decodes client bytes: each request is answered (no panic, no hang)
// and the broker keeps serving. Ext fields come from "k=v;k=v" text.
func FuzzRequests(f *testing.F) {
	f.Add(uint8(1), "a=pg;b=T;e=0;f=0;g=1;h=0", []byte("body"))
	f.Add(uint8(2), "a=pg;b=T;e=0;f=0;g=1;h=0;m=true", []byte{0, 0, 0, 30, 0, 0, 0, 0})
	f.Add(uint8(3), "consumerGroup=g;topic=T;queueId=0;queueOffset=0;maxMsgNums=32;sysFlag=6;subscription=a||b", []byte(nil))
	f.Add(uint8(4), "", []byte(`{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"T","subString":"*","codeSet":[1,"2"]}]}]}`))
	f.Add(uint8(5), "", []byte(`{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"T","queueId":-1}]}`))
	f.Add(uint8(7), "offset=-5;group=g;delayLevel=99", []byte(nil))
	f.Add(uint8(11), "", []byte(`{"topicConfigList":[{"topicName":"x","readQueueNums":-1}]}`))
	f.Add(uint8(17), "group=g;topic=T;timestamp=-1;queueId=0;offset=5", []byte(nil))
	f.Add(uint8(19), "consumerGroup=g;topicList=[a, ,b];topic=", []byte(nil))
	f.Add(uint8(1), "a=pg;b=T;e=0;f=4;g=1;h=0;i=TRAN_MSG\x01true\x02PGROUP\x01pg\x02", []byte("half"))
	f.Add(uint8(1), "a=pg;b=T;e=0;f=0;g=1;h=0;i=TIMER_DELAY_SEC\x015\x02TIMER_DELIVER_MS\x01-1\x02", []byte("timer"))
	f.Add(uint8(23), "producerGroup=pg;tranStateTableOffset=0;commitLogOffset=3;commitOrRollback=8", []byte(nil))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.UpdateBrokerConfig)), "", []byte("brokerPermission=0\nfileReservedTime=0\n"))
	f.Add(uint8(3), "consumerGroup=g;topic=T;queueId=0;queueOffset=0;maxMsgNums=32;sysFlag=6;expressionType=SQL92;subscription=a > 1 AND b IN ('x')", []byte(nil))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.CheckClientConfig)), "",
		[]byte(`{"clientId":"c","group":"g","subscriptionData":{"topic":"T","subString":"a BETWEEN 1 AND 2","expressionType":"SQL92"}}`))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.UpdateAndGetGroupForbidden)), "group=g;topic=T;readable=false", []byte(nil))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.CloneGroupOffset)), "srcGroup=a;destGroup=b;topic=;offline=true", []byte(nil))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.ExportRocksDBConfigToJSON)), "configType=topics;;CONSUMEROFFSETS; x", []byte(nil))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.RecallMessage)), "producerGroup=pg;topic=T;recallHandle=djEgVCBiIDEgeD8-", []byte(nil))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.UpdateAndCreateACLConfig)), "accessKey=fuzzuser1;secretKey=fuzzsecret2;topicPerms=A=PUB,B=SUB|PUB;whiteRemoteAddress=10.*.*.*", []byte(nil))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.UpdateGlobalWhiteAddrsConfig)), "globalWhiteAddrs=1.2.3.{4,5},::1", []byte(nil))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.AuthCreateUser)), "username=u1", []byte(`{"password":"p","userType":"Normal"}`))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.AuthCreateACL)), "subject=User:u1",
		[]byte(`{"subject":"User:u1","policies":[{"policyType":"Custom","entries":[{"resource":"Topic:t*","actions":["Pub"],"sourceIps":["10.0.0.0/8"],"decision":"Allow"}]}]}`))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.AuthDeleteACL)), "subject=User:u1;resource=Topic:t*;policyType=Default", []byte(nil))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.AuthListACL)), "subjectFilter=u;resourceFilter=Topic", []byte(nil))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.QueryAssignment)), "",
		[]byte(`{"topic":"T","consumerGroup":"g","clientId":"","strategyName":"AVG_BY_CIRCLE","messageModel":"CLUSTERING"}`))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.SetMessageRequestMode)), "", []byte(`{"topic":"T","consumerGroup":"g","mode":"POP","popShareQueueNum":-7}`))
	f.Add(uint8(slices.Index(fuzzCodes, remoting.DeleteTopicInBroker)), "topic=TBW102", []byte(nil))
	aclFile := filepath.Join(f.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(aclFile, []byte(fuzzACLFile), 0o644); err != nil {
		f.Fatal(err)
	}
	// Every input goes over one connection: a heartbeat input registers a
	// client on it, and a client without a heartbeat for
	// channelExpiredTimeout has its connection closed, as RocketMQ's; the
	// inputs after would fail with "connection reset" for no fault of
	// theirs (seen after about 220 s of fuzzing).
	b := startTestBroker(f, map[string]string{"enablePropertyFilter": "true", "recallMessageEnable": "true", "rocksdbCQDoubleWriteEnable": "true",
		"aclEnable": "true", "plainAclFile": aclFile, "channelExpiredTimeout": fuzzChannelExpiry})
	// An UPDATE_BROKER_CONFIG input would otherwise leave its settings to
	// every later input (a permission of 0 refuses nearly everything).
	start := b.live.cur.Load()
	c, err := remoting.Dial(context.Background(), b.Addr(), remoting.ClientOptions{})
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	f.Fuzz(func(t *testing.T, which uint8, ext string, body []byte) {
		code := fuzzCodes[int(which)%len(fuzzCodes)]
		h := map[string]string{}
		for _, kv := range strings.Split(ext, ";") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				h[k] = v
			}
		}
		if h["suspendTimeoutMillis"] == "" {
			h["suspendTimeoutMillis"] = "1" // never hold a fuzzed pull for long
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, remoting.NewRequest(code, h, body))
		if err != nil {
			t.Fatalf("code %d ext %v: %v", code, h, err)
		}
		// The server answers a handler's panic; the answer tells.
		if resp.Code == remoting.SystemError && strings.HasPrefix(resp.Remark, remoting.PanicRemark) {
			t.Fatalf("code %d ext %v: the handler panicked: %s", code, h, resp.Remark)
		}
		switch code {
		case remoting.UpdateBrokerConfig:
			b.live.cur.Store(start)
			b.clog.SetRetention(retentionOf(&start.cfg))
		case remoting.UpdateAndCreateACLConfig, remoting.DeleteACLConfig, remoting.UpdateGlobalWhiteAddrsConfig:
			// An edit could shut every later input out.
			if err := os.WriteFile(aclFile, []byte(fuzzACLFile), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := b.acl.Reload(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

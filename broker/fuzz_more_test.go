package broker

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// moreFuzzCodes are the request codes whose processors decode client
// header fields or bodies and that FuzzRequests (fuzzCodes) does not send:
// the POP family, the offset and config queries and the maintenance
// commands. POP_ROLLBACK reads nothing from the request and is left out.
var moreFuzzCodes = []int32{
	remoting.PopMessage, remoting.AckMessage, remoting.BatchAckMessage, remoting.ChangeMessageInvisibleTime,
	remoting.PeekMessage, remoting.Notification, remoting.PollingInfo, remoting.GetPopState,
	remoting.LitePullMessage, remoting.SendReplyMessageV2, remoting.GetMaxOffset, remoting.GetMinOffset,
	remoting.GetEarliestMsgStoretime, remoting.UnregisterClient, remoting.GetTopicConfig,
	remoting.GetSystemTopicListFromBroker, remoting.GetAllTopicConfig, remoting.GetAllSubscriptionGroupConfig,
	remoting.GetSubscriptionGroupConfig, remoting.DeleteSubscriptionGroup, remoting.GetBrokerRuntimeInfo,
	remoting.GetBrokerConsumeStats, remoting.GetBrokerConfig, remoting.SetCommitLogReadMode,
	remoting.CleanExpiredConsumeQueue, remoting.CleanUnusedTopic, remoting.CheckpointIndex,
	remoting.GetAllMessageRequestMode, remoting.QueryCorrectionOffset,
	remoting.UpdateColdDataFlowCtrConfig, remoting.RemoveColdDataFlowCtrConfig, remoting.GetColdDataFlowCtrInfo,
}

// moreCode is the index of code in moreFuzzCodes, for seeds.
func moreCode(code int32) uint8 { return uint8(slices.Index(moreFuzzCodes, code)) }

// FuzzMoreRequests is FuzzRequests for the codes it does not send: every
// request is answered (no panic, no hang) and the broker keeps serving.
// Ext fields come from "k=v;k=v" text; poll times are capped so that a
// held request never outlives the invocation's deadline.
func FuzzMoreRequests(f *testing.F) {
	f.Add(moreCode(remoting.PopMessage), "consumerGroup=g;topic=T;queueId=-1;maxMsgNums=32;invisibleTime=60000;pollTime=1;bornTime=0;initMode=0", []byte(nil))
	f.Add(moreCode(remoting.PopMessage), "consumerGroup=g;topic=T;queueId=0;maxMsgNums=1;invisibleTime=1;pollTime=0;expType=SQL92;exp=a > 1;order=true;attemptId=x", []byte(nil))
	f.Add(moreCode(remoting.AckMessage), "consumerGroup=g;topic=T;queueId=0;extraInfo=5 1700000000000 60000 0 0 broker-a 3 7;offset=7", []byte(nil))
	f.Add(moreCode(remoting.BatchAckMessage), "", []byte(`{"acks":[{"b":"AwI=","c":"g","it":60000,"pt":1,"q":3,"r":"1","rq":0,"so":5,"t":"T"}]}`))
	f.Add(moreCode(remoting.ChangeMessageInvisibleTime), "consumerGroup=g;topic=T;queueId=0;extraInfo=5 1 2 999 1 b 0;offset=1;invisibleTime=-5", []byte(nil))
	f.Add(moreCode(remoting.PeekMessage), "consumerGroup=g;topic=T;queueId=0;maxMsgNums=2147483647", []byte(nil))
	f.Add(moreCode(remoting.Notification), "consumerGroup=g;topic=T;queueId=-1;pollTime=1;bornTime=0;order=false", []byte(nil))
	f.Add(moreCode(remoting.PollingInfo), "consumerGroup=g;topic=T;queueId=0", []byte(nil))
	f.Add(moreCode(remoting.GetPopState), "session=nope", []byte(nil))
	f.Add(moreCode(remoting.LitePullMessage), "consumerGroup=g;topic=T;queueId=0;queueOffset=0;maxMsgNums=32;sysFlag=6;subscription=*", []byte(nil))
	f.Add(moreCode(remoting.GetMaxOffset), "topic=T;queueId=0", []byte(nil))
	f.Add(moreCode(remoting.GetMinOffset), "topic=T;queueId=x", []byte(nil))
	f.Add(moreCode(remoting.GetEarliestMsgStoretime), "topic=T;queueId=0", []byte(nil))
	f.Add(moreCode(remoting.UnregisterClient), "clientID=c;producerGroup=pg;consumerGroup=g", []byte(nil))
	f.Add(moreCode(remoting.GetTopicConfig), "topic=T", []byte(nil))
	f.Add(moreCode(remoting.GetAllTopicConfig), "dataVersion=x", []byte(`{"counter":1,"timestamp":2}`))
	f.Add(moreCode(remoting.GetAllTopicConfig), `topicSeq=1;maxTopicNum=2;dataVersion={"counter":1,"timestamp":2}`, []byte(nil))
	f.Add(moreCode(remoting.GetAllSubscriptionGroupConfig), "groupSeq=-1;maxGroupNum=0;dataVersion=", []byte(nil))
	f.Add(moreCode(remoting.GetSubscriptionGroupConfig), "group=g", []byte(nil))
	f.Add(moreCode(remoting.DeleteSubscriptionGroup), "groupName=g;cleanOffset=true", []byte(nil))
	f.Add(moreCode(remoting.SetCommitLogReadMode), "READ_AHEAD_MODE=1", []byte(nil))
	f.Add(moreCode(remoting.CheckpointIndex), "dir=/tmp/../etc", []byte(nil))
	f.Add(moreCode(remoting.CleanUnusedTopic), "", []byte(nil))
	f.Add(moreCode(remoting.QueryCorrectionOffset), "topic=T;compareGroup=g;filterGroups=g,,h", []byte(nil))
	f.Add(moreCode(remoting.UpdateColdDataFlowCtrConfig), "", []byte("g1=1048576\ng2=x\n=5\n"))
	f.Add(moreCode(remoting.RemoveColdDataFlowCtrConfig), "", []byte("g1"))
	f.Add(moreCode(remoting.GetColdDataFlowCtrInfo), "", []byte(nil))
	b := startTestBroker(f, map[string]string{"enablePropertyFilter": "true", "channelExpiredTimeout": fuzzChannelExpiry}) // see FuzzRequests
	start := b.live.cur.Load()
	c, err := remoting.Dial(context.Background(), b.Addr(), remoting.ClientOptions{})
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	// A message in T gives the POP processors something to read.
	{
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _ = c.Invoke(ctx, remoting.NewRequest(remoting.SendMessageV2,
			map[string]string{"a": "pg", "b": "T", "e": "0", "f": "0", "g": "1", "h": "0"}, []byte("body")))
		cancel()
	}
	f.Fuzz(func(t *testing.T, which uint8, ext string, body []byte) {
		code := moreFuzzCodes[int(which)%len(moreFuzzCodes)]
		h := map[string]string{}
		for _, kv := range strings.Split(ext, ";") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				h[k] = v
			}
		}
		for _, k := range []string{"pollTime", "suspendTimeoutMillis"} {
			if n, err := strconv.ParseInt(h[k], 10, 64); err == nil && n > 50 {
				h[k] = "50" // never hold a fuzzed request for long
			}
		}
		if h["suspendTimeoutMillis"] == "" {
			h["suspendTimeoutMillis"] = "1"
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
		if code == remoting.SetCommitLogReadMode {
			b.live.cur.Store(start)
		}
	})
}

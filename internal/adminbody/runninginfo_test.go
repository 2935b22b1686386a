package adminbody

import "testing"

// A Java client's answer, object-keyed queue tables and a numeric
// property included, decodes field by field.
func TestDecodeConsumerRunningInfo(t *testing.T) {
	body := []byte(`{"jstack":"main: RUNNABLE","mqPopTable":{{"brokerName":"b","queueId":1,"topic":"t"}:{"droped":false,"lastPopTimestamp":7,"waitAckCount":2}},` +
		`"mqTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"cachedMsgCount":4,"commitOffset":3,"locked":true}},` +
		`"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","PROP_CONSUMER_START_TIMESTAMP":1700000000000},` +
		`"statusTable":{"t":{"consumeFailedMsgs":5,"pullRT":1.5}},"subscriptionSet":[{"classFilterMode":false,"subString":"*","topic":"t"}],` +
		`"userConsumerInfo":{"u":"v"}}`)
	info, err := DecodeConsumerRunningInfo(body)
	if err != nil {
		t.Fatal(err)
	}
	q0, q1 := MessageQueue{BrokerName: "b", QueueID: 0, Topic: "t"}, MessageQueue{BrokerName: "b", QueueID: 1, Topic: "t"}
	if pq := info.MQTable[q0]; pq.CommitOffset != 3 || pq.CachedMsgCount != 4 || !pq.Locked {
		t.Errorf("mqTable: %+v", info.MQTable)
	}
	if pp := info.MQPopTable[q1]; pp.WaitAckCount != 2 || pp.LastPopTimestamp != 7 {
		t.Errorf("mqPopTable: %+v", info.MQPopTable)
	}
	if info.Properties["PROP_CONSUME_TYPE"] != "CONSUME_PASSIVELY" || info.Properties["PROP_CONSUMER_START_TIMESTAMP"] != "1700000000000" {
		t.Errorf("properties: %v", info.Properties)
	}
	if s := info.StatusTable["t"]; s.PullRT != 1.5 || s.ConsumeFailedMsgs != 5 {
		t.Errorf("statusTable: %+v", info.StatusTable)
	}
	if len(info.SubscriptionSet) != 1 || info.SubscriptionSet[0].SubString != "*" || info.UserConsumerInfo["u"] != "v" ||
		info.Jstack == nil || *info.Jstack != "main: RUNNABLE" {
		t.Errorf("decoded %+v", info)
	}
	if _, err := DecodeConsumerRunningInfo([]byte(`{"mqTable":{"k":1}}`)); err == nil {
		t.Error("a queue table with a string key decoded")
	}
}

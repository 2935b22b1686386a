package broker

import (
	"github.com/rocketkv/rocketkv/remoting"
)

// routes registers every request code the broker answers. Codes without a
// processor get REQUEST_CODE_NOT_SUPPORTED from the mux; the connection
// stays open.
func (b *Broker) routes() {
	handle := func(code int32, f remoting.RespondFunc) { b.mux.Handle(code, f) }
	handle(remoting.SendMessage, b.admitted(b.processSend))
	handle(remoting.SendMessageV2, b.admitted(b.processSend))
	handle(remoting.SendBatchMessage, b.admitted(b.processSend))
	handle(remoting.PullMessage, b.processPull)
	handle(remoting.LitePullMessage, b.processPull)
	handle(remoting.QueryConsumerOffset, b.processQueryConsumerOffset)
	handle(remoting.UpdateConsumerOffset, b.processUpdateConsumerOffset)
	handle(remoting.GetMaxOffset, queueOffsetHandler(func(t string, q int32) (int64, error) { return b.cqs.MaxOffset(t, q) }))
	handle(remoting.GetMinOffset, queueOffsetHandler(func(t string, q int32) (int64, error) { return b.cqs.MinOffset(t, q) }))
	handle(remoting.SearchOffsetByTimestamp, b.processSearchOffset)
	handle(remoting.GetEarliestMsgStoretime, b.processEarliestMsgStoreTime)
	handle(remoting.HeartBeat, b.processHeartbeat)
	handle(remoting.UnregisterClient, b.processUnregisterClient)
	handle(remoting.GetConsumerListByGroup, b.processConsumerList)
	handle(remoting.LockBatchMQ, b.processLockBatch)
	handle(remoting.UnlockBatchMQ, b.processUnlockBatch)
	handle(remoting.ConsumerSendMsgBack, b.admitted(b.processSendBack))
	handle(remoting.EndTransaction, b.admitted(b.processEndTransaction))
	handle(remoting.QueryMessage, b.processQueryMessage)
	handle(remoting.ViewMessageByID, b.processViewMessage)
	handle(remoting.UpdateAndCreateTopic, b.processCreateTopic)
	handle(remoting.UpdateAndCreateTopicList, b.processCreateTopicList)
	handle(remoting.DeleteTopicInBroker, b.processDeleteTopic)
	handle(remoting.GetTopicConfig, b.processGetTopicConfig)
	handle(remoting.GetAllTopicConfig, b.processGetAllTopicConfig)
	handle(remoting.UpdateAndCreateSubscriptionGroup, b.processCreateGroup)
	handle(remoting.GetAllSubscriptionGroupConfig, b.processGetAllGroups)
	handle(remoting.GetSubscriptionGroupConfig, b.processGetGroup)
	handle(remoting.DeleteSubscriptionGroup, b.processDeleteGroup)
	handle(remoting.InvokeBrokerToResetOffset, b.processResetOffset)
	handle(remoting.GetBrokerRuntimeInfo, b.processRuntimeInfo)
	handle(remoting.GetTopicStatsInfo, b.processTopicStats)
	handle(remoting.GetConsumeStats, b.processConsumeStats)
	handle(remoting.GetConsumerConnectionList, b.processConsumerConnection)
	handle(remoting.GetProducerConnectionList, b.processProducerConnection)
	handle(remoting.QueryTopicConsumeByWho, b.processTopicConsumeByWho)
	handle(remoting.CheckpointIndex, b.processCheckpoint)
	handle(remoting.PopMessage, b.processPop)
	handle(remoting.AckMessage, b.processAck)
	handle(remoting.BatchAckMessage, b.processBatchAck)
	handle(remoting.ChangeMessageInvisibleTime, b.processChangeInvisibleTime)
	handle(remoting.PeekMessage, b.processPeek)
	handle(remoting.Notification, b.processNotification)
	handle(remoting.PollingInfo, b.processPollingInfo)
	handle(remoting.QueryAssignment, b.processQueryAssignment)
	handle(remoting.SetMessageRequestMode, b.processSetRequestMode)
	handle(remoting.GetAllMessageRequestMode, b.processGetAllRequestMode)
}

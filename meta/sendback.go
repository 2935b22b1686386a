package meta

import "github.com/rocketkv/rocketkv/commitlog"

// The properties a send-back's copy names its origin in.
const (
	PropertyRetryTopic      = "RETRY_TOPIC"
	PropertyOriginMessageID = "ORIGIN_MESSAGE_ID"
)

// SendBackProperties returns the properties RocketMQ's
// consumerSendMsgBack sets on its copy of m, for a retry or dead-letter
// topic: WAIT=false; RETRY_TOPIC, m's topic, unless m names one (the
// topic first sent to); ORIGIN_MESSAGE_ID, m's offset message id, unless
// m has one that is not blank (UtilAll.isBlank). The broker's send-back
// and the POP revive's dead-letter copy both use it.
func SendBackProperties(m *commitlog.Message) [][2]string {
	set := [][2]string{{"WAIT", "false"}}
	if _, has := commitlog.LookupProperty(m.Properties, PropertyRetryTopic); !has {
		set = append(set, [2]string{PropertyRetryTopic, m.Topic})
	}
	if id, has := commitlog.LookupProperty(m.Properties, PropertyOriginMessageID); !has || IsBlank(id) {
		set = append(set, [2]string{PropertyOriginMessageID, commitlog.MessageID(m.StoreHost, m.PhyOffset)})
	}
	return set
}

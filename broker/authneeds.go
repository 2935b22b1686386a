package broker

import (
	"encoding/json"
	"strings"

	"github.com/rocketkv/rocketkv/auth"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// authField is a header field that names a resource of a request.
type authField struct {
	name string
	typ  auth.ResourceType
	// sep splits a field listing several (empty: one name).
	sep string
}

// authRule is what a request code needs when its header decides it: the
// actions on every resource its fields name, or on the cluster when
// cluster is set and no field named one. It is the RocketMQAction and
// RocketMQResource annotations of RocketMQ 5.3's request headers, which its
// DefaultAuthorizationContextBuilder reads for the codes it has no case
// for.
type authRule struct {
	cluster bool
	actions []auth.Action
	fields  []authField
}

var (
	topicField = authField{name: "topic", typ: auth.TypeTopic}
	cgField    = authField{name: "consumerGroup", typ: auth.TypeGroup}
	groupField = authField{name: "group", typ: auth.TypeGroup}
	authSub    = []auth.Action{auth.ActionSub}
	authGet    = []auth.Action{auth.ActionGet}
	authUpdate = []auth.Action{auth.ActionUpdate}
)

// authRules maps request codes to their rule. Codes absent here and from
// authNeeds' cases need nothing: they are only authenticated.
var authRules = map[int32]authRule{
	// Consumers (POP and the queries a client makes).
	remoting.PopMessage:                 {actions: authSub, fields: []authField{cgField, topicField}},
	remoting.PeekMessage:                {actions: authSub, fields: []authField{topicField, cgField}},
	remoting.AckMessage:                 {actions: authSub, fields: []authField{cgField, topicField}},
	remoting.ChangeMessageInvisibleTime: {actions: authSub, fields: []authField{cgField, topicField}},
	remoting.Notification:               {actions: authSub, fields: []authField{cgField, topicField}},
	remoting.PollingInfo:                {actions: authGet, fields: []authField{cgField, topicField}},
	remoting.NotifyConsumerIDsChanged:   {actions: authSub, fields: []authField{cgField}},
	remoting.ConsumeMessageDirectly:     {actions: authSub, fields: []authField{cgField, topicField}},
	remoting.PushReplyMessageToClient:   {actions: authSub, fields: []authField{{name: "producerGroup", typ: auth.TypeGroup}, topicField}},
	remoting.CheckTransactionState:      {actions: []auth.Action{auth.ActionPub}, fields: []authField{topicField}},
	remoting.GetMaxOffset:               {actions: authGet, fields: []authField{topicField}},
	remoting.GetMinOffset:               {actions: authGet, fields: []authField{topicField}},
	remoting.GetEarliestMsgStoretime:    {actions: authGet, fields: []authField{topicField}},
	remoting.SearchOffsetByTimestamp:    {actions: authGet, fields: []authField{topicField}},
	remoting.ViewMessageByID:            {actions: authGet, fields: []authField{topicField}},
	// Administration of topics and groups.
	remoting.UpdateAndCreateTopic: {actions: []auth.Action{auth.ActionCreate}, fields: []authField{topicField}},
	// RocketMQ registers CreateTopicRequestHeader's annotation for code
	// 17 only, so its ACL 2.0 checks nothing of 513: rocketkv asks what
	// 17 asks, rather than let any user rewrite a topic's queues.
	remoting.UpdateAndCreateStaticTopic:      {actions: []auth.Action{auth.ActionCreate}, fields: []authField{topicField}},
	remoting.DeleteTopicInBroker:             {actions: []auth.Action{auth.ActionDelete}, fields: []authField{topicField}},
	remoting.DeleteSubscriptionGroup:         {actions: []auth.Action{auth.ActionDelete}, fields: []authField{{name: "groupName", typ: auth.TypeGroup}}},
	remoting.GetTopicConfig:                  {actions: authGet, fields: []authField{topicField}},
	remoting.GetSubscriptionGroupConfig:      {actions: authGet, fields: []authField{groupField}},
	remoting.GetTopicStatsInfo:               {actions: authGet, fields: []authField{topicField}},
	remoting.GetConsumeStats:                 {actions: authGet, fields: []authField{cgField, topicField, {name: "topicList", typ: auth.TypeTopic, sep: ";"}}},
	remoting.GetConsumerConnectionList:       {actions: authGet, fields: []authField{cgField}},
	remoting.GetConsumerRunningInfo:          {actions: authGet, fields: []authField{cgField}},
	remoting.InvokeBrokerToGetConsumerStatus: {actions: authGet, fields: []authField{topicField, groupField}},
	remoting.InvokeBrokerToResetOffset:       {actions: authUpdate, fields: []authField{groupField, topicField}},
	remoting.QueryTopicConsumeByWho:          {actions: authGet, fields: []authField{topicField}},
	remoting.QueryTopicsByConsumer:           {actions: authGet, fields: []authField{groupField}},
	remoting.QuerySubscriptionByConsumer:     {actions: authGet, fields: []authField{groupField, topicField}},
	remoting.QueryConsumeTimeSpan:            {actions: authGet, fields: []authField{topicField, groupField}},
	remoting.QueryConsumeQueue:               {actions: authGet, fields: []authField{topicField, cgField}},
	remoting.ResumeCheckHalfMessage:          {actions: authUpdate, fields: []authField{topicField}},
	remoting.CheckRocksdbCqWriteProgress:     {actions: authGet, fields: []authField{topicField}},
	remoting.QueryCorrectionOffset:           {actions: authGet, fields: []authField{{name: "filterGroups", typ: auth.TypeGroup, sep: ","}, {name: "compareGroup", typ: auth.TypeGroup}, topicField}},
	remoting.CloneGroupOffset:                {actions: authUpdate, fields: []authField{{name: "destGroup", typ: auth.TypeGroup}, topicField}},
	remoting.UpdateAndGetGroupForbidden:      {actions: authUpdate, fields: []authField{groupField, topicField}},
	remoting.GetBrokerMemberGroup:            {actions: authGet, fields: []authField{{name: "clusterName", typ: auth.TypeCluster}}},
	// The cluster.
	remoting.GetProducerConnectionList: {cluster: true, actions: authGet},
	remoting.NotifyMinBrokerIDChange:   {cluster: true, actions: authUpdate},
	remoting.GetBrokerConsumeStats:     {cluster: true, actions: authGet},
	remoting.ViewBrokerStatsData:       {cluster: true, actions: authGet},
	remoting.GetAllProducerInfo:        {cluster: true, actions: authGet},
	remoting.ExportRocksDBConfigToJSON: {cluster: true, actions: authGet},
	remoting.AuthCreateUser:            {cluster: true, actions: authUpdate},
	remoting.AuthUpdateUser:            {cluster: true, actions: authUpdate},
	remoting.AuthDeleteUser:            {cluster: true, actions: authUpdate},
	remoting.AuthGetUser:               {cluster: true, actions: authGet},
	remoting.AuthListUser:              {cluster: true, actions: authGet},
	remoting.AuthCreateACL:             {cluster: true, actions: authUpdate},
	remoting.AuthUpdateACL:             {cluster: true, actions: authUpdate},
	remoting.AuthDeleteACL:             {cluster: true, actions: authUpdate},
	remoting.AuthGetACL:                {cluster: true, actions: authGet},
	remoting.AuthListACL:               {cluster: true, actions: authGet},
	// Beyond RocketMQ 5.3, whose headers for these carry no annotation, so
	// that any signed user could change the broker: they need Update on
	// the cluster.
	remoting.UpdateBrokerConfig:          {cluster: true, actions: authUpdate},
	remoting.UpdateColdDataFlowCtrConfig: {cluster: true, actions: authUpdate},
	remoting.RemoveColdDataFlowCtrConfig: {cluster: true, actions: authUpdate},
	remoting.GetColdDataFlowCtrInfo:      {cluster: true, actions: authGet},
	remoting.DeleteExpiredCommitLog:      {cluster: true, actions: authUpdate},
	remoting.SetCommitLogReadMode:        {cluster: true, actions: authUpdate},
	remoting.CleanExpiredConsumeQueue:    {cluster: true, actions: authUpdate},
	remoting.CleanUnusedTopic:            {cluster: true, actions: authUpdate},
	remoting.PopRollback:                 {cluster: true, actions: authUpdate},
	// rocketkv's own: a checkpoint is a copy of the whole index, users'
	// passwords included, which AUTH_GET_USER guards with Get on the
	// cluster too.
	remoting.CheckpointIndex: {cluster: true, actions: authGet},
}

// Request codes of RocketMQ's admin tools this broker does not serve but
// whose needs the table above keeps, so a later processor is not left
// unchecked.
const (
	codeGetRouteInfoByTopic int32 = 105
)

// authNeeds returns what req needs under ACL 2.0: the cases of RocketMQ
// 5.3's DefaultAuthorizationContextBuilder for the codes it decides from
// the fields and bodies, else the code's authRule. cluster is the broker's
// cluster name. A body that does not decode needs nothing of what it
// would have named (the processor refuses it).
func authNeeds(req *remoting.Command, cluster string) []auth.Need {
	f := req.ExtFields
	if len(f) == 0 {
		return nil // RocketMQ builds no context for a request without fields
	}
	var out []auth.Need
	need := func(r auth.Resource, actions ...auth.Action) {
		out = append(out, auth.Need{Resource: r, Actions: actions})
	}
	// topic needs actions on a topic, or Sub on the group a retry topic
	// belongs to, as RocketMQ's Resource.ofGroup reads it.
	topicOrGroup := func(topic string, actions ...auth.Action) {
		if auth.IsRetryTopic(topic) {
			need(auth.Group(topic), actions...)
			return
		}
		need(auth.Topic(topic), actions...)
	}
	// send: Pub on the topic; a send to a retry topic is a consumer's
	// send-back and needs Sub on the group whose retry topic it is.
	// RocketMQ 5.3 checks the producer group field instead, which names
	// any group the sender likes (Java's fallback send-back names
	// CLIENT_INNER_PRODUCER): it let a consumer of one group write into
	// another group's retry topic.
	send := func(topic string) {
		if !auth.IsRetryTopic(topic) {
			need(auth.Topic(topic), auth.ActionPub)
			return
		}
		need(auth.Group(topic), auth.ActionSub)
	}
	// consume: actions on the topic, or on the group a retry topic
	// belongs to (RocketMQ 5.3 checks nothing for a retry topic, which
	// let a group read another's retries), and on the group.
	consume := func(topic, group string, actions ...auth.Action) {
		if auth.IsRetryTopic(topic) {
			if owner := auth.Group(topic); owner != auth.Group(group) {
				need(owner, actions...)
			}
		} else {
			need(auth.Topic(topic), actions...)
		}
		need(auth.Group(group), actions...)
	}
	switch req.Code {
	case codeGetRouteInfoByTopic:
		if t := f["topic"]; auth.IsRetryTopic(t) {
			need(auth.Group(t), auth.ActionSub, auth.ActionGet)
		} else {
			need(auth.Topic(t), auth.ActionPub, auth.ActionSub, auth.ActionGet)
		}
	case remoting.SendMessage, remoting.SendReplyMessage:
		// SEND_REPLY_MESSAGE: beyond RocketMQ 5.3, which leaves it unchecked.
		send(f["topic"])
	case remoting.SendMessageV2, remoting.SendBatchMessage, remoting.SendReplyMessageV2:
		send(sendTopic(f))
	case remoting.RecallMessage:
		need(auth.Topic(f["topic"]), auth.ActionPub)
	case remoting.EndTransaction:
		if t := f["topic"]; strings.TrimSpace(t) != "" {
			need(auth.Topic(t), auth.ActionPub)
		}
	case remoting.ViewMessageByID:
		// Get on the topic named, whose messages only the processor
		// returns under access control; without one (a 4.x client), Get
		// on every topic (only a policy on Topic:* grants a topic of
		// no name). RocketMQ 5.3 checks nothing then.
		topicOrGroup(strings.TrimSpace(f["topic"]), auth.ActionGet)
	case remoting.ConsumerSendMsgBack:
		// Beyond RocketMQ 5.3: Sub on the message's topic too (the
		// processor refuses a message of another topic).
		if o := strings.TrimSpace(f["originTopic"]); o != "" {
			if t, ok := sendBackOriginTopic(o, f["group"]); !ok {
				need(auth.Group(o), auth.ActionSub)
			} else if t != "" {
				need(auth.Topic(t), auth.ActionSub)
			}
		}
		need(auth.Group(f["group"]), auth.ActionSub)
	case remoting.PullMessage, remoting.LitePullMessage:
		// LITE_PULL_MESSAGE: beyond RocketMQ 5.3, which leaves it unchecked.
		consume(f["topic"], f["consumerGroup"], auth.ActionSub)
	case remoting.QueryMessage:
		need(auth.Topic(f["topic"]), auth.ActionSub, auth.ActionGet)
	case remoting.HeartBeat:
		for _, cd := range heartbeatConsumers(req.Body) {
			need(auth.Group(cd.GroupName), auth.ActionSub)
			for _, s := range cd.SubscriptionDataSet {
				if !auth.IsRetryTopic(s.Topic) {
					need(auth.Topic(s.Topic), auth.ActionSub)
				}
			}
		}
	case remoting.UnregisterClient:
		if g := f["consumerGroup"]; strings.TrimSpace(g) != "" {
			need(auth.Group(g), auth.ActionSub)
		}
	case remoting.GetConsumerListByGroup:
		need(auth.Group(f["consumerGroup"]), auth.ActionSub, auth.ActionGet)
	case remoting.QueryConsumerOffset:
		consume(f["topic"], f["consumerGroup"], auth.ActionSub, auth.ActionGet)
	case remoting.UpdateConsumerOffset:
		consume(f["topic"], f["consumerGroup"], auth.ActionSub, auth.ActionUpdate)
	case remoting.LockBatchMQ, remoting.UnlockBatchMQ:
		var body lockBatchBody
		if json.Unmarshal(req.Body, &body) == nil {
			need(auth.Group(body.ConsumerGroup), auth.ActionSub)
			for _, mq := range body.MQSet {
				if !auth.IsRetryTopic(mq.Topic) {
					need(auth.Topic(mq.Topic), auth.ActionSub)
				}
			}
		}
	case remoting.BatchAckMessage:
		// Beyond RocketMQ 5.3, which leaves it unchecked: each ack as
		// ACK_MESSAGE is.
		if body, err := pop.DecodeBatchAck(req.Body); err == nil {
			for _, a := range body.Acks {
				need(auth.Group(a.ConsumerGroup), auth.ActionSub)
				topicOrGroup(a.Topic, auth.ActionSub)
			}
		}
	case remoting.UpdateAndCreateTopicList:
		// Beyond RocketMQ 5.3, whose header names no topic: Create on each
		// topic of the body.
		var body struct {
			TopicConfigList []meta.TopicConfig `json:"topicConfigList"`
		}
		if json.Unmarshal(req.Body, &body) == nil {
			for _, tc := range body.TopicConfigList {
				need(auth.Topic(tc.TopicName), auth.ActionCreate)
			}
		}
	case remoting.UpdateAndCreateSubscriptionGroup:
		// Beyond RocketMQ 5.3, which has no header for it: Create on the
		// group of the body.
		if gc, ok := decodeGroupConfig(req.Body); ok {
			need(auth.Group(gc.GroupName), auth.ActionCreate)
		}
	case remoting.UpdateAndCreateSubscriptionGroupList:
		var body struct {
			GroupConfigList []json.RawMessage `json:"groupConfigList"`
		}
		if json.Unmarshal(req.Body, &body) == nil {
			for _, raw := range body.GroupConfigList {
				if gc, ok := decodeGroupConfig(raw); ok {
					need(auth.Group(gc.GroupName), auth.ActionCreate)
				}
			}
		}
	case remoting.QueryAssignment:
		// As RocketMQ 5.3 decides the gRPC QueryAssignment (its remoting
		// header has no annotation): Sub on the group and the topic.
		var body queryAssignmentBody
		if json.Unmarshal(req.Body, &body) == nil {
			need(auth.Group(body.ConsumerGroup), auth.ActionSub)
			topicOrGroup(body.Topic, auth.ActionSub)
		}
	case remoting.SetMessageRequestMode:
		// Beyond RocketMQ 5.3, which leaves it unchecked: it changes how a
		// group consumes a topic.
		var body requestModeBody
		if json.Unmarshal(req.Body, &body) == nil {
			need(auth.Group(body.ConsumerGroup), auth.ActionUpdate)
			topicOrGroup(body.Topic, auth.ActionUpdate)
		}
	default:
		rule, ok := authRules[req.Code]
		if !ok {
			return nil
		}
		for _, fl := range rule.fields {
			v, ok := f[fl.name]
			if !ok {
				continue
			}
			names := []string{v}
			if fl.sep != "" {
				names = splitNames(v, fl.sep)
			}
			for _, n := range names {
				switch {
				case fl.typ == auth.TypeTopic:
					topicOrGroup(n, rule.actions...)
				case fl.typ == auth.TypeGroup:
					need(auth.Group(n), rule.actions...)
				default:
					need(auth.Cluster(n), rule.actions...)
				}
			}
		}
		if len(out) == 0 && rule.cluster {
			need(auth.Cluster(cluster), rule.actions...)
		}
	}
	return out
}

// sendTopic is the topic of a send with letter-named fields
// (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE) as the send processor reads it:
// the letter, else the long name, so a header without "b" is not checked
// against an empty topic while it sends to another.
func sendTopic(f map[string]string) string {
	if t, ok := f["b"]; ok {
		return t
	}
	return f["topic"]
}

// heartbeatConsumers returns the consumers of a HEART_BEAT body; none when
// it does not decode.
func heartbeatConsumers(body []byte) []consumerData {
	var hb heartbeatData
	if json.Unmarshal(body, &hb) != nil {
		return nil
	}
	return hb.ConsumerDataSet
}

// splitNames splits a header field listing several names at any rune of
// sep, dropping empty items: how the permission check reads such a field,
// and so how the request's processor must read it, or it would act on a
// name that was not checked.
func splitNames(v, sep string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune(sep, r) })
}

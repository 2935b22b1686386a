package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/vfs"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// jsonResponse answers req with v as a JSON body.
func jsonResponse(req *remoting.Command, v any) *remoting.Command {
	body, err := json.Marshal(v)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// processCreateTopic answers UPDATE_AND_CREATE_TOPIC; the SUCCESS of a
// change waits for a registration (answerRegistered). A config equal to
// the one the broker holds is answered SUCCESS at once, with nothing
// stored nor registered (RocketMQ's updateAndCreateTopic).
func (b *Broker) processCreateTopic(_ context.Context, _ *remoting.Conn, req *remoting.Command) (*remoting.Command, bool) {
	resp, changed := b.createTopic(req)
	return resp, changed && resp.Code == remoting.Success
}

// createTopic creates or updates the topic of an UPDATE_AND_CREATE_TOPIC
// request and returns the answer, and whether the broker's topics
// changed.
func (b *Broker) createTopic(req *remoting.Command) (*remoting.Command, bool) {
	h := remoting.Header(req.ExtFields)
	topic, err := h.String("topic")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error()), false
	}
	if remark := validateTopicName(topic); remark != "" {
		return remoting.NewResponse(req, remoting.InvalidParameter, remark), false
	}
	if remark := b.systemTopicRefusal(topic); remark != "" {
		return remoting.NewResponse(req, remoting.InvalidParameter, remark), false
	}
	tc := meta.NewTopicConfig(topic, 8)
	r, err1 := h.OptInt32("readQueueNums", 8)
	w, err2 := h.OptInt32("writeQueueNums", 8)
	perm, err3 := h.OptInt32("perm", meta.PermRead|meta.PermWrite)
	sys, err4 := h.OptInt32("topicSysFlag", 0)
	for _, e := range []error{err1, err2, err3, err4} {
		if e != nil {
			return remoting.NewResponse(req, remoting.SystemError, e.Error()), false
		}
	}
	if !validQueueNums(int(r), int(w)) {
		return remoting.NewResponse(req, remoting.InvalidParameter, fmt.Sprintf("queue numbers %d/%d out of range [0, %d]", r, w, maxTopicQueueNums)), false
	}
	tc.ReadQueueNums, tc.WriteQueueNums, tc.Perm, tc.TopicSysFlag = int(r), int(w), int(perm), int(sys)
	tc.TopicFilterType = h.OptString("topicFilterType", meta.SingleTag)
	tc.Order = h.OptBool("order", false)
	mods, refusal := meta.ParseAttributeModifications(h.OptString("attributes", ""))
	if refusal != "" {
		return remoting.NewResponse(req, remoting.SystemError, refusal), false
	}
	if b.refusesMixedType(mods) {
		return remoting.NewResponse(req, remoting.InvalidParameter, mixedRefusal), false
	}
	tc.Attributes = mods
	stored, refusal, err := b.topics.createOrUpdate([]meta.TopicConfig{tc})
	if err != nil || refusal != "" {
		if err != nil {
			refusal = err.Error()
		}
		return remoting.NewResponse(req, remoting.SystemError, refusal), false
	}
	if stored > 0 {
		b.log.Info().Str("topic", topic).Int("read", tc.ReadQueueNums).Int("write", tc.WriteQueueNums).Msg("topic created or updated")
	}
	// A light message queue's update is dropped yet answered after a
	// registration, as RocketMQ's.
	return remoting.NewResponse(req, remoting.Success, ""), stored > 0 || b.lmqName(topic)
}

// defaultListQueueNums is the queue count of an UPDATE_AND_CREATE_TOPIC_LIST
// entry that names none (RocketMQ's TopicConfig default).
const defaultListQueueNums = 16

// maxTopicQueueNums bounds a topic's queue counts (clients and the name
// server list every queue).
const maxTopicQueueNums = 65535

// validQueueNums reports whether a topic's read and write queue counts
// are in [0, maxTopicQueueNums]. 0 is allowed as RocketMQ allows it: 0
// write queues stops sends to the broker's queues of the topic while
// consumers drain them.
func validQueueNums(read, write int) bool {
	return read >= 0 && write >= 0 && read <= maxTopicQueueNums && write <= maxTopicQueueNums
}

// registeringResponder handles a request whose answer, when register is
// true, waits until the broker registered with the name servers (see
// answerRegistered).
type registeringResponder func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) (resp *remoting.Command, register bool)

// registering serves f's requests, answering through answerRegistered.
func (b *Broker) registering(f registeringResponder) remoting.RespondFunc {
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		resp, register := f(ctx, conn, req)
		return b.answerRegistered(conn, req, resp, register, nil)
	}
}

// answerRegistered answers req with done(resp) (resp when done is nil):
// when register is set and name servers are configured, once the broker
// registered with them (registerBeforeAnswer), a wait that runs off the
// worker (offWorker). RocketMQ's admin processor waits on a thread of
// its admin pool, which sends and pulls do not use; here every request
// shares the server's workers, and a name server that hangs would hold
// one for up to registerBrokerTimeoutMills per admin change.
func (b *Broker) answerRegistered(conn *remoting.Conn, req, resp *remoting.Command, register bool,
	done func(*remoting.Command) *remoting.Command) *remoting.Command {
	if done == nil {
		done = func(resp *remoting.Command) *remoting.Command { return resp }
	}
	if !register || !b.register.hasNameServers() {
		return done(resp)
	}
	return b.offWorker(conn, req, func(ctx context.Context) *remoting.Command {
		b.registerBeforeAnswer(ctx)
		return done(resp)
	})
}

// registerBeforeAnswer registers the broker with the name servers and
// waits for it (at most registerBrokerTimeoutMills), so that the routes
// carry an admin change once it is answered, as RocketMQ's admin
// processor registers before it answers: a producer started right after
// mqadmin updateTopic finds the topic.
func (b *Broker) registerBeforeAnswer(ctx context.Context) {
	timeout := b.cfg.RegisterBrokerTimeout
	if timeout <= 0 {
		timeout = 24 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b.register.registerAndWait(ctx)
}

// processCreateGroupList answers UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST:
// the groups of a SubscriptionGroupList body in one synced batch.
func (b *Broker) processCreateGroupList(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body struct {
		GroupConfigList []json.RawMessage `json:"groupConfigList"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "malformed subscription group list body: "+err.Error())
	}
	groups := make([]meta.SubscriptionGroupConfig, 0, len(body.GroupConfigList))
	for i, raw := range body.GroupConfigList {
		gc, ok := decodeGroupConfig(raw)
		if !ok {
			return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("malformed subscription group %d of the list", i))
		}
		// RocketMQ validates every name before its LMQ manager drops
		// those of light message queues.
		if remark := validateGroupName(gc.GroupName); remark != "" {
			return remoting.NewResponse(req, remoting.InvalidParameter, remark)
		}
		if b.lmqName(gc.GroupName) {
			continue
		}
		if refusal, err := b.groupAttributesRefusal(gc); err != nil || refusal != "" {
			return remoting.NewResponse(req, remoting.SystemError, cmp.Or(refusal, fmt.Sprint(err)))
		}
		groups = append(groups, gc)
	}
	if err := b.groups.Put(groups...); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// isSystemTopic reports whether RocketMQ's TopicValidator counts topic as
// a system topic: the topics no client may send to, the broker's own
// (cluster, broker and reply topics), the trace and benchmark topics and
// every rmq_sys_ topic.
func (b *Broker) isSystemTopic(topic string) bool {
	if meta.IsSystemTopic(topic) || topic == b.cfg.BrokerClusterName || topic == b.cfg.BrokerName {
		return true
	}
	if b.cfg.TraceTopicEnable && topic == b.cfg.MsgTraceTopicName {
		return true
	}
	cluster, ok := strings.CutSuffix(topic, replyTopicSuffix)
	return ok && cluster == b.cfg.BrokerClusterName // the reply topic, without building its name on every send
}

// systemTopicRefusal returns the remark refusing an admin request to
// create, update or delete topic, or "" when it may go ahead. With
// validateSystemTopicWhenUpdateTopic (RocketMQ's default) every system
// topic is refused; without it, still the broker's internal topics and
// TBW102, whose configuration and messages the broker owns (deleting
// SCHEDULE_TOPIC_XXXX would drop every scheduled message).
func (b *Broker) systemTopicRefusal(topic string) string {
	if b.current().ValidateSystemTopicWhenUpdateTopic && b.isSystemTopic(topic) || notSendable[topic] || topic == autoCreateTopic {
		return "The topic[" + topic + "] is conflict with system topic."
	}
	return ""
}

// processSystemTopicList answers GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the
// broker's topics that RocketMQ's TopicValidator calls system topics.
func (b *Broker) processSystemTopicList(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topics := []string{}
	err := b.topics.table.Each(func(tc meta.TopicConfig) bool {
		if b.isSystemTopic(tc.TopicName) {
			topics = append(topics, tc.TopicName)
		}
		return true
	})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	return jsonResponse(req, topicList{TopicList: topics})
}

// processCreateTopicList answers UPDATE_AND_CREATE_TOPIC_LIST: many topics
// in one synced batch and one registration (bulk creation), which its
// SUCCESS waits for (answerRegistered). Configs equal to the ones the
// broker holds are left out; a list of nothing but those is answered
// SUCCESS at once, with nothing stored nor registered.
//
// RocketMQ's updateAndCreateTopicList answers SUCCESS, with nothing
// stored, as soon as it meets one unchanged config, which drops the
// changes of every other topic of the list (a defect its review of
// apache/rocketmq#8267 pointed out: it should skip that topic and go
// on); rocketkv goes on.
func (b *Broker) processCreateTopicList(_ context.Context, _ *remoting.Conn, req *remoting.Command) (*remoting.Command, bool) {
	resp, changed := b.createTopicList(req)
	return resp, changed && resp.Code == remoting.Success
}

// createTopicList creates or updates the topics of an
// UPDATE_AND_CREATE_TOPIC_LIST request and returns the answer, and
// whether the broker's topics changed.
func (b *Broker) createTopicList(req *remoting.Command) (*remoting.Command, bool) {
	var list struct {
		TopicConfigList []json.RawMessage `json:"topicConfigList"`
	}
	if err := json.Unmarshal(req.Body, &list); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "malformed topic list body: "+err.Error()), false
	}
	var body struct{ TopicConfigList []meta.TopicConfig }
	for i, raw := range list.TopicConfigList {
		// Over RocketMQ's TopicConfig defaults: what an entry leaves out
		// is 16 read and write queues, perm 6, SINGLE_TAG.
		tc := meta.NewTopicConfig("", defaultListQueueNums)
		if err := json.Unmarshal(raw, &tc); err != nil {
			return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("malformed topic %d of the list: %v", i, err)), false
		}
		body.TopicConfigList = append(body.TopicConfigList, tc)
	}
	for i, tc := range body.TopicConfigList {
		if remark := validateTopicName(tc.TopicName); remark != "" {
			return remoting.NewResponse(req, remoting.InvalidParameter, remark), false
		}
		if remark := b.systemTopicRefusal(tc.TopicName); remark != "" {
			return remoting.NewResponse(req, remoting.InvalidParameter, remark), false
		}
		if !validQueueNums(tc.ReadQueueNums, tc.WriteQueueNums) {
			return remoting.NewResponse(req, remoting.InvalidParameter, fmt.Sprintf("topic %s: queue numbers %d/%d out of range [0, %d]",
				tc.TopicName, tc.ReadQueueNums, tc.WriteQueueNums, maxTopicQueueNums)), false
		}
		if tc.TopicFilterType == "" {
			body.TopicConfigList[i].TopicFilterType = meta.SingleTag
		}
		if b.refusesMixedType(tc.Attributes) {
			return remoting.NewResponse(req, remoting.InvalidParameter, mixedRefusal), false
		}
	}
	// Each config's attributes are modifications, as in a single create.
	stored, refusal, err := b.topics.createOrUpdate(body.TopicConfigList)
	if err != nil || refusal != "" {
		if err != nil {
			refusal = err.Error()
		}
		return remoting.NewResponse(req, remoting.SystemError, refusal), false
	}
	b.log.Info().Int("topics", len(body.TopicConfigList)).Int("changed", stored).Msg("topics created in bulk")
	lmq := slices.ContainsFunc(body.TopicConfigList, func(tc meta.TopicConfig) bool { return b.lmqName(tc.TopicName) })
	return remoting.NewResponse(req, remoting.Success, ""), stored > 0 || lmq
}

// processDeleteTopic answers DELETE_TOPIC_IN_BROKER: the config, the
// ConsumeQueue and the consumer offsets of the topic go.
func (b *Broker) processDeleteTopic(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, err := remoting.Header(req.ExtFields).String("topic")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if strings.TrimSpace(topic) == "" {
		// As AdminBrokerProcessor.deleteTopic; it used to run a delete of
		// the topic "".
		return remoting.NewResponse(req, remoting.InvalidParameter, "The specified topic is blank.")
	}
	if remark := b.systemTopicRefusal(topic); remark != "" {
		return remoting.NewResponse(req, remoting.InvalidParameter, remark)
	}
	doomed := []string{topic}
	if b.current().ClearRetryTopicWhenDeleteTopic {
		// As RocketMQ: the pop-retry topics of the groups that consumed
		// the topic, those that exist.
		groups := map[string]bool{}
		if err := b.groupsWithOffsetsOn(topic, groups); err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		for g := range groups {
			for _, rt := range []string{pop.RetryTopicV2(topic, g), pop.RetryTopicV1(topic, g)} {
				if _, ok, err := b.topicConfig(rt); err != nil {
					return remoting.NewResponse(req, remoting.SystemError, err.Error())
				} else if ok {
					doomed = append(doomed, rt)
				}
			}
		}
	}
	for _, t := range doomed {
		if err := b.deleteTopic(t); err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
	}
	b.register.trigger()
	b.log.Info().Str("topic", topic).Strs("retryTopics", doomed[1:]).Msg("topic deleted")
	return remoting.NewResponse(req, remoting.Success, "")
}

// deleteTopic deletes a topic's config, queues, statistics and metrics
// series, then what
// its consumers left: every group's committed offsets, pop positions,
// orderly batches and checkpoints. The config goes first: the POP
// service's writes of the topic that begin once it is gone write nothing,
// and the deletion of the consumer state waits for those under way
// (kvindex.PopStore.DeleteTopic), so none of them survives it. The steps
// are separate commits: a durable marker written before the first and
// removed after the last lets a start after a crash in between complete
// the deletion (completeTopicDeletions). A deletion that fails keeps its
// marker too: the next start completes it, unless the topic exists again
// by then. While it runs, nothing creates the topic again
// (topicManager.beginDeletion).
func (b *Broker) deleteTopic(topic string) error {
	b.topics.beginDeletion(topic)
	defer b.topics.endDeletion(topic)
	if err := b.db.BeginTopicDeletion(topic); err != nil {
		return err
	}
	b.deletionStep(stepTopicDeletionBegun)
	if err := b.topics.table.Delete(topic); err != nil {
		return err
	}
	// A static topic's mapping goes with its config, as RocketMQ's
	// deleteTopicInBroker deletes it.
	if err := b.mappings.Delete(topic); err != nil {
		return err
	}
	if err := b.refreshStaticNames(); err != nil {
		return err
	}
	b.deletionStep(stepTopicConfigDeleted)
	if err := b.dropTopicQueues(topic); err != nil {
		return err
	}
	b.deletionStep(stepTopicQueuesDropped)
	b.stats.TopicDeleted(topic)
	b.metrics.TopicDeleted(topic)
	if err := b.dropTopicConsumerState(topic); err != nil {
		return err
	}
	b.deletionStep(stepTopicConsumerStateDeleted)
	return b.db.EndTopicDeletion(topic)
}

// dropTopicConsumerState deletes what the consumers of topic left, of
// every group: its pull offsets, its consumer state in the store
// (kvindex.PopStore.DeleteTopic) and what a slave's own pops keep of it
// in memory. A topic created again numbers its queues from 0: a stale
// position or offset past their end would skip its messages, and revive
// would read its messages at the offsets of checkpoints left. The slave's
// in-memory part is its in-flight count (as RocketMQ's deleteTopic clears
// its PopInflightMessageCounter), its own offsets and orderly batches.
func (b *Broker) dropTopicConsumerState(topic string) error {
	b.pulled.forget(func(q groupQueue) bool { return q.topic == topic })
	if err := b.db.Pop().DeleteTopic(topic); err != nil {
		return err
	}
	if svc := b.reviving.Load(); svc != nil {
		return svc.SlaveTopicDeleted(topic)
	}
	return nil
}

// The steps of a topic deletion, each a commit of its own, for crash
// tests (Broker.recoveryStep).
const (
	stepTopicDeletionBegun        = "topic deletion begun"
	stepTopicConfigDeleted        = "topic config deleted"
	stepTopicQueuesDropped        = "topic queues dropped"
	stepTopicConsumerStateDeleted = "topic consumer state deleted"
)

// deletionStep reports a step of a topic deletion to recoveryStep.
func (b *Broker) deletionStep(step string) {
	if b.recoveryStep != nil {
		b.recoveryStep(step)
	}
}

// completeTopicDeletions runs again, before the broker serves, the topic
// deletions a crash (or an error) interrupted once they had deleted the
// topic's config, their first step that deletes anything: what the first
// run deleted is gone already, the rest goes now, so that a topic created
// again under the name finds none of the old topic's queues, offsets or
// POP state. A deletion whose topic still has its config was interrupted
// before it deleted anything, or the topic was created again since (after
// a deletion that failed, or by a send under autoCreateTopicEnable): the
// topic is kept, and so is what the deletion had not reached.
func (b *Broker) completeTopicDeletions() error {
	pending, err := b.db.PendingTopicDeletions()
	if err != nil {
		return err
	}
	for _, topic := range pending {
		if _, exists, err := b.topics.table.Get(topic); err != nil {
			return fmt.Errorf("complete the interrupted deletion of topic %s: %w", topic, err)
		} else if exists {
			b.log.Warn().Str("topic", topic).Msg("a deletion of this topic was interrupted, but the topic exists: kept, the deletion dropped")
			if err := b.db.EndTopicDeletion(topic); err != nil {
				return err
			}
			continue
		}
		b.log.Warn().Str("topic", topic).Msg("completing the deletion of a topic that a crash or an error interrupted")
		if err := b.deleteTopic(topic); err != nil {
			return fmt.Errorf("complete the interrupted deletion of topic %s: %w", topic, err)
		}
	}
	return nil
}

// processGetTopicConfig answers GET_TOPIC_CONFIG.
func (b *Broker) processGetTopicConfig(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, err := remoting.Header(req.ExtFields).String("topic")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	tc, ok, err := b.topicConfig(topic)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if !ok {
		return remoting.NewResponse(req, remoting.TopicNotExist, "No topic in this broker. topic: "+topic)
	}
	// RocketMQ answers TopicConfigAndQueueMapping: the TopicConfig fields
	// plus, asked with lo=true, the static topic's mappingDetail (left out
	// when there is none, as fastjson leaves out nulls).
	answer := struct {
		meta.TopicConfig
		MappingDetail *meta.TopicQueueMappingDetail `json:"mappingDetail,omitempty"`
	}{TopicConfig: tc}
	if remoting.Header(req.ExtFields).OptBool("lo", false) {
		d, ok, err := b.mappings.Get(topic)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		if ok {
			answer.MappingDetail = &d
		}
	}
	return jsonResponse(req, answer)
}

// processGetAllTopicConfig answers GET_ALL_TOPIC_CONFIG with RocketMQ's
// TopicConfigSerializeWrapper: the whole table, or the page the request
// asks for (see metapages.go), and the table's size in totalTopicNum.
func (b *Broker) processGetAllTopicConfig(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	// The version is read first: a change made during the scan bumps it
	// after its contents, so the answer never names a version newer than
	// what it holds (a slave holding it would be told "not modified").
	version := b.topics.table.Version()
	page, err := b.readMetaPage(req, fieldTopicSeq, fieldMaxTopicNum, version)
	if err != nil {
		return b.refusePage(req, err)
	}
	table := map[string]meta.TopicConfig{}
	var total int
	if page.paged {
		total, err = b.topics.table.Page(page.from, page.size, func(tc meta.TopicConfig) { table[tc.TopicName] = tc })
		if err == nil {
			if err := checkPageSize(page, total); err != nil {
				return b.refusePage(req, err)
			}
		}
	} else {
		err = b.topics.table.Each(func(tc meta.TopicConfig) bool { table[tc.TopicName] = tc; return true })
		total = len(table)
	}
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	// RocketMQ's TopicConfigAndMappingSerializeWrapper: the static topics'
	// mappings of the topics answered, for slaves and mqadmin.
	mappingVersion := b.mappings.Version()
	details := map[string]meta.TopicQueueMappingDetail{}
	if err := b.mappings.Each(func(d meta.TopicQueueMappingDetail) bool {
		if _, ok := table[d.Topic]; ok {
			details[d.Topic] = d
		}
		return true
	}); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	return withTotal(jsonResponse(req, struct {
		TopicConfigTable           map[string]meta.TopicConfig             `json:"topicConfigTable"`
		DataVersion                meta.DataVersion                        `json:"dataVersion"`
		MappingDataVersion         meta.DataVersion                        `json:"mappingDataVersion"`
		TopicQueueMappingDetailMap map[string]meta.TopicQueueMappingDetail `json:"topicQueueMappingDetailMap"`
		TopicQueueMappingInfoMap   struct{}                                `json:"topicQueueMappingInfoMap"`
	}{table, version, mappingVersion, details, struct{}{}}), fieldTotalTopicNum, total)
}

// processCreateGroup answers UPDATE_AND_CREATE_SUBSCRIPTIONGROUP.
func (b *Broker) processCreateGroup(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	gc, ok := decodeGroupConfig(req.Body)
	if !ok {
		return remoting.NewResponse(req, remoting.SystemError, "malformed subscription group body")
	}
	if remark := validateGroupName(gc.GroupName); remark != "" {
		return remoting.NewResponse(req, remoting.InvalidParameter, remark)
	}
	if b.lmqName(gc.GroupName) {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	if refusal, err := b.groupAttributesRefusal(gc); err != nil || refusal != "" {
		return remoting.NewResponse(req, remoting.SystemError, cmp.Or(refusal, fmt.Sprint(err)))
	}
	if err := b.groups.Put(gc); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// decodeGroupConfig reads a SubscriptionGroupConfig an admin tool sent,
// RocketMQ's defaults filling the fields it leaves out; false when it is
// not one or names no group.
func decodeGroupConfig(raw []byte) (meta.SubscriptionGroupConfig, bool) {
	gc := meta.NewSubscriptionGroupConfig("")
	if err := json.Unmarshal(raw, &gc); err != nil || gc.GroupName == "" {
		return gc, false
	}
	return gc, true
}

// groupAttributesRefusal is what RocketMQ 5.3 answers a subscription
// group config whose attributes it would apply ("" when it has none):
// they are modifications of the group's current ones, and RocketMQ knows
// no group attribute, so every well-formed one is an unsupported key.
func (b *Broker) groupAttributesRefusal(gc meta.SubscriptionGroupConfig) (string, error) {
	if len(gc.Attributes) == 0 {
		return "", nil
	}
	cur, exists, err := b.groups.Get(gc.GroupName)
	if err != nil {
		return "", fmt.Errorf("read subscription group %s: %w", gc.GroupName, err)
	}
	_, refusal := meta.AlterAttributes(!exists, meta.GroupAttributes, cur.Attributes, gc.Attributes)
	return refusal, nil
}

// processGetAllGroups answers GET_ALL_SUBSCRIPTIONGROUP_CONFIG: the whole
// table, or the page the request asks for (see metapages.go) with the
// forbidden topics of its groups only, and the table's size in
// totalGroupNum.
func (b *Broker) processGetAllGroups(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	version := b.groups.Version() // first, as processGetAllTopicConfig's
	page, err := b.readMetaPage(req, fieldGroupSeq, fieldMaxGroupNum, version)
	if err != nil {
		return b.refusePage(req, err)
	}
	table := map[string]meta.SubscriptionGroupConfig{}
	var total int
	if page.paged {
		total, err = b.groups.Page(page.from, page.size, func(g meta.SubscriptionGroupConfig) { table[g.GroupName] = g })
		if err == nil {
			if err := checkPageSize(page, total); err != nil {
				return b.refusePage(req, err)
			}
		}
	} else {
		err = b.groups.Each(func(g meta.SubscriptionGroupConfig) bool { table[g.GroupName] = g; return true })
		total = len(table)
	}
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	forbidden, err := b.forbidden.all(ctx)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if page.paged {
		for g := range forbidden {
			if _, ok := table[g]; !ok {
				delete(forbidden, g)
			}
		}
	}
	return withTotal(jsonResponse(req, struct {
		SubscriptionGroupTable map[string]meta.SubscriptionGroupConfig `json:"subscriptionGroupTable"`
		ForbiddenTable         map[string]map[string]int               `json:"forbiddenTable"`
		DataVersion            meta.DataVersion                        `json:"dataVersion"`
	}{table, forbidden, version}), fieldTotalGroupNum, total)
}

// processGetGroup answers GET_SUBSCRIPTIONGROUP_CONFIG.
func (b *Broker) processGetGroup(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group, err := remoting.Header(req.ExtFields).String("group")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	// RocketMQ's findSubscriptionGroupConfig creates a missing group here
	// under autoCreateSubscriptionGroup; rocketkv does not, so a look at
	// a group (bin/admin's checks among them) does not make it exist.
	gc, err := b.groupConfig(group, false)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if gc.GroupName == "" {
		return remoting.NewResponse(req, remoting.SubscriptionGroupNotExist, "No group in this broker")
	}
	return jsonResponse(req, gc)
}

// processDeleteGroup answers DELETE_SUBSCRIPTIONGROUP (and removes the
// group's offsets when cleanOffset is set, and what it was forbidden).
func (b *Broker) processDeleteGroup(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	h := remoting.Header(req.ExtFields)
	group, err := h.String("groupName")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if err := b.groups.Delete(group); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	// As RocketMQ, what the group was forbidden goes with it.
	if err := b.forbidden.drop(group); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	b.resets.forgetGroup(group)
	b.stats.GroupDeleted(group)
	b.metrics.GroupDeleted(group)
	if h.OptBool("cleanOffset", false) {
		// As RocketMQ's removeOffset, the pull offsets go with the
		// committed ones.
		b.pulled.forget(func(q groupQueue) bool { return q.group == group })
		if err := b.offsets.DeleteGroup(group); err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		// And where its pops stood, or a pop would go on from there.
		if err := b.db.Pop().DeleteGroupPositions(group); err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		// On a slave, what its own pops keep of the group in memory
		// too: its in-flight count, as RocketMQ clears its
		// PopInflightMessageCounter here, its own offsets and orderly
		// batches.
		if svc := b.popSvc; svc != nil {
			if err := svc.SlaveGroupOffsetsDeleted(group); err != nil {
				return remoting.NewResponse(req, remoting.SystemError, err.Error())
			}
		}
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// earliestMessageTime is the store time of the oldest record in the
// CommitLog, or -1 when it holds none (RocketMQ's getEarliestMessageTime).
func (b *Broker) earliestMessageTime() int64 {
	v, err := b.clog.ReadRecord(b.clog.MinOffset())
	if err != nil {
		return -1
	}
	defer v.Release()
	m, err := commitlog.Decode(v.Data)
	if err != nil {
		return -1
	}
	return m.StoreTimestamp
}

// addExporterKeys adds to a GET_BROKER_RUNTIME_INFO table the keys of
// RocketMQ's StoreStatsService and AdminBrokerProcessor that
// apache/rocketmq-exporter parses without a default (its
// BrokerRuntimeStats: one key missing and it reports none of the
// broker's rocketmq_brokeruntime_* metrics), in RocketMQ's formats.
// Where rocketkv has no counterpart the value is the one RocketMQ writes
// when the feature is idle or off:
//
//   - the pull and query thread pools: rocketkv serves pulls and queries
//     on their connections' goroutines, with no queue: size, capacity and
//     head wait 0; the send queue's head wait is 0 as well (the flow
//     control slots keep no arrival times);
//   - dispatchMaxBuffer and pageCacheLockTimeMills 0 (RocketMQ's
//     dispatcher buffers nothing, and no CommitLog lock is held);
//   - remainTransientStoreBufferNumbs Integer.MAX_VALUE, RocketMQ's value
//     with transientStorePoolEnable off (rocketkv has no transient pool).
//
// puts and putBytes are the messages and bytes stored since start
// (putMessageAverageSize divides them as RocketMQ does, a total of 0
// counted as 1); flushBehind is the CommitLog bytes not yet flushed.
func addExporterKeys(table map[string]string, puts, putBytes, flushBehind int64) {
	if puts == 0 {
		puts = 1
	}
	table["putMessageAverageSize"] = javaDouble(float64(putBytes) / float64(puts))
	table["dispatchMaxBuffer"] = "0"
	table["pageCacheLockTimeMills"] = "0"
	table["remainTransientStoreBufferNumbs"] = strconv.Itoa(math.MaxInt32)
	table["remainHowManyDataToFlush"] = humanReadableByteCount(max(flushBehind, 0))
	for _, pool := range []string{"pull", "query"} {
		table[pool+"ThreadPoolQueueSize"] = "0"
		table[pool+"ThreadPoolQueueCapacity"] = "0"
		table[pool+"ThreadPoolQueueHeadWaitTimeMills"] = "0"
	}
	table["sendThreadPoolQueueHeadWaitTimeMills"] = "0"
}

// javaDouble formats v as Java's String.valueOf(double) does for the
// values a runtime table holds: at least one decimal ("12.0", "0.5").
func javaDouble(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eEN") {
		s += ".0"
	}
	return s
}

// humanReadableByteCount is RocketMQ's MixAll.humanReadableByteCount(n,
// false): "512 B" under 1 KiB, else one decimal and a binary unit
// ("97.9 GiB").
func humanReadableByteCount(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	exp := int(math.Log(float64(n)) / math.Log(unit))
	exp = min(exp, 6)
	return fmt.Sprintf("%.1f %ciB", float64(n)/math.Pow(unit, float64(exp)), "KMGTPE"[exp-1])
}

// formatRuntime is RocketMQ's StoreStatsService.getFormatRuntime: how
// long the broker has run, "[ 1 days, 2 hours, 3 minutes, 4 seconds ]".
func formatRuntime(d time.Duration) string {
	d = max(d, 0)
	days := d / (24 * time.Hour)
	hours := d % (24 * time.Hour) / time.Hour
	minutes := d % time.Hour / time.Minute
	seconds := d % time.Minute / time.Second
	return fmt.Sprintf("[ %d days, %d hours, %d minutes, %d seconds ]", days, hours, minutes, seconds)
}

// scheduleRuntimeInfo adds RocketMQ's scheduleMessageOffset_<level> to a
// runtime info table: "<progress>,<queue end>" of each delay level with a
// progress (ScheduleMessageService.buildRunningStats), which
// rocketmq-exporter reads as the schedule backlog.
func (b *Broker) scheduleRuntimeInfo(table map[string]string) {
	levels, err := rmqconfig.StoreDelayOffsets(context.Background(), b.db)
	if err != nil {
		b.log.Warn().Err(err).Msg("runtime info: read the delay levels' progress")
		return
	}
	for level, off := range levels {
		end, err := b.cqs.MaxOffset(meta.ScheduleTopic, int32(level-1))
		if err != nil {
			b.log.Warn().Err(err).Int("delayLevel", level).Msg("runtime info: read a delay level's queue end")
			continue
		}
		table["scheduleMessageOffset_"+strconv.Itoa(level)] = strconv.FormatInt(off, 10) + "," + strconv.FormatInt(end, 10)
	}
}

// timerRuntimeInfo adds RocketMQ's timer keys to a runtime info table:
// timerReadBehind, the seconds the timer's read time is behind the clock
// (getDequeueBehind: timer.Service.ReadBehind; it grows with a message
// overdue and while timerStopDequeue holds delivery, idle or not; on a
// slave, the read time of its master's checkpoint as last copied, which
// RocketMQ's slave takes as its own, so that it grows while the master
// is down); timerOffsetBehind, the timer messages stored and
// not yet taken in (getEnqueueBehindMessages); timerCongestNum, the timer
// messages waiting (getAllCongestNum: 0 until the timer has counted them
// after a start); timerEnqueueTps and timerDequeueTps, the rates of the
// timer's records taken in and put over the last 10 s. On a slave all but
// timerReadBehind come from its own copies of the timer messages, as
// RocketMQ's slave computes them from its own wheel and timer queue
// (its congestion counted from the master's read time; here the entries
// its master delivered are forgotten with the 3 s timer sync instead),
// not from the TimerMetrics it copies; its timerDequeueTps is 0.0, the
// slave delivering nothing. All are 0 with the timer off, as RocketMQ
// writes them; mqadmin clusterList -m prints them.
func (b *Broker) timerRuntimeInfo(table map[string]string, nowMs int64) {
	readBehind, offsetBehind, congest := int64(0), int64(0), int64(0)
	enqueueTps, dequeueTps := "0.0", "0.0"
	if b.cfg.TimerWheelEnable {
		offsetBehind, _ = b.timerEnqueueBehind(nowMs)
		if behind, err := b.timerReadBehind(time.UnixMilli(nowMs)); err != nil {
			b.log.Warn().Err(err).Msg("runtime info: read how far the timer is behind")
		} else {
			readBehind = behind
		}
		congest, _ = b.timers.WaitingTotal()
		enqueueTps, dequeueTps = b.stats.TimerTPS()
	}
	table["timerReadBehind"] = strconv.FormatInt(readBehind, 10)
	table["timerOffsetBehind"] = strconv.FormatInt(offsetBehind, 10)
	table["timerCongestNum"] = strconv.FormatInt(congest, 10)
	table["timerEnqueueTps"] = enqueueTps
	table["timerDequeueTps"] = dequeueTps
}

// timerReadBehind is RocketMQ's getDequeueBehind at now: the seconds the
// timer's read time is behind the clock. A slave that copied its master's
// timer checkpoint goes by the read time copied, as RocketMQ's slave
// takes it as its timer's while it does not deliver
// (syncLastReadTimeMs), so that it grows while the master is down or
// stopped (negative, as RocketMQ's, when the master's clock is ahead),
// and before its first copy after a start by the copy it saved before
// it stopped, as RocketMQ's slave starts from its saved checkpoint; any
// other broker by its own timer (timer.Service.ReadBehind), whose read
// time a start resumes where the last run saved it.
func (b *Broker) timerReadBehind(now time.Time) (int64, error) {
	if ck, ok := b.slaveTimerCheckpoint(); ok {
		return (now.UnixMilli() - ck.ReadMs) / 1000, nil
	}
	if saved := b.repl.savedTimerReadMs.Load(); b.isSlave() && saved > 0 {
		// Before the first copy: the copy saved before the last stop.
		return (now.UnixMilli() - saved) / 1000, nil
	}
	behind, err := b.timers.ReadBehind(now)
	if err != nil {
		return 0, err
	}
	return int64(behind / time.Second), nil
}

// processRuntimeInfo answers GET_BROKER_RUNTIME_INFO with a KVTable: the
// keys mqadmin brokerStatus and clusterList and the dashboard read under
// RocketMQ's names (rates, day totals, disk ratio, earliest message), and
// rocketkv's own (dispatch lag, index and ConsumeQueue state).
func (b *Broker) processRuntimeInfo(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	producers, consumers := b.clients.counts()
	topics, _ := b.topics.table.Count()
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	cache := b.db.BlockCache()
	table := map[string]string{
		"brokerVersionDesc":               remoting.VersionName(int(remoting.CurrentVersion)),
		"brokerVersion":                   itoa(int64(remoting.CurrentVersion)),
		"bootTimestamp":                   itoa(b.started.UnixMilli()),
		"runtime":                         formatRuntime(time.Since(b.started)),
		"putMessageBytesTotal":            itoa(b.stats.PutBytes()),
		"putMessageSizeTotal":             itoa(b.stats.PutBytes()),
		"putMessageTimesTotal":            itoa(b.stats.PutMessages()),
		"brokerActive":                    strconv.FormatBool(b.specialServicesActive()),
		"startAcceptSendRequestTimeStamp": itoa(b.current().StartAcceptSendRequestTimeStamp),
		// Sends waiting for the index under flow control (see admitted):
		// what RocketMQ's send queue holds.
		"sendThreadPoolQueueSize":     itoa(int64(len(b.admitSlots))),
		"sendThreadPoolQueueCapacity": itoa(int64(cap(b.admitSlots))),
		"commitLogMinOffset":          itoa(b.clog.MinOffset()),
		"commitLogMaxOffset":          itoa(b.clog.MaxOffset()),
		"commitLogFlushedOffset":      itoa(b.clog.FlushedOffset()),
		"dispatchBehindBytes":         itoa(b.disp.Lag()),
		"storeType":                   b.cfg.StoreType,
		"topicCount":                  itoa(int64(topics)),
		"producerGroupCount":          itoa(int64(producers)),
		"consumerGroupCount":          itoa(int64(consumers)),
		"heldPullRequests":            itoa(int64(b.holds.count())),
		"queueOffsetsInMemory":        itoa(int64(b.qoffsets.Len())),
		"indexDiskUsage":              itoa(int64(b.db.DiskUsage())),
		"indexWalSync":                b.cfg.IndexWALSyncMode(),
		"indexWalSyncs":               itoa(b.db.WALSyncs()),
		"indexWalFlushes":             itoa(b.db.Flushes()),
		"indexBlockCacheCapacity":     itoa(cache.Capacity),
		"indexBlockCacheBytes":        itoa(cache.Bytes),
		"indexBlockCacheHits":         itoa(cache.Hits),
		"indexBlockCacheMisses":       itoa(cache.Misses),
		"goHeapInuse":                 itoa(int64(ms.HeapInuse)),
		"connections":                 itoa(int64(b.server.ConnCount())),
	}
	b.stats.Runtime(table)
	addExporterKeys(table, b.stats.PutMessages(), b.stats.PutBytes(), b.clog.MaxOffset()-b.clog.FlushedOffset())
	if u, err := (vfs.OS{}).Statfs(b.cfg.StorePathRootDir); err == nil && u.Total > 0 {
		// RocketMQ's AdminBrokerProcessor: the file system of
		// storePathRootDir, Java's getTotalSpace and getFreeSpace.
		table["commitLogDirCapacity"] = fmt.Sprintf("Total : %s, Free : %s.",
			humanReadableByteCount(int64(u.Total)), humanReadableByteCount(int64(u.Free)))
		// The ConsumeQueues (or the index that holds them) live under the
		// store root: UtilAll.getDiskPartitionSpaceUsedPercent of it.
		table["consumeQueueDiskRatio"] = strconv.FormatFloat(u.UsedRatio()/100, 'f', -1, 64)
	} else {
		// RocketMQ writes -1 for a ratio it cannot read, and no
		// capacity; the exporter needs the key, so the sizes it cannot
		// know are 0.
		table["commitLogDirCapacity"] = "Total : 0 B, Free : 0 B."
		table["consumeQueueDiskRatio"] = "-1"
	}
	table["earliestMessageTimeStamp"] = itoa(b.earliestMessageTime())
	b.scheduleRuntimeInfo(table)
	b.timerRuntimeInfo(table, time.Now().UnixMilli())
	if used, err := b.clog.DiskUsedPercent(); err == nil {
		table["commitLogDiskRatio"] = strconv.FormatFloat(used/100, 'f', -1, 64)
	}
	if kv := b.kvCQ; kv != nil {
		hits, misses := kv.CacheStats()
		table["consumeQueueReadsFromMemory"] = itoa(hits)
		table["consumeQueueReadsFromIndex"] = itoa(misses)
	}
	if b.fileCQ != nil {
		table["consumeQueueOpenFiles"] = itoa(int64(b.fileCQ.OpenFiles()))
		table["consumeQueueMappings"] = itoa(int64(b.fileCQ.OpenMappings()))
	}
	if c := b.repl.client; c != nil {
		// A slave that found its CommitLog differing from its master's
		// takes nothing until mended (ha.ErrDiverged): where it parts,
		// and whether cutting there mends it.
		if d := c.Status().Diverged; d != nil {
			table["haDivergedAt"] = itoa(d.At)
			table["haDivergedExact"] = strconv.FormatBool(d.Exact)
		}
	}
	if c := b.repl.autoClient; c != nil && c.Status().NoConsistentPoint {
		// An AutoSwitch slave whose epochs share none with its master's
		// takes nothing until rebuilt from an empty store, as a classic
		// slave whose log differs from its first record: no cut mends it.
		// (Records past a consistent point are no standing state: the
		// Supervisor restarts the slave with the CommitLog cut there.)
		table["haDivergedAt"] = "0"
		table["haDivergedExact"] = "false"
	}
	// Which ConsumeQueue layouts are written, and which one serves reads.
	table["consumeQueueReads"] = b.cfg.StoreType
	table["consumeQueueDoubleWrite"] = strconv.FormatBool(b.cqMirror != nil)
	return jsonResponse(req, struct {
		Table map[string]string `json:"table"`
	}{table})
}

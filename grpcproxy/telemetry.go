package grpcproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// groupPolicy reads a consumer group's configuration from one master of
// the topic (GET_SUBSCRIPTIONGROUP_CONFIG). A group no master knows yet
// (brokers create groups on first use) has RocketMQ's defaults.
func (s *Server) groupPolicy(ctx context.Context, r *topicRoute, group string) groupPolicy {
	return s.groupPolicyAt(ctx, sortedValues(r.masters), group)
}

// groupPolicyAt reads a consumer group's configuration from the first of
// the brokers that answers, or gives RocketMQ's defaults; answers are
// cached for Config.GroupPolicyTTL. A cached policy is answered at
// once; once older than the TTL it is refreshed in the background
// meanwhile, and kept when no broker answers the refresh, as routes are
// (a call does not wait for a broker that hangs). Only a group not cached
// waits for the brokers: it gets the defaults, not cached, when no broker
// answered (a FIFO group must not be taken for a concurrent one for a
// whole TTL after a broker's hiccup) or ctx ended first.
func (s *Server) groupPolicyAt(ctx context.Context, brokers []string, group string) groupPolicy {
	if c, ok := s.policies.Get(group); ok {
		if time.Since(c.at) >= s.cfg.GroupPolicyTTL && c.refreshing.CompareAndSwap(false, true) {
			s.loadGroupPolicy(brokers, group, c) // not waited for: its result is cached
		}
		return c.gp
	}
	select {
	case r := <-s.loadGroupPolicy(brokers, group, nil):
		if r.Err != nil {
			return defaultGroupPolicy()
		}
		return r.Val.(groupPolicy)
	case <-ctx.Done():
		return defaultGroupPolicy()
	}
}

// defaultGroupPolicy is RocketMQ's subscription group defaults.
func defaultGroupPolicy() groupPolicy { return groupPolicy{retryMaxTimes: 16} }

// loadGroupPolicy reads the group's policy, or joins the read of it on
// its way, as background work: not cancelled with the caller that
// started it, but with Shutdown, and bounded by a request timeout per
// broker. old is the cached policy, if any.
func (s *Server) loadGroupPolicy(brokers []string, group string, old *cachedPolicy) <-chan singleflight.Result {
	return s.policyLoads.DoChan(group, func() (any, error) {
		return s.bg.do(func(ctx context.Context) (any, error) {
			ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout*time.Duration(max(len(brokers), 1)))
			defer cancel()
			return s.readGroupPolicy(ctx, brokers, group, old), nil
		})
	})
}

// readGroupPolicy asks the brokers in turn for the group's configuration
// and caches what the first that answers gives (the defaults when it
// knows no such group). When none answers, old, the cached policy, if
// any, is kept for one more TTL; without one the defaults are returned,
// not cached.
func (s *Server) readGroupPolicy(ctx context.Context, brokers []string, group string, old *cachedPolicy) groupPolicy {
	gp := defaultGroupPolicy()
	for _, addr := range brokers {
		resp, err := s.invoke(ctx, addr, 0, remoting.NewRequest(remoting.GetSubscriptionGroupConfig, map[string]string{"group": group}, nil))
		if err != nil {
			continue
		}
		if resp.Code != remoting.Success {
			if resp.Code == remoting.SubscriptionGroupNotExist {
				s.policies.Add(group, &cachedPolicy{gp: gp, at: time.Now()})
				return gp
			}
			continue
		}
		read, err := decodeGroupPolicy(resp.Body)
		if err != nil {
			continue
		}
		s.policies.Add(group, &cachedPolicy{gp: read, at: time.Now()})
		return read
	}
	if old != nil {
		s.policies.Add(group, &cachedPolicy{gp: old.gp, at: time.Now()})
		return old.gp
	}
	return gp
}

// decodeGroupPolicy reads a broker's answer to
// GET_SUBSCRIPTION_GROUP_CONFIG (RocketMQ's SubscriptionGroupConfig as
// JSON) into the part of it the proxy tells consumers: orderly or not,
// the number of retries and the retry policy.
func decodeGroupPolicy(body []byte) (groupPolicy, error) {
	var gc meta.SubscriptionGroupConfig
	if err := json.Unmarshal(body, &gc); err != nil {
		return groupPolicy{}, fmt.Errorf("decode a group's configuration: %w", err)
	}
	return groupPolicy{orderly: gc.ConsumeMessageOrderly, retryMaxTimes: gc.RetryMaxTimes, retry: gc.GroupRetryPolicy}, nil
}

// Telemetry is the client's settings stream: each Settings the client
// sends is stored and answered with the settings that apply (the proxy's
// retry policy and limits for producers, the group's policy for
// consumers). Clients wait for that first answer before they start.
func (s *Server) Telemetry(stream rmqpb.MessagingService_TelemetryServer) error {
	ctx := stream.Context()
	who := callerOf(ctx)
	ts := newTelemetryStream(stream)
	opened := false
	defer func() {
		if opened {
			s.streams.close(who.clientID, ts)
		}
	}()
	for {
		cmd, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if meta.IsBlank(who.clientID) {
			// As RocketMQ's proxy, whatever the command: the status, then
			// the end of the stream.
			return ts.send(&rmqpb.TelemetryCommand{Status: clientIDRequired()})
		}
		settings := cmd.GetSettings()
		if settings == nil {
			continue // thread stack traces and verify results: nothing asked for them
		}
		if err := checkSettings(settings); err != nil {
			s.log.Debug().Err(err).Str("client", who.clientID).Msg("client settings refused")
			return settingsRefusal(err)
		}
		if !opened {
			// Registered only now, once the stream's first settings passed
			// the access check: a stream that names another client's id
			// cannot take its place before.
			s.streams.open(who.clientID, ts)
			opened = true
		}
		s.clients.setSettings(who.clientID, settings)
		answer := s.answerSettings(ctx, settings)
		if pub := settings.GetPublishing(); pub != nil {
			topics := map[string]bool{}
			for _, t := range pub.GetTopics() {
				topics[wrap(t)] = true
			}
			s.streams.setTopics(ts, topics)
			// Registered at once, so that the brokers' transaction checks
			// find the producer before its first heartbeat.
			s.producerHeartbeat(ctx, who.clientID, settings)
		}
		if sub := settings.GetSubscription(); sub != nil && consumeTypeOf(settings.GetClientType()) != "" {
			// As RocketMQ's proxy (processAndWriteClientSettings): a
			// consumer is registered with its settings, under the
			// subscriptions and version they bring, before its first
			// heartbeat.
			s.consumerHeartbeat(ctx, who.clientID, wrap(sub.GetGroup()), settings)
		}
		s.log.Debug().Str("client", who.clientID).Str("type", settings.GetClientType().String()).Msg("client settings")
		if err := ts.send(&rmqpb.TelemetryCommand{Status: okStatus(), Command: &rmqpb.TelemetryCommand_Settings{Settings: answer}}); err != nil {
			return err
		}
	}
}

// checkSettings refuses settings as RocketMQ's proxy does: a producer's
// topics and a consumer's group must be legal names, and settings must be
// a producer's or a consumer's.
func checkSettings(in *rmqpb.Settings) error {
	switch {
	case in.GetPublishing() != nil:
		for _, t := range in.GetPublishing().GetTopics() {
			if err := checkTopic(wrap(t)); err != nil {
				return err
			}
		}
		return nil
	case in.GetSubscription() != nil:
		return checkGroup(wrap(in.GetSubscription().GetGroup()))
	}
	return fail(rmqpb.Code_BAD_REQUEST, "there is no publishing or subscription data in settings")
}

// settingsRefusal is the end of a telemetry stream whose settings were
// refused, as RocketMQ's proxy ends it (processTelemetryException): gRPC's
// INVALID_ARGUMENT for a refusal of the client's input (a status code
// from BAD_REQUEST up to INTERNAL_ERROR), INTERNAL for any other.
func settingsRefusal(err error) error {
	st := statusOf(err)
	code := codes.Internal
	if st.GetCode() >= rmqpb.Code_BAD_REQUEST && st.GetCode() < rmqpb.Code_INTERNAL_ERROR {
		code = codes.InvalidArgument
	}
	return status.Error(code, "process client telemetryCommand failed. "+st.GetMessage())
}

// answerSettings merges a client's settings, which checkSettings passed,
// with what applies to it.
func (s *Server) answerSettings(ctx context.Context, in *rmqpb.Settings) *rmqpb.Settings {
	if in.GetPublishing() != nil {
		return s.producerSettings(in)
	}
	sub := in.GetSubscription()
	group := wrap(sub.GetGroup())
	gp := groupPolicy{retryMaxTimes: 16}
	for _, e := range sub.GetSubscriptions() {
		if r, err := s.routes.get(ctx, wrap(e.GetTopic())); err == nil {
			gp = s.groupPolicy(ctx, r, group)
			break
		}
	}
	return s.consumerSettings(in, gp)
}

// consumerSettingsOf returns the settings a consumer's receives follow: its
// stored settings merged with the group's policy (defaults when it sent
// none). A receive without settings is served on purpose, where
// RocketMQ's ReceiveMessageActivity fails it (INTERNAL_SERVER_ERROR from
// a null): the Go client v5.1.4 goes on receiving after its telemetry
// stream broke (a proxy restart) and opens a new one only at its next
// settings sync, up to 5 minutes later; RocketMQ's check would fail
// every receive of that client until then.
func (s *Server) consumerSettingsOf(ctx context.Context, clientID string, r *topicRoute, group string) *rmqpb.Settings {
	in := s.clients.settings(clientID)
	if in == nil {
		in = &rmqpb.Settings{}
	}
	return s.consumerSettings(in, s.groupPolicy(ctx, r, group))
}

// Heartbeat keeps the client alive in the proxy and registers a consumer
// with the masters of the topics it subscribes (HEART_BEAT, see
// consumerHeartbeat), so that the brokers list it among the group's
// clients.
// As RocketMQ's proxy, it takes the client's type from its settings: a
// client that sent none to this proxy is UNRECOGNIZED_CLIENT_TYPE, a
// consumer's heartbeat without a legal group ILLEGAL_CONSUMER_GROUP.
func (s *Server) Heartbeat(ctx context.Context, req *rmqpb.HeartbeatRequest) (*rmqpb.HeartbeatResponse, error) {
	who := callerOf(ctx)
	if meta.IsBlank(who.clientID) {
		return &rmqpb.HeartbeatResponse{Status: clientIDRequired()}, nil
	}
	s.clients.touch(who.clientID)
	// As RocketMQ's proxy: what the client is comes from its settings.
	settings := s.clients.settings(who.clientID)
	if settings == nil {
		return &rmqpb.HeartbeatResponse{Status: unknownClient()}, nil
	}
	switch ct := settings.GetClientType(); ct {
	case rmqpb.ClientType_PRODUCER:
		s.producerHeartbeat(ctx, who.clientID, settings)
	case rmqpb.ClientType_PUSH_CONSUMER, rmqpb.ClientType_SIMPLE_CONSUMER:
		group := wrap(req.GetGroup())
		if err := checkGroup(group); err != nil {
			return &rmqpb.HeartbeatResponse{Status: statusOf(err)}, nil
		}
		s.consumerHeartbeat(ctx, who.clientID, group, settings)
	default:
		return &rmqpb.HeartbeatResponse{Status: &rmqpb.Status{Code: rmqpb.Code_UNRECOGNIZED_CLIENT_TYPE, Message: ct.String()}}, nil
	}
	return &rmqpb.HeartbeatResponse{Status: okStatus()}, nil
}

// unknownClient is the status of a heartbeat or termination of a client
// whose settings the proxy does not have (it sent none on a telemetry
// stream to this proxy, or they were forgotten), as RocketMQ's proxy
// answers it.
func unknownClient() *rmqpb.Status {
	return &rmqpb.Status{Code: rmqpb.Code_UNRECOGNIZED_CLIENT_TYPE, Message: "cannot find client settings for this client"}
}

// tell sends a client's registration (or its end) to a broker, logging a
// failure: the client's next heartbeat tries again.
func (s *Server) tell(ctx context.Context, clientID, addr, what string, req *remoting.Command) {
	resp, err := s.invoke(ctx, addr, 0, req)
	if err == nil && resp.Code != remoting.Success {
		err = remotingFailure(what, resp)
	}
	if err != nil {
		s.log.Warn().Err(err).Str("client", clientID).Str("broker", addr).Msg(what + " to broker failed")
	}
}

// mastersOf maps each master of the given (wrapped) topics to the topics
// it holds; topics without a route are left out.
func (s *Server) mastersOf(ctx context.Context, topics []string) map[string][]string {
	out := map[string][]string{}
	for _, topic := range topics {
		r, err := s.routes.get(ctx, topic)
		if err != nil {
			continue
		}
		for _, addr := range r.masters {
			out[addr] = append(out[addr], topic)
		}
	}
	return out
}

// subscribedTopics and publishedTopics are the wrapped topics of a
// consumer's subscriptions and of a producer's settings.
func subscribedTopics(settings *rmqpb.Settings) []string {
	var topics []string
	for _, e := range settings.GetSubscription().GetSubscriptions() {
		topics = append(topics, wrap(e.GetTopic()))
	}
	return topics
}

func publishedTopics(settings *rmqpb.Settings) []string {
	var topics []string
	for _, t := range settings.GetPublishing().GetTopics() {
		topics = append(topics, wrap(t))
	}
	return topics
}

// heartbeatConsumer and heartbeatSubscription are the parts of a
// HEART_BEAT body (RocketMQ's HeartbeatData) a POP consumer sends.
type heartbeatConsumer struct {
	GroupName           string                  `json:"groupName"`
	ConsumeType         string                  `json:"consumeType"`
	MessageModel        string                  `json:"messageModel"`
	ConsumeFromWhere    string                  `json:"consumeFromWhere"`
	SubscriptionDataSet []heartbeatSubscription `json:"subscriptionDataSet"`
	UnitMode            bool                    `json:"unitMode"`
}

type heartbeatSubscription struct {
	Topic          string   `json:"topic"`
	SubString      string   `json:"subString"`
	TagsSet        []string `json:"tagsSet"`
	CodeSet        []int    `json:"codeSet"`
	SubVersion     int64    `json:"subVersion"`
	ExpressionType string   `json:"expressionType"`
}

// consumeTypeOf is the ConsumeType RocketMQ's proxy registers a gRPC
// consumer under (ClientActivity.buildConsumeType): a simple consumer is
// CONSUME_ACTIVELY, a push consumer CONSUME_PASSIVELY; other clients are
// no consumers ("").
func consumeTypeOf(ct rmqpb.ClientType) string {
	switch ct {
	case rmqpb.ClientType_SIMPLE_CONSUMER:
		return "CONSUME_ACTIVELY"
	case rmqpb.ClientType_PUSH_CONSUMER:
		return "CONSUME_PASSIVELY"
	}
	return ""
}

// consumerHeartbeat registers a consumer of group with the masters of the
// topics its settings subscribe (HEART_BEAT). Its subscriptions carry the
// version of its settings (clientRegistry.subVersion), so that a heartbeat
// leaves the subscriptions the brokers keep as its settings made them.
func (s *Server) consumerHeartbeat(ctx context.Context, clientID, group string, settings *rmqpb.Settings) {
	body := consumerHeartbeatBody(clientID, group, settings, s.clients.subVersion(clientID))
	for addr := range s.mastersOf(ctx, subscribedTopics(settings)) {
		s.tell(ctx, clientID, addr, "consumer heartbeat", remoting.NewRequest(remoting.HeartBeat, nil, body))
	}
}

// consumerHeartbeatBody builds a consumer's HEART_BEAT body from its
// settings' subscriptions, each of version subVersion.
func consumerHeartbeatBody(clientID, group string, settings *rmqpb.Settings, subVersion int64) []byte {
	cd := heartbeatConsumer{GroupName: group, ConsumeType: consumeTypeOf(settings.GetClientType()), MessageModel: "CLUSTERING",
		ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET", SubscriptionDataSet: []heartbeatSubscription{}}
	for _, e := range settings.GetSubscription().GetSubscriptions() {
		expType, exp := filterOf(e.GetExpression())
		hs := heartbeatSubscription{Topic: wrap(e.GetTopic()), SubString: exp, ExpressionType: expType, TagsSet: []string{}, CodeSet: []int{}, SubVersion: subVersion}
		if expType == "TAG" && exp != "*" {
			for _, t := range strings.Split(exp, "||") {
				if t = strings.TrimSpace(t); t != "" {
					hs.TagsSet = append(hs.TagsSet, t)
				}
			}
		}
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, hs)
	}
	body, _ := json.Marshal(struct {
		ClientID        string              `json:"clientID"`
		ProducerDataSet []struct{}          `json:"producerDataSet"`
		ConsumerDataSet []heartbeatConsumer `json:"consumerDataSet"`
	}{clientID, []struct{}{}, []heartbeatConsumer{cd}})
	return body
}

// producerHeartbeat registers a producer with the masters of the topics
// it publishes to, under each topic as its producer group (the group
// RocketMQ's proxy gives gRPC producers, which transactional half
// messages carry in PGROUP): the brokers' transaction checks then come to
// the proxy, which passes them on over the producer's telemetry stream.
func (s *Server) producerHeartbeat(ctx context.Context, clientID string, settings *rmqpb.Settings) {
	type producerData struct {
		GroupName string `json:"groupName"`
	}
	for addr, groups := range s.mastersOf(ctx, publishedTopics(settings)) {
		pds := make([]producerData, len(groups))
		for i, g := range groups {
			pds[i] = producerData{GroupName: g}
		}
		body, _ := json.Marshal(struct {
			ClientID        string         `json:"clientID"`
			ProducerDataSet []producerData `json:"producerDataSet"`
			ConsumerDataSet []struct{}     `json:"consumerDataSet"`
		}{clientID, pds, []struct{}{}})
		s.tell(ctx, clientID, addr, "producer heartbeat", remoting.NewRequest(remoting.HeartBeat, nil, body))
	}
}

// filterOf returns the Remoting expression type and expression of a
// filter: TAG "*" when none is given.
func filterOf(f *rmqpb.FilterExpression) (expType, exp string) {
	exp = strings.TrimSpace(f.GetExpression())
	if f.GetType() == rmqpb.FilterType_SQL {
		return "SQL92", exp
	}
	if exp == "" {
		exp = "*"
	}
	return "TAG", exp
}

// NotifyClientTermination unregisters a closing client from the brokers
// (UNREGISTER_CLIENT) and forgets its settings and renewals. Its status
// is RocketMQ proxy's: UNRECOGNIZED_CLIENT_TYPE for a client whose
// settings the proxy does not have, ILLEGAL_CONSUMER_GROUP for a
// consumer's without a legal group.
func (s *Server) NotifyClientTermination(ctx context.Context, req *rmqpb.NotifyClientTerminationRequest) (*rmqpb.NotifyClientTerminationResponse, error) {
	who := callerOf(ctx)
	if meta.IsBlank(who.clientID) {
		return &rmqpb.NotifyClientTerminationResponse{Status: clientIDRequired()}, nil
	}
	settings := s.clients.settings(who.clientID)
	s.clients.remove(who.clientID)
	s.renewer.dropClient(who.clientID)
	switch settings.GetClientType() {
	case rmqpb.ClientType_PRODUCER:
	case rmqpb.ClientType_PUSH_CONSUMER, rmqpb.ClientType_SIMPLE_CONSUMER:
		if err := checkGroup(wrap(req.GetGroup())); err != nil {
			return &rmqpb.NotifyClientTerminationResponse{Status: statusOf(err)}, nil
		}
	default:
		// Its renewals are given back all the same: a client going away
		// does not consume them.
		if settings == nil {
			return &rmqpb.NotifyClientTerminationResponse{Status: unknownClient()}, nil
		}
		return &rmqpb.NotifyClientTerminationResponse{Status: &rmqpb.Status{Code: rmqpb.Code_UNRECOGNIZED_CLIENT_TYPE, Message: settings.GetClientType().String()}}, nil
	}
	for addr, groups := range s.mastersOf(ctx, publishedTopics(settings)) {
		for _, g := range groups {
			s.tell(ctx, who.clientID, addr, "unregister", remoting.NewRequest(remoting.UnregisterClient,
				map[string]string{"clientID": who.clientID, "producerGroup": g}, nil))
		}
	}
	if req.GetGroup() != nil && settings.GetSubscription() != nil {
		group := wrap(req.GetGroup())
		for addr := range s.mastersOf(ctx, subscribedTopics(settings)) {
			s.tell(ctx, who.clientID, addr, "unregister", remoting.NewRequest(remoting.UnregisterClient,
				map[string]string{"clientID": who.clientID, "consumerGroup": group}, nil))
		}
	}
	return &rmqpb.NotifyClientTerminationResponse{Status: okStatus()}, nil
}

// cachedPolicy is a group's policy as read at a time; groups' policies are
// kept for the route TTL, so that receives do not each ask a broker.
type cachedPolicy struct {
	gp groupPolicy
	at time.Time
	// refreshing is set once a refresh of this policy, past its TTL, has
	// been started.
	refreshing atomic.Bool
}

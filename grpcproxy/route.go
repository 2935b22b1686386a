package grpcproxy

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"unicode/utf16"

	"google.golang.org/grpc/peer"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
)

// QueryRoute answers a topic's queues, every one served at the endpoint
// the client used: in cluster mode the proxy, not the broker, is what
// clients talk to.
func (s *Server) QueryRoute(ctx context.Context, req *rmqpb.QueryRouteRequest) (*rmqpb.QueryRouteResponse, error) {
	s.clients.touch(callerOf(ctx).clientID)
	topic := wrap(req.GetTopic())
	if err := checkTopic(topic); err != nil {
		return &rmqpb.QueryRouteResponse{Status: statusOf(err)}, nil
	}
	r, err := s.routes.get(ctx, topic)
	if err != nil {
		s.log.Debug().Err(err).Str("topic", topic).Msg("query route failed")
		return &rmqpb.QueryRouteResponse{Status: statusOf(err)}, nil
	}
	endpoints := s.endpointsFor(ctx, req.GetEndpoints())
	var mqs []*rmqpb.MessageQueue
	for _, qd := range r.route.QueueDatas {
		if _, ok := r.masters[qd.BrokerName]; !ok {
			continue
		}
		broker := &rmqpb.Broker{Name: qd.BrokerName, Id: int32(namesrv.MasterID), Endpoints: endpoints}
		mqs = append(mqs, queuesOf(qd, req.GetTopic(), r.types, broker)...)
	}
	return &rmqpb.QueryRouteResponse{Status: okStatus(), MessageQueues: mqs}, nil
}

// queuesOf lists a broker group's queues as RocketMQ's proxy does:
// read-only ones first, then write-only, then read-write, numbered from 0.
func queuesOf(qd namesrv.QueueData, topic *rmqpb.Resource, types []rmqpb.MessageType, broker *rmqpb.Broker) []*rmqpb.MessageQueue {
	readable, writable := qd.Perm&namesrv.PermRead != 0, qd.Perm&namesrv.PermWrite != 0
	var r, w, rw, none int32
	switch {
	case readable && writable:
		rw = min(qd.ReadQueueNums, qd.WriteQueueNums)
		r, w = qd.ReadQueueNums-rw, qd.WriteQueueNums-rw
	case writable:
		w = qd.WriteQueueNums
	case readable:
		r = qd.ReadQueueNums
	default:
		none = max(1, qd.ReadQueueNums, qd.WriteQueueNums)
	}
	var mqs []*rmqpb.MessageQueue
	id := int32(0)
	add := func(n int32, p rmqpb.Permission) {
		for range n {
			mqs = append(mqs, &rmqpb.MessageQueue{Topic: topic, Id: id, Permission: p, Broker: broker, AcceptMessageTypes: types})
			id++
		}
	}
	add(r, rmqpb.Permission_READ)
	add(w, rmqpb.Permission_WRITE)
	add(rw, rmqpb.Permission_READ_WRITE)
	add(none, rmqpb.Permission_NONE)
	return mqs
}

// endpointsFor returns the endpoints a client should reach brokers at:
// the hosts it used to reach the proxy with the proxy's port (the port it
// named with Config.EndpointPortFromRequest, RocketMQ proxy's
// useEndpointPortFromRequest), or, when it names none, the address its
// connection reached.
func (s *Server) endpointsFor(ctx context.Context, asked *rmqpb.Endpoints) *rmqpb.Endpoints {
	if asked != nil && len(asked.GetAddresses()) > 0 {
		if s.cfg.EndpointPortFromRequest {
			return asked
		}
		_, port, _ := net.SplitHostPort(s.Addr().String())
		p, _ := strconv.Atoi(port)
		out := &rmqpb.Endpoints{Scheme: asked.GetScheme()}
		for _, a := range asked.GetAddresses() {
			out.Addresses = append(out.Addresses, &rmqpb.Address{Host: a.GetHost(), Port: int32(p)})
		}
		return out
	}
	// The address the client reached, not the listen address ("::" when
	// the proxy listens on every interface).
	addr := s.Addr()
	if p, ok := peer.FromContext(ctx); ok && p.LocalAddr != nil {
		addr = p.LocalAddr
	}
	host, port, _ := net.SplitHostPort(addr.String())
	p, _ := strconv.Atoi(port)
	scheme := rmqpb.AddressScheme_DOMAIN_NAME
	if ip, err := netip.ParseAddr(host); err == nil {
		scheme = rmqpb.AddressScheme_IPv6
		if ip.Unmap().Is4() {
			scheme, host = rmqpb.AddressScheme_IPv4, ip.Unmap().String()
		}
	}
	return &rmqpb.Endpoints{Scheme: scheme, Addresses: []*rmqpb.Address{{Host: host, Port: int32(p)}}}
}

// QueryAssignment answers which queues a push consumer of the group
// receives from: one queue -1 per readable broker group (the broker then
// pops from all of them), or every readable queue when the group consumes
// in order.
func (s *Server) QueryAssignment(ctx context.Context, req *rmqpb.QueryAssignmentRequest) (*rmqpb.QueryAssignmentResponse, error) {
	s.clients.touch(callerOf(ctx).clientID)
	topic, group := wrap(req.GetTopic()), wrap(req.GetGroup())
	if err := checkTopic(topic); err != nil {
		return &rmqpb.QueryAssignmentResponse{Status: statusOf(err)}, nil
	}
	if err := checkGroup(group); err != nil {
		return &rmqpb.QueryAssignmentResponse{Status: statusOf(err)}, nil
	}
	r, err := s.routes.get(ctx, topic)
	if err != nil {
		return &rmqpb.QueryAssignmentResponse{Status: statusOf(err)}, nil
	}
	gp := s.groupPolicy(ctx, r, group)
	endpoints := s.endpointsFor(ctx, req.GetEndpoints())
	var as []*rmqpb.Assignment
	for _, qd := range r.readableBrokers() {
		broker := &rmqpb.Broker{Name: qd.BrokerName, Id: int32(namesrv.MasterID), Endpoints: endpoints}
		perm := rmqpb.Permission_READ
		if qd.Perm&namesrv.PermWrite != 0 {
			perm = rmqpb.Permission_READ_WRITE
		}
		if gp.orderly {
			for i := range qd.ReadQueueNums {
				as = append(as, &rmqpb.Assignment{MessageQueue: &rmqpb.MessageQueue{Topic: req.GetTopic(), Id: i, Permission: perm, Broker: broker}})
			}
			continue
		}
		as = append(as, &rmqpb.Assignment{MessageQueue: &rmqpb.MessageQueue{Topic: req.GetTopic(), Id: -1, Permission: perm, Broker: broker}})
	}
	if len(as) == 0 {
		return &rmqpb.QueryAssignmentResponse{Status: &rmqpb.Status{Code: rmqpb.Code_FORBIDDEN, Message: "no readable queue"}}, nil
	}
	return &rmqpb.QueryAssignmentResponse{Status: okStatus(), Assignments: as}, nil
}

// checkTopic refuses the topic names RocketMQ's proxy refuses
// (GrpcValidator.validateTopic, which applies the client's
// Validators.checkTopic), in its order and with its messages: blank,
// longer than 127, characters other than ^[%|a-zA-Z0-9_-]+$, a system
// topic.
func checkTopic(topic string) error {
	switch {
	case meta.IsBlank(topic):
		return fail(rmqpb.Code_ILLEGAL_TOPIC, "The specified topic is blank")
	case javaLength(topic) > maxTopicLength:
		return fail(rmqpb.Code_ILLEGAL_TOPIC, "The specified topic is longer than topic max length %d.", maxTopicLength)
	case !meta.ValidTopicChars(topic):
		return fail(rmqpb.Code_ILLEGAL_TOPIC, "The specified topic[%s] contains illegal characters, allowing only ^[%%|a-zA-Z0-9_-]+$", topic)
	case meta.IsSystemTopic(topic):
		return fail(rmqpb.Code_ILLEGAL_TOPIC, "cannot access system topic")
	}
	return nil
}

// maxTopicLength and maxGroupLength are the longest topic and group names
// RocketMQ's proxy takes (Validators.TOPIC_MAX_LENGTH, GROUP_MAX_LENGTH).
// Groups are held to 120 since apache/rocketmq#9563 (255 before): a
// group's name goes into its retry and dead-letter topics, which may be
// 255 long.
const (
	maxTopicLength = 127
	maxGroupLength = 120
)

// checkGroup refuses the consumer group names RocketMQ's proxy refuses
// (GrpcValidator.validateConsumerGroup, which applies the client's
// Validators.checkGroup), in its order and with its messages: blank,
// longer than 120, characters other than ^[%|a-zA-Z0-9_-]+$, a system
// group.
func checkGroup(group string) error {
	switch {
	case meta.IsBlank(group):
		return fail(rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "the specified group is blank")
	case javaLength(group) > maxGroupLength:
		return fail(rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "the specified group[%s] is longer than group max length: %d.", group, maxGroupLength)
	case !meta.ValidTopicChars(group):
		return fail(rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "the specified group[%s] contains illegal characters, allowing only ^[%%|a-zA-Z0-9_-]+$", group)
	case meta.IsSystemGroup(group):
		return fail(rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")
	}
	return nil
}

// javaLength is the length Java's String.length gives s: its UTF-16 code
// units. A name of allowed characters is ASCII, where it is len(s); it
// matters only to which refusal a name of other characters meets first.
func javaLength(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

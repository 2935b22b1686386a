package grpcproxy

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/rocketkv/rocketkv/auth"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// Metadata keys of a signed call: RocketMQ 5's clients send
//
//	authorization: MQv2-HMAC-SHA1 Credential=<user>, SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1 of the date-time with the password>
//	x-mq-date-time: 20261202T081500Z
const (
	mdAuthorization = "authorization"
	mdDateTime      = "x-mq-date-time"
)

// credentialsOf reads the user and the signature of a call; ok is false
// when the call is not signed or the header is malformed.
func credentialsOf(md metadata.MD) (user, signature, dateTime string, ok bool) {
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	scheme, rest, found := strings.Cut(first(mdAuthorization), " ")
	if !found || scheme != "MQv2-HMAC-SHA1" {
		return "", "", "", false
	}
	for _, item := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(item), "=")
		switch k {
		case "Credential":
			user = v
		case "Signature":
			signature = v
		}
	}
	dateTime = first(mdDateTime)
	return user, signature, dateTime, user != "" && signature != ""
}

// signatureMatches reports whether signature (hex, any case) is the
// HMAC-SHA1 of dateTime under password, as the clients compute it.
func signatureMatches(signature, dateTime, password string) bool {
	got, err := hex.DecodeString(signature)
	if err != nil {
		return false
	}
	mac := hmac.New(sha1.New, []byte(password))
	mac.Write([]byte(dateTime))
	return hmac.Equal(got, mac.Sum(nil))
}

// needsOf lists what a call does to which resources, as RocketMQ's proxy
// builds its authorization contexts: sends publish to the topic, receives
// and acknowledgements subscribe to the topic and the group, a route
// query does either to the topic, and the settings a client sends say
// which topics it publishes to or which it subscribes to for its group.
func needsOf(req any) []auth.Need {
	topic := func(r *rmqpb.Resource, actions ...auth.Action) auth.Need {
		return auth.Need{Resource: auth.Topic(wrap(r)), Actions: actions}
	}
	group := func(r *rmqpb.Resource) auth.Need {
		return auth.Need{Resource: auth.Group(wrap(r)), Actions: []auth.Action{auth.ActionSub}}
	}
	pub, sub := auth.ActionPub, auth.ActionSub
	switch r := req.(type) {
	case *rmqpb.QueryRouteRequest:
		return []auth.Need{topic(r.GetTopic(), pub, sub)}
	case *rmqpb.SendMessageRequest:
		var needs []auth.Need
		for _, m := range r.GetMessages() {
			needs = append(needs, topic(m.GetTopic(), pub))
		}
		return needs
	case *rmqpb.EndTransactionRequest:
		return []auth.Need{topic(r.GetTopic(), pub)}
	case *rmqpb.RecallMessageRequest:
		return []auth.Need{topic(r.GetTopic(), pub)}
	case *rmqpb.QueryAssignmentRequest:
		return []auth.Need{topic(r.GetTopic(), sub), group(r.GetGroup())}
	case *rmqpb.ReceiveMessageRequest:
		return []auth.Need{topic(r.GetMessageQueue().GetTopic(), sub), group(r.GetGroup())}
	case *rmqpb.AckMessageRequest:
		return []auth.Need{topic(r.GetTopic(), sub), group(r.GetGroup())}
	case *rmqpb.ChangeInvisibleDurationRequest:
		return []auth.Need{topic(r.GetTopic(), sub), group(r.GetGroup())}
	case *rmqpb.ForwardMessageToDeadLetterQueueRequest:
		return []auth.Need{topic(r.GetTopic(), sub), group(r.GetGroup())}
	case *rmqpb.HeartbeatRequest:
		if r.GetGroup() != nil {
			return []auth.Need{group(r.GetGroup())}
		}
	case *rmqpb.TelemetryCommand:
		s := r.GetSettings()
		var needs []auth.Need
		for _, t := range s.GetPublishing().GetTopics() {
			needs = append(needs, topic(t, pub))
		}
		if sub := s.GetSubscription(); sub != nil {
			for _, e := range sub.GetSubscriptions() {
				needs = append(needs, topic(e.GetTopic(), auth.ActionSub))
			}
			needs = append(needs, group(sub.GetGroup()))
		}
		return needs
	}
	return nil
}

// checkCall authenticates and authorizes one call (or one message of a
// stream) with the proxy's checker; nil when allowed. A refusal is a gRPC
// status, Unauthenticated or PermissionDenied with RocketMQ's remark, and
// a log line.
func (s *Server) checkCall(ctx context.Context, method string, req any) error {
	if s.checker == nil {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	user, sig, dateTime, signed := credentialsOf(md)
	var remote netip.Addr
	if p, ok := peer.FromContext(ctx); ok {
		if ta, ok := p.Addr.(*net.TCPAddr); ok {
			remote, _ = netip.AddrFromSlice(ta.IP)
			remote = remote.Unmap()
		}
	}
	err := s.checker.CheckSigned(user, func(password string) bool {
		return signed && signatureMatches(sig, dateTime, password)
	}, remote, needsOf(req))
	if err == nil {
		return nil
	}
	var denied *auth.Denied
	if !errors.As(err, &denied) {
		s.log.Error().Err(err).Str("method", method).Str("user", user).Msg("access check failed")
		return status.Error(codes.Unavailable, "access check failed: "+err.Error())
	}
	code := codes.PermissionDenied
	if strings.Contains(denied.Reason, "signature") || strings.Contains(denied.Reason, "is not found") || strings.Contains(denied.Reason, "cannot be null") {
		code = codes.Unauthenticated
	}
	s.log.Warn().Str("method", method).Str("user", user).Stringer("remote", remote).Str("reason", denied.Reason).Msg("call refused")
	return status.Error(code, denied.Reason)
}

// authUnary checks a unary call before its handler.
func (s *Server) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.checkCall(ctx, info.FullMethod, req); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

// authStream checks every message a streaming call receives (the receive's
// request, each telemetry command).
func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if s.checker == nil {
		return h(srv, ss)
	}
	return h(srv, &checkedStream{ServerStream: ss, s: s, method: info.FullMethod})
}

// checkedStream is a server stream whose received messages are checked.
type checkedStream struct {
	grpc.ServerStream
	s      *Server
	method string
}

func (c *checkedStream) RecvMsg(m any) error {
	if err := c.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return c.s.checkCall(c.Context(), c.method, m)
}

// remoteAuthStore reads users and access lists from the brokers
// (AUTH_GET_USER, AUTH_GET_ACL), as RocketMQ's proxy reads them, keeping
// each answer for a while (aclCacheRefreshSeconds).
type remoteAuthStore struct {
	s   *Server
	ttl time.Duration

	mu    sync.Mutex
	users map[string]cachedUser
	acls  map[string]cachedACL
}

type cachedUser struct {
	u  meta.UserInfo
	ok bool
	at time.Time
}

type cachedACL struct {
	a  meta.AclInfo
	ok bool
	at time.Time
}

// User implements auth.Store.
func (r *remoteAuthStore) User(name string) (meta.UserInfo, bool, error) {
	r.mu.Lock()
	c, hit := r.users[name]
	r.mu.Unlock()
	if hit && time.Since(c.at) < r.ttl {
		return c.u, c.ok, nil
	}
	resp, err := r.ask(remoting.AuthGetUser, map[string]string{"username": name})
	if err != nil {
		return meta.UserInfo{}, false, err
	}
	c = cachedUser{at: time.Now()}
	if len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, &c.u); err != nil {
			return meta.UserInfo{}, false, fmt.Errorf("user %s from a broker: %w", name, err)
		}
		c.ok = true
	}
	r.mu.Lock()
	r.users[name] = c
	r.mu.Unlock()
	return c.u, c.ok, nil
}

// ACL implements auth.Store.
func (r *remoteAuthStore) ACL(subject string) (meta.AclInfo, bool, error) {
	r.mu.Lock()
	c, hit := r.acls[subject]
	r.mu.Unlock()
	if hit && time.Since(c.at) < r.ttl {
		return c.a, c.ok, nil
	}
	resp, err := r.ask(remoting.AuthGetACL, map[string]string{"subject": subject})
	if err != nil && !errors.Is(err, errNoSuchSubject) {
		return meta.AclInfo{}, false, err
	}
	c = cachedACL{at: time.Now()}
	if err == nil && len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, &c.a); err != nil {
			return meta.AclInfo{}, false, fmt.Errorf("access list of %s from a broker: %w", subject, err)
		}
		c.ok = true
	}
	r.mu.Lock()
	r.acls[subject] = c
	r.mu.Unlock()
	return c.a, c.ok, nil
}

// errNoSuchSubject is a broker's answer to AUTH_GET_ACL for a user it does
// not have.
var errNoSuchSubject = errors.New("no such subject")

// ask sends an auth metadata request to the first master that answers.
func (r *remoteAuthStore) ask(code int32, ext map[string]string) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.s.cfg.RequestTimeout)
	defer cancel()
	masters, err := r.s.allMasters(ctx)
	if err != nil {
		return nil, err
	}
	var last error
	for _, addr := range masters {
		resp, err := r.s.invoke(ctx, addr, 0, remoting.NewRequest(code, ext, nil))
		switch {
		case err != nil:
			last = err
		case resp.Code == remoting.Success:
			return resp, nil
		case resp.Code == remoting.NoPermission && code == remoting.AuthGetACL:
			return nil, errNoSuchSubject
		default:
			last = remotingFailure("read access metadata", resp)
		}
	}
	if last == nil {
		last = errors.New("no broker known to read users and access lists from")
	}
	return nil, last
}

// allMasters lists the master of every broker group the name servers
// know (GET_BROKER_CLUSTER_INFO), by broker name.
func (s *Server) allMasters(ctx context.Context) ([]string, error) {
	var last error
	for _, ns := range s.cfg.NamesrvAddrs {
		resp, err := s.invoke(ctx, ns, 0, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
		if err != nil {
			last = err
			continue
		}
		if resp.Code != remoting.Success {
			last = remotingFailure("cluster info", resp)
			continue
		}
		var ci struct {
			BrokerAddrTable map[string]namesrv.BrokerData `json:"brokerAddrTable"`
		}
		if err := json.Unmarshal(resp.Body, &ci); err != nil {
			return nil, fmt.Errorf("cluster info from %s: %w", ns, err)
		}
		m := map[string]string{}
		for name, bd := range ci.BrokerAddrTable {
			if a := bd.BrokerAddrs[namesrv.MasterID]; a != "" {
				m[name] = a
			}
		}
		return sortedValues(m), nil
	}
	return nil, last
}

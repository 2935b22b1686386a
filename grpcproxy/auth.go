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

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rocketkv/rocketkv/auth"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/internal/adminbody"
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
			// The C++ client writes AK/region/service: the user is the AK.
			user, _, _ = strings.Cut(v, "/")
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
	case *rmqpb.NotifyClientTerminationRequest:
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
// stream) with the proxy's checker; nil when allowed. A refusal is a
// statusError with RocketMQ's code and remark, joined with the
// auth.Denied, and a log line: UNAUTHORIZED for who signed and for what
// it asked alike, as RocketMQ proxy's ResponseBuilder answers an
// AuthenticationException and an AuthorizationException.
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
		return fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "access check failed: %v", err)
	}
	s.log.Warn().Str("method", method).Str("user", user).Stringer("remote", remote).Str("reason", denied.Reason).Msg("call refused")
	return errors.Join(fail(rmqpb.Code_UNAUTHORIZED, "%s", denied.Reason), denied)
}

// authUnary checks a unary call before its handler; a refusal is answered
// in the call's response Status, as RocketMQ's proxy answers it.
func (s *Server) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.checkCall(ctx, info.FullMethod, req); err != nil {
		if resp := refusal(req, statusOf(err)); resp != nil {
			return resp, nil
		}
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	return h(ctx, req)
}

// refusal returns the response of req's call carrying only st; nil for a
// request type the proxy does not serve.
func refusal(req any, st *rmqpb.Status) any {
	switch req.(type) {
	case *rmqpb.QueryRouteRequest:
		return &rmqpb.QueryRouteResponse{Status: st}
	case *rmqpb.HeartbeatRequest:
		return &rmqpb.HeartbeatResponse{Status: st}
	case *rmqpb.SendMessageRequest:
		return &rmqpb.SendMessageResponse{Status: st}
	case *rmqpb.QueryAssignmentRequest:
		return &rmqpb.QueryAssignmentResponse{Status: st}
	case *rmqpb.AckMessageRequest:
		return &rmqpb.AckMessageResponse{Status: st}
	case *rmqpb.ForwardMessageToDeadLetterQueueRequest:
		return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: st}
	case *rmqpb.EndTransactionRequest:
		return &rmqpb.EndTransactionResponse{Status: st}
	case *rmqpb.NotifyClientTerminationRequest:
		return &rmqpb.NotifyClientTerminationResponse{Status: st}
	case *rmqpb.ChangeInvisibleDurationRequest:
		return &rmqpb.ChangeInvisibleDurationResponse{Status: st}
	case *rmqpb.RecallMessageRequest:
		return &rmqpb.RecallMessageResponse{Status: st}
	}
	return nil
}

// errRefusalAnswered ends a stream whose refusal was already sent on it.
var errRefusalAnswered = errors.New("grpcproxy: refusal answered on the stream")

// authStream checks every message a streaming call receives (the receive's
// request, each telemetry command). A refused receive is answered with
// its status and the delivery time; a refused telemetry command ends its
// stream with gRPC's Unauthenticated or PermissionDenied.
func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if s.checker == nil {
		return h(srv, ss)
	}
	err := h(srv, &checkedStream{ServerStream: ss, s: s, method: info.FullMethod})
	if errors.Is(err, errRefusalAnswered) {
		return nil
	}
	return err
}

// checkedStream is a server stream whose received messages are checked.
type checkedStream struct {
	grpc.ServerStream
	s      *Server
	method string
}

// RecvMsg receives a message and checks it; a refusal is sent on the
// stream as the call's kind of answer and ends it.
func (c *checkedStream) RecvMsg(m any) error {
	if err := c.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	err := c.s.checkCall(c.Context(), c.method, m)
	if err == nil {
		return nil
	}
	st := statusOf(err)
	switch m.(type) {
	case *rmqpb.ReceiveMessageRequest:
		_ = c.SendMsg(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Status{Status: st}})
		_ = c.SendMsg(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_DeliveryTimestamp{DeliveryTimestamp: timestamppb.Now()}})
	default:
		// A telemetry stream may carry a transaction check sent from
		// another goroutine: its refusal ends it with gRPC's status
		// rather than a second sender.
		code := codes.PermissionDenied
		var denied *auth.Denied
		if errors.As(err, &denied) && denied.Authentication {
			code = codes.Unauthenticated
		}
		return status.Error(code, st.GetMessage())
	}
	return errRefusalAnswered
}

// authCacheSize bounds the users and the access lists a proxy keeps by
// default (RocketMQ proxy's userCacheMaxNum and aclCacheMaxNum are 20,000;
// Config.UserCacheSize and ACLCacheSize set them), and the consumer
// groups' policies: the names come from unverified credentials and
// requests, so the caches must not grow with them.
const authCacheSize = 20_000

// remoteAuthStore reads users and access lists from the brokers
// (AUTH_GET_USER, AUTH_GET_ACL), as RocketMQ's proxy reads them, keeping
// each answer, found or not, for a while (userCacheRefreshSeconds,
// aclCacheRefreshSeconds) in bounded caches, and the brokers' list as
// long as access lists.
type remoteAuthStore struct {
	s *Server
	// userTTL is the users', ttl the access lists' (and the brokers').
	userTTL, ttl time.Duration
	users        *lru.Cache[string, cachedUser]
	acls         *lru.Cache[string, cachedACL]
	// loads collapses concurrent misses of one user or access list into
	// one request to the brokers.
	loads singleflight.Group

	mu        sync.Mutex
	masters   []string
	mastersAt time.Time
}

// newRemoteAuthStore returns an empty store.
func newRemoteAuthStore(s *Server, ttl time.Duration) *remoteAuthStore {
	return newRemoteAuthStoreSized(s, ttl, ttl, authCacheSize, authCacheSize)
}

// newRemoteAuthStoreSized returns an empty store keeping users for
// userTTL and access lists for ttl, at most userSize and aclSize of them
// (RocketMQ proxy's userCache* and aclCache* keys).
func newRemoteAuthStoreSized(s *Server, userTTL, ttl time.Duration, userSize, aclSize int) *remoteAuthStore {
	users, _ := lru.New[string, cachedUser](max(userSize, 1))
	acls, _ := lru.New[string, cachedACL](max(aclSize, 1))
	return &remoteAuthStore{s: s, userTTL: userTTL, ttl: ttl, users: users, acls: acls}
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

// User implements auth.Store. A cached user is answered at once; past
// the TTL it is read again in the background meanwhile (kept when that
// fails), as RocketMQ's proxy caches (refreshAfterWrite), so that no call
// waits for a broker that may take a request timeout to answer. Only a
// user not cached, or any with a TTL of 0, is waited for.
func (r *remoteAuthStore) User(name string) (meta.UserInfo, bool, error) {
	c, hit := r.users.Get(name)
	load := func(ctx context.Context) (any, error) { return r.loadUser(ctx, name) }
	if hit && r.fresh(c.at, r.userTTL, "user\x00"+name, load) {
		return c.u, c.ok, nil
	}
	v, err, _ := r.loads.Do("user\x00"+name, func() (any, error) { return load(context.Background()) })
	if err != nil {
		return meta.UserInfo{}, false, err
	}
	c = v.(cachedUser)
	return c.u, c.ok, nil
}

// fresh reports whether an entry cached at may be answered: within the
// TTL, or past it (load then runs in the background, once at a time per
// key) unless the TTL is 0.
func (r *remoteAuthStore) fresh(at time.Time, ttl time.Duration, key string, load func(context.Context) (any, error)) bool {
	if ttl <= 0 {
		return false
	}
	if time.Since(at) >= ttl {
		r.loads.DoChan(key, func() (any, error) { return r.s.bg.do(load) })
	}
	return true
}

// loadUser asks the brokers for a user and caches the answer.
func (r *remoteAuthStore) loadUser(ctx context.Context, name string) (cachedUser, error) {
	resp, err := r.ask(ctx, remoting.AuthGetUser, map[string]string{"username": name})
	if err != nil {
		return cachedUser{}, err
	}
	c := cachedUser{at: time.Now()}
	if len(resp.Body) > 0 {
		if c.u, err = decodeUser(resp.Body); err != nil {
			return cachedUser{}, fmt.Errorf("user %s from a broker: %w", name, err)
		}
		c.ok = true
	}
	r.users.Add(name, c)
	return c, nil
}

// ACL implements auth.Store, cached as User.
func (r *remoteAuthStore) ACL(subject string) (meta.AclInfo, bool, error) {
	c, hit := r.acls.Get(subject)
	load := func(ctx context.Context) (any, error) { return r.loadACL(ctx, subject) }
	if hit && r.fresh(c.at, r.ttl, "acl\x00"+subject, load) {
		return c.a, c.ok, nil
	}
	v, err, _ := r.loads.Do("acl\x00"+subject, func() (any, error) { return load(context.Background()) })
	if err != nil {
		return meta.AclInfo{}, false, err
	}
	c = v.(cachedACL)
	return c.a, c.ok, nil
}

// loadACL asks the brokers for a subject's access list and caches the
// answer.
func (r *remoteAuthStore) loadACL(ctx context.Context, subject string) (cachedACL, error) {
	resp, err := r.ask(ctx, remoting.AuthGetACL, map[string]string{"subject": subject})
	if err != nil && !errors.Is(err, errNoSuchSubject) {
		return cachedACL{}, err
	}
	c := cachedACL{at: time.Now()}
	if err == nil && len(resp.Body) > 0 {
		if c.a, err = decodeACL(resp.Body); err != nil {
			return cachedACL{}, fmt.Errorf("access list of %s from a broker: %w", subject, err)
		}
		c.ok = true
	}
	r.acls.Add(subject, c)
	return c, nil
}

// errNoSuchSubject is a broker's answer to AUTH_GET_ACL for a user it does
// not have.
var errNoSuchSubject = errors.New("no such subject")

// ask sends an auth metadata request to the first master that answers,
// within a request timeout and ctx.
func (r *remoteAuthStore) ask(ctx context.Context, code int32, ext map[string]string) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, r.s.cfg.RequestTimeout)
	defer cancel()
	masters, err := r.brokers(ctx)
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

// brokers returns the masters to read from, asking the name servers at
// most once per TTL.
func (r *remoteAuthStore) brokers(ctx context.Context) ([]string, error) {
	r.mu.Lock()
	m, at := r.masters, r.mastersAt
	r.mu.Unlock()
	if len(m) > 0 && time.Since(at) < max(r.ttl, time.Second) {
		return m, nil
	}
	m, err := r.s.allMasters(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.masters, r.mastersAt = m, time.Now()
	r.mu.Unlock()
	return m, nil
}

// allMasters lists the master of every broker group the name servers
// know (GET_BROKER_CLUSTER_INFO), by broker name.
func (s *Server) allMasters(ctx context.Context) ([]string, error) {
	addrs := s.ns.get()
	if len(addrs) == 0 {
		// No list yet (the address server has not answered): not "no
		// broker".
		return nil, fmt.Errorf("cluster info: %w", namesrv.ErrNoNameServer)
	}
	var last error
	for _, ns := range addrs {
		resp, err := s.invoke(ctx, ns, 0, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
		if err != nil {
			last = err
			continue
		}
		if resp.Code != remoting.Success {
			last = remotingFailure("cluster info", resp)
			continue
		}
		masters, err := decodeClusterMasters(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("cluster info from %s: %w", ns, err)
		}
		return masters, nil
	}
	return nil, last
}

// decodeUser reads a broker's answer to AUTH_GET_USER (RocketMQ's
// UserInfo as JSON).
func decodeUser(body []byte) (meta.UserInfo, error) {
	var u meta.UserInfo
	if err := json.Unmarshal(body, &u); err != nil {
		return meta.UserInfo{}, fmt.Errorf("decode a user: %w", err)
	}
	return u, nil
}

// decodeACL reads a broker's answer to AUTH_GET_ACL (RocketMQ's AclInfo as
// JSON).
func decodeACL(body []byte) (meta.AclInfo, error) {
	var a meta.AclInfo
	if err := json.Unmarshal(body, &a); err != nil {
		return meta.AclInfo{}, fmt.Errorf("decode an access list: %w", err)
	}
	return a, nil
}

// decodeClusterMasters reads a name server's answer to
// GET_BROKER_CLUSTER_INFO (RocketMQ's ClusterInfo as JSON) into the
// address of every broker group's master (broker id 0), ordered by broker
// name; a group without a master is left out. A Java name server writes
// the broker ids of brokerAddrs as bare keys ({0:"host:port"}, fastjson's
// Map<Long, String>), which are read as quoted ones.
func decodeClusterMasters(body []byte) ([]string, error) {
	var ci struct {
		BrokerAddrTable map[string]namesrv.BrokerData `json:"brokerAddrTable"`
	}
	if err := adminbody.UnmarshalFastjson(body, &ci); err != nil {
		return nil, fmt.Errorf("decode cluster info: %w", err)
	}
	m := map[string]string{}
	for name, bd := range ci.BrokerAddrTable {
		if a := bd.BrokerAddrs[namesrv.MasterID]; a != "" {
			m[name] = a
		}
	}
	return sortedValues(m), nil
}

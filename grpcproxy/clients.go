package grpcproxy

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
)

// Metadata keys every RocketMQ 5 client sends with each call.
const (
	mdClientID  = "x-mq-client-id"
	mdNamespace = "x-mq-namespace"
	mdLanguage  = "x-mq-language"
	mdVersion   = "x-mq-client-version"
)

// caller is who sent a call: the client id and namespace from the
// metadata, and the peer's address.
type caller struct {
	clientID, namespace, language, version, addr string
}

// callerOf reads the caller from a call's context.
func callerOf(ctx context.Context) caller {
	var c caller
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		first := func(k string) string {
			if v := md.Get(k); len(v) > 0 {
				return v[0]
			}
			return ""
		}
		c.clientID, c.namespace = first(mdClientID), first(mdNamespace)
		c.language, c.version = first(mdLanguage), first(mdVersion)
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		c.addr = p.Addr.String()
	}
	return c
}

// clientIDRequired is the status of a call without a client id.
func clientIDRequired() *rmqpb.Status {
	return &rmqpb.Status{Code: rmqpb.Code_CLIENT_ID_REQUIRED, Message: "client id cannot be empty: the x-mq-client-id metadata is required"}
}

// clientIDUnary refuses a unary call whose client id is blank (Java's
// isBlank) with CLIENT_ID_REQUIRED before its handler, as RocketMQ's
// proxy checks every call after the access check (validateContext).
func (s *Server) clientIDUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if meta.IsBlank(callerOf(ctx).clientID) {
		if resp := refusal(req, clientIDRequired()); resp != nil {
			s.log.Debug().Str("method", info.FullMethod).Msg("call without a client id refused")
			return resp, nil
		}
	}
	return h(ctx, req)
}

// wrap returns a resource's name as the brokers know it: RocketMQ's
// namespaces prefix names with "namespace%".
func wrap(r *rmqpb.Resource) string {
	if r == nil {
		return ""
	}
	if ns := r.GetResourceNamespace(); ns != "" && r.GetName() != "" && !strings.HasPrefix(r.GetName(), ns+"%") {
		return ns + "%" + r.GetName()
	}
	return r.GetName()
}

// splitNamespace splits a name the brokers know into its namespace and
// the name a client of that namespace uses ("ns%Orders" is ns, Orders);
// system names, which start with '%', and names without one have none.
func splitNamespace(name string) (namespace, short string) {
	if i := strings.IndexByte(name, '%'); i > 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

// unwrap strips a namespace prefix from a name the brokers know.
func unwrap(name, namespace string) string {
	if namespace != "" {
		return strings.TrimPrefix(name, namespace+"%")
	}
	return name
}

// clientState is what the proxy keeps of one client: its last settings,
// when they came (in ms, the subVersion of its subscriptions) and when it
// was last heard from.
type clientState struct {
	settings   *rmqpb.Settings
	settingsAt int64
	seen       time.Time
}

// clientRegistry holds the clients' settings by client id.
type clientRegistry struct {
	mu      sync.Mutex
	clients map[string]*clientState
}

func newClientRegistry() *clientRegistry {
	return &clientRegistry{clients: map[string]*clientState{}}
}

// touch records that the client was heard from.
func (r *clientRegistry) touch(id string) {
	if id == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.clients[id]; c != nil {
		c.seen = time.Now()
		return
	}
	r.clients[id] = &clientState{seen: time.Now()}
}

// setSettings stores the settings a client sent.
func (r *clientRegistry) setSettings(id string, s *rmqpb.Settings) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.clients[id]
	if c == nil {
		c = &clientState{}
		r.clients[id] = c
	}
	now := time.Now()
	c.settings, c.settingsAt, c.seen = s, now.UnixMilli(), now
}

// subVersion returns the version of the client's subscriptions: when its
// last settings came, in ms (0 without settings). As RocketMQ's proxy,
// which builds a consumer's subscriptions (FilterAPI.build, stamped with
// the time) only from its settings, its heartbeats repeat this version
// instead of a new one each.
func (r *clientRegistry) subVersion(id string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.clients[id]; c != nil && c.settings != nil {
		return c.settingsAt
	}
	return 0
}

// settings returns a copy of the client's settings, or nil.
func (r *clientRegistry) settings(id string) *rmqpb.Settings {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.clients[id]; c != nil && c.settings != nil {
		return proto.Clone(c.settings).(*rmqpb.Settings)
	}
	return nil
}

// known reports whether the client is registered: heard from, and not
// ended (NotifyClientTermination) or forgotten as idle since.
func (r *clientRegistry) known(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.clients[id]
	return ok
}

// remove forgets a client.
func (r *clientRegistry) remove(id string) {
	r.mu.Lock()
	delete(r.clients, id)
	r.mu.Unlock()
}

// expire forgets clients not heard from since before and returns their
// ids.
func (r *clientRegistry) expire(before time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var gone []string
	for id, c := range r.clients {
		if c.seen.Before(before) {
			delete(r.clients, id)
			gone = append(gone, id)
		}
	}
	return gone
}

// groupPolicy is what the settings of a consumer take from its group's
// configuration.
type groupPolicy struct {
	orderly       bool
	retryMaxTimes int
	// retry is the group's retry policy (nil: RocketMQ's default, the
	// delay levels).
	retry *meta.GroupRetryPolicy
}

// producerSettings completes a producer's settings with the proxy's retry
// policy and publishing limits.
func (s *Server) producerSettings(in *rmqpb.Settings) *rmqpb.Settings {
	out := proto.Clone(in).(*rmqpb.Settings)
	out.BackoffPolicy = &rmqpb.RetryPolicy{
		MaxAttempts: int32(s.cfg.ProducerMaxAttempts),
		Strategy: &rmqpb.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &rmqpb.ExponentialBackoff{
			Initial:    durationpb.New(s.cfg.ProducerBackoffInitial),
			Max:        durationpb.New(s.cfg.ProducerBackoffMax),
			Multiplier: s.cfg.ProducerBackoffMultiplier,
		}},
	}
	pub := out.GetPublishing()
	if pub == nil {
		pub = &rmqpb.Publishing{}
		out.PubSub = &rmqpb.Settings_Publishing{Publishing: pub}
	}
	pub.ValidateMessageType = s.cfg.CheckMessageType
	pub.MaxBodySize = int32(s.cfg.MaxMessageSize)
	out.Metric = s.metric()
	return out
}

// metric is the settings' metric export: on, to Config.MetricCollector,
// when it names a collector (RocketMQ proxy's metricCollectorMode on).
func (s *Server) metric() *rmqpb.Metric {
	host, port, err := net.SplitHostPort(s.cfg.MetricCollector)
	if err != nil {
		return &rmqpb.Metric{On: false}
	}
	p, _ := strconv.Atoi(port)
	scheme := rmqpb.AddressScheme_DOMAIN_NAME
	if ip, err := netip.ParseAddr(host); err == nil {
		scheme = rmqpb.AddressScheme_IPv6
		if ip.Unmap().Is4() {
			scheme = rmqpb.AddressScheme_IPv4
		}
	}
	return &rmqpb.Metric{On: true, Endpoints: &rmqpb.Endpoints{Scheme: scheme, Addresses: []*rmqpb.Address{{Host: host, Port: int32(p)}}}}
}

// consumerSettings completes a consumer's settings with its group's
// policy: FIFO or not, the number of deliveries and the pauses between
// them, the receive batch size and the long polling time.
func (s *Server) consumerSettings(in *rmqpb.Settings, gp groupPolicy) *rmqpb.Settings {
	out := proto.Clone(in).(*rmqpb.Settings)
	sub := out.GetSubscription()
	if sub == nil {
		sub = &rmqpb.Subscription{}
		out.PubSub = &rmqpb.Settings_Subscription{Subscription: sub}
	}
	fifo := gp.orderly
	batch := int32(s.cfg.ReceiveBatchSize)
	sub.Fifo = &fifo
	sub.ReceiveBatchSize = &batch
	sub.LongPollingTimeout = durationpb.New(s.cfg.MaxLongPolling)
	policy := &rmqpb.RetryPolicy{MaxAttempts: int32(gp.retryMaxTimes + 1)}
	// As RocketMQ's proxy: the policy of the group's type, or that
	// type's default when the group gives none.
	if gp.retry.IsExponential() {
		e := meta.DefaultExponentialRetryPolicy()
		if gp.retry.Exponential != nil {
			e = *gp.retry.Exponential
		}
		policy.Strategy = &rmqpb.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &rmqpb.ExponentialBackoff{
			Initial: durationpb.New(meta.Millis(e.Initial)), Max: durationpb.New(meta.Millis(e.Max)),
			Multiplier: float32(e.Multiplier),
		}}
	} else {
		c := meta.DefaultCustomizedRetryPolicy()
		if gp.retry != nil && gp.retry.Customized != nil {
			c = *gp.retry.Customized
		}
		next := make([]*durationpb.Duration, len(c.Next))
		for i, ms := range c.Next {
			next[i] = durationpb.New(meta.Millis(ms))
		}
		policy.Strategy = &rmqpb.RetryPolicy_CustomizedBackoff{CustomizedBackoff: &rmqpb.CustomizedBackoff{Next: next}}
	}
	out.BackoffPolicy = policy
	out.Metric = s.metric()
	return out
}

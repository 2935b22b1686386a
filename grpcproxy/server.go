package grpcproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/rs/zerolog"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/auth"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/internal/certwatch"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// Server is a gRPC proxy: New builds it, Start listens and serves,
// Shutdown stops it and every goroutine it started.
type Server struct {
	rmqpb.UnimplementedMessagingServiceServer

	cfg  Config
	log  zerolog.Logger
	pool *remoting.ClientPool
	// ns is the current name server list; lookup, with an address
	// server (namesrvDomain), keeps it (nil otherwise).
	ns      *nameServers
	lookup  *nsLookup
	routes  *routes
	clients *clientRegistry
	streams *streamRegistry
	txns    *txnTable
	renewer *renewer
	// checker authenticates and authorizes calls when ACL is on; nil
	// when it is off.
	checker *auth.Checker
	// policies caches consumer groups' policies (bounded: group names
	// come from clients).
	policies *lru.Cache[string, *cachedPolicy]
	// policyLoads collapses concurrent reads of one group's policy.
	policyLoads singleflight.Group
	// bg owns the background work: renewals, route and policy refreshes.
	bg   *background
	grpc *grpc.Server
	// certs serves the gRPC port's certificate and reloads it when its
	// files change; nil when none is watched (plaintext, self-signed).
	certs *certwatch.Watcher

	// next spreads sends without a message group over a topic's queues
	// and receives without a broker over its broker groups.
	next atomic.Uint64

	ln     net.Listener
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New builds a proxy from cfg; it does not listen yet.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Log.With().Str("component", "grpcproxy").Logger()}
	opts := cfg.Remoting
	opts.Log = s.log
	opts.Handler = s.brokerRequest
	if cfg.InnerAccessKey != "" {
		// The brokers check ACL: the proxy signs as its own account.
		opts.BeforeRequest = acl.RequestSigner(cfg.InnerAccessKey, cfg.InnerSecretKey)
	}
	s.pool = remoting.NewClientPool(opts)
	s.bg = newBackground()
	if cfg.AddressServer != "" {
		// RocketMQ's proxy ignores namesrvAddr then, and has no list
		// until the address server answers.
		s.ns = newNameServers(nil)
		s.lookup = &nsLookup{ns: s.ns, pool: s.pool, server: namesrv.NewAddressServer(cfg.AddressServer),
			delay: cfg.AddressServerDelay, period: cfg.AddressServerPeriod, log: s.log}
	} else {
		s.ns = newNameServers(cfg.NamesrvAddrs)
	}
	s.routes = newRoutes(s.pool, &s.cfg, s.ns, s.bg)
	s.clients = newClientRegistry()
	s.streams = newStreamRegistry()
	s.txns = newTxnTable(txnMax)
	s.renewer = newRenewer(s)
	s.policies, _ = lru.New[string, *cachedPolicy](max(cfg.GroupPolicySize, 1))
	if cfg.Authentication || cfg.Authorization {
		s.checker = auth.NewChecker(auth.Config{Authentication: cfg.Authentication, Authorization: cfg.Authorization},
			newRemoteAuthStoreSized(s, cfg.UserCacheTTL, cfg.AuthCacheTTL, cfg.UserCacheSize, cfg.ACLCacheSize))
	}
	tc := withH2(cfg.TLS)
	if tc != nil && len(tc.Certificates) == 1 && cfg.CertWatch.enabled() {
		s.certs = cfg.CertWatch.watch(tc, s.log)
		tc = s.certs.Config()
	}
	s.grpc = grpc.NewServer(
		grpc.Creds(&sniffCreds{mode: cfg.TLSMode, tls: tc}),
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgSize),
		// Clients ping idle connections; RocketMQ's proxy lets them.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(s.recoverUnary, s.authUnary, s.clientIDUnary),
		grpc.ChainStreamInterceptor(s.recoverStream, s.authStream),
	)
	rmqpb.RegisterMessagingServiceServer(s.grpc, s)
	return s, nil
}

// withH2 returns a copy of tc that negotiates HTTP/2 by ALPN, which gRPC
// clients require.
func withH2(tc *tls.Config) *tls.Config {
	if tc == nil {
		return nil
	}
	tc = tc.Clone()
	if !slices.Contains(tc.NextProtos, "h2") {
		tc.NextProtos = append([]string{"h2"}, tc.NextProtos...)
	}
	return tc
}

// Start listens on the configured address and serves until Shutdown.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("grpcproxy: listen on %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	if s.lookup != nil {
		// Asked once before serving, as RocketMQ's proxy asks as it
		// starts (a failure is logged and leaves no list), then in the
		// background until Shutdown.
		s.log.Info().Strs("namesrvAddr", s.cfg.NamesrvAddrs).Str("addressServer", s.cfg.AddressServer).
			Msg("namesrvAddr is not used: namesrvDomain names an address server, which the name servers are asked of (as in RocketMQ)")
		if s.lookup.refresh(ctx) {
			s.log.Info().Str("addressServer", s.cfg.AddressServer).Strs("namesrv", s.ns.get()).Msg("name servers from the address server")
		}
		s.bg.start(s.lookup.run)
	}
	served := proxyProtocolListener(ln, s.cfg.ProxyProtocol)
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(served); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error().Err(err).Msg("gRPC server stopped")
		}
	}()
	go func() {
		defer s.wg.Done()
		s.housekeep(bg)
	}()
	if s.certs != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.certs.Run(bg, s.cfg.CertWatch.Interval)
		}()
	}
	if s.cfg.Authorization && !s.cfg.ProxyProtocol.Disabled && len(s.cfg.ProxyProtocol.Trusted) == 0 {
		s.log.Warn().Msg("authorization is on and PROXY protocol headers are trusted from every peer: a client can claim any source address to access lists that name addresses; set proxyProtocolTrustedNetworks")
	}
	s.log.Info().Str("addr", ln.Addr().String()).Str("namesrv", s.cfg.nameServerSource()).Stringer("tls", s.cfg.TLSMode).Msg("gRPC proxy listening")
	return nil
}

// Addr is the address the proxy listens on (after Start).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops accepting calls, lets running ones finish until ctx ends
// or Config.ShutdownTimeout passes (then cuts them), stops the background
// work and closes the Remoting connections.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.cfg.ShutdownTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
		defer cancel()
	}
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	s.bg.stop()
	return s.pool.Close()
}

// housekeep forgets idle clients and queues the renewals due until ctx
// ends; the renewer's workers send them, so that a broker that does not
// answer does not hold up the loop.
func (s *Server) housekeep(ctx context.Context) {
	period := s.cfg.RenewPeriod
	if period <= 0 {
		period = 5 * time.Second
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, id := range s.clients.expire(now.Add(-s.cfg.ClientIdle)) {
				s.renewer.dropClient(id)
				s.log.Info().Str("client", id).Msg("client idle, forgotten")
			}
			if s.cfg.AutoRenew {
				s.renewer.renewDue(now)
			}
		}
	}
}

// recoverUnary turns a handler's panic into an INTERNAL error and a log
// line instead of a dead proxy.
func (s *Server) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error().Str("method", info.FullMethod).Interface("panic", r).Msg("handler panicked")
			err = fmt.Errorf("grpcproxy: %s failed", info.FullMethod)
		}
	}()
	return h(ctx, req)
}

// recoverStream is recoverUnary for streaming calls.
func (s *Server) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error().Str("method", info.FullMethod).Interface("panic", r).Msg("handler panicked")
			err = fmt.Errorf("grpcproxy: %s failed", info.FullMethod)
		}
	}()
	return h(srv, ss)
}

// invoke sends one Remoting request to addr within the request timeout
// plus extra (a long poll's time).
func (s *Server) invoke(ctx context.Context, addr string, extra time.Duration, req *remoting.Command) (*remoting.Command, error) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout+extra)
	defer cancel()
	resp, err := s.pool.Invoke(cctx, addr, req)
	if err != nil {
		return nil, plaintextHint(s.cfg.Remoting.TLS == nil, fmt.Errorf("request %d to %s: %w", req.Code, addr, err))
	}
	return resp, nil
}

// plaintextHint returns err, from a proxy that dials in plaintext when
// plaintext is set, with the likely cause added when the server closed
// the connection unanswered: a broker or name server whose
// tls.server.mode is enforcing closes plaintext connections so, and
// tls.enable is the proxy's fix.
func plaintextHint(plaintext bool, err error) error {
	if !plaintext || !(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)) {
		return err
	}
	return fmt.Errorf("%w (closed unanswered: a server with tls.server.mode=enforcing closes plaintext connections; set the proxy's tls.enable)", err)
}

// masterRefused reports whether a master's answer to a request, or the
// failure to get one, says that the broker may be a master no more: it
// could not be reached (stopped, or not answering), or it refused the
// request as a slave does (SYSTEM_BUSY with RocketMQ's rejectRequest
// remark) or as a controller-mode broker does while it changes role or a
// store that is shutting down does (SERVICE_NOT_AVAILABLE). A master's
// own flow control (SYSTEM_BUSY with another remark: [DISPATCH_BEHIND],
// [OVERLOAD], [PC_SYNCHRONIZED], ...) says nothing of its role and must
// not send every topic it serves to the name servers; nor does a failure
// that is the caller's own (ctx cancelled, or past its deadline: an
// overloaded proxy's clients giving up). routes.refusedBy takes it from
// there.
func masterRefused(ctx context.Context, resp *remoting.Command, err error) bool {
	if err != nil {
		return ctx.Err() == nil
	}
	return refusedAsSlave(resp.Code, resp.Remark)
}

// refusedAsSlave reports whether an answer's code and remark are a
// slave's or a switching broker's refusal (masterRefused).
func refusedAsSlave(code int32, remark string) bool {
	switch code {
	case remoting.ServiceNotAvailable:
		return true
	case remoting.SystemBusy:
		return strings.HasPrefix(remark, rejectRequestRemark)
	}
	return false
}

// rejectRequestRemark begins RocketMQ's remark of a request its
// processor rejects (NettyRemotingAbstract's rejectRequest), which is
// what a slave answers a send.
const rejectRequestRemark = "[REJECTREQUEST]"

// answeredBySlave reports whether a broker's answer says that it is a
// slave following its master (remoting.FieldSlave: a rocketkv broker
// marks so its answers to pops, acks and changes of invisible time,
// which RocketMQ's slave gives as a master would). The proxy sends those
// to the masters its routes name: a slave answering is a master demoted
// since the route was asked for, and routes.refusedBy takes it from
// there.
func answeredBySlave(ext map[string]string) bool {
	return ext[remoting.FieldSlave] == "true"
}

// notMaster reports whether a broker's answer to a request sent to it as
// its group's master says that it is not one (any more): a rocketkv
// slave's mark (answeredBySlave), or a slave's or switching broker's
// refusal (refusedAsSlave).
func notMaster(resp *remoting.Command) bool {
	return answeredBySlave(resp.ExtFields) || refusedAsSlave(resp.Code, resp.Remark)
}

// invokeOneway sends one Remoting request to addr without waiting for an
// answer; it returns once the request is queued on the connection, or
// fails when that takes longer than the request timeout.
func (s *Server) invokeOneway(ctx context.Context, addr string, req *remoting.Command) error {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if err := s.pool.InvokeOneway(cctx, addr, req); err != nil {
		return fmt.Errorf("oneway request %d to %s: %w", req.Code, addr, err)
	}
	return nil
}

// masterOf returns the master address of a broker group of topic.
func (s *Server) masterOf(ctx context.Context, topic, brokerName string) (string, error) {
	r, err := s.routes.get(ctx, topic)
	if err != nil {
		return "", err
	}
	if addr, ok := r.masters[brokerName]; ok {
		return addr, nil
	}
	return "", fail(rmqpb.Code_NOT_FOUND, "broker group %s of topic %s has no master", brokerName, topic)
}

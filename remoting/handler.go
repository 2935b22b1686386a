package remoting

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
)

// Handler processes the requests a Server receives. ServeCommand runs on a
// worker goroutine, never on an event loop, so it may block on disk or
// locks; while it runs it holds one of the server's workers.
//
// The handler answers with conn.Reply(req, resp), either before returning
// or later from any goroutine (a held long-polling pull answers when a
// message arrives or its deadline passes). A request that never gets a
// reply times out at the client. Oneway requests (FlagOneway) must not be
// answered; Reply ignores them. ctx is done when the connection closes or
// the server shuts down.
//
// A panic in ServeCommand is recovered: the server logs it and answers
// SYSTEM_ERROR.
type Handler interface {
	ServeCommand(ctx context.Context, conn *Conn, req *Command)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, conn *Conn, req *Command)

// ServeCommand calls f.
func (f HandlerFunc) ServeCommand(ctx context.Context, conn *Conn, req *Command) { f(ctx, conn, req) }

// RespondFunc adapts a function that returns its response to Handler: a
// non-nil result is sent as the reply at once; nil means the function has
// arranged to answer later (or the request is oneway).
type RespondFunc func(ctx context.Context, conn *Conn, req *Command) *Command

// ServeCommand calls f and replies with its result when there is one.
func (f RespondFunc) ServeCommand(ctx context.Context, conn *Conn, req *Command) {
	if resp := f(ctx, conn, req); resp != nil {
		_ = conn.Reply(req, resp)
	}
}

// NotSupported answers req with REQUEST_CODE_NOT_SUPPORTED and Java's
// remark " request type N not supported". It is Mux's default.
func NotSupported(_ context.Context, conn *Conn, req *Command) {
	_ = conn.Reply(req, NotSupportedResponse(req))
}

// NotSupportedResponse returns the REQUEST_CODE_NOT_SUPPORTED answer to req.
func NotSupportedResponse(req *Command) *Command {
	return NewResponse(req, RequestCodeNotSupported, fmt.Sprintf(" request type %d not supported", req.Code))
}

// Mux routes requests to handlers by request code. Codes without a handler
// go to the default handler, NotSupported unless SetDefault changed it.
// Handle may be called while the mux is serving: lookups read an immutable
// table that Handle replaces.
type Mux struct {
	mu       sync.Mutex // serializes writers of routes
	routes   atomic.Pointer[map[int32]Handler]
	fallback atomic.Pointer[Handler]
}

// NewMux returns an empty Mux.
func NewMux() *Mux {
	m := &Mux{}
	empty := map[int32]Handler{}
	m.routes.Store(&empty)
	return m
}

// Handle routes code to h, replacing any earlier handler for code.
func (m *Mux) Handle(code int32, h Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := maps.Clone(*m.routes.Load())
	next[code] = h
	m.routes.Store(&next)
}

// HandleFunc routes code to f.
func (m *Mux) HandleFunc(code int32, f func(ctx context.Context, conn *Conn, req *Command)) {
	m.Handle(code, HandlerFunc(f))
}

// SetDefault sets the handler for codes without a route.
func (m *Mux) SetDefault(h Handler) { m.fallback.Store(&h) }

// ServeCommand dispatches req by its code.
func (m *Mux) ServeCommand(ctx context.Context, conn *Conn, req *Command) {
	if h, ok := (*m.routes.Load())[req.Code]; ok {
		h.ServeCommand(ctx, conn, req)
		return
	}
	if h := m.fallback.Load(); h != nil {
		(*h).ServeCommand(ctx, conn, req)
		return
	}
	NotSupported(ctx, conn, req)
}

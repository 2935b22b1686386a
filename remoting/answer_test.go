package remoting

import (
	"context"
	"sync"
	"testing"
	"time"
)

// answers collects what OnAnswer hears.
type answers struct {
	mu  sync.Mutex
	all []Answer
}

func (a *answers) add(x Answer) {
	a.mu.Lock()
	a.all = append(a.all, x)
	a.mu.Unlock()
}

func (a *answers) byRequest(code int32) []Answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Answer
	for _, x := range a.all {
		if x.RequestCode == code {
			out = append(out, x)
		}
	}
	return out
}

// OnAnswer hears of every answer: its codes, whether the request was held
// (MarkHeld), how long it took from the read of the request, and whether
// it was queued, dropped as oneway or failed.
func TestOnAnswerHearsEveryAnswer(t *testing.T) {
	const hold = 30 * time.Millisecond
	var heard answers
	holds := make(chan held, 1)
	mux := NewMux()
	mux.Handle(SendMessageV2, RespondFunc(func(_ context.Context, _ *Conn, req *Command) *Command {
		return NewResponse(req, Success, "")
	}))
	mux.Handle(PullMessage, RespondFunc(func(_ context.Context, conn *Conn, req *Command) *Command {
		holds <- held{conn, req}
		return nil
	}))
	mux.Handle(UpdateConsumerOffset, RespondFunc(func(_ context.Context, _ *Conn, req *Command) *Command {
		return NewResponse(req, Success, "")
	}))
	s, _ := startServer(t, ServerConfig{OnAnswer: heard.add}, mux)
	c := dialServer(t, s, ClientOptions{})

	for range 2 {
		if r, err := c.Invoke(testCtx(t), NewRequest(SendMessageV2, nil, nil)); err != nil || r.Code != Success {
			t.Fatalf("send: %v %v", r, err)
		}
	}
	if r, err := c.Invoke(testCtx(t), NewRequest(9999, nil, nil)); err != nil || r.Code != RequestCodeNotSupported {
		t.Fatalf("unknown code: %v %v", r, err)
	}
	if err := c.InvokeOneway(testCtx(t), NewRequest(UpdateConsumerOffset, nil, nil)); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, s)
	writeCommand(t, raw, &Command{Code: UpdateConsumerOffset, Opaque: 7, Flag: FlagOneway})

	pulled := make(chan *Command, 1)
	go func() {
		r, err := c.Invoke(testCtx(t), NewRequest(PullMessage, nil, nil))
		if err != nil {
			t.Error(err)
		}
		pulled <- r
	}()
	h := <-holds
	time.Sleep(hold)
	go h.conn.ServeFunc(h.req, func() *Command {
		h.req.MarkHeld()
		return NewResponse(h.req, PullNotFound, "")
	})
	if r := <-pulled; r == nil || r.Code != PullNotFound {
		t.Fatalf("held pull: %v", r)
	}
	waitFor(t, "the oneway answers", func() bool { return len(heard.byRequest(UpdateConsumerOffset)) == 2 })
	// The observer hears an answer once it is queued, which may be after
	// the client has read it.
	waitFor(t, "the other answers", func() bool {
		return len(heard.byRequest(PullMessage)) == 1 && len(heard.byRequest(SendMessageV2)) == 2 && len(heard.byRequest(9999)) == 1
	})

	sends := heard.byRequest(SendMessageV2)
	if len(sends) != 2 {
		t.Fatalf("%d answers to sends, want 2", len(sends))
	}
	for _, a := range sends {
		if a.ResponseCode != Success || a.Held || a.Outcome != AnswerQueued || a.Elapsed <= 0 {
			t.Errorf("send answer %+v", a)
		}
	}
	if u := heard.byRequest(9999); len(u) != 1 || u[0].ResponseCode != RequestCodeNotSupported || u[0].Outcome != AnswerQueued {
		t.Errorf("unknown code answers %+v", u)
	}
	// Oneway requests: the answers are dropped, and heard as such.
	for _, a := range heard.byRequest(UpdateConsumerOffset) {
		if a.Outcome != AnswerOneway || a.ResponseCode != Success {
			t.Errorf("oneway answer %+v", a)
		}
	}
	p := heard.byRequest(PullMessage)
	if len(p) != 1 || !p[0].Held || p[0].ResponseCode != PullNotFound || p[0].Elapsed < hold {
		t.Errorf("held pull answers %+v, want one held, PULL_NOT_FOUND, after at least %v", p, hold)
	}

	// An answer on a closed connection fails, and is heard as failed.
	_ = h.conn.Close()
	waitFor(t, "the close", h.conn.Closed)
	if err := h.conn.Reply(h.req, NewResponse(h.req, Success, "")); err == nil {
		t.Fatal("reply on a closed connection succeeded")
	}
	if p := heard.byRequest(PullMessage); len(p) != 2 || p[1].Outcome != AnswerFailed {
		t.Errorf("answers to the pull %+v, want a second one that failed", p)
	}
}

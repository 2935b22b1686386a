package ha

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/periodic"
)

// Accept failures other than the listener's close (out of file
// descriptors, a connection reset before it was taken) are retried after a
// pause growing from minAcceptPause to maxAcceptPause, as RocketMQ's HA
// accept loop logs and goes on: giving up would leave the port open with
// no one taking its slaves until a restart.
const (
	minAcceptPause = 5 * time.Millisecond
	maxAcceptPause = time.Second
)

// AcceptLoop is the accept loop of an HA port: this package's and
// ha/autoswitch's servers (AcceptSlaves) and a controller-mode broker's
// process-wide HA port use it. A failed accept is logged and retried
// after a pause that doubles from MinPause up to MaxPause while accepts
// keep failing and starts over after one succeeds; the pause ends at
// once when the context of Run ends.
type AcceptLoop struct {
	// Listener is accepted from until it closes or Run's context ends.
	Listener net.Listener
	// Log gets a line for each failed accept.
	Log zerolog.Logger
	// Handle takes each connection accepted, on the loop's goroutine.
	Handle func(net.Conn)
	// MinPause and MaxPause bound the pause after a failed accept
	// (zero: 5 ms and 1 s).
	MinPause, MaxPause time.Duration

	// wait pauses for d unless ctx ends first, reporting whether the
	// pause ran out (tests record the pauses; nil: periodic.Sleep).
	wait func(ctx context.Context, d time.Duration) bool
}

// Run accepts until ctx ends or the listener closes. A caller that
// closes the listener to stop the loop cancels ctx too: a close alone
// is seen only at the next Accept, after a pause in progress. A
// connection accepted after ctx ended is closed, not handed on.
func (a AcceptLoop) Run(ctx context.Context) {
	lo, hi := a.MinPause, a.MaxPause
	if lo <= 0 {
		lo = minAcceptPause
	}
	if hi <= 0 {
		hi = maxAcceptPause
	}
	hi = max(hi, lo)
	wait := a.wait
	if wait == nil {
		wait = periodic.Sleep
	}
	var pause time.Duration
	for {
		conn, err := a.Listener.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, lo), hi)
			a.Log.Error().Err(err).Dur("retryIn", pause).Msg("HA accept failed; accepting again after a pause")
			if !wait(ctx, pause) {
				return
			}
			continue
		}
		if ctx.Err() != nil {
			_ = conn.Close()
			return
		}
		pause = 0
		a.Handle(conn)
	}
}

// AcceptSlaves takes the connections of slaves on ln until ctx ends or
// ln closes: the accept loop (AcceptLoop) of both HA protocols (this
// package's and ha/autoswitch's). Each connection gets TCP_NODELAY and is
// handed to serve, which registers it and returns the two halves that
// serve it; both run under wg with a context of ctx that ends, closing the
// connection, as soon as either returns. The caller runs AcceptSlaves
// itself under wg.
func AcceptSlaves(ctx context.Context, ln net.Listener, log zerolog.Logger, wg *sync.WaitGroup,
	serve func(conn net.Conn) (read, write func(context.Context))) {
	AcceptLoop{Listener: ln, Log: log, Handle: func(conn net.Conn) {
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		read, write := serve(conn)
		cctx, cancel := context.WithCancel(ctx)
		context.AfterFunc(cctx, func() { _ = conn.Close() })
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer cancel()
			read(cctx)
		}()
		go func() {
			defer wg.Done()
			defer cancel()
			write(cctx)
		}()
	}}.Run(ctx)
}

package ha

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
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

// AcceptSlaves takes the connections of slaves on ln until ctx ends or
// ln closes: the accept loop of both HA protocols (this package's and
// ha/autoswitch's). Each connection gets TCP_NODELAY and is handed to
// serve, which registers it and returns the two halves that serve it; both
// run under wg with a context of ctx that ends, closing the connection,
// as soon as either returns. The caller runs AcceptSlaves itself under wg.
func AcceptSlaves(ctx context.Context, ln net.Listener, log zerolog.Logger, wg *sync.WaitGroup,
	serve func(conn net.Conn) (read, write func(context.Context))) {
	var pause time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, minAcceptPause), maxAcceptPause)
			log.Error().Err(err).Dur("retryIn", pause).Msg("HA accept failed; accepting slaves again after a pause")
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			continue
		}
		pause = 0
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
	}
}

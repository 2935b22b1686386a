package configs

import "time"

// Listener is the part of RocketMQ's NettyServerConfig (keys of a
// broker.conf or namesrv.properties) that rocketkv's listeners honour.
type Listener struct {
	// MaxIdle is serverChannelMaxIdleTimeSeconds: a connection without
	// reads or writes for this long is closed; 0 never closes one.
	MaxIdle time.Duration
	// SendBuffer is serverSocketSndBufSize, the SO_SNDBUF of accepted
	// connections in bytes; 0 leaves the system's.
	SendBuffer int
	// RecvBuffer is serverSocketRcvBufSize, their SO_RCVBUF; 0 leaves the
	// system's.
	RecvBuffer int
	// WriteBufferHighWaterMark and WriteBufferLowWaterMark bound the
	// answers waiting for a client's socket, in bytes: past the high mark
	// the client's requests are not read until the answers drain to the
	// low mark. 0 (either) is Netty's 64 KiB and 32 KiB, as in RocketMQ.
	WriteBufferHighWaterMark, WriteBufferLowWaterMark int
	// ShutdownGracefully is enableShutdownGracefully: a stopping server
	// first tells clients newer than RocketMQ 5.3.1 to go away (GO_AWAY)
	// for ShutdownWait while it serves older ones, then stops.
	ShutdownGracefully bool
	// ShutdownWait is shutdownWaitTimeSeconds, that graceful wait.
	ShutdownWait time.Duration
}

// GoAwayWait is how long a stopping server tells newer clients to go away
// before it stops: ShutdownWait when ShutdownGracefully is on, else 0.
func (l Listener) GoAwayWait() time.Duration {
	if !l.ShutdownGracefully {
		return 0
	}
	return l.ShutdownWait
}

// IdleTimeout is MaxIdle as a remoting server's idle timeout, which is
// negative for never.
func (l Listener) IdleTimeout() time.Duration {
	if l.MaxIdle <= 0 {
		return -1
	}
	return l.MaxIdle
}

// listenerFields are the NettyServerConfig keys of a server configuration
// T, whose listener settings ptr returns, with RocketMQ's defaults.
func listenerFields[T any](ptr func(*T) *Listener) []field[T] {
	return []field[T]{
		inUnit("serverChannelMaxIdleTimeSeconds", "120", time.Second, "seconds", 0, 1<<32, func(c *T) *time.Duration { return &ptr(c).MaxIdle }),
		intRange("serverSocketSndBufSize", "0", 0, 1<<30, func(c *T) *int { return &ptr(c).SendBuffer }),
		intRange("serverSocketRcvBufSize", "0", 0, 1<<30, func(c *T) *int { return &ptr(c).RecvBuffer }),
		intRange("writeBufferHighWaterMark", "0", 0, 1<<30, func(c *T) *int { return &ptr(c).WriteBufferHighWaterMark }),
		intRange("writeBufferLowWaterMark", "0", 0, 1<<30, func(c *T) *int { return &ptr(c).WriteBufferLowWaterMark }),
		boolean("enableShutdownGracefully", "false", func(c *T) *bool { return &ptr(c).ShutdownGracefully }),
		inUnit("shutdownWaitTimeSeconds", "30", time.Second, "seconds", 0, 1<<31-1, func(c *T) *time.Duration { return &ptr(c).ShutdownWait }),
	}
}

// nettyServerInert are the rest of NettyServerConfig's keys: tuning of a
// Netty server rocketkv does not have.
func nettyServerInert[T any]() []inert[T] {
	return []inert[T]{
		inertInt[T]("serverCallbackExecutorThreads", "no Netty server: answers to requests the server sends are handled on goroutines"),
		inertInt[T]("serverOnewaySemaphoreValue", "requests the server sends to clients are not bounded by a semaphore"),
		inertInt[T]("serverAsyncSemaphoreValue", "requests the server sends to clients are not bounded by a semaphore"),
		inertInt[T]("serverSocketBacklog", "the listen backlog is the system's (net.core.somaxconn)"),
		inertBool[T]("serverPooledByteBufAllocatorEnable", "no Netty buffers: frames are read into Go slices from a pool"),
		inertBool[T]("serverNettyWorkerGroupEnable", "no Netty server: requests run on the network event loops and a pool of goroutines"),
		inertBool[T]("useEpollNativeSelector", "the network event loops always use epoll on Linux"),
	}
}

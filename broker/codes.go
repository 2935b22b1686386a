package broker

import (
	"context"
	"errors"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// appendErrorCode maps a failed CommitLog append to RocketMQ's response
// code: the one place where storage errors become wire codes.
func appendErrorCode(err error) int32 {
	switch {
	case commitlog.Unstorable(err):
		return remoting.MessageIllegal
	case errors.Is(err, kvindex.ErrDispatchBehind):
		return remoting.SystemBusy
	case errors.Is(err, commitlog.ErrDiskFull),
		errors.Is(err, commitlog.ErrStoreFull),
		errors.Is(err, commitlog.ErrMapFailed),
		errors.Is(err, commitlog.ErrClosed),
		errors.Is(err, commitlog.ErrReplica),
		errors.Is(err, context.Canceled):
		return remoting.ServiceNotAvailable
	default:
		return remoting.SystemError
	}
}

// appendStatusCode maps the status of a successful append.
func appendStatusCode(s commitlog.AppendStatus) int32 {
	switch s {
	case commitlog.FlushDiskTimeout:
		return remoting.FlushDiskTimeout
	case commitlog.FlushSlaveTimeout:
		return remoting.FlushSlaveTimeout
	}
	return remoting.Success
}

package grpcproxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/remoting"
)

// statusError is a failure with the protocol's status code, which the
// handlers answer inside the response (clients read Status, not the gRPC
// status).
type statusError struct {
	code rmqpb.Code
	msg  string
}

func (e *statusError) Error() string { return fmt.Sprintf("%s: %s", e.code, e.msg) }

// fail returns a statusError.
func fail(code rmqpb.Code, format string, args ...any) error {
	return &statusError{code: code, msg: fmt.Sprintf(format, args...)}
}

// okStatus is the status of a success.
func okStatus() *rmqpb.Status { return &rmqpb.Status{Code: rmqpb.Code_OK, Message: "OK"} }

// statusOf converts err into a status: a statusError keeps its code, a
// deadline is PROXY_TIMEOUT, anything else INTERNAL_SERVER_ERROR.
func statusOf(err error) *rmqpb.Status {
	var se *statusError
	switch {
	case err == nil:
		return okStatus()
	case errors.As(err, &se):
		return &rmqpb.Status{Code: se.code, Message: se.msg}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, remoting.ErrTimeout):
		return &rmqpb.Status{Code: rmqpb.Code_PROXY_TIMEOUT, Message: err.Error()}
	default:
		return &rmqpb.Status{Code: rmqpb.Code_INTERNAL_SERVER_ERROR, Message: err.Error()}
	}
}

// remotingFailure converts a broker's or name server's failed Remoting
// answer into a statusError, as RocketMQ's proxy maps them.
func remotingFailure(what string, resp *remoting.Command) error {
	code := rmqpb.Code_INTERNAL_SERVER_ERROR
	switch resp.Code {
	case remoting.SystemBusy, remoting.FlowControl, remoting.PollingFull:
		code = rmqpb.Code_TOO_MANY_REQUESTS
	case remoting.FlushDiskTimeout:
		code = rmqpb.Code_MASTER_PERSISTENCE_TIMEOUT
	case remoting.FlushSlaveTimeout:
		code = rmqpb.Code_SLAVE_PERSISTENCE_TIMEOUT
	case remoting.SlaveNotAvailable:
		code = rmqpb.Code_HA_NOT_AVAILABLE
	case remoting.MessageIllegal, remoting.InvalidParameter:
		code = rmqpb.Code_BAD_REQUEST
	case remoting.SubscriptionParseFailed:
		code = rmqpb.Code_ILLEGAL_FILTER_EXPRESSION
	case remoting.NoPermission:
		code = rmqpb.Code_FORBIDDEN
	case remoting.TopicNotExist:
		code = rmqpb.Code_TOPIC_NOT_FOUND
	case remoting.SubscriptionGroupNotExist, remoting.SubscriptionNotExist:
		code = rmqpb.Code_CONSUMER_GROUP_NOT_FOUND
	case remoting.PullNotFound, remoting.PollingTimeout:
		code = rmqpb.Code_MESSAGE_NOT_FOUND
	case remoting.NoMessage:
		code = rmqpb.Code_INVALID_RECEIPT_HANDLE
	case remoting.ServiceNotAvailable:
		code = rmqpb.Code_INTERNAL_SERVER_ERROR
	case remoting.RequestCodeNotSupported, remoting.VersionNotSupported:
		code = rmqpb.Code_UNSUPPORTED
	}
	return fail(code, "%s: broker answered code %d: %s", what, resp.Code, resp.Remark)
}

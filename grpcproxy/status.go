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

// remotingFailure converts a broker's failed Remoting answer, one the
// proxy does not read itself, into a statusError with the code RocketMQ's
// proxy answers: its client library turns such an answer into an
// MQBrokerException, which ResponseBuilder.buildStatus maps by
// TopicRouteHelper (TOPIC_NOT_EXIST) and buildCode (the few codes below);
// every other code, NO_PERMISSION and MESSAGE_ILLEGAL among them, is
// INTERNAL_SERVER_ERROR. The requests whose answers RocketMQ's proxy reads
// have their own: sendFailure, popFailure, ackFailure.
func remotingFailure(what string, resp *remoting.Command) error {
	code := responseCode(resp.Code)
	if resp.Code == remoting.TopicNotExist {
		code = rmqpb.Code_TOPIC_NOT_FOUND
	}
	return fail(code, "%s: broker answered code %d: %s", what, resp.Code, resp.Remark)
}

// responseCode is RocketMQ proxy's ResponseBuilder.buildCode: the status
// code of a Remoting response code when the proxy passes the code on
// (a dead-letter forward's answer, an MQBrokerException's code).
func responseCode(code int32) rmqpb.Code {
	switch code {
	case remoting.Success:
		return rmqpb.Code_OK
	case remoting.SystemBusy:
		return rmqpb.Code_TOO_MANY_REQUESTS
	case remoting.RequestCodeNotSupported:
		return rmqpb.Code_NOT_IMPLEMENTED
	case remoting.SubscriptionGroupNotExist:
		return rmqpb.Code_CONSUMER_GROUP_NOT_FOUND
	}
	return rmqpb.Code_INTERNAL_SERVER_ERROR
}

// sendFailure converts a failed answer to SEND_MESSAGE_V2: the three
// codes RocketMQ's client library reads as a send status of a stored
// message (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE)
// have their own status codes, as RocketMQ proxy's SendMessageActivity
// gives them; any other is remotingFailure's.
func sendFailure(what string, resp *remoting.Command) error {
	switch resp.Code {
	case remoting.FlushDiskTimeout:
		return fail(rmqpb.Code_MASTER_PERSISTENCE_TIMEOUT, "%s: send message failed, sendStatus=FLUSH_DISK_TIMEOUT", what)
	case remoting.FlushSlaveTimeout:
		return fail(rmqpb.Code_SLAVE_PERSISTENCE_TIMEOUT, "%s: send message failed, sendStatus=FLUSH_SLAVE_TIMEOUT", what)
	case remoting.SlaveNotAvailable:
		return fail(rmqpb.Code_HA_NOT_AVAILABLE, "%s: send message failed, sendStatus=SLAVE_NOT_AVAILABLE", what)
	}
	return remotingFailure(what, resp)
}

// popFailure converts a failed answer to POP_MESSAGE (other than no
// message found): POLLING_FULL is TOO_MANY_REQUESTS, as RocketMQ's proxy
// writes a pop status of POLLING_FULL; any other is remotingFailure's.
func popFailure(what string, resp *remoting.Command) error {
	if resp.Code == remoting.PollingFull {
		return fail(rmqpb.Code_TOO_MANY_REQUESTS, "%s: polling full", what)
	}
	return remotingFailure(what, resp)
}

// ackFailure converts a failed answer to ACK_MESSAGE or
// CHANGE_MESSAGE_INVISIBLETIME: whatever the broker's code, RocketMQ's
// client library reads it as the ack status NO_EXIST, which RocketMQ's
// proxy answers INTERNAL_SERVER_ERROR ("status is abnormal"). The Java
// client's FIFO push consumer retries an ack so answered; it gives up on
// INVALID_RECEIPT_HANDLE.
func ackFailure(what string, resp *remoting.Command) error {
	return fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "%s failed: status is abnormal (broker answered code %d: %s)", what, resp.Code, resp.Remark)
}

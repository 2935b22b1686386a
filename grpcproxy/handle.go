package grpcproxy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rocketkv/rocketkv/pop"
)

// Handle is the receipt handle the proxy gives a client for one received
// message: the broker's POP_CK extraInfo (pop.Handle) and the message's
// CommitLog offset, which forwarding to the dead-letter queue needs. On
// the wire it is RocketMQ proxy's form, nine fields separated by spaces:
//
//	ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId msgQueueOffset commitLogOffset
//
// for example "5 1700000000000 60000 0 0 broker-a 3 7 4096".
type Handle struct {
	pop.Handle
	// CommitLogOffset is the message's physical offset on its broker.
	CommitLogOffset int64
}

// ErrBadHandle is returned by ParseHandle for a receipt handle the proxy
// did not write: fewer than nine fields, a field that is not a number
// where one is needed, or no broker name.
var ErrBadHandle = errors.New("grpcproxy: malformed receipt handle")

// String encodes the handle.
func (h Handle) String() string {
	return h.Handle.String() + " " + strconv.FormatInt(h.CommitLogOffset, 10)
}

// ParseHandle decodes a receipt handle written by String.
func ParseHandle(s string) (Handle, error) {
	i := strings.LastIndexByte(s, ' ')
	if i < 0 || strings.Count(s, " ") != 8 {
		return Handle{}, fmt.Errorf("%w: %q does not have nine fields", ErrBadHandle, s)
	}
	off, err := strconv.ParseInt(s[i+1:], 10, 64)
	if err != nil || off < 0 {
		return Handle{}, fmt.Errorf("%w: the CommitLog offset of %q is not a number", ErrBadHandle, s)
	}
	ph, err := pop.ParseHandle(s[:i])
	if err != nil {
		return Handle{}, fmt.Errorf("%w: %w", ErrBadHandle, err)
	}
	if ph.BrokerName == "" || ph.QueueID < 0 || ph.QueueOffset < 0 {
		return Handle{}, fmt.Errorf("%w: %q names no broker, queue or offset", ErrBadHandle, s)
	}
	return Handle{Handle: ph, CommitLogOffset: off}, nil
}

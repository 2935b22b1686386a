package broker

import (
	"encoding/binary"
	"encoding/hex"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Property names the broker reads or writes (RocketMQ's MessageConst).
const (
	propTags              = "TAGS"
	propKeys              = "KEYS"
	propUniqKey           = "UNIQ_KEY"
	propWait              = "WAIT"
	propDelay             = "DELAY"
	propCluster           = "CLUSTER"
	propRetryTopic        = "RETRY_TOPIC"
	propOriginMessageID   = "ORIGIN_MESSAGE_ID"
	propReconsumeTime     = "RECONSUME_TIME"
	propMaxReconsumeTimes = "MAX_RECONSUME_TIMES"
	propPopCK             = "POP_CK"
	propDLQOriginTopic    = "DLQ_ORIGIN_TOPIC"
	propDLQOriginMsgID    = "DLQ_ORIGIN_MESSAGE_ID"
)

// uniqIDGen makes UNIQ_KEYs in the layout of RocketMQ's
// MessageClientIDSetter: IP (4 bytes), pid (2), a per-process number (4),
// milliseconds since the start of the month (4), a counter (2), as
// upper-case hex. The broker assigns one to messages that arrive without.
type uniqIDGen struct {
	prefix  [10]byte
	counter atomic.Uint32
}

func newUniqIDGen(ip [4]byte) *uniqIDGen {
	g := &uniqIDGen{}
	copy(g.prefix[:4], ip[:])
	binary.BigEndian.PutUint16(g.prefix[4:], uint16(os.Getpid()))
	binary.BigEndian.PutUint32(g.prefix[6:], uint32(time.Now().UnixNano()))
	return g
}

func (g *uniqIDGen) next() string {
	var b [16]byte
	copy(b[:10], g.prefix[:])
	now := time.Now()
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, now.Location())
	binary.BigEndian.PutUint32(b[10:], uint32(now.Sub(monthStart).Milliseconds()))
	binary.BigEndian.PutUint16(b[14:], uint16(g.counter.Add(1)))
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

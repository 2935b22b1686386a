package broker

import (
	"encoding/binary"
	"encoding/hex"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
)

// Property names the broker reads or writes (RocketMQ's MessageConst).
const (
	propTags              = "TAGS"
	propKeys              = "KEYS"
	propUniqKey           = "UNIQ_KEY"
	propWait              = "WAIT"
	propDelay             = "DELAY"
	propCluster           = "CLUSTER"
	propRealTopic         = "REAL_TOPIC"
	propRealQueueID       = "REAL_QID"
	propRetryTopic        = "RETRY_TOPIC"
	propOriginMessageID   = "ORIGIN_MESSAGE_ID"
	propReconsumeTime     = "RECONSUME_TIME"
	propMaxReconsumeTimes = "MAX_RECONSUME_TIMES"
	propTranMsg           = "TRAN_MSG"
	propPopCK             = "POP_CK"
	propTimerDeliverMs    = "TIMER_DELIVER_MS"
	propTimerDelaySec     = "TIMER_DELAY_SEC"
	propTimerDelayMs      = "TIMER_DELAY_MS"
	propDLQOriginTopic    = "DLQ_ORIGIN_TOPIC"
	propDLQOriginMsgID    = "DLQ_ORIGIN_MESSAGE_ID"
)

// rewriteProperties returns props without the keys drop names (and
// without the keys set names), followed by the pairs of set in order, in
// one pass and one allocation. The client's order of the pairs it keeps is
// preserved, so an unchanged message is stored as sent. Pairs of set with
// an empty value are left out.
func rewriteProperties(props string, drop []string, set ...[2]string) string {
	skip := func(k string) bool {
		for _, d := range drop {
			if k == d {
				return true
			}
		}
		for _, s := range set {
			if k == s[0] {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	b.Grow(len(props) + 64)
	for i := 0; i < len(props); {
		end := strings.IndexByte(props[i:], commitlog.PropertySeparator)
		if end < 0 {
			end = len(props)
		} else {
			end += i
		}
		seg := props[i:end]
		i = end + 1
		sep := strings.IndexByte(seg, commitlog.NameValueSeparator)
		if sep <= 0 || sep >= len(seg)-1 || skip(seg[:sep]) {
			continue
		}
		b.WriteString(seg)
		b.WriteByte(commitlog.PropertySeparator)
	}
	for _, s := range set {
		if s[0] == "" || s[1] == "" {
			continue
		}
		b.WriteString(s[0])
		b.WriteByte(commitlog.NameValueSeparator)
		b.WriteString(s[1])
		b.WriteByte(commitlog.PropertySeparator)
	}
	return b.String()
}

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

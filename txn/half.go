package txn

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
)

// Property names of transactional messages (RocketMQ's MessageConst).
const (
	PropTransactionPrepared = "TRAN_MSG"
	PropProducerGroup       = "PGROUP"
	PropTransactionID       = "__transactionId__"
	PropCheckTimes          = "TRANSACTION_CHECK_TIMES"
	PropCheckImmunitySecs   = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	// PropPreparedQueueOffset is set by Apache RocketMQ on a half it
	// stored again for a later check: the queue offset of the original.
	PropPreparedQueueOffset = "TRAN_PREPARED_QUEUE_OFFSET"
	propUniqKey             = commitlog.PropertyUniqID
)

// IsHalfSend reports whether a send is the half of a transaction: the
// TRAN_MSG property is "true" in any case (RocketMQ's send processor reads
// it with Java's Boolean.parseBoolean) or the sysFlag says PREPARED.
func IsHalfSend(properties string, sysFlag int32) bool {
	if v, _ := commitlog.LookupProperty(properties, PropTransactionPrepared); strings.EqualFold(v, "true") {
		return true
	}
	return commitlog.TransactionType(sysFlag) == commitlog.TransactionPrepared
}

// ToHalf turns a message sent as the half of a transaction into the half
// message the broker stores: queue 0 of RMQ_SYS_TRANS_HALF_TOPIC, the real
// topic and queue in REAL_TOPIC and REAL_QID, the UNIQ_KEY copied to
// __transactionId__, and the transaction bits of sysFlag cleared (so the
// half gets a ConsumeQueue entry of the half topic and no consumer sees
// it).
func ToHalf(m *commitlog.Message) {
	uniq, _ := commitlog.LookupProperty(m.Properties, propUniqKey)
	m.Properties = commitlog.RewriteProperties(m.Properties, nil,
		[2]string{commitlog.PropertyRealTopic, m.Topic},
		[2]string{commitlog.PropertyRealQueueID, strconv.Itoa(int(m.QueueID))},
		[2]string{PropTransactionID, uniq})
	m.Topic = meta.TransHalfTopic
	m.QueueID = 0
	m.SysFlag &^= commitlog.TransactionRollback // the two transaction bits
}

// realDestination returns the topic and queue a half message was sent to.
func realDestination(half *commitlog.Message) (string, int32, error) {
	topic, qid, ok := commitlog.RealDestination(half.Properties)
	if !ok {
		return "", 0, fmt.Errorf("half message at %d has no valid REAL_TOPIC/REAL_QID", half.PhyOffset)
	}
	return topic, qid, nil
}

// committedMessage builds the message a commit stores from its half: the
// real topic and queue, the transaction type COMMIT, PREPARED TX OFFSET
// pointing at the half, and the half's properties as stored, REAL_TOPIC,
// REAL_QID and TRAN_MSG included; body, flag and born data as sent.
// RocketMQ's EndTransactionProcessor stores the half's properties string
// so (it clears those three from the message's map only after building
// the string), and its consumers and proxy see them: the proxy calls the
// message a TRANSACTION one for its TRAN_MSG. A committed message parked
// for a delay level or timer loses TRAN_MSG (ParkedCommit).
func committedMessage(half *commitlog.Message) (*commitlog.Message, error) {
	topic, qid, err := realDestination(half)
	if err != nil {
		return nil, err
	}
	return &commitlog.Message{
		Topic:                     topic,
		QueueID:                   qid,
		Flag:                      half.Flag,
		SysFlag:                   half.SysFlag&^commitlog.TransactionRollback | commitlog.TransactionCommit,
		BornTimestamp:             half.BornTimestamp,
		BornHost:                  half.BornHost,
		ReconsumeTimes:            half.ReconsumeTimes,
		PreparedTransactionOffset: half.PhyOffset,
		Body:                      half.Body,
		Properties:                half.Properties,
	}, nil
}

// ParkedCommit drops TRAN_MSG from the properties of a committed message
// about to be parked for its delay level or timer: RocketMQ rebuilds the
// properties string of a message it parks from the message's map, from
// which its EndTransactionProcessor cleared TRAN_MSG, REAL_TOPIC and
// REAL_QID (the parking sets the last two again).
func ParkedCommit(props string) string {
	return commitlog.RewriteProperties(props, []string{PropTransactionPrepared})
}

// discardedMessage is the copy of a half given up after transactionCheckMax
// checks, stored in TRANS_CHECK_MAX_TIME_TOPIC queue 0 for an operator to
// look at; it keeps REAL_TOPIC and REAL_QID.
func discardedMessage(half *commitlog.Message, checks int32) *commitlog.Message {
	return &commitlog.Message{
		Topic:          meta.TransCheckMaxTopic,
		QueueID:        0,
		Flag:           half.Flag,
		SysFlag:        half.SysFlag,
		BornTimestamp:  half.BornTimestamp,
		BornHost:       half.BornHost,
		ReconsumeTimes: half.ReconsumeTimes,
		Body:           half.Body,
		Properties:     withCheckTimes(half.Properties, checks),
	}
}

// withCheckTimes returns properties with TRANSACTION_CHECK_TIMES set to
// checks, or unchanged when the property would not fit a record (a half
// whose properties are near the 32,767-byte limit): its check and its
// give-up then go without the count rather than never.
func withCheckTimes(props string, checks int32) string {
	out := commitlog.RewriteProperties(props, nil, [2]string{PropCheckTimes, strconv.Itoa(int(checks))})
	if len(out) > commitlog.MaxPropertiesLen {
		return props
	}
	return out
}

// opMessage is the op message that ends a half: RMQ_SYS_TRANS_OP_HALF_TOPIC,
// the half's queue, tag "d", WAIT true, a fresh UNIQ_KEY (uniq; none when
// empty, as RocketMQ 4 writes them) and the half's queue offset in decimal
// as the body. RocketMQ 5 batches several offsets into one body, each
// followed by a comma; both versions read a single offset without one.
func opMessage(half *commitlog.Message, uniq string, now time.Time) *commitlog.Message {
	return &commitlog.Message{
		Topic:         meta.TransOpHalfTopic,
		QueueID:       half.QueueID,
		BornTimestamp: now.UnixMilli(),
		BornHost:      half.StoreHost,
		Body:          strconv.AppendInt(nil, half.QueueOffset, 10),
		Properties: commitlog.RewriteProperties("", nil,
			[2]string{commitlog.PropertyTags, opTag}, [2]string{commitlog.PropertyWait, "true"}, [2]string{propUniqKey, uniq}),
	}
}

// checkBody is the body of CHECK_TRANSACTION_STATE: the half message as a
// stored record, with its real topic and queue and its check count, as
// RocketMQ's clients decode it.
func checkBody(half *commitlog.Message, checks int32) ([]byte, error) {
	topic, qid, err := realDestination(half)
	if err != nil {
		return nil, err
	}
	m := *half
	m.Topic, m.QueueID = topic, qid
	m.Properties = withCheckTimes(half.Properties, checks)
	body, err := commitlog.AppendRecord(nil, &m)
	if err != nil {
		return nil, fmt.Errorf("encode half at %d for a check: %w", half.PhyOffset, err)
	}
	return body, nil
}

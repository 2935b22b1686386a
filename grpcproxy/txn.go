package grpcproxy

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// Transaction states of END_TRANSACTION's commitOrRollback (RocketMQ's
// MessageSysFlag): not yet known (TRANSACTION_NOT_TYPE), commit and
// rollback.
const (
	endUnknown  = "0"
	endCommit   = "8"
	endRollback = "12"
)

// txnKeep bounds how long the proxy remembers a half message for the
// client's EndTransaction (RocketMQ proxy's maxTransactionRecoverySecond,
// an hour), and txnMax how many it remembers.
const (
	txnKeep = time.Hour
	txnMax  = 100_000
)

// txnData is what END_TRANSACTION needs of a half message besides the
// client's request: where it is stored, and whether the proxy learnt
// that from the broker's check (rather than from the send).
type txnData struct {
	addr, broker         string
	tranStateTableOffset int64
	commitLogOffset      int64
	checked              bool
	at                   time.Time
}

// fromCheck is END_TRANSACTION's fromTransactionCheck for a client's
// EndTransaction of d: whether it answers the broker's check. A client
// that says so (SOURCE_SERVER_CHECK, the Java client's answer to a check)
// or says it does not (SOURCE_CLIENT) is believed. One that says nothing
// (the Go client v5.1.4 never sets the source) answers a check when the
// proxy last heard of the half from a check: RocketMQ's broker then
// commits, with its TRANSACTION_CHECK_TIMES, the copy of the half the
// check stored again, whose place its proxy passes on whatever the
// source; rocketkv's broker stores no copy and takes the count from the
// check it is told the answer is to, so the proxy tells it.
func (d txnData) fromCheck(source rmqpb.TransactionSource) bool {
	switch source {
	case rmqpb.TransactionSource_SOURCE_SERVER_CHECK:
		return true
	case rmqpb.TransactionSource_SOURCE_CLIENT:
		return false
	}
	return d.checked
}

// txnTable remembers half messages by producer group (the topic, as
// RocketMQ's proxy names gRPC producers' groups) and transaction id, from
// their send or from the broker's check, until they end. When full, the
// half message remembered or looked up longest ago is forgotten.
type txnTable struct {
	mu sync.Mutex // makes take's look-up and removal one step
	m  *lru.Cache[string, txnData]
}

// newTxnTable returns a table of size half messages (at least one).
func newTxnTable(size int) *txnTable {
	m, _ := lru.New[string, txnData](max(size, 1))
	return &txnTable{m: m}
}

func txnKey(group, id string) string { return group + "\x00" + id }

// put remembers a half message.
func (t *txnTable) put(group, id string, d txnData) { t.m.Add(txnKey(group, id), d) }

// take returns and forgets a half message; one remembered longer than
// txnKeep is forgotten without being returned.
func (t *txnTable) take(group, id string) (txnData, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.m.Peek(txnKey(group, id))
	if !ok {
		return d, false
	}
	t.m.Remove(txnKey(group, id))
	if time.Since(d.at) > txnKeep {
		return d, false
	}
	return d, true
}

// EndTransaction commits or rolls back a half message the client sent
// through a proxy (or was asked about by the broker's check through it).
func (s *Server) EndTransaction(ctx context.Context, req *rmqpb.EndTransactionRequest) (*rmqpb.EndTransactionResponse, error) {
	who := callerOf(ctx)
	s.clients.touch(who.clientID)
	answer := func(err error) (*rmqpb.EndTransactionResponse, error) {
		return &rmqpb.EndTransactionResponse{Status: statusOf(err)}, nil
	}
	topic := wrap(req.GetTopic())
	if err := checkTopic(topic); err != nil {
		return answer(err)
	}
	id := req.GetTransactionId()
	if meta.IsBlank(id) {
		return answer(fail(rmqpb.Code_INVALID_TRANSACTION_ID, "transaction id cannot be empty"))
	}
	var state string
	switch req.GetResolution() {
	case rmqpb.TransactionResolution_COMMIT:
		state = endCommit
	case rmqpb.TransactionResolution_ROLLBACK:
		state = endRollback
	default:
		// UNSPECIFIED or UNKNOWN: RocketMQ's proxy passes these on as
		// TRANSACTION_NOT_TYPE, which the broker only logs; its check
		// asks again later.
		state = endUnknown
	}
	d, ok := s.txns.take(topic, id)
	if !ok {
		// RocketMQ proxy's TRANSACTION_DATA_NOT_FOUND, which its gRPC
		// layer answers INTERNAL_SERVER_ERROR (the code has no mapping).
		return answer(fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "cannot found transaction data: no half message of transaction %s on topic %s passed through this proxy (or it ended)", id, topic))
	}
	h := map[string]string{
		"producerGroup": topic, "tranStateTableOffset": strconv.FormatInt(d.tranStateTableOffset, 10),
		"commitLogOffset": strconv.FormatInt(d.commitLogOffset, 10), "commitOrRollback": state,
		"fromTransactionCheck": strconv.FormatBool(d.fromCheck(req.GetSource())),
		"msgId":                req.GetMessageId(), "transactionId": id,
	}
	if state == endUnknown {
		// As RocketMQ's proxy: the half is forgotten (the broker's next
		// check brings it back to a proxy, with the producer to ask) and
		// the broker is told oneway, without waiting for it.
		if err := s.invokeOneway(ctx, d.addr, remoting.NewRequest(remoting.EndTransaction, h, nil)); err != nil {
			s.log.Warn().Err(err).Str("topic", topic).Str("transactionId", id).Msg("end transaction unknown: telling the broker failed")
			return answer(err)
		}
		return answer(nil)
	}
	resp, err := s.invoke(ctx, d.addr, 0, remoting.NewRequest(remoting.EndTransaction, h, nil))
	if err == nil && resp.Code != remoting.Success {
		err = remotingFailure("end transaction", resp)
	}
	if err != nil {
		s.txns.put(topic, id, d) // the client may try again
		return answer(err)
	}
	return answer(nil)
}

// brokerRequest answers what a broker asks the proxy on its Remoting
// connection: the transaction check of a half message whose producer
// group the proxy registered for its gRPC producers.
func (s *Server) brokerRequest(_ context.Context, req *remoting.Command) *remoting.Command {
	if req.Code != remoting.CheckTransactionState {
		return remoting.NotSupportedResponse(req)
	}
	if err := s.checkTransaction(req); err != nil {
		s.log.Warn().Err(err).Msg("transaction check not passed on to a client")
	}
	return nil // oneway
}

// checkTransaction passes a broker's CHECK_TRANSACTION_STATE on to a
// producer of the message's topic over its telemetry stream
// (RecoverOrphanedTransactionCommand), remembering the half message for
// the EndTransaction the client answers with.
func (s *Server) checkTransaction(req *remoting.Command) error {
	h := remoting.Header(req.ExtFields)
	m, err := commitlog.Decode(req.Body)
	if err != nil {
		return fmt.Errorf("check of a half message: %w", err)
	}
	tso, err := h.Int64("tranStateTableOffset")
	if err != nil {
		return fmt.Errorf("check of a half message: %w", err)
	}
	clo, err := h.Int64("commitLogOffset")
	if err != nil {
		return fmt.Errorf("check of a half message: %w", err)
	}
	id := h.OptString("transactionId", "")
	if id == "" {
		id, _ = commitlog.LookupProperty(m.Properties, propUniqKey)
	}
	group, _ := commitlog.LookupProperty(m.Properties, propProducerGroup)
	// The header names the half topic; the record carries the real one.
	topic := m.Topic
	if group == "" {
		group = topic
	}
	broker := h.OptString("bname", "")
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	addr, err := s.masterOf(ctx, topic, broker)
	if err != nil {
		return fmt.Errorf("check of transaction %s: %w", id, err)
	}
	pm, err := toProto(&received{msg: m, topic: topic})
	if err != nil {
		return fmt.Errorf("check of transaction %s: %w", id, err)
	}
	ns, name := splitNamespace(topic)
	pm.Topic = &rmqpb.Resource{ResourceNamespace: ns, Name: name}
	s.txns.put(group, id, txnData{addr: addr, broker: broker, tranStateTableOffset: tso, commitLogOffset: clo, checked: true, at: time.Now()})
	cmd := &rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_RecoverOrphanedTransactionCommand{
		RecoverOrphanedTransactionCommand: &rmqpb.RecoverOrphanedTransactionCommand{Message: pm, TransactionId: id}}}
	if !s.streams.sendToProducer(topic, cmd) {
		return fmt.Errorf("check of transaction %s on %s: no producer of the topic is connected", id, topic)
	}
	return nil
}

// errBadRecallHandle is a recall handle that does not decode.
var errBadRecallHandle = errors.New("grpcproxy: recall handle is invalid")

// recallBroker returns the broker group a recall handle names, decoding
// it as RocketMQ's RecallMessageHandle.decodeHandle does: base64 of the
// URL alphabet, padded or not (no line breaks), of "v1 topic brokerName
// deliverMs uniqKey", split at single spaces with trailing empty fields
// dropped (Java's String.split); fields past the fifth are ignored. An
// empty broker name (two spaces in a row) decodes, as in RocketMQ, and
// names no broker.
func recallBroker(handle string) (string, error) {
	if handle == "" || strings.ContainsAny(handle, "\r\n") {
		return "", fmt.Errorf("%w: empty or holds line breaks", errBadRecallHandle)
	}
	raw, err := base64.URLEncoding.DecodeString(handle)
	if err != nil {
		raw, err = base64.RawURLEncoding.DecodeString(handle)
	}
	if err != nil {
		return "", fmt.Errorf("%w: not base64", errBadRecallHandle)
	}
	f := strings.Split(string(raw), " ")
	for len(f) > 0 && f[len(f)-1] == "" {
		f = f[:len(f)-1]
	}
	if len(f) < 5 || f[0] != "v1" {
		return "", fmt.Errorf("%w: %d fields", errBadRecallHandle, len(f))
	}
	return f[2], nil
}

// RecallMessage cancels a delay message before it is delivered, by the
// recall handle its send answered (RECALL_MESSAGE to its broker). Its
// refusals are RocketMQ proxy's (ProducerProcessor.recallMessage): a
// topic that takes no delay messages is MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
// a handle that does not decode INTERNAL_SERVER_ERROR, one naming a broker
// group the topic's route does not have BAD_REQUEST (INVALID_BROKER_NAME),
// and the broker's refusals are remotingFailure's.
func (s *Server) RecallMessage(ctx context.Context, req *rmqpb.RecallMessageRequest) (*rmqpb.RecallMessageResponse, error) {
	who := callerOf(ctx)
	s.clients.touch(who.clientID)
	answer := func(id string, err error) (*rmqpb.RecallMessageResponse, error) {
		if err != nil {
			s.log.Debug().Err(err).Str("client", who.clientID).Msg("recall refused")
		}
		return &rmqpb.RecallMessageResponse{Status: statusOf(err), MessageId: id}, nil
	}
	topic := wrap(req.GetTopic())
	if err := checkTopic(topic); err != nil {
		return answer("", err)
	}
	r, err := s.routes.get(ctx, topic)
	if err != nil {
		return answer("", err)
	}
	if len(r.types) > 0 && !slices.Contains(r.types, rmqpb.MessageType_DELAY) {
		return answer("", fail(rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
			"TopicMessageType validate failed, the expected type is %s, but actual type is DELAY", r.types[0]))
	}
	broker, err := recallBroker(req.GetRecallHandle())
	if err != nil {
		return answer("", fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "%v", err))
	}
	addr, ok := r.masters[broker]
	if !ok {
		return answer("", fail(rmqpb.Code_BAD_REQUEST, "cannot find broker %s", broker))
	}
	resp, err := s.invoke(ctx, addr, 0, remoting.NewRequest(remoting.RecallMessage,
		map[string]string{"topic": topic, "producerGroup": topic, "recallHandle": req.GetRecallHandle()}, nil))
	if err != nil {
		return answer("", err)
	}
	if resp.Code != remoting.Success {
		return answer("", remotingFailure("recall", resp))
	}
	return answer(remoting.Header(resp.ExtFields).OptString("msgId", ""), nil)
}

package grpcproxy

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/remoting"
)

// An EndTransaction that does not say where it comes from (the Go client
// v5.1.4 sets no source, not even in answer to a check) answers the
// broker's check when the proxy's last word of the half came from a
// check: the message it commits then carries TRANSACTION_CHECK_TIMES, as
// RocketMQ commits the copy its check stored again. One the producer
// commits unasked carries none.
func TestEndTransactionWithoutSourceAnswersTheCheck(t *testing.T) {
	c := startTestClusterWith(t, map[string]string{"transactionTimeOut": "1000", "transactionCheckInterval": "1000"}, nil)
	const topic, group, producer = "TxnNoSource", "GroupTxnNoSource", "txn-no-source"
	c.createTopic(t, topic, 1, "+message.type=TRANSACTION")

	stream, err := c.rpc.Telemetry(callCtx(t, producer, 30*time.Second))
	if err != nil {
		t.Fatalf("Telemetry: %v", err)
	}
	if err := stream.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{
		ClientType: rmqpb.ClientType_PRODUCER.Enum(),
		PubSub:     &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: []*rmqpb.Resource{{Name: topic}}}},
	}}}); err != nil {
		t.Fatalf("send settings: %v", err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("receive the settings' answer: %v", err)
	}

	end := func(m *rmqpb.Message, txnID string) {
		t.Helper()
		resp, err := c.rpc.EndTransaction(callCtx(t, producer, 5*time.Second), &rmqpb.EndTransactionRequest{
			Topic: &rmqpb.Resource{Name: topic}, MessageId: m.GetSystemProperties().GetMessageId(),
			TransactionId: txnID, Resolution: rmqpb.TransactionResolution_COMMIT,
		})
		if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
			t.Fatalf("EndTransaction of %s: %v %v", m.GetBody(), resp.GetStatus(), err)
		}
	}
	half := func(body string) (*rmqpb.Message, string) {
		m := newMessage(topic, body)
		m.SystemProperties.MessageType = rmqpb.MessageType_TRANSACTION
		return m, c.send(t, producer, m).GetTransactionId()
	}

	unasked, unaskedID := half("unasked")
	end(unasked, unaskedID)
	checked, _ := half("checked")
	for {
		cmd, err := stream.Recv()
		if err != nil {
			t.Fatalf("waiting for the check of the open transaction: %v", err)
		}
		if rc := cmd.GetRecoverOrphanedTransactionCommand(); rc != nil {
			if got := string(rc.GetMessage().GetBody()); got != "checked" {
				t.Fatalf("the proxy asked about %q, want checked", got)
			}
			end(checked, rc.GetTransactionId())
			break
		}
	}

	props := map[string]map[string]string{}
	for _, m := range c.receiveN(t, "txn-consumer", receiveRequest(group, topic, 30*time.Second, 2*time.Second), 2) {
		props[string(m.GetBody())] = m.GetUserProperties()
	}
	if n, ok := props["checked"]["TRANSACTION_CHECK_TIMES"]; n != "1" {
		t.Errorf("the message committed answering its first check carries TRANSACTION_CHECK_TIMES %q (present %v), want 1", n, ok)
	}
	if n, ok := props["unasked"]["TRANSACTION_CHECK_TIMES"]; ok {
		t.Errorf("the message its producer committed unasked carries TRANSACTION_CHECK_TIMES %q", n)
	}
}

// A client that says where its EndTransaction comes from is believed,
// whatever the proxy last heard of the half.
func TestTxnFromCheck(t *testing.T) {
	for _, tc := range []struct {
		source  rmqpb.TransactionSource
		checked bool
		want    bool
	}{
		{rmqpb.TransactionSource_SOURCE_UNSPECIFIED, false, false},
		{rmqpb.TransactionSource_SOURCE_UNSPECIFIED, true, true},
		{rmqpb.TransactionSource_SOURCE_CLIENT, true, false},
		{rmqpb.TransactionSource_SOURCE_SERVER_CHECK, false, true},
	} {
		if got := (txnData{checked: tc.checked}).fromCheck(tc.source); got != tc.want {
			t.Errorf("fromCheck(%v) of a half heard of from a check %v = %v, want %v", tc.source, tc.checked, got, tc.want)
		}
	}
}

// An EndTransaction that does not resolve (UNSPECIFIED, or a value the
// protocol does not define: it has no UNKNOWN) is
// handled as RocketMQ's proxy does: the proxy forgets the half and tells
// its broker oneway, with TRANSACTION_NOT_TYPE, that the producer does
// not know yet, answering OK without waiting for the broker; one of a
// half the proxy has no record of is answered INTERNAL_SERVER_ERROR, as
// RocketMQ's TRANSACTION_DATA_NOT_FOUND is.
func TestEndTransactionUnknown(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, producer = "TxnUnknown", "txn-unknown"
	c.createTopic(t, topic, 1, "+message.type=TRANSACTION")
	end := func(id string, r rmqpb.TransactionResolution) *rmqpb.Status {
		t.Helper()
		resp, err := c.rpc.EndTransaction(callCtx(t, producer, 10*time.Second), &rmqpb.EndTransactionRequest{
			Topic: &rmqpb.Resource{Name: topic}, MessageId: "01TESTUNKNOWN", TransactionId: id, Resolution: r,
		})
		if err != nil {
			t.Fatalf("EndTransaction %v of %s: %v", r, id, err)
		}
		return resp.GetStatus()
	}

	for _, r := range []rmqpb.TransactionResolution{rmqpb.TransactionResolution_TRANSACTION_RESOLUTION_UNSPECIFIED, 7} {
		m := newMessage(topic, "half-"+r.String())
		m.SystemProperties.MessageType = rmqpb.MessageType_TRANSACTION
		id := c.send(t, producer, m).GetTransactionId()
		if st := end(id, r); st.GetCode() != rmqpb.Code_OK {
			t.Fatalf("EndTransaction %v of an open transaction answered %v, want OK", r, st)
		}
		if st := end(id, rmqpb.TransactionResolution_COMMIT); st.GetCode() != rmqpb.Code_INTERNAL_SERVER_ERROR {
			t.Errorf("a commit after EndTransaction %v answered %v, want INTERNAL_SERVER_ERROR: the proxy kept the half", r, st)
		}
		if st := end(id, r); st.GetCode() != rmqpb.Code_INTERNAL_SERVER_ERROR {
			t.Errorf("EndTransaction %v of a transaction the proxy forgot answered %v, want INTERNAL_SERVER_ERROR", r, st)
		}
	}

	// What the broker is told, and that the proxy does not wait for an
	// answer: this broker never answers (RocketMQ's answers no
	// TRANSACTION_NOT_TYPE), so a proxy waiting would answer PROXY_TIMEOUT.
	got := make(chan *remoting.Command, 1)
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.EndTransaction, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) { got <- req })
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, mux, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	c.proxy.txns.put(topic, "silent", txnData{addr: srv.Addr().String(), broker: "silent", tranStateTableOffset: 7, commitLogOffset: 4096, at: time.Now()})
	if st := end("silent", rmqpb.TransactionResolution_TRANSACTION_RESOLUTION_UNSPECIFIED); st.GetCode() != rmqpb.Code_OK {
		t.Fatalf("EndTransaction UNSPECIFIED through a broker that does not answer: %v, want OK", st)
	}
	select {
	case req := <-got:
		want := map[string]string{"producerGroup": topic, "transactionId": "silent", "commitOrRollback": "0",
			"tranStateTableOffset": "7", "commitLogOffset": "4096", "fromTransactionCheck": "false", "msgId": "01TESTUNKNOWN"}
		for k, v := range want {
			if req.ExtFields[k] != v {
				t.Errorf("END_TRANSACTION %s = %q, want %q", k, req.ExtFields[k], v)
			}
		}
		if !req.IsOneway() {
			t.Error("END_TRANSACTION of an unknown resolution is not oneway")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the broker was not told of the unknown resolution")
	}
}

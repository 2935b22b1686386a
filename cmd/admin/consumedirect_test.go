package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// fakeConsumer connects to the broker as client id of group, subscribed
// to topic, of consume type ctype, answering GET_CONSUMER_RUNNING_INFO
// (its mqTable the JSON given) and CONSUME_MESSAGE_DIRECTLY as a RocketMQ
// client does; it returns the CONSUME_MESSAGE_DIRECTLY requests it got.
func fakeConsumer(t *testing.T, ns, broker, group, id, topic, ctype, mqTable string) func() []*remoting.Command {
	t.Helper()
	var mu sync.Mutex
	var got []*remoting.Command
	c, err := remoting.Dial(context.Background(), broker, remoting.ClientOptions{Handler: func(_ context.Context, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		switch req.Code {
		case remoting.GetConsumerRunningInfo:
			resp.Body = []byte(`{"properties":{"PROP_CONSUME_TYPE":"` + ctype + `"},"subscriptionSet":[],"mqTable":` + mqTable + `,"statusTable":{}}`)
		case remoting.ConsumeMessageDirectly:
			mu.Lock()
			got = append(got, req)
			mu.Unlock()
			resp.Body = []byte(`{"order":false,"autoCommit":true,"consumeResult":"CR_SUCCESS","remark":null,"spentTimeMills":7}`)
		default:
			return nil
		}
		return resp
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	request(t, c, remoting.HeartBeat, nil, []byte(`{"clientID":"`+id+`","producerDataSet":[],"consumerDataSet":[{"groupName":"`+group+`",`+
		`"consumeType":"`+ctype+`","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",`+
		`"subscriptionDataSet":[{"topic":"`+topic+`","subString":"*","expressionType":"TAG"}]}]}`))
	waitRoute(t, ns, "%RETRY%"+group)
	return func() []*remoting.Command {
		mu.Lock()
		defer mu.Unlock()
		return append([]*remoting.Command(nil), got...)
	}
}

// queryMsgById and queryMsgByUniqueKey -g -d hand the message to a push
// consumer (CONSUME_MESSAGE_DIRECTLY through the broker) and print its
// result as mqadmin does; a pull consumer is refused as mqadmin refuses
// it. queryMsgById -s true sends the message again (queryMsgByUniqueKey
// then finds it twice, -a showing both), -s false does nothing, and -f
// prints the body in a charset.
func TestConsumeDirectlyResendAndBodyFormat(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	br := b.Addr()
	c := client(t, br)
	out0(t, "updateTopic", "-b", br, "-t", "DT", "-r", "1", "-w", "1")
	waitRoute(t, ns, "DT")
	out := out0(t, "sendMessage", "-n", ns, "-t", "DT", "-p", "héllo", "-k", "dk")
	f := strings.Fields(strings.Split(out, "\n")[1])
	id := f[len(f)-1]
	waitIndexed(t, c, "DT", 0, 1)

	pushed := fakeConsumer(t, ns, br, "DirectG", "10.0.0.8@push", "DT", "CONSUME_PASSIVELY", "{}")
	want := "ConsumeMessageDirectlyResult [order=false, autoCommit=true, consumeResult=CR_SUCCESS, remark=null, spentTimeMills=7]\n"
	for i, args := range [][]string{
		{"queryMsgByUniqueKey", "-t", "DT", "-i", id},
		{"queryMsgById", "-t", "DT", "-i", id},
	} {
		args = append(args, "-n", ns, "-b", br, "-g", "DirectG", "-d", "10.0.0.8@push")
		if out := out0(t, args...); out != want {
			t.Fatalf("%v printed %q, want %q", args, out, want)
		}
		got := pushed()
		if len(got) != i+1 {
			t.Fatalf("%v: the client got %d messages to consume, want %d", args, len(got), i+1)
		}
		h := got[i].ExtFields
		if h["consumerGroup"] != "DirectG" || h["clientId"] != "10.0.0.8@push" || h["topic"] != "DT" || !strings.Contains(string(got[i].Body), "héllo") {
			t.Fatalf("%v: the client got %v %q", args, h, got[i].Body)
		}
	}
	fakeConsumer(t, ns, br, "PullG", "10.0.0.9@pull", "DT", "CONSUME_ACTIVELY", "{}")
	if out := out0(t, "queryMsgById", "-n", ns, "-b", br, "-t", "DT", "-i", id, "-g", "PullG", "-d", "10.0.0.9@pull"); out != "this 10.0.0.9@pull client is not push consumer ,not support direct push \n" {
		t.Fatalf("a pull consumer: %q", out)
	}

	if out := out0(t, "queryMsgById", "-n", ns, "-t", "DT", "-i", id, "-f", "UTF-8"); !strings.Contains(out, "Message Body:        héllo\n") {
		t.Fatalf("queryMsgById -f UTF-8:\n%s", out)
	}
	if out := out0(t, "queryMsgById", "-n", ns, "-t", "DT", "-i", id, "-s", "false"); out != "" {
		t.Fatalf("queryMsgById -s false: %q", out)
	}
	out = out0(t, "queryMsgById", "-n", ns, "-t", "DT", "-i", id, "-s", "true")
	if !strings.HasPrefix(out, "prepare resend msg. originalMsgId="+id+"\nSendResult [sendStatus=SEND_OK, msgId="+id+", ") {
		t.Fatalf("queryMsgById -s true:\n%s", out)
	}
	waitIndexed(t, c, "DT", 0, 2)
	if out := out0(t, "queryMsgByUniqueKey", "-n", ns, "-t", "DT", "-i", id); strings.Count(out, "OffsetID:") != 1 || !strings.Contains(out, "Queue Offset:        0\n") {
		t.Fatalf("queryMsgByUniqueKey without -a: the first stored only:\n%s", out)
	}
	if out := out0(t, "queryMsgByUniqueKey", "-n", ns, "-t", "DT", "-i", id, "-a"); strings.Count(out, "OffsetID:") != 2 || !strings.Contains(out, "Keys:                [dk]") {
		t.Fatalf("queryMsgByUniqueKey -a: both:\n%s", out)
	}
}

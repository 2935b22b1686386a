package main

import (
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/msgtrace"
	"github.com/rocketkv/rocketkv/remoting"
)

// traceRecord is one record of RocketMQ's trace format, written out by
// hand: fields separated by 0x01, the record ended by 0x02.
func traceRecord(fields ...string) string { return strings.Join(fields, "\x01") + "\x02" }

// queryMsgTraceById finds the trace messages keyed by a message id in the
// trace topic and prints that message's records as mqadmin's tables: each
// send under a Pub header, the consumptions by consumer group, leaving out
// the records of other messages that share a trace message; a trace
// message that is not in the format is named in the error, a time window
// without trace messages is an error, and so is a trace topic without a
// route.
func TestQueryMsgTraceByID(t *testing.T) {
	ns, b := startClusterWith(t, map[string]string{"traceTopicEnable": "true"})
	c := client(t, b.Addr())
	waitRoute(t, ns, defaultTraceTopic)
	const msgID = "7F0000010001000000000000000000AA"
	sent := 0
	sendTraceFlagged := func(keys, sysFlag string, body []byte) {
		request(t, c, remoting.SendMessageV2, map[string]string{
			"a": "trace-producer", "b": defaultTraceTopic, "c": "TBW102", "d": "1", "e": "0", "f": sysFlag, "g": "1", "h": "0",
			"i": "KEYS\x01" + keys + "\x02",
		}, body)
		sent++
		waitIndexed(t, c, defaultTraceTopic, 0, int64(sent))
	}
	sendTrace := func(keys, body string) {
		sendTraceFlagged(keys, "0", []byte(body))
	}
	pubAt, subAt, subAt2 := int64(1764504000123), int64(1764504001456), int64(1764504002789)
	ms := func(v int64) string { return strconv.FormatInt(v, 10) }
	sendTrace(msgID+" order-1", traceRecord("Pub", ms(pubAt), "DefaultRegion", "PG", "TopicA", msgID, "TagA", "order-1", "10.0.0.1:10911", "11", "7", "0", "OFFSETID", "true")+
		traceRecord("Pub", ms(pubAt), "DefaultRegion", "PG", "TopicA", "OTHERID", "TagA", "", "10.0.0.1:10911", "11", "99", "0", "OFFSETID2", "true"))
	sendTrace(msgID+" OTHERID", traceRecord("SubBefore", ms(subAt), "DefaultRegion", "CG-B", "REQ1", msgID, "0", "order-1")+
		traceRecord("SubAfter", "REQ1", msgID, "30", "false", "order-1", "1", ms(subAt), "CG-B")+
		traceRecord("SubAfter", "REQ2", msgID, "5", "true", "order-1", "0", ms(subAt2), "CG-A")+
		traceRecord("SubAfter", "REQ3", "OTHERID", "66", "true", "", "0", ms(subAt2), "CG-A"))

	out, err := run(t, "queryMsgTraceById", "-n", ns, "-i", msgID)
	if err != nil {
		t.Fatalf("queryMsgTraceById: %v\n%s", err, out)
	}
	row := func(cols ...string) string {
		return fmt.Sprintf("%-10s %-20s %-20s %-20s %-10s %-10s\n", cols[0], cols[1], cols[2], cols[3], cols[4], cols[5])
	}
	at := func(v int64) string { return time.UnixMilli(v).Format("2006-01-02 15:04:05") }
	want := row("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status") +
		row("Pub", "PG", "127.0.0.1", at(pubAt), "7ms", "success") + "\n" +
		row("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status") +
		row("Sub", "CG-A", "127.0.0.1", at(subAt2), "5ms", "success") + "\n" +
		row("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status") +
		row("Sub", "CG-B", "127.0.0.1", at(subAt), "30ms", "failed") + "\n"
	if out != want {
		t.Fatalf("queryMsgTraceById printed\n%s\nwant\n%s", out, want)
	}

	// A producer compresses a large trace message's body (zlib, sysFlag
	// bit 1), as RocketMQ's over 4 KiB; it is read inflated.
	const zipID = "7F0000010001000000000000000000CC"
	var zipped bytes.Buffer
	zw := zlib.NewWriter(&zipped)
	if _, err := zw.Write([]byte(traceRecord("Pub", ms(pubAt), "DefaultRegion", "PG-Z", "TopicA", zipID, "", "", "h", "1", "3", "0", "OFF", "false"))); err != nil || zw.Close() != nil {
		t.Fatal(err)
	}
	sendTraceFlagged(zipID, "1", zipped.Bytes())
	if out, err := run(t, "queryMsgTraceById", "-n", ns, "-i", zipID); err != nil || !strings.Contains(out, row("Pub", "PG-Z", "127.0.0.1", at(pubAt), "3ms", "failed")) {
		t.Fatalf("a compressed trace message: %q %v", out, err)
	}

	// A trace message of another id that is not in the format.
	const badID = "7F0000010001000000000000000000BB"
	sendTrace(badID, traceRecord("Pub", "yesterday", "DefaultRegion", "PG", "TopicA", badID, "", "", "h", "1", "1", "0", "OFF", "true"))
	out, err = run(t, "queryMsgTraceById", "-n", ns, "-i", badID, "-t", defaultTraceTopic, "-c", "8")
	if err == nil || !strings.Contains(err.Error(), "yesterday") || out != "" {
		t.Errorf("a trace message not in the format: %q %v", out, err)
	}
	future := time.Now().Add(time.Hour).UnixMilli()
	if _, err := run(t, "queryMsgTraceById", "-n", ns, "-i", msgID, "-b", ms(future), "-e", ms(future+1)); err == nil || !strings.Contains(err.Error(), "no trace message") ||
		!strings.Contains(err.Error(), "query message by key finished, but no message.") {
		t.Errorf("a window after the trace messages: %v", err)
	}
	if _, err := run(t, "queryMsgTraceById", "-n", ns, "-i", "NOSUCHID"); err == nil || !strings.Contains(err.Error(), "NOSUCHID") {
		t.Errorf("an id without traces: %v", err)
	}
	if _, err := run(t, "queryMsgTraceById", "-n", ns, "-i", msgID, "-t", "NoSuchTraceTopic"); err == nil || !strings.Contains(err.Error(), "NoSuchTraceTopic") {
		t.Errorf("a trace topic without a route: %v", err)
	}
}

// sendMessage -m true writes the send's Pub record, as a Java producer
// with message trace on writes it, to RMQ_SYS_TRACE_TOPIC under the
// message's id and keys: queryMsgTraceById shows it. -m false, or a
// broker answering TRACE_ON false, writes none.
func TestSendMessageTrace(t *testing.T) {
	for _, traceOn := range []string{"true", "false"} {
		ns, b := startClusterWith(t, map[string]string{"traceTopicEnable": "true", "traceOn": traceOn})
		c := client(t, b.Addr())
		out0(t, "updateTopic", "-b", b.Addr(), "-t", "MT", "-r", "1", "-w", "1")
		waitRoute(t, ns, "MT")
		waitRoute(t, ns, defaultTraceTopic)
		idOf := func(out string) string {
			f := strings.Fields(strings.Split(out, "\n")[1])
			return f[len(f)-1]
		}
		out0(t, "sendMessage", "-n", ns, "-t", "MT", "-p", "no trace", "-m", "false")
		sentFrom := time.Now().UnixMilli()
		traced := idOf(out0(t, "sendMessage", "-n", ns, "-t", "MT", "-p", "traced", "-k", "tk1 tk2", "-m", "true"))
		waitIndexed(t, c, "MT", 0, 2)
		// The trace topic's messages: none, or the traced send's only.
		var stored int64
		for _, row := range rows(out0(t, "topicStatus", "-b", b.Addr(), "-t", defaultTraceTopic)) {
			n, _ := strconv.ParseInt(row[3], 10, 64)
			stored += n
		}
		if want := map[string]int64{"true": 1, "false": 0}[traceOn]; stored != want {
			t.Fatalf("traceOn %s: the trace topic holds %d messages, want %d", traceOn, stored, want)
		}
		if traceOn == "false" {
			continue
		}
		waitIndexed(t, c, defaultTraceTopic, 0, 1)
		msgs, err := newRootGlobals(t, ns).queryMessages(context.Background(), io.Discard, "", defaultTraceTopic, "tk2", false, 32, 0, math.MaxInt64)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("trace messages under key tk2: %d %v", len(msgs), err)
		}
		m := msgs[0]
		if keys, _ := commitlog.LookupProperty(m.Properties, "KEYS"); keys != traced+" tk1 tk2" {
			t.Errorf("the trace message's keys %q", keys)
		}
		recs, err := msgtrace.Decode(m.Body)
		if err != nil || len(recs) != 1 {
			t.Fatalf("trace body %q: %v", m.Body, err)
		}
		r := recs[0]
		// The producer group is the time the send started in ms, as
		// mqadmin's SendMessageCommand names it.
		if group, err := strconv.ParseInt(r.GroupName, 10, 64); err != nil || group < sentFrom || group > time.Now().UnixMilli() {
			t.Errorf("trace record's group %q, want the send's start in ms (from %d)", r.GroupName, sentFrom)
		}
		if r.Type != msgtrace.Pub || r.Topic != "MT" || r.MsgID != traced || r.Tags != "null" || r.Keys != "tk1 tk2" ||
			r.StoreHost != b.Addr() || r.BodyLength != 6 || r.RegionID != "DefaultRegion" || !r.Success || r.OffsetMsgID == "" || r.MsgType != 0 {
			t.Errorf("trace record %+v", r)
		}
		out := out0(t, "queryMsgTraceById", "-n", ns, "-i", traced)
		if !strings.Contains(out, "Pub        "+r.GroupName+" ") || !strings.Contains(out, "success") {
			t.Errorf("queryMsgTraceById of the traced send:\n%s", out)
		}
	}
}

// newRootGlobals returns the globals of a tool asking the name servers ns.
func newRootGlobals(t *testing.T, ns string) *globals {
	t.Helper()
	return &globals{namesrv: ns, timeout: 10 * time.Second, broker: defaultBroker}
}

package main

import (
	"bytes"
	"compress/zlib"
	"maps"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
)

// printMsg and printMsgByQueue print the messages mqadmin's do, filtered
// by tag, between timestamps, with bodies in a charset, or counted by tag.
func TestPrintMsg(t *testing.T) {
	ns, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "PM", "-r", "2", "-w", "2"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "PM")
	ids := map[string]string{}
	for _, m := range []struct{ q, tag, body string }{
		{"0", "TagA", "hello"}, {"0", "TagB", "world"}, {"0", "TagA", "\xd6\xd0\xce\xc4"}, {"1", "TagB", "x"},
	} {
		out, err := run(t, "sendMessage", "-n", ns, "-t", "PM", "--broker-name", "broker-a", "-i", m.q, "-c", m.tag, "-p", m.body)
		if err != nil {
			t.Fatal(err)
		}
		f := rows(out)[0]
		ids[m.body] = f[len(f)-1]
	}
	c := client(t, br)
	waitIndexed(t, c, "PM", 0, 3)
	waitIndexed(t, c, "PM", 1, 1)

	out, err := run(t, "printMsg", "-n", ns, "-t", "PM")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	dashes := "--------------------------------------------------------"
	if len(lines) != 8 || lines[0] != "minOffset=0, maxOffset=3, MessageQueue [topic=PM, brokerName=broker-a, queueId=0]" ||
		lines[4] != dashes || lines[5] != "minOffset=0, maxOffset=1, MessageQueue [topic=PM, brokerName=broker-a, queueId=1]" || lines[7] != dashes {
		t.Fatalf("printMsg:\n%s", out)
	}
	for i, body := range []string{"hello", "world"} {
		l := lines[1+i]
		if !strings.HasPrefix(l, "MSGID: "+ids[body]+" MessageExt [brokerName=broker-a, queueId=0, ") || !strings.HasSuffix(l, " BODY: "+body) ||
			!strings.Contains(l, "queueOffset="+string(rune('0'+i))+",") || !strings.Contains(l, "toString()=Message{topic='PM', flag=0, properties={") ||
			!strings.Contains(l, "MAX_OFFSET=3, MIN_OFFSET=0") || !strings.Contains(l, "UNIQ_KEY="+ids[body]) {
			t.Errorf("message line %q", l)
		}
	}
	if !strings.Contains(lines[1], "body=[104, 101, 108, 108, 111], transactionId='null'}]") {
		t.Errorf("body bytes as Java prints them: %q", lines[1])
	}
	// GBK bytes, read as UTF-8 by default: replacement characters.
	if !strings.Contains(lines[3], "body=[-42, -48, -50, -60]") || !strings.HasSuffix(lines[3], " BODY: \ufffd\ufffd\ufffd\ufffd") {
		t.Errorf("a GBK body read as UTF-8: %q", lines[3])
	}

	// -s: the tag expression; -d false: no bodies.
	out, err = run(t, "printMsg", "-n", ns, "-t", "PM", "-s", "TagA", "-d", "false")
	if err != nil {
		t.Fatal(err)
	}
	// Queue 1 holds only TagB: the broker matches nothing.
	if !strings.Contains(out, "MessageQueue [topic=PM, brokerName=broker-a, queueId=1] no matched msg. status=NO_MATCHED_MSG, offset=1\n") {
		t.Errorf("printMsg -s TagA: no \"no matched msg\" line for queue 1:\n%s", out)
	}
	var msgs []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "MSGID: ") {
			msgs = append(msgs, l)
			if !strings.HasSuffix(l, " BODY: NOT PRINT BODY") || !strings.Contains(l, "TAGS=TagA") {
				t.Errorf("printMsg -s TagA -d false: %q", l)
			}
		}
	}
	if len(msgs) != 2 {
		t.Fatalf("printMsg -s TagA: %d messages, want 2:\n%s", len(msgs), out)
	}

	// -b in the future and -e at the epoch: nothing to read.
	out, err = run(t, "printMsg", "-n", ns, "-t", "PM", "-b", "2099-01-01#00:00:00:000")
	if err != nil || !strings.Contains(out, "minOffset=3, maxOffset=3, MessageQueue [topic=PM, brokerName=broker-a, queueId=0]") || strings.Contains(out, "MSGID") {
		t.Fatalf("printMsg -b 2099: %v\n%s", err, out)
	}
	out, err = run(t, "printMsg", "-n", ns, "-t", "PM", "-e", "0")
	if err != nil || !strings.Contains(out, "minOffset=0, maxOffset=0, MessageQueue [topic=PM, brokerName=broker-a, queueId=0]") || strings.Contains(out, "MSGID") {
		t.Fatalf("printMsg -e 0: %v\n%s", err, out)
	}
	if _, err := run(t, "printMsg", "-n", ns, "-t", "PM", "-c", "NoSuchCharset"); err == nil || !strings.Contains(err.Error(), "unknown charset") {
		t.Fatalf("printMsg -c NoSuchCharset: %v", err)
	}

	// printMsgByQueue: nothing printed without -p; -f counts by tag.
	out, err = run(t, "printMsgByQueue", "-n", ns, "-t", "PM", "-a", "broker-a", "-i", "0", "-f", "true")
	if err != nil || out != "Tag: TagA                           Count: 2\nTag: TagB                           Count: 1\n" {
		t.Fatalf("printMsgByQueue -f true: %v\n%q", err, out)
	}
	out, err = run(t, "printMsgByQueue", "-n", ns, "-t", "PM", "-a", "broker-a", "-i", "0", "-p", "true", "-d", "true", "-c", "GBK", "-s", "TagA")
	if err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], " BODY: hello") || !strings.HasSuffix(lines[1], " BODY: 中文") {
		t.Fatalf("printMsgByQueue -p true -d true -c GBK -s TagA:\n%s", out)
	}
	out, err = run(t, "printMsgByQueue", "-n", ns, "-t", "PM", "-a", "broker-a", "-i", "0", "-p", "true")
	if err != nil || strings.Count(out, "BODY: NOT PRINT BODY\n") != 3 {
		t.Fatalf("printMsgByQueue -p true (bodies off by default): %v\n%s", err, out)
	}
	if _, err := run(t, "printMsgByQueue", "-n", ns, "-t", "PM", "-a", "broker-z", "-i", "0"); err == nil || !strings.Contains(err.Error(), "broker-z") {
		t.Fatalf("printMsgByQueue -a broker-z: %v", err)
	}
}

// A compressed body is printed as the producer sent it, as RocketMQ's
// clients decompress it: zlib (also without type bits), LZ4 and zstd.
func TestInflateBody(t *testing.T) {
	want := []byte(strings.Repeat("compressible ", 50))
	var z, l bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write(want)
	_ = zw.Close()
	lw := lz4.NewWriter(&l)
	_, _ = lw.Write(want)
	_ = lw.Close()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	zs := enc.EncodeAll(want, nil)
	_ = enc.Close()
	for _, c := range []struct {
		name    string
		sysFlag int32
		body    []byte
	}{
		{"plain", 0, want},
		{"zlib", commitlog.FlagCompressed | commitlog.CompressionZLIB, z.Bytes()},
		{"zlib without type bits", commitlog.FlagCompressed, z.Bytes()},
		{"lz4", commitlog.FlagCompressed | commitlog.CompressionLZ4, l.Bytes()},
		{"zstd", commitlog.FlagCompressed | commitlog.CompressionZSTD, zs},
	} {
		got, err := inflateBody(&commitlog.Message{SysFlag: c.sysFlag, Body: c.body})
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %q (%v)", c.name, got, err)
		}
	}
	if _, err := inflateBody(&commitlog.Message{SysFlag: commitlog.FlagCompressed, Body: []byte("not zlib")}); err == nil {
		t.Error("a body that is not zlib inflated")
	}
}

// TestTagFilterAsMQAdmin checks printMsg's -s as mqadmin reads it: the
// option trimmed as Java's String.trim trims, then the broker's parser
// (FilterAPI.buildSubscriptionData), the client dropping the messages of
// other tags only when the expression names one (PullAPIWrapper).
func TestTagFilterAsMQAdmin(t *testing.T) {
	tests := []struct {
		expr string
		want tagFilter
	}{
		{"*", nil},
		{"", nil},
		{"TagA || TagB", tagFilter{"TagA": true, "TagB": true}},
		{"TagA||", tagFilter{"TagA": true}},
		// Java's trim leaves Unicode spaces: no message of TagA matches.
		{"\u00a0TagA || TagB", tagFilter{"\u00a0TagA": true, "TagB": true}},
		// No tag at all: the tool filters nothing (the broker takes none).
		{"|| ||", nil},
	}
	for _, tc := range tests {
		if got := parseTagFilter(tc.expr); !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("parseTagFilter(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
	var o printOptions
	cmd := &cobra.Command{}
	o.flags(cmd)
	if err := cmd.Flags().Set("subExpression", " \u3000TagA || TagB \t"); err != nil {
		t.Fatal(err)
	}
	if err := o.parse(cmd); err != nil {
		t.Fatalf("parse: %v", err)
	}
	if o.sub != "\u3000TagA || TagB" {
		t.Errorf("subscription sent %q, want the option trimmed as Java trims it", o.sub)
	}
}

package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/rocketkv/rocketkv/commitlog"
)

// sampleCommitLog is an 8 KiB CommitLog file RocketMQ 4.4.0 wrote: 47
// records of 172 bytes on topic abc, then a blank filler (see the
// fixtures' README).
const sampleCommitLog = "../../../shared/fixtures/rocketmq-4.4.0-fork-sample-4e25b979/store/commitlog/00000000000000000000"

// sampleBytes reads the sample, skipping the test when the fixtures are
// absent.
func sampleBytes(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(sampleCommitLog)
	if os.IsNotExist(err) {
		t.Skip("fixtures absent")
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile writes b to a file in a temporary directory.
func writeFile(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "00000000000000000000")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// dumpCompactionLog prints every record of a RocketMQ-written file as
// MessageExt.toString of the record read without its body, ending at the
// blank filler; the fields are those RocketMQ's MessageDecoder reads
// (the fixtures' expected.json), the properties in HashMap order.
func TestDumpCompactionLogOfRocketMQRecords(t *testing.T) {
	sample := sampleBytes(t)
	out, err := run(t, "dumpCompactionLog", "-f", sampleCommitLog)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 47 {
		t.Fatalf("%d lines, want 47:\n%s", len(lines), out)
	}
	want := "MessageExt [brokerName=null, queueId=0, storeSize=172, queueOffset=0, sysFlag=0, bornTimestamp=1632821159368, " +
		"bornHost=/127.0.0.1:0, storeTimestamp=1632821159372, storeHost=/192.168.71.1:8123, msgId=C0A8470100001FBB0000000000000000, " +
		"commitLogOffset=0, bodyCRC=151131488, reconsumeTimes=0, preparedTransactionOffset=0, toString()=Message{topic='abc', flag=0, " +
		"properties={0=imagoodperson0, TAGS=TAG1, KEYS=1632821159368}, body=null, transactionId='null'}]"
	if lines[0] != want {
		t.Fatalf("first line\n%s\nwant\n%s", lines[0], want)
	}
	if !strings.Contains(lines[46], "queueOffset=46,") || !strings.Contains(lines[46], "commitLogOffset=7912,") {
		t.Fatalf("last line %s", lines[46])
	}

	// A file still being written: its records, then zeros.
	growing := append(append([]byte(nil), sample[:3*172]...), make([]byte, 1000)...)
	for _, f := range [][]byte{growing, growing[:3*172+3], sample[:3*172]} {
		out, err = run(t, "dumpCompactionLog", "--file", writeFile(t, f))
		if err != nil || strings.Count(out, "\n") != 3 {
			t.Fatalf("%d bytes with a zero tail: %v\n%s", len(f), err, out)
		}
	}
}

// A file that is cut inside a record, or holds bytes that are not
// records, prints the records before the bad spot and fails naming its
// offset; nothing panics.
func TestDumpCompactionLogOfBadFiles(t *testing.T) {
	sample := sampleBytes(t)
	two := sample[:2*172]
	with := func(tail ...byte) []byte { return append(append([]byte(nil), two...), tail...) }
	resized := with(sample[2*172 : 3*172]...)
	binary.BigEndian.PutUint32(resized[2*172:], 171)
	negative := with(0xFF, 0xFF, 0xFF, 0xFF, 0xDA, 0xA3, 0x20, 0xA7, 1, 2, 3, 4)
	for _, tc := range []struct {
		name    string
		file    []byte
		printed int
		want    string
	}{
		{"cut inside the third record", with(sample[2*172 : 2*172+100]...), 2, "record at offset 344: commitlog: record truncated: TOTALSIZE 172, 100 bytes left"},
		{"cut inside the third header", with(sample[2*172 : 2*172+5]...), 2, "record at offset 344: commitlog: record truncated: 5 bytes left"},
		{"garbage after two records", with([]byte(strings.Repeat("garbage!", 8))...), 2, "record at offset 344: commitlog: bad magic code 0x61676521"},
		{"garbage only", []byte("this is not a compaction log file at all"), 0, "record at offset 0: commitlog: bad magic code"},
		{"TOTALSIZE that disagrees with the fields", resized, 2, "record at offset 344: commitlog: corrupt record"},
		{"negative TOTALSIZE", negative, 2, "record at offset 344: commitlog: record truncated: TOTALSIZE -1"},
		{"three stray bytes", with(1, 2, 3), 2, "record at offset 344: commitlog: record truncated: 3 bytes left"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, "dumpCompactionLog", "-f", writeFile(t, tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
			if got := strings.Count(out, "\n"); got != tc.printed {
				t.Fatalf("%d lines printed, want %d:\n%s", got, tc.printed, out)
			}
		})
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dumpCompactionLog", "-f", filepath.Join(dir, "nope")}, "file " + filepath.Join(dir, "nope") + " not exist"},
		{[]string{"dumpCompactionLog", "-f", dir}, "file " + dir + " is a directory"},
		{[]string{"dumpCompactionLog"}, "miss dump log file name"},
	} {
		if _, err := run(t, tc.args...); err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// Records rocketkv's codec writes dump the same way: IPv6 hosts as Java
// 8 writes them and in the 56-digit message id, the properties of a
// message in HashMap order, the flags and offsets as stored.
func TestDumpCompactionLogOfIPv6AndProperties(t *testing.T) {
	m := commitlog.Message{Topic: "CompactT", QueueID: 3, Flag: 7, QueueOffset: 12, PhyOffset: 0, SysFlag: 0,
		BornTimestamp: 1700000000000, BornHost: netip.MustParseAddrPort("[2001:db8::5]:40000"),
		StoreTimestamp: 1700000000001, StoreHost: netip.MustParseAddrPort("[::1]:10911"),
		Body: []byte("v1"), Properties: "KEYS\x01order-1\x02UNIQ_KEY\x01AB01\x02TAGS\x01t\x02KEYS\x01order-2\x02"}
	rec, err := commitlog.AppendRecord(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	bare := commitlog.Message{Topic: "CompactT", PhyOffset: int64(len(rec)), BornHost: m.BornHost, StoreHost: netip.MustParseAddrPort("10.1.2.3:10911")}
	rec2, err := commitlog.AppendRecord(nil, &bare)
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	file.Write(rec)
	file.Write(rec2)
	file.Write(make([]byte, 64))
	out, err := run(t, "dumpCompactionLog", "-f", writeFile(t, file.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"queueId=3, storeSize=" + strconv.Itoa(len(rec)) + ", queueOffset=12, sysFlag=",
		"bornHost=/2001:db8:0:0:0:0:0:5:40000,", "storeHost=/0:0:0:0:0:0:0:1:10911,",
		"msgId=" + commitlog.MessageID(m.StoreHost, 0) + ",",
		"toString()=Message{topic='CompactT', flag=7, properties={UNIQ_KEY=AB01, TAGS=t, KEYS=order-2}, body=null, transactionId='null'}]\n",
		"storeHost=/10.1.2.3:10911, msgId=0A01020300002A9F" + fmt.Sprintf("%016X", len(rec)) + ", commitLogOffset=" + strconv.Itoa(len(rec)) + ",",
		"toString()=Message{topic='CompactT', flag=0, properties=null, body=null, transactionId='null'}]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if len(commitlog.MessageID(m.StoreHost, 0)) != 56 {
		t.Fatal("an IPv6 store host makes a 56-digit id")
	}
}

// The properties are listed as Java's HashMap(128) lists them; the
// expected strings are what OpenJDK 17 printed for the same puts.
func TestJavaHashMapOrder(t *testing.T) {
	for _, keys := range [][]string{
		{"0", "KEYS", "TAGS"},
		{"UNIQ_KEY", "WAIT", "TAGS", "KEYS", "CLUSTER", "MIN_OFFSET", "MAX_OFFSET", "TRAN_MSG", "PGROUP", "__CRC32#", "REAL_TOPIC",
			"REAL_QID", "DELAY", "RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "CONSUME_START_TIME", "a", "b", "c", "日本語", "\U0001F600x"},
	} {
		vals := map[string]string{}
		for _, k := range keys {
			vals[k] = "v" + strconv.Itoa(len(utf16.Encode([]rune(k))))
		}
		got := javaHashMapString(keys, vals, 128)
		want := map[int]string{
			3: "{0=v1, TAGS=v4, KEYS=v4}",
			21: "{CONSUME_START_TIME=v18, ORIGIN_MESSAGE_ID=v17, RETRY_TOPIC=v11, UNIQ_KEY=v8, CLUSTER=v7, 日本語=v3, PGROUP=v6, " +
				"__CRC32#=v8, MIN_OFFSET=v10, \U0001F600x=v3, DELAY=v5, TAGS=v4, TRAN_MSG=v8, KEYS=v4, WAIT=v4, a=v1, b=v1, c=v1, " +
				"REAL_TOPIC=v10, MAX_OFFSET=v10, REAL_QID=v8}",
		}[len(keys)]
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
	// Past 96 keys the table doubles, as Java's does.
	var keys []string
	vals := map[string]string{}
	for i := range 150 {
		k := "k" + strconv.Itoa(i*7919%1000)
		keys = append(keys, k)
		vals[k] = "v"
	}
	want := "{k947=v, k704=v, k308=v, k707=v, k31=v, k34=v, k37=v, k380=v, k383=v, k140=v, k143=v, k660=v, k386=v, k785=v, k389=v, k542=v, k146=v, k545=v, k302=v, k305=v, k822=v, k788=v, k548=v, k816=v, k819=v, k0=v, k3=v, k6=v, k9=v, k492=v, k495=v, k252=v, k651=v, k255=v, k411=v, k894=v, k498=v, k897=v, k137=v, k654=v, k657=v, k414=v, k931=v, k813=v, k417=v, k847=v, k56=v, k59=v, k165=v, k682=v, k442=v, k168=v, k685=v, k841=v, k327=v, k844=v, k601=v, k604=v, k838=v, k62=v, k65=v, k280=v, k271=v, k274=v, k791=v, k277=v, k794=v, k551=v, k433=v, k950=v, k710=v, k676=v, k679=v, k436=v, k953=v, k439=v, k956=v, k713=v, k903=v, k869=v, k629=v, k190=v, k461=v, k464=v, k981=v, k221=v, k224=v, k741=v, k467=v, k984=v, k866=v, k623=v, k227=v, k109=v, k626=v, k900=v, k738=v, k84=v, k87=v, k171=v, k570=v, k174=v, k330=v, k299=v, k573=v, k576=v, k333=v, k732=v, k336=v, k975=v, k579=v, k978=v, k218=v, k735=v, k408=v, k925=v, k90=v, k93=v, k928=v, k12=v, k361=v, k760=v, k246=v, k763=v, k520=v, k523=v, k489=v, k249=v, k766=v, k922=v, k517=v, k919=v, k28=v, k193=v, k196=v, k470=v, k352=v, k112=v, k595=v, k199=v, k598=v, k355=v, k872=v, k358=v, k875=v, k115=v, k632=v, k514=v, k118=v, k757=v}"
	if got := javaHashMapString(keys, vals, 128); got != want {
		t.Errorf("150 keys: %s", got)
	}
}

// FuzzDumpCompactionLog: whatever the file holds, the dump ends with the
// records printed and nil or an error, never a panic.
func FuzzDumpCompactionLog(f *testing.F) {
	if b, err := os.ReadFile(sampleCommitLog); err == nil {
		f.Add(b[:3*172])
		f.Add(b[8000:])
	}
	f.Add([]byte{0, 0, 0, 20, 0xDA, 0xA3, 0x20, 0xA7, 1})
	f.Add([]byte("garbage"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "log")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_ = dumpCompactionLog(io.Discard, p)
	})
}

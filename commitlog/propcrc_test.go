package commitlog

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/vfs"
)

// The vectors below were worked out by hand from the field table of spec
// sections 1.2 and 1.7 (RocketMQ 5.3.3's MessageExtEncoder and
// CommitLog.doAppend): the properties get a 0x02 when they do not end
// with one, then "__CRC32#" 0x01, ten digits, 0x02; the CRC is
// zlib.crc32(record bytes before those 20) & 0x7FFFFFFF, computed outside
// Go, and its digits are written least significant first, padded with
// '0' on the right. The three records follow each other from offset 0 of
// a log, all with the store time 0x0000010203040507 and the store host
// 192.168.1.10:10911.

// propCRCVectorA: properties "a\x01b" (no trailing 0x02). PROPLEN is
// 3 + 1 + 20 = 24, TOTALSIZE 91 + 2 + 1 + 24 = 118. CRC 444652867, a
// nine-digit one: "768256444" and one '0' of padding.
const propCRCVectorA = `
00000076                   total size 118
DAA320A7                   magic V1
58932AAC                   body CRC of "hi"
00000003                   queue id 3
00000007                   flag 7
0000000000000005           queue offset 5
0000000000000000           physical offset 0
00000000                   sysFlag 0
0000010203040506           born timestamp
0A000002 00000FA0          born host 10.0.0.2:4000
0000010203040507           store timestamp
C0A8010A 00002A9F          store host 192.168.1.10:10911
00000002                   reconsume times 2
0000000000000000           prepared transaction offset
00000002 6869              body "hi"
01 54                      topic "T"
0018                       properties length 24
610162 02                  "a\x01b", then the 0x02 the append adds
5F5F4352433332 23 01       "__CRC32#" 0x01
37363832353634343430       "7682564440" (444652867 reversed, padded)
02                         0x02`

// propCRCVectorB: no properties at all: PROPLEN 20, only the CRC
// property, no 0x02 before it. TOTALSIZE 114, at offset 118.
const propCRCVectorB = `
00000072 DAA320A7 58932AAC 00000003 00000007
0000000000000005
0000000000000076           physical offset 118
00000000 0000010203040506 0A000002 00000FA0
0000010203040507 C0A8010A 00002A9F 00000002 0000000000000000
00000002 6869 01 54
0014                       properties length 20
5F5F435243333223 01        "__CRC32#" 0x01
37353933393432353831       "7593942581" (1852493957 reversed)
02`

// propCRCVectorC: properties "k\x01v\x02" end with 0x02: no second one.
// PROPLEN 4 + 20 = 24, TOTALSIZE 118, at offset 232.
const propCRCVectorC = `
00000076 DAA320A7 58932AAC 00000003 00000007
0000000000000005
00000000000000E8           physical offset 232
00000000 0000010203040506 0A000002 00000FA0
0000010203040507 C0A8010A 00002A9F 00000002 0000000000000000
00000002 6869 01 54
0018                       properties length 24
6B017602                   "k\x01v\x02" as sent
5F5F435243333223 01
31313836383336303431       "1186836041" (1406386811 reversed)
02`

// propCRCVectorMessage is the message of the vectors, with props.
func propCRCVectorMessage(props string) *Message {
	return &Message{
		Topic: "T", QueueID: 3, Flag: 7, QueueOffset: 5, BornTimestamp: 0x0000010203040506,
		BornHost: netip.MustParseAddrPort("10.0.0.2:4000"), ReconsumeTimes: 2,
		Body: []byte("hi"), Properties: props,
	}
}

// propCRCConfig is a small log that appends the CRC property, with the
// store time of the vectors.
func propCRCConfig(t *testing.T) Config {
	cfg := testConfig(t, 1<<16)
	cfg.AppendPropCRC = true
	cfg.Now = func() time.Time { return time.UnixMilli(0x0000010203040507) }
	return cfg
}

func TestPropCRCVectors(t *testing.T) {
	vectors := []struct {
		name, hex, props string
		crc              uint32
	}{
		{"A props without trailing 0x02", propCRCVectorA, "a\x01b", 444652867},
		{"B no props", propCRCVectorB, "", 1852493957},
		{"C props with trailing 0x02", propCRCVectorC, "k\x01v\x02", 1406386811},
	}
	l := mustOpen(t, propCRCConfig(t))
	defer l.Close()
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			want := unhexT(t, stripComments(v.hex))
			if got := PropCRC(want); got != v.crc {
				t.Fatalf("PropCRC of the vector = %d, want %d", got, v.crc)
			}
			if n, err := CheckPropCRC(append(bytes.Clone(want), 0xEE)); err != nil || int(n) != len(want) {
				t.Fatalf("CheckPropCRC of the vector = %d, %v", n, err)
			}
			if n, err := Check(want, true); err != nil || int(n) != len(want) {
				t.Fatalf("Check of the vector = %d, %v", n, err)
			}
			res := mustAppend(t, l, AppendRequest{Message: propCRCVectorMessage(v.props)})
			view, err := l.ReadRecord(res.PhyOffset)
			if err != nil {
				t.Fatal(err)
			}
			defer view.Release()
			if !bytes.Equal(view.Data, want) {
				t.Fatalf("appended record\n%X\nwant\n%X", view.Data, want)
			}
			m, err := Decode(view.Data)
			if err != nil {
				t.Fatal(err)
			}
			// A consumer reads the property, as it does from RocketMQ.
			if d, ok := LookupProperty(m.Properties, PropertyCRC32); !ok || d != string(want[len(want)-11:len(want)-1]) {
				t.Fatalf("%s = %q, %v", PropertyCRC32, d, ok)
			}
		})
	}
}

func TestFormatPropCRC(t *testing.T) {
	for _, c := range []struct {
		crc  uint32
		want string
	}{
		{0, "0000000000"},
		{123, "3210000000"},
		{1000000000, "0000000001"},
		{2147483647, "7463847412"},
	} {
		rec := make([]byte, 100)
		formatPropCRC(rec[len(rec)-PropCRCReservedLen:], c.crc)
		want := "__CRC32#\x01" + c.want + "\x02"
		if got := string(rec[len(rec)-PropCRCReservedLen:]); got != want {
			t.Errorf("CRC %d: %q, want %q", c.crc, got, want)
		}
		if got := propCRCValue([]byte(c.want)); got != int32(c.crc) {
			t.Errorf("value of %q = %d, want %d", c.want, got, c.crc)
		}
	}
}

func TestPropCRCValueAsJava(t *testing.T) {
	for _, c := range []struct {
		v    string
		want int32
	}{
		{"3210000000", 123},
		{"321", 123},                // shorter: the same sum
		{"", 0},                     // no digits: 0
		{"1:", 101},                 // ':' is '0'+10: 10*10 + 1
		{"/", -1},                   // '/' is '0'-1
		{"9999999999", 1410065407},  // 9,999,999,999 wraps in 32 bits, as in Java
		{"0000000003", -1294967296}, // 3,000,000,000 wraps negative: "no value" for RocketMQ
	} {
		if got := propCRCValue([]byte(c.v)); got != c.want {
			t.Errorf("propCRCValue(%q) = %d, want %d", c.v, got, c.want)
		}
	}
}

func TestDropPropCRC(t *testing.T) {
	// Worked by hand from MessageUtils.deleteProperty: a "__CRC32#" at
	// the start or after 0x02, followed by 0x01, is cut through the next
	// 0x02 (through the end when there is none); nothing else changes.
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"a\x01b", "a\x01b"},
		{"__CRC32#\x011234\x02", ""},
		{"__CRC32#\x011234", ""},
		{"a\x01b\x02__CRC32#\x011234\x02c\x01d", "a\x01b\x02c\x01d"},
		{"a\x01b\x02__CRC32#\x011234", "a\x01b\x02"},
		{"__CRC32#\x011\x02a\x01b\x02__CRC32#\x012\x02", "a\x01b\x02"},
		{"x__CRC32#\x011\x02", "x__CRC32#\x011\x02"},         // not at a pair's start
		{"a\x01__CRC32#\x011\x02", "a\x01__CRC32#\x011\x02"}, // a value
		{"__CRC32#x\x011\x02", "__CRC32#x\x011\x02"},         // another key
		{"__CRC32#\x01\x02a\x01b", "a\x01b"},                 // empty value: cut too
	} {
		if got := dropPropCRC(c.in); got != c.want {
			t.Errorf("dropPropCRC(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCheckPropCRCRejects(t *testing.T) {
	good := unhexT(t, stripComments(propCRCVectorA))
	digits := len(good) - 11 // first digit
	for _, c := range []struct {
		name   string
		damage func(b []byte)
	}{
		{"digit changed", func(b []byte) { b[digits] = '8' }},
		{"queue offset changed", func(b []byte) { b[posQueueOffset+7] = 6 }},
		{"body changed", func(b []byte) { b[88] ^= 1 }},
		{"store timestamp changed", func(b []byte) { b[63] ^= 1 }},
		{"key changed", func(b []byte) { b[len(b)-20] = 'X' }},                                              // no __CRC32# left
		{"value empty", func(b []byte) { copy(b[len(b)-11:], "\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02") }}, // pair dropped by the parser
		{"value negative", func(b []byte) { copy(b[len(b)-11:], "0000000003") }},                            // wraps below zero
	} {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(good)
			c.damage(b)
			if _, err := CheckPropCRC(b); !errors.Is(err, ErrPropCRC) {
				t.Fatalf("CheckPropCRC = %v, want ErrPropCRC", err)
			}
		})
	}
	// A record without the property fails, as RocketMQ's check does.
	plain := unhexT(t, stripComments(vectorV1))
	if _, err := CheckPropCRC(plain); !errors.Is(err, ErrPropCRC) {
		t.Fatalf("record without the property: %v, want ErrPropCRC", err)
	}
	// A blank filler and a torn record are reported as Check reports them.
	if n, err := CheckPropCRC([]byte{0, 0, 0x10, 0, 0xCB, 0xD4, 0x31, 0x94}); n != 4096 || !errors.Is(err, ErrBlank) {
		t.Fatalf("filler: %d, %v", n, err)
	}
	if _, err := CheckPropCRC(good[:100]); !errors.Is(err, ErrTruncated) {
		t.Fatalf("torn record: %v", err)
	}
}

func TestAppendPropCRCSingleAndBatch(t *testing.T) {
	l := mustOpen(t, propCRCConfig(t))
	defer l.Close()
	clientCRC := "__CRC32#\x011234567890\x02"
	// A single message's own __CRC32# is dropped before the log's is
	// added (RocketMQ's asyncPutMessage).
	single := propCRCVectorMessage("a\x01b\x02" + clientCRC + "c\x01d")
	res := mustAppend(t, l, AppendRequest{Message: single, Assigner: newCounter()})
	v, err := l.ReadRecord(res.PhyOffset)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := Decode(v.Data)
	if want := "a\x01b\x02c\x01d\x02__CRC32#\x01"; !strings.HasPrefix(m.Properties, want) || len(m.Properties) != len(want)+11 {
		t.Fatalf("single message properties %q", m.Properties)
	}
	if _, err := CheckPropCRC(v.Data); err != nil {
		t.Fatal(err)
	}
	v.Release()
	if single.Properties != "a\x01b\x02"+clientCRC+"c\x01d" {
		t.Fatalf("the caller's message was changed: %q", single.Properties)
	}

	// A producer batch keeps its messages' own (RocketMQ's
	// asyncPutMessages); the log's comes last and is the one read.
	batch := []*Message{propCRCVectorMessage("k\x01v\x02" + clientCRC), propCRCVectorMessage(""), propCRCVectorMessage("x\x01y")}
	res = mustAppend(t, l, AppendRequest{Batch: batch, Assigner: newCounter(), ProducerBatch: true})
	wantPrefix := []string{"k\x01v\x02" + clientCRC, "", "x\x01y\x02"}
	for i, p := range res.Records {
		v, err := l.ReadRecord(p.Offset)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := Decode(v.Data)
		if !strings.HasPrefix(m.Properties, wantPrefix[i]+"__CRC32#\x01") || len(m.Properties) != len(wantPrefix[i])+PropCRCReservedLen {
			t.Errorf("batch record %d properties %q", i, m.Properties)
		}
		if _, err := CheckPropCRC(v.Data); err != nil {
			t.Errorf("batch record %d: %v", i, err)
		}
		if d, _ := LookupProperty(m.Properties, PropertyCRC32); d == "1234567890" {
			t.Errorf("batch record %d: the client's value is the one read", i)
		}
		if m.QueueOffset != int64(i) || m.PhyOffset != p.Offset {
			t.Errorf("batch record %d: queue offset %d, physical %d", i, m.QueueOffset, m.PhyOffset)
		}
		v.Release()
	}
	// The same batch not from a producer is RocketMQ's single puts: the
	// client's property is dropped.
	res = mustAppend(t, l, AppendRequest{Batch: batch[:1], Assigner: newCounter()})
	v, err = l.ReadRecord(res.PhyOffset)
	if err != nil {
		t.Fatal(err)
	}
	m, _ = Decode(v.Data)
	if !strings.HasPrefix(m.Properties, "k\x01v\x02__CRC32#\x01") {
		t.Fatalf("properties %q", m.Properties)
	}
	v.Release()
}

func TestAppendPropCRCPropertiesLimit(t *testing.T) {
	// The reserve counts in the 32,767 bytes (RocketMQ's
	// PROPERTIES_SIZE_EXCEEDED).
	props := "k\x01" + strings.Repeat("v", MaxPropertiesLen-PropCRCReservedLen-3) + "\x02"
	l := mustOpen(t, propCRCConfig(t))
	defer l.Close()
	mustAppend(t, l, AppendRequest{Message: propCRCVectorMessage(props)})
	// The same length without the trailing 0x02: the one the append
	// adds makes it a byte too long.
	_, err := l.Append(t.Context(), AppendRequest{Message: propCRCVectorMessage(props[:len(props)-1] + "v")})
	if !errors.Is(err, ErrPropertiesTooLarge) {
		t.Fatalf("Append = %v, want ErrPropertiesTooLarge", err)
	}
}

func TestAppendWithoutPropCRCLeavesProperties(t *testing.T) {
	// Off (the default), records are as before and a client's __CRC32#
	// is stored as sent, as RocketMQ stores it.
	cfg := propCRCConfig(t)
	cfg.AppendPropCRC = false
	l := mustOpen(t, cfg)
	defer l.Close()
	props := "a\x01b\x02__CRC32#\x011234567890\x02"
	res := mustAppend(t, l, AppendRequest{Message: propCRCVectorMessage(props)})
	v, err := l.ReadRecord(res.PhyOffset)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	m, _ := Decode(v.Data)
	if m.Properties != props {
		t.Fatalf("properties %q", m.Properties)
	}
}

// propCRCRecoveryLog appends n messages of 200 bytes to a fresh log of
// cfg, closes it, and returns the records' positions.
func propCRCRecoveryLog(t *testing.T, cfg Config, n int) []Pos {
	l := mustOpen(t, cfg)
	var recs []Pos
	for i := range n {
		res := mustAppend(t, l, AppendRequest{Message: testMessage("TopicA", 0, i, 200), Assigner: newCounter()})
		recs = append(recs, res.Records...)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestRecoverPropCRC(t *testing.T) {
	const n = 40 // 40 records of ~300 bytes in segments of 4 KiB: four segments
	type tc struct {
		name            string
		appendCRC       bool           // enabledAppendPropCRC when written
		force, checkCRC bool           // forceVerifyPropCRC, checkCRCOnRecover at the reopen
		damage          func(b []byte) // applied to record 20
		cutAt20         bool           // the recovered log ends at record 20
		wantErr         error
	}
	digit := func(b []byte) { b[len(b)-5]++ }                     // a digit of the CRC
	queueOffset := func(b []byte) { b[posQueueOffset+7] ^= 0x10 } // a field only the property CRC covers
	body := func(b []byte) { b[120] ^= 0x01 }
	for _, c := range []tc{
		{name: "written and verified", appendCRC: true, force: true, checkCRC: true},
		{name: "written, body CRCs verified", appendCRC: true, checkCRC: true},
		{name: "corrupt digit, verified", appendCRC: true, force: true, checkCRC: true, damage: digit, cutAt20: true, wantErr: ErrPropCRC},
		{name: "corrupt queue offset, verified", appendCRC: true, force: true, checkCRC: true, damage: queueOffset, cutAt20: true, wantErr: ErrPropCRC},
		{name: "corrupt body, verified by the property alone", appendCRC: true, force: true, checkCRC: true, damage: body, cutAt20: true, wantErr: ErrPropCRC},
		{name: "corrupt digit, body CRCs verified", appendCRC: true, checkCRC: true, damage: digit},
		{name: "corrupt queue offset, body CRCs verified", appendCRC: true, checkCRC: true, damage: queueOffset},
		{name: "corrupt digit, checkCRCOnRecover off", appendCRC: true, force: true, damage: digit},
		{name: "written without, checkCRCOnRecover off", force: true},
		{name: "written without, body CRCs verified", checkCRC: true},
	} {
		for _, abnormal := range []bool{false, true} {
			name := c.name
			if abnormal {
				name += " (crash)"
			}
			t.Run(name, func(t *testing.T) {
				cfg := testConfig(t, 4096)
				cfg.AppendPropCRC = c.appendCRC
				recs := propCRCRecoveryLog(t, cfg, n)
				r20 := recs[20]
				start := r20.Offset / 4096 * 4096
				if c.damage != nil {
					patchFile(t, segPath(cfg.Dir, start), func(b []byte) {
						rel := r20.Offset - start
						c.damage(b[rel : rel+int64(r20.Size)])
					})
				}
				if abnormal {
					markAbort(t, cfg.Dir)
				}
				cfg.ForceVerifyPropCRC, cfg.CheckCRCOnRecover = c.force, c.checkCRC
				l := mustOpen(t, cfg)
				defer l.Close()
				info := l.RecoveryInfo()
				end := recs[n-1].Offset + int64(recs[n-1].Size)
				if c.cutAt20 {
					end = r20.Offset
				}
				if info.EndOffset != end || l.MaxOffset() != end {
					t.Fatalf("recovered end %d (max %d), want %d; %+v", info.EndOffset, l.MaxOffset(), end, info)
				}
				if c.wantErr != nil && !errors.Is(info.CutReason, c.wantErr) {
					t.Fatalf("cut reason %v, want %v", info.CutReason, c.wantErr)
				}
				if !c.cutAt20 {
					if info.CutReason != nil {
						t.Fatalf("cut reason %v", info.CutReason)
					}
					return
				}
				// The tail is cut as RocketMQ's recovery cuts it: the
				// bytes after the record zeroed, later segments gone.
				s := l.activeSegment()
				if s.start != start || !allZero(s.data[r20.Offset-start:]) {
					t.Fatalf("active segment %d, tail zeroed %v", s.start, allZero(s.data[r20.Offset-start:]))
				}
				if got := scanAll(t, l); len(got) != 20 {
					t.Fatalf("%d records left, want 20", len(got))
				}
			})
		}
	}
}

func TestRecoverForceVerifyWithoutPropCRCCuts(t *testing.T) {
	// forceVerifyPropCRC over records appended without the property:
	// RocketMQ's check finds no CRC in the properties and takes the
	// record for a bad one, so recovery ends the log at the first record
	// it scans. The normal recovery of a small log scans from offset 0.
	cfg := testConfig(t, 4096)
	propCRCRecoveryLog(t, cfg, 5)
	cfg.ForceVerifyPropCRC = true
	l := mustOpen(t, cfg)
	info := l.RecoveryInfo()
	if info.EndOffset != 0 || !errors.Is(info.CutReason, ErrPropCRC) {
		t.Fatalf("recovered end %d, cut reason %v; want 0 and ErrPropCRC", info.EndOffset, info.CutReason)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Records appended with the property after records without it: the
	// cut is at the first one without.
	cfg = testConfig(t, 1<<16)
	recs := propCRCRecoveryLog(t, cfg, 3)
	cfg.AppendPropCRC = true
	l = mustOpen(t, cfg)
	for i := range 3 {
		mustAppend(t, l, AppendRequest{Message: testMessage("TopicA", 0, i, 200)})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.ForceVerifyPropCRC = true
	l = mustOpen(t, cfg)
	defer l.Close()
	if info := l.RecoveryInfo(); info.EndOffset != recs[0].Offset || !errors.Is(info.CutReason, ErrPropCRC) {
		t.Fatalf("recovered end %d, cut reason %v; want %d and ErrPropCRC", info.EndOffset, info.CutReason, recs[0].Offset)
	}
}

// FuzzCheckPropCRC checks the property CRC verification of arbitrary
// bytes, as recovery reads them from a file: it never panics nor reads
// outside b, agrees with Check on structure, and accepts only records
// whose last __CRC32# value reads back as their CRC; the records the log
// appends pass, and the value it writes reads back.
func FuzzCheckPropCRC(f *testing.F) {
	for _, v := range []string{propCRCVectorA, propCRCVectorB, propCRCVectorC, vectorV1, vectorV2} {
		f.Add(unhexT(f, stripComments(v)))
	}
	f.Add(unhexT(f, "0000006C CBD43194"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:len(b):len(b)]
		n, err := CheckPropCRC(b)
		cn, cerr := Check(b, false)
		if cerr != nil {
			if err == nil || (errors.Is(cerr, ErrBlank) != errors.Is(err, ErrBlank)) || (errors.Is(err, ErrBlank) && n != cn) {
				t.Fatalf("CheckPropCRC %d, %v; Check %d, %v", n, err, cn, cerr)
			}
			return
		}
		m, derr := Decode(b)
		if derr != nil {
			t.Fatalf("Check passed, Decode: %v", derr)
		}
		v, ok := LookupProperty(m.Properties, PropertyCRC32)
		rec := b[:cn]
		wantOK := ok && propCRCValue([]byte(v)) >= 0 && uint32(propCRCValue([]byte(v))) == PropCRC(rec)
		if wantOK != (err == nil) {
			t.Fatalf("CheckPropCRC %v; property %q (found %v), CRC %d", err, v, ok, PropCRC(rec))
		}
		if err == nil && n != cn {
			t.Fatalf("CheckPropCRC size %d, Check %d", n, cn)
		}
		if err != nil && !errors.Is(err, ErrPropCRC) {
			t.Fatalf("CheckPropCRC of a sound record: %v", err)
		}
		// Re-encoded with the property's room and filled as an append
		// fills it, the record passes and its value reads back.
		m.Properties = dropPropCRC(m.Properties)
		out, eerr := appendRecord(nil, &m, true)
		if eerr != nil {
			return // too long with the property
		}
		putPropCRC(out)
		if _, err := CheckPropCRC(out); err != nil {
			t.Fatalf("re-encoded record: %v", err)
		}
		d, _ := LookupProperty(string(out[len(out)-PropCRCReservedLen:]), PropertyCRC32)
		if uint32(propCRCValue([]byte(d))) != PropCRC(out) {
			t.Fatalf("value %q does not read back as %d", d, PropCRC(out))
		}
	})
}

// propCRCStoreSeed returns the segments of a store of 4 KiB segments
// written with AppendPropCRC: records across three segments, fillers
// included.
func propCRCStoreSeed(f *testing.F) []byte {
	cfg := testConfig(f, minSegmentSize)
	cfg.AppendPropCRC = true
	l := mustOpen(f, cfg)
	c := newCounter()
	for i := range 30 {
		mustAppend(f, l, AppendRequest{Message: testMessage("TopicA", int32(i%2), i, 200+i*7), Assigner: c})
	}
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	return storeSeed(f, filepath.Join(cfg.Dir, "commitlog"))
}

// FuzzRecoverPropCRC lays out arbitrary bytes as the segment files of a
// store (seeded with one written with the CRC property, damaged or not,
// and one written without it) and opens it with AppendPropCRC and
// ForceVerifyPropCRC, after a clean stop or a crash. Open either fails
// with ErrBadSegment, or recovers a log whose records from the first
// scanned one all pass CheckPropCRC at their own offsets, unchanged; an
// append lands at the recovered end, and the log reopens with the new
// record too.
func FuzzRecoverPropCRC(f *testing.F) {
	w := propCRCStoreSeed(f)
	f.Add(w, true, false)
	f.Add(w, true, true)
	c := bytes.Clone(w)
	c[5000] ^= 0x01 // a byte of a record in the second segment
	f.Add(c, true, false)
	f.Add(writtenStoreSeed(f), true, true) // no property anywhere: cut at 0
	f.Add([]byte{}, false, false)
	f.Fuzz(func(t *testing.T, data []byte, pad, abnormal bool) {
		cfg := testConfig(t, minSegmentSize)
		cfg.FS = vfs.NoSync{}
		cfg.AppendPropCRC, cfg.ForceVerifyPropCRC = true, true
		data = layOutSegments(t, cfg.Dir, data, minSegmentSize, pad)
		if abnormal {
			if err := os.WriteFile(filepath.Join(cfg.Dir, abortFileName), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		l, err := Open(cfg)
		if err != nil {
			if !errors.Is(err, ErrBadSegment) {
				t.Fatalf("open: not a bad segment: %v", err)
			}
			return
		}
		defer func() { l.Close() }()
		end, info := l.MaxOffset(), l.RecoveryInfo()
		check := func() int {
			t.Helper()
			r := l.NewReader(info.FirstScanned)
			defer r.Close()
			n := 0
			for {
				e, err := r.Next()
				if errors.Is(err, ErrNoMoreData) {
					return n
				}
				if err != nil {
					t.Fatalf("read at %d (recovered %+v): %v", r.Offset(), info, err)
				}
				if _, err := CheckPropCRC(e.Data); err != nil || recordPhyOffset(e.Data) != e.Offset {
					t.Fatalf("record at %d kept by recovery (%+v): %v", e.Offset, info, err)
				}
				if stop := e.Offset + int64(e.Size); stop <= end && !bytes.Equal(e.Data, data[e.Offset:stop]) {
					t.Fatalf("record at %d reads other bytes than its segment held", e.Offset)
				}
				n++
			}
		}
		n := check()
		res, err := l.Append(context.Background(), AppendRequest{Message: testMessage("TopicF", 1, 7, 100), Assigner: newCounter()})
		if err != nil {
			t.Fatalf("append after recovery to %d: %v", end, err)
		}
		after := l.MaxOffset()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if l, err = Open(cfg); err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if again := l.RecoveryInfo(); l.MaxOffset() != after || again.CutReason != nil {
			t.Fatalf("closed at %d after appending at %d, reopened at %d: %+v", after, res.PhyOffset, l.MaxOffset(), again)
		}
		if got := check(); got != n+1 {
			t.Fatalf("recovered %d records and appended one; reopened with %d", n, got)
		}
	})
}

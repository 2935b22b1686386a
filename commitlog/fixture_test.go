package commitlog

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fixturesDir is where the stores written by Apache RocketMQ live,
// relative to this package's directory.
const fixturesDir = "../../shared/fixtures"

const (
	store498 = "rocketmq-store-4.9.8"
	store440 = "rocketmq-4.4.0-fork-sample-4e25b979"
)

// fixturePath returns a path inside the fixtures, skipping the test when
// the fixtures are absent.
func fixturePath(t testing.TB, elem ...string) string {
	t.Helper()
	if _, err := os.Stat(fixturesDir); err != nil {
		t.Skipf("RocketMQ fixtures not found at %s (expected beside the repository in shared/fixtures): %v", fixturesDir, err)
	}
	return filepath.Join(append([]string{fixturesDir}, elem...)...)
}

// javaHost formats an address like Java's InetSocketAddress.toString
// without the host name: IPv6 uncompressed, in brackets.
func javaHost(h netip.AddrPort) string {
	a := h.Addr()
	if a.Is4() {
		return h.String()
	}
	b := a.As16()
	parts := make([]string, 8)
	for i := range parts {
		parts[i] = fmt.Sprintf("%x", uint16(b[2*i])<<8|uint16(b[2*i+1]))
	}
	return fmt.Sprintf("[%s]:%d", strings.Join(parts, ":"), h.Port())
}

type expected498 struct {
	CheckpointFile struct {
		PhysicMsgTimestamp int64 `json:"physicMsgTimestamp"`
		LogicsMsgTimestamp int64 `json:"logicsMsgTimestamp"`
		IndexMsgTimestamp  int64 `json:"indexMsgTimestamp"`
	} `json:"checkpointFile"`
	PutResults []struct {
		Status         string `json:"status"`
		WroteOffset    int64  `json:"wroteOffset"`
		WroteBytes     int64  `json:"wroteBytes"`
		StoreTimestamp int64  `json:"storeTimestamp"`
		MsgID          string `json:"msgId"`
	} `json:"putResults"`
	View struct {
		CommitLog struct {
			MappedFiles []struct {
				File          string `json:"file"`
				FileSize      int64  `json:"fileSize"`
				WrotePosition int64  `json:"wrotePosition"`
			} `json:"mappedFiles"`
			Records []struct {
				CommitLogOffset int64   `json:"commitLogOffset"`
				Size            int32   `json:"size"`
				BlankUntil      *int64  `json:"blankFillerUntil"`
				Topic           string  `json:"topic"`
				QueueID         int32   `json:"queueId"`
				QueueOffset     int64   `json:"consumeQueueOffset"`
				StoreTimestamp  int64   `json:"storeTimestamp"`
				SysFlag         int32   `json:"sysFlag"`
				PreparedOffset  int64   `json:"preparedTransactionOffset"`
				UniqKey         *string `json:"uniqKey"`
				Keys            *string `json:"keys"`
			} `json:"records"`
		} `json:"commitlog"`
		Messages []expectedMessage `json:"messages"`
	} `json:"view"`
}

type expectedMessage struct {
	Topic           string            `json:"topic"`
	QueueID         int32             `json:"queueId"`
	QueueOffset     int64             `json:"queueOffset"`
	CommitLogOffset int64             `json:"commitLogOffset"`
	StoreSize       int32             `json:"storeSize"`
	Size            int32             `json:"size"`
	MagicCode       string            `json:"magicCode"`
	PhysicalField   *int64            `json:"physicalOffsetField"`
	SysFlag         int32             `json:"sysFlag"`
	Flag            int32             `json:"flag"`
	BodyCRC         uint32            `json:"bodyCRC"`
	ReconsumeTimes  int32             `json:"reconsumeTimes"`
	PreparedOffset  int64             `json:"preparedTransactionOffset"`
	BornTimestamp   int64             `json:"bornTimestamp"`
	BornHost        string            `json:"bornHost"`
	StoreTimestamp  int64             `json:"storeTimestamp"`
	StoreHost       string            `json:"storeHost"`
	MsgID           string            `json:"msgId"`
	Tags            *string           `json:"tags"`
	Keys            *string           `json:"keys"`
	TagsCode        int64             `json:"tagsCode"`
	Properties      map[string]string `json:"properties"`
	BodyLength      *int              `json:"bodyLength"`
	BodyBase64      *string           `json:"bodyBase64"`
	BodyUTF8        *string           `json:"bodyUtf8"`
	Kind            string            `json:"kind"`
}

func loadJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}

// readStoreBytes concatenates the segment files of a commitlog directory
// into one buffer indexed by log offset (the fixtures are small).
func readStoreBytes(t testing.TB, dir string) ([]byte, int64) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	var segSize int64
	for i, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		start, ok := parseSegmentName(e.Name())
		if !ok || start != int64(len(all)) {
			t.Fatalf("segment %s does not start at %d", e.Name(), len(all))
		}
		if i == 0 {
			segSize = int64(len(b))
		}
		all = append(all, b...)
	}
	return all, segSize
}

// checkMessage compares a decoded message with RocketMQ's view of it.
func checkMessage(t *testing.T, m Message, want expectedMessage) {
	t.Helper()
	ctx := fmt.Sprintf("record at %d", want.CommitLogOffset)
	size := want.StoreSize
	if size == 0 {
		size = want.Size
	}
	type pair struct {
		name      string
		got, want any
	}
	checks := []pair{
		{"topic", m.Topic, want.Topic},
		{"queueId", m.QueueID, want.QueueID},
		{"queueOffset", m.QueueOffset, want.QueueOffset},
		{"physicalOffset", m.PhyOffset, want.CommitLogOffset},
		{"storeSize", m.StoreSize, size},
		{"sysFlag", m.SysFlag, want.SysFlag},
		{"flag", m.Flag, want.Flag},
		{"bodyCRC", m.BodyCRC, want.BodyCRC},
		{"reconsumeTimes", m.ReconsumeTimes, want.ReconsumeTimes},
		{"preparedTransactionOffset", m.PreparedTransactionOffset, want.PreparedOffset},
		{"bornTimestamp", m.BornTimestamp, want.BornTimestamp},
		{"bornHost", javaHost(m.BornHost), want.BornHost},
		{"storeTimestamp", m.StoreTimestamp, want.StoreTimestamp},
		{"storeHost", javaHost(m.StoreHost), want.StoreHost},
		{"msgId", MessageID(m.StoreHost, m.PhyOffset), want.MsgID},
		{"properties", ParseProperties(m.Properties), want.Properties},
	}
	if want.MagicCode != "" {
		checks = append(checks, pair{"magic", fmt.Sprintf("0x%08X", m.Magic), want.MagicCode})
	} else {
		checks = append(checks, pair{"magic", m.Magic, MagicV1})
	}
	if want.PhysicalField != nil {
		checks = append(checks, pair{"physicalOffsetField", m.PhyOffset, *want.PhysicalField})
	}
	if want.Tags != nil {
		tags, _ := LookupProperty(m.Properties, PropertyTags)
		checks = append(checks, pair{"tags", tags, *want.Tags})
		if m.Topic != "SCHEDULE_TOPIC_XXXX" {
			checks = append(checks, pair{"tagsCode", TagsCode(tags), want.TagsCode})
		}
	}
	if want.Keys != nil {
		keys, _ := LookupProperty(m.Properties, PropertyKeys)
		checks = append(checks, pair{"keys", keys, *want.Keys})
	}
	if want.BodyBase64 != nil {
		checks = append(checks, pair{"body", base64.StdEncoding.EncodeToString(m.Body), *want.BodyBase64})
	}
	if want.BodyLength != nil {
		checks = append(checks, pair{"bodyLength", len(m.Body), *want.BodyLength})
	}
	if want.BodyUTF8 != nil {
		checks = append(checks, pair{"bodyUtf8", string(m.Body), *want.BodyUTF8})
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: %s = %v, want %v", ctx, c.name, c.got, c.want)
		}
	}
	// Every property must also be found by the allocation-free lookup.
	for k, v := range want.Properties {
		if got, ok := LookupProperty(m.Properties, k); !ok || got != v {
			t.Errorf("%s: LookupProperty(%q) = %q, %v; want %q", ctx, k, got, ok, v)
		}
	}
}

func TestFixture498DecodeEveryRecord(t *testing.T) {
	var exp expected498
	loadJSON(t, fixturePath(t, store498, "expected.json"), &exp)
	all, segSize := readStoreBytes(t, fixturePath(t, store498, "clean", "commitlog"))
	if segSize != 16384 {
		t.Fatalf("segment size %d, want 16384", segSize)
	}
	msgs := map[int64]expectedMessage{}
	for _, m := range exp.View.Messages {
		msgs[m.CommitLogOffset] = m
	}
	// Walk the log the way the dispatcher does and compare record by record.
	off := int64(0)
	ri := 0
	decoded := 0
	for ri < len(exp.View.CommitLog.Records) {
		want := exp.View.CommitLog.Records[ri]
		if off != want.CommitLogOffset {
			t.Fatalf("walk reached %d, expected record %d at %d", off, ri, want.CommitLogOffset)
		}
		m, err := DecodeWith(all[off:], DecodeOptions{VerifyCRC: true})
		if want.BlankUntil != nil {
			if !errors.Is(err, ErrBlank) {
				t.Fatalf("offset %d: err = %v, want ErrBlank", off, err)
			}
			if off+int64(m.StoreSize) != *want.BlankUntil {
				t.Fatalf("offset %d: blank size %d reaches %d, want %d", off, m.StoreSize, off+int64(m.StoreSize), *want.BlankUntil)
			}
			if n, ok := BlankSize(all[off:]); !ok || n != m.StoreSize {
				t.Fatalf("BlankSize = %d, %v", n, ok)
			}
			off = *want.BlankUntil
			ri++
			continue
		}
		if err != nil {
			t.Fatalf("offset %d: %v", off, err)
		}
		if m.StoreSize != want.Size || m.Topic != want.Topic || m.QueueID != want.QueueID ||
			m.QueueOffset != want.QueueOffset || m.StoreTimestamp != want.StoreTimestamp ||
			m.SysFlag != want.SysFlag || m.PreparedTransactionOffset != want.PreparedOffset {
			t.Errorf("offset %d: decoded %+v, RocketMQ's walk says %+v", off, m, want)
		}
		if want.UniqKey != nil {
			if u, _ := LookupProperty(m.Properties, PropertyUniqID); u != *want.UniqKey {
				t.Errorf("offset %d: UNIQ_KEY %q, want %q", off, u, *want.UniqKey)
			}
		}
		em, ok := msgs[off]
		if !ok {
			t.Fatalf("no decoded message for offset %d in expected.json", off)
		}
		checkMessage(t, m, em)
		if n, err := Check(all[off:], true); err != nil || n != m.StoreSize {
			t.Errorf("offset %d: Check = %d, %v", off, n, err)
		}
		decoded++
		off += int64(m.StoreSize)
		ri++
	}
	if decoded != len(exp.View.Messages) || decoded != 104 {
		t.Errorf("decoded %d records, expected.json lists %d messages (README: 104)", decoded, len(exp.View.Messages))
	}
	if off != 53272 {
		t.Errorf("walk ended at %d, want RocketMQ's max offset 53272", off)
	}
	if _, err := Decode(all[off:]); !errors.Is(err, ErrBadMagic) {
		t.Errorf("after the last record: err = %v, want ErrBadMagic (zeros)", err)
	}
	// The put results agree with the records (msgId and offsets).
	for _, p := range exp.PutResults {
		if p.MsgID == "" || p.WroteBytes == 0 {
			continue
		}
		for _, id := range strings.Split(p.MsgID, ",") {
			host, phy, err := ParseMessageID(id)
			if err != nil {
				t.Fatalf("ParseMessageID(%s): %v", id, err)
			}
			m, err := Decode(all[phy:])
			if err != nil {
				t.Fatalf("put result %s: %v", id, err)
			}
			if MessageID(host, phy) != id || m.PhyOffset != phy || javaHost(m.StoreHost) != javaHost(host) {
				t.Errorf("put result %s: record at %d has store host %v", id, phy, m.StoreHost)
			}
		}
	}
}

func TestFixture440DecodeEveryRecord(t *testing.T) {
	var exp struct {
		Records []expectedMessage `json:"records"`
	}
	loadJSON(t, fixturePath(t, store440, "expected.json"), &exp)
	all, segSize := readStoreBytes(t, fixturePath(t, store440, "store", "commitlog"))
	if segSize != 8192 {
		t.Fatalf("segment size %d, want 8192", segSize)
	}
	off := int64(0)
	for i, want := range exp.Records {
		if off != want.CommitLogOffset {
			t.Fatalf("record %d: walk at %d, want %d", i, off, want.CommitLogOffset)
		}
		m, err := DecodeWith(all[off:], DecodeOptions{VerifyCRC: true})
		if want.MagicCode == "0xCBD43194" {
			if !errors.Is(err, ErrBlank) || m.StoreSize != want.Size || m.Magic != BlankMagic {
				t.Fatalf("offset %d: %+v, %v; want a blank of %d", off, m, err, want.Size)
			}
			off += int64(m.StoreSize)
			continue
		}
		if err != nil {
			t.Fatalf("offset %d: %v", off, err)
		}
		if !strings.HasSuffix(m.Properties, "\x02") {
			t.Errorf("offset %d: 4.4.0 properties should end with 0x02: %q", off, m.Properties)
		}
		checkMessage(t, m, want)
		off += int64(m.StoreSize)
	}
	if off != 8192 || len(exp.Records) != 48 {
		t.Errorf("walk ended at %d after %d records, want 8192 and 48", off, len(exp.Records))
	}
}

package broker

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/remoting"
)

// A large metadata table goes to a rocketkv slave compressed, and plain
// to a slave that does not ask (Apache RocketMQ's); the slave's copy is
// the master's. A table whose version the slave has is not sent again.
func TestSlaveSyncCompressesLargeTables(t *testing.T) {
	master := startTestBroker(t, nil)
	slave := startTestBroker(t, nil)
	var ups []kvindex.OffsetUpdate
	for tp := range 200 {
		for q := range 100 {
			ups = append(ups, kvindex.OffsetUpdate{Group: "cg-big", Topic: fmt.Sprintf("Big-%03d", tp), QueueID: int32(q), Offset: int64(tp*1000 + q)})
		}
	}
	if err := master.offsets.SetMany(ups, true); err != nil {
		t.Fatal(err)
	}
	c := master.client(nil)
	plain := call(t, c, remoting.GetAllConsumerOffset, nil, nil)
	packed := call(t, c, remoting.GetAllConsumerOffset, map[string]string{syncFieldAccept: syncEncodingZstd}, nil)
	if plain.Code != remoting.Success || packed.Code != remoting.Success {
		t.Fatalf("GET_ALL_CONSUMER_OFFSET: %d %s / %d %s", plain.Code, plain.Remark, packed.Code, packed.Remark)
	}
	if plain.ExtFields[syncFieldEncoding] != "" || packed.ExtFields[syncFieldEncoding] != syncEncodingZstd {
		t.Fatalf("encodings: plain %q, asked %q", plain.ExtFields[syncFieldEncoding], packed.ExtFields[syncFieldEncoding])
	}
	if len(plain.Body) < syncCompressMin || len(packed.Body)*4 > len(plain.Body) {
		t.Fatalf("%d bytes compressed to %d", len(plain.Body), len(packed.Body))
	}
	body, err := syncBody(packed)
	if err != nil {
		t.Fatal(err)
	}
	want, err := rmqconfig.ParseOffsets(plain.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rmqconfig.ParseOffsets(body); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("the decompressed table differs from the plain one (%v)", err)
	}

	syncSlave(t, slave, master)
	for _, u := range ups {
		if off, ok, err := slave.offsets.Get(u.Group, u.Topic, u.QueueID); err != nil || !ok || off != u.Offset {
			t.Fatalf("slave's offset of %s %s/%d: %d %v %v, want %d", u.Group, u.Topic, u.QueueID, off, ok, err, u.Offset)
		}
	}
	// The topic table the slave took over is not sent again while its
	// version stays; a new topic changes it.
	have := map[string]string{syncFieldHaveVersion: versionField(slave.topics.table.Version())}
	if r := call(t, c, remoting.GetAllTopicConfig, have, nil); r.Code != remoting.Success || r.ExtFields[syncFieldNotModified] != "true" || len(r.Body) != 0 {
		t.Fatalf("topics at the slave's version: %d %q, %d bytes", r.Code, r.ExtFields[syncFieldNotModified], len(r.Body))
	}
	createTopic(t, c, "NewAfterSync", 4, 4)
	if r := call(t, c, remoting.GetAllTopicConfig, have, nil); r.ExtFields[syncFieldNotModified] != "" || len(r.Body) == 0 {
		t.Fatalf("topics after a change: %q, %d bytes", r.ExtFields[syncFieldNotModified], len(r.Body))
	}
	syncSlave(t, slave, master)
	if _, ok := topicTable(t, slave)["NewAfterSync"]; !ok {
		t.Fatal("the slave did not take over the changed topic table")
	}
	// A small table stays plain, asked or not.
	if r := call(t, c, remoting.GetAllDelayOffset, map[string]string{syncFieldAccept: syncEncodingZstd}, nil); r.ExtFields[syncFieldEncoding] != "" {
		t.Fatalf("a small table compressed: %q", r.ExtFields[syncFieldEncoding])
	}
	// Bytes that do not decompress are an error, not a panic.
	bad := &remoting.Command{Body: []byte("not zstd"), ExtFields: map[string]string{syncFieldEncoding: syncEncodingZstd}}
	if _, err := syncBody(bad); err == nil {
		t.Fatal("garbage decompressed")
	}
	if _, err := syncBody(&remoting.Command{ExtFields: map[string]string{syncFieldEncoding: "br"}}); err == nil {
		t.Fatal("an unknown encoding taken")
	}
}

// A compressed answer is taken only as the bytes its frame declares, at
// most the limit: frames of zeros compress a thousandfold, and one that
// declares no size (or a small one, followed by more) is refused before
// the slave allocates what it expands to.
func TestSyncBodyBombIsRefused(t *testing.T) {
	const limit = 16 << 20
	enc, err := newSyncEncoder()
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	var undeclared bytes.Buffer
	w, err := zstd.NewWriter(&undeclared, zstd.WithWindowSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	for range 64 {
		if _, err := w.Write(zeros); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	small := enc.EncodeAll([]byte(`{"offsetTable":{}}`), nil)
	for name, bomb := range map[string][]byte{
		"no declared size":         undeclared.Bytes(),
		"more than declared":       append(append([]byte(nil), small...), undeclared.Bytes()...),
		"declared over the limit":  enc.EncodeAll(bytes.Repeat(zeros, 17), nil),
		"declared, then cut short": enc.EncodeAll(bytes.Repeat([]byte("{}"), 1<<19), nil)[:100],
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := decompressSyncBody(bomb, limit)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("%s: %d compressed bytes taken", name, len(bomb))
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > limit/2 {
			t.Fatalf("%s: refusing it allocated %d bytes", name, alloc)
		}
	}
	body := bytes.Repeat([]byte("{}"), limit/2)
	if got, err := decompressSyncBody(enc.EncodeAll(body, nil), limit); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("a body of the limit's size: %d bytes, %v", len(got), err)
	}
}

// FuzzSyncBody: a master's compressed answer, or arbitrary bytes claiming
// to be one, never panics the slave, and what it accepts is exactly the
// size the frame declares; a body the master compresses comes back
// exactly, and is refused by a slave whose limit it exceeds; an
// uncompressed answer is taken as it is.
func FuzzSyncBody(f *testing.F) {
	enc, err := newSyncEncoder()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(enc.EncodeAll([]byte(`{"offsetTable":{}}`), nil), bytes.Repeat([]byte(`{"offsetTable":{}}`), 20), uint16(1000))
	f.Add([]byte("not zstd"), bytes.Repeat([]byte("{}"), 300), uint16(599))
	f.Add(enc.EncodeAll(bytes.Repeat([]byte("a"), 5000), nil)[:20], []byte("x"), uint16(0))
	f.Fuzz(func(t *testing.T, raw, data []byte, limit uint16) {
		if body, err := syncBody(&remoting.Command{Body: raw}); err != nil || !bytes.Equal(body, raw) {
			t.Fatalf("an uncompressed answer of %d bytes read as %d bytes, %v", len(raw), len(body), err)
		}
		body, err := syncBody(&remoting.Command{Body: raw, ExtFields: map[string]string{syncFieldEncoding: syncEncodingZstd}})
		if err == nil {
			var h zstd.Header
			if herr := h.Decode(raw); herr != nil || !h.HasFCS || uint64(len(body)) != h.FrameContentSize {
				t.Fatalf("%d bytes accepted as %d, the frame declares %d (%v)", len(raw), len(body), h.FrameContentSize, herr)
			}
		}
		if len(data) < 256 {
			// The encoder declares no size for 1 to 255 bytes, which
			// the slave refuses; compressedForSlaves compresses only
			// bodies of syncCompressMin (64 KiB) or more.
			return
		}
		frame := enc.EncodeAll(data, nil)
		if got, err := syncBody(&remoting.Command{Body: frame, ExtFields: map[string]string{syncFieldEncoding: syncEncodingZstd}}); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes compressed came back as %d bytes, %v", len(data), len(got), err)
		}
		if under := len(data) - 1 - int(limit)%len(data); under >= 0 {
			if _, err := decompressSyncBody(frame, int64(under)); err == nil {
				t.Fatalf("%d bytes compressed accepted under the limit %d", len(data), under)
			}
		}
	})
}

// A topic table answered while topics are created names a version no
// newer than its contents: a slave holding that version is told "not
// modified" at its next sync, and would otherwise keep a table missing
// the topics created during the scan until the next change.
func TestTopicTableAnswerNeverNamesANewerVersion(t *testing.T) {
	b := startTestBroker(t, nil)
	base := b.topics.table.Version().Counter
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := range 3000 {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := b.topics.table.Put(meta.NewTopicConfig(fmt.Sprintf("New%d", i), 1)); err != nil {
				done <- err
				return
			}
			time.Sleep(50 * time.Microsecond) // spread over the answers
		}
		done <- nil
	}()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}()
	for range 300 {
		resp := b.processGetAllTopicConfig(context.Background(), nil, remoting.NewRequest(remoting.GetAllTopicConfig, nil, nil))
		topics, v, err := rmqconfig.ParseTopics(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		created := 0
		for _, tc := range topics {
			if strings.HasPrefix(tc.TopicName, "New") {
				created++
			}
		}
		if v.Counter > base+int64(created) {
			t.Fatalf("an answer names version %d and holds the %d topics of version %d", v.Counter, created, base+int64(created))
		}
	}
}

package ha

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
)

// applyFuzzSegment is the segment size of FuzzClientApply's logs: small,
// so that the replica spans several segments and opens fast.
const applyFuzzSegment = 8 << 10

// FuzzClientApply feeds arbitrary master bytes to a slave whose replica
// holds records, as a connection does from its first transfer: the
// transfers are read, the part below the replica's end compared with its
// own bytes, the rest appended. Whatever the master sends, the slave
// never panics, never changes a byte it held before (a master that
// disagrees is reported as diverged, not written over the slave's
// records) and never ends up shorter. Seeds are a master that agrees and
// sends more, one that only heartbeats, and one whose tail differs.
func FuzzClientApply(f *testing.F) {
	dir := f.TempDir()
	master, err := commitlog.Open(logConfig(dir, false, applyFuzzSegment))
	if err != nil {
		f.Fatal(err)
	}
	defer master.Close()
	add := func(from, n int) {
		for i := from; i < from+n; i++ {
			m := &commitlog.Message{Topic: "TopicHA", QueueID: int32(i % 3), Body: bytes.Repeat([]byte{byte(i)}, 100+(i*53)%900),
				BornTimestamp: int64(i), BornHost: netip.MustParseAddrPort("10.0.0.2:4000"),
				Properties: fmt.Sprintf("UNIQ_KEY\x01K%06d", i), QueueOffset: int64(i)}
			if _, err := master.Append(context.Background(), commitlog.AppendRequest{Message: m}); err != nil {
				f.Fatal(err)
			}
		}
	}
	add(0, 20)
	held := master.MaxOffset() // what each input's replica holds
	add(20, 10)
	all := readAll(f, master, master.MaxOffset())

	// The replica of every input, and its check as a connection opens it.
	newReplica := func(tb testing.TB, window int64) (*commitlog.Log, *Client, tailCheck) {
		r, err := commitlog.Open(logConfig(tb.TempDir(), true, applyFuzzSegment))
		if err != nil {
			tb.Fatal(err)
		}
		for off := int64(0); off < held; {
			n := min(held, off+applyFuzzSegment-off%applyFuzzSegment) - off
			if err := r.AppendReplica(off, all[off:off+n]); err != nil {
				r.Close()
				tb.Fatal(err)
			}
			off += n
		}
		c := NewClient(ClientConfig{MasterAddr: func() string { return "" }, Log: r, VerifyWindow: window, Logger: zerolog.Nop()})
		chk, err := c.newTailCheck()
		if err != nil {
			r.Close()
			tb.Fatal(err)
		}
		return r, c, chk
	}
	for _, window := range []uint32{4096, 100} {
		r, _, chk := newReplica(f, int64(window))
		r.Close()
		// As the master sends them: a transfer never crosses a segment.
		var agree []byte
		for off := chk.start; off < int64(len(all)); {
			n := min(int64(len(all)), off+applyFuzzSegment-off%applyFuzzSegment) - off
			agree = append(appendTransferHeader(agree, off, int(n)), all[off:off+n]...)
			off += n
		}
		f.Add(agree, window)
		f.Add(appendTransferHeader(nil, chk.start, 0), window)
		differ := bytes.Clone(agree)
		differ[TransferHeaderSize+int(held-chk.start)/2] ^= 0xff
		f.Add(differ, window)
	}
	f.Fuzz(func(t *testing.T, data []byte, window uint32) {
		r, c, chk := newReplica(t, int64(window%(4*applyFuzzSegment))+1)
		defer r.Close()
		var tr transferReader
		tr.feed(data)
		_ = c.apply(&tr, &chk) // an error ends the connection; what it left is checked below
		if end := r.ReplicaOffset(); end < held {
			t.Fatalf("the replica held up to %d, after the master's bytes up to %d", held, end)
		}
		if got := readAll(t, r, held); !bytes.Equal(got, all[:held]) {
			t.Fatalf("the replica's bytes below %d changed (first difference at %d)", held, mismatch(got, all[:held]))
		}
	})
}

// readAll returns the bytes of l from 0 to end.
func readAll(tb testing.TB, l *commitlog.Log, end int64) []byte {
	tb.Helper()
	var out []byte
	for off := int64(0); off < end; {
		v, err := l.ReadReplica(off, int(end-off))
		if err != nil {
			tb.Fatal(err)
		}
		if len(v.Data) == 0 {
			v.Release()
			tb.Fatalf("no bytes at %d, below %d", off, end)
		}
		out = append(out, v.Data...)
		off += int64(len(v.Data))
		v.Release()
	}
	return out
}

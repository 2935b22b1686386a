package commitlog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

const replicaTestSegment = 64 << 10

// fillMaster appends n records of varied sizes (several segment rolls at
// replicaTestSegment) and returns the log.
func fillMaster(t *testing.T, n int) *Log {
	t.Helper()
	m := mustOpen(t, testConfig(t, replicaTestSegment))
	t.Cleanup(func() { m.Close() })
	c := newCounter()
	for i := range n {
		mustAppend(t, m, AppendRequest{Message: testMessage("TopicR", int32(i%4), i, 100+(i*37)%3000), Assigner: c})
	}
	return m
}

func openReplica(t *testing.T, dir string, segSize int64) *Log {
	t.Helper()
	cfg := testConfig(t, segSize)
	cfg.Dir = dir
	cfg.Replica = true
	return mustOpen(t, cfg)
}

// stream copies the master's bytes from the replica's end to the master's
// end in pieces of random sizes up to maxPiece, as the HA transfer does.
func stream(t *testing.T, m, r *Log, rng *rand.Rand, maxPiece int) {
	t.Helper()
	from := r.ReplicaOffset()
	if r.activeSegment() == nil {
		end := m.MaxOffset()
		from = end - end%m.SegmentSize()
	}
	for from < m.MaxOffset() {
		v, err := m.ReadStream(from, 1+rng.IntN(maxPiece))
		if err != nil {
			t.Fatalf("ReadStream(%d): %v", from, err)
		}
		if len(v.Data) == 0 {
			t.Fatalf("ReadStream(%d) gave nothing below the end %d", from, m.MaxOffset())
		}
		if err := r.AppendReplica(from, v.Data); err != nil {
			t.Fatalf("AppendReplica(%d, %d bytes): %v", from, len(v.Data), err)
		}
		from += int64(len(v.Data))
		v.Release()
		if r.MaxOffset() > r.ReplicaOffset() {
			t.Fatalf("MaxOffset %d past ReplicaOffset %d", r.MaxOffset(), r.ReplicaOffset())
		}
	}
}

// sameRecords checks that the replica's readers yield the master's
// records byte for byte from offset from.
func sameRecords(t *testing.T, m, r *Log, from int64) int {
	t.Helper()
	mr, rr := m.NewReader(from), r.NewReader(from)
	defer mr.Close()
	defer rr.Close()
	n := 0
	for {
		me, merr := mr.Next()
		re, rerr := rr.Next()
		if errors.Is(merr, ErrNoMoreData) {
			if !errors.Is(rerr, ErrNoMoreData) {
				t.Fatalf("replica has more than the master at %d: %v", re.Offset, rerr)
			}
			return n
		}
		if merr != nil || rerr != nil {
			t.Fatalf("record %d: master %v, replica %v", n, merr, rerr)
		}
		if me.Offset != re.Offset || !bytes.Equal(me.Data, re.Data) {
			t.Fatalf("record %d differs: master at %d (%d bytes), replica at %d (%d bytes)", n, me.Offset, me.Size, re.Offset, re.Size)
		}
		n++
	}
}

func TestReplicaCopiesTheMasterInPieces(t *testing.T) {
	m := fillMaster(t, 300)
	if len(m.segs) < 4 {
		t.Fatalf("want several segments, have %d", len(m.segs))
	}
	r := openReplica(t, t.TempDir(), replicaTestSegment)
	defer r.Close()
	// A new replica starts at the master's newest segment, as RocketMQ's
	// master serves a slave that reports offset 0.
	rng := rand.New(rand.NewPCG(1, 2))
	stream(t, m, r, rng, 5000)
	newest := m.MaxOffset() - m.MaxOffset()%replicaTestSegment
	if r.MinOffset() != newest || r.MaxOffset() != m.MaxOffset() || r.ReplicaOffset() != m.MaxOffset() {
		t.Fatalf("replica [%d, %d) replicated to %d; master newest segment %d, end %d",
			r.MinOffset(), r.MaxOffset(), r.ReplicaOffset(), newest, m.MaxOffset())
	}
	if n := sameRecords(t, m, r, newest); n == 0 {
		t.Fatal("no record compared")
	}
	// More appends, then the rest, through rolls.
	c := newCounter()
	for i := range 200 {
		mustAppend(t, m, AppendRequest{Message: testMessage("TopicR", 1, 1000+i, 2000+i), Assigner: c})
	}
	stream(t, m, r, rng, 9000)
	if r.MaxOffset() != m.MaxOffset() {
		t.Fatalf("replica ends at %d, master at %d", r.MaxOffset(), m.MaxOffset())
	}
	sameRecords(t, m, r, newest)
	if _, err := r.Append(t.Context(), AppendRequest{Message: testMessage("TopicR", 0, 1, 10)}); !errors.Is(err, ErrReplica) {
		t.Fatalf("Append on a replica: %v, want ErrReplica", err)
	}
	if err := m.AppendReplica(m.MaxOffset(), []byte{1}); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("AppendReplica on a master: %v, want ErrNotReplica", err)
	}
}

func TestReplicaShowsOnlyWholeRecords(t *testing.T) {
	m := fillMaster(t, 3)
	r := openReplica(t, t.TempDir(), replicaTestSegment)
	defer r.Close()
	v, err := m.ReadStream(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	first, _ := RecordSize(v.Data)
	cut := int(first) + 10 // the first record and 10 bytes of the second
	if err := r.AppendReplica(0, v.Data[:cut]); err != nil {
		t.Fatal(err)
	}
	if r.MaxOffset() != int64(first) || r.ReplicaOffset() != int64(cut) {
		t.Fatalf("after a cut piece: MaxOffset %d ReplicaOffset %d, want %d and %d", r.MaxOffset(), r.ReplicaOffset(), first, cut)
	}
	rd := r.NewReader(0)
	defer rd.Close()
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Next(); !errors.Is(err, ErrNoMoreData) {
		t.Fatalf("the cut record is visible: %v", err)
	}
	// The cut record's bytes are the replica's to compare with its master's
	// (ReadReplica), not a reader's (ReadStream).
	raw, err := r.ReadReplica(1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw.Data, v.Data[1:cut]) {
		t.Fatalf("ReadReplica(1) gave %d bytes, want the %d received after offset 1", len(raw.Data), cut-1)
	}
	raw.Release()
	if sv, err := r.ReadStream(1, 1<<20); err != nil || len(sv.Data) != int(first)-1 {
		t.Fatalf("ReadStream(1) gave %d bytes (%v), want the %d up to the whole record's end", len(sv.Data), err, first-1)
	} else {
		sv.Release()
	}
	if tail, err := r.ReadReplica(int64(cut), 10); err != nil || len(tail.Data) != 0 {
		t.Fatalf("ReadReplica at the replica's end: %d bytes, %v", len(tail.Data), err)
	}
	if err := r.AppendReplica(int64(cut)+1, v.Data[cut+1:]); !errors.Is(err, ErrReplicaGap) {
		t.Fatalf("a piece after a gap: %v, want ErrReplicaGap", err)
	}
	if err := r.AppendReplica(int64(cut), v.Data[cut:]); err != nil {
		t.Fatal(err)
	}
	if r.MaxOffset() != m.MaxOffset() {
		t.Fatalf("replica ends at %d, master at %d", r.MaxOffset(), m.MaxOffset())
	}
}

func TestReplicaRefusesAnotherSegmentSize(t *testing.T) {
	m := fillMaster(t, 120) // several rolls at 64 KiB
	r := openReplica(t, t.TempDir(), 2*replicaTestSegment)
	defer r.Close()
	var err error
	for from := int64(0); from < m.MaxOffset() && err == nil; {
		v, rerr := m.ReadStream(from, 32<<10)
		if rerr != nil {
			t.Fatal(rerr)
		}
		err = r.AppendReplica(from, v.Data)
		from += int64(len(v.Data))
		v.Release()
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a master with half the segment size: %v, want ErrCorrupt", err)
	}
	if r.ReplicaOffset() != r.MaxOffset() || r.MaxOffset() >= replicaTestSegment {
		t.Fatalf("after the refusal: MaxOffset %d ReplicaOffset %d, want both at the last whole record before %d",
			r.MaxOffset(), r.ReplicaOffset(), replicaTestSegment)
	}
}

func TestReplicaRestartsCleanWithACutRecord(t *testing.T) {
	m := fillMaster(t, 40)
	dir := t.TempDir()
	r := openReplica(t, dir, replicaTestSegment)
	v, err := m.ReadStream(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	half := len(v.Data) / 2
	if err := r.AppendReplica(0, v.Data[:half]); err != nil {
		t.Fatal(err)
	}
	v.Release()
	whole := r.MaxOffset()
	if whole == int64(half) {
		t.Fatal("the piece ended on a record boundary; pick another cut")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openReplica(t, dir, replicaTestSegment)
	defer r.Close()
	info := r.RecoveryInfo()
	if info.Abnormal || info.CutReason != nil || r.MaxOffset() != whole || r.ReplicaOffset() != whole {
		t.Fatalf("reopened: %+v MaxOffset %d ReplicaOffset %d, want a clean end at %d", info, r.MaxOffset(), r.ReplicaOffset(), whole)
	}
	stream(t, m, r, rand.New(rand.NewPCG(3, 4)), 7000)
	sameRecords(t, m, r, 0)
}

func TestReadStreamBounds(t *testing.T) {
	m := fillMaster(t, 100)
	v, err := m.ReadStream(m.MaxOffset(), 100)
	if err != nil || len(v.Data) != 0 {
		t.Fatalf("at the end: %d bytes, %v", len(v.Data), err)
	}
	// The first segment's piece runs to its end, filler included.
	v, err = m.ReadStream(replicaTestSegment-100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Data) != 100 {
		t.Fatalf("tail of the first segment: %d bytes, want 100", len(v.Data))
	}
	v.Release()
	if _, err := m.ReadStream(-1, 10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("below the log: %v", err)
	}
}

// FuzzReplicaPieceApply feeds arbitrary bytes to the replica's unit walk
// (replicaPiece.apply) in a segment len(data)+room bytes long, as one
// piece and as two cut at any byte. It must not panic; both must stop at
// the same unit with the same verdict; what they call whole must be the
// stream's bytes and read back as records; and the header window of a
// unit left unfinished must be held, not mapped.
func FuzzReplicaPieceApply(f *testing.F) {
	seed := mustOpen(f, testConfig(f, replicaTestSegment))
	c := newCounter()
	for i := range 5 {
		mustAppend(f, seed, AppendRequest{Message: testMessage("TopicF", 0, i, 50+i*10), Assigner: c})
	}
	v, err := seed.ReadStream(0, 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	first, _ := RecordSize(v.Data)
	f.Add(append([]byte(nil), v.Data...), uint16(100), uint16(first)+3)
	f.Add(append([]byte(nil), v.Data...), uint16(0), uint16(len(v.Data)-5))
	f.Add(append([]byte(nil), v.Data[:first+40]...), uint16(1000), uint16(first)+3) // ends in the second record
	f.Add(append([]byte(nil), v.Data[:70]...), uint16(3), uint16(4))
	v.Release()
	seed.Close()
	f.Add([]byte{0, 0, 0, 8, 0xcb, 0xd4, 0x33, 0x20}, uint16(0), uint16(5))
	f.Add([]byte{0, 0, 0, 12, 0xcb, 0xd4, 0x33, 0x20, 0, 0, 0, 0}, uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, room uint16, cut uint16) {
		size := int64(len(data)) + int64(room)
		noop := func(int64) {}
		whole := &segment{size: size, data: make([]byte, size)}
		p := replicaPiece{seg: whole, data: data}
		pos, _, err := p.apply(noop)
		if pos < 0 || pos > int64(len(data)) {
			t.Fatalf("walk ended at %d of %d bytes", pos, len(data))
		}
		at := int64(cut) % (int64(len(data)) + 1)
		split := &segment{size: size, data: make([]byte, size)}
		p1 := replicaPiece{seg: split, data: data[:at]}
		pos2, _, err2 := p1.apply(noop)
		if err2 == nil {
			p2 := replicaPiece{seg: split, wp: pos2, rp: at, data: data[at:], held: p1.heldAt(pos2)}
			pos2, _, err2 = p2.apply(noop)
		}
		if pos2 != pos || (err2 == nil) != (err == nil) {
			t.Fatalf("cut at %d: the walk ends at %d (%v), whole at %d (%v)", at, pos2, err2, pos, err)
		}
		for _, s := range []*segment{whole, split} {
			if !bytes.Equal(s.data[:pos], data[:pos]) {
				t.Fatalf("the bytes before %d are not the stream's", pos)
			}
			if err != nil || pos == int64(len(data)) {
				continue
			}
			if hdr := s.data[pos:min(p.headerEnd(pos), int64(len(data)))]; !allZero(hdr) {
				t.Fatalf("the unfinished unit at %d has header bytes %x mapped", pos, hdr)
			}
			if from := min(p.headerEnd(pos), int64(len(data))); !bytes.Equal(s.data[from:len(data)], data[from:]) {
				t.Fatalf("the unfinished unit's bytes after %d are not the stream's", from)
			}
		}
		for at := int64(0); at < pos; {
			if size-at < blankFillerLength {
				break // the segment's last bytes, too few for a record
			}
			n, cerr := Check(whole.data[at:pos], false)
			if errors.Is(cerr, ErrBlank) {
				break
			}
			if cerr != nil {
				t.Fatalf("bytes at %d called whole do not check: %v (walk error %v)", at, cerr, err)
			}
			at += int64(n)
		}
	})
}

// masterBytes returns a copy of the master's bytes [from, to), read
// segment by segment.
func masterBytes(t *testing.T, m *Log, from, to int64) []byte {
	t.Helper()
	var out []byte
	for from < to {
		v, err := m.ReadStream(from, int(to-from))
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Data) == 0 {
			t.Fatalf("nothing at %d (the master ends at %d)", from, m.MaxOffset())
		}
		out = append(out, v.Data...)
		from += int64(len(v.Data))
		v.Release()
	}
	return out
}

// A piece across a segment end is refused whole (RocketMQ's slave refuses
// it too): taken and then refused for a bad record, it left the next
// segment active behind an end moved back into the one before, and the
// master's resend panicked.
func TestReplicaRefusesAPieceAcrossASegmentEnd(t *testing.T) {
	m := fillMaster(t, 120)
	r := openReplica(t, t.TempDir(), replicaTestSegment)
	defer r.Close()
	start := int64(replicaTestSegment)
	if err := r.AppendReplica(start, masterBytes(t, m, start, start+1000)); err != nil {
		t.Fatal(err)
	}
	from := r.ReplicaOffset()
	for _, corrupt := range []bool{true, false} {
		data := masterBytes(t, m, from, 2*replicaTestSegment+500)
		if corrupt {
			data[len(data)-600] ^= 0xff
		}
		if err := r.AppendReplica(from, data); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a piece across the segment end at %d (corrupt %v): %v, want ErrCorrupt", 2*replicaTestSegment, corrupt, err)
		}
		if r.ReplicaOffset() != from {
			t.Fatalf("the refused piece moved ReplicaOffset from %d to %d", from, r.ReplicaOffset())
		}
	}
	stream(t, m, r, rand.New(rand.NewPCG(5, 6)), 9000)
	sameRecords(t, m, r, r.MinOffset())
}

// The bytes of a refused piece are zeroed: a clean Close leaves zeros
// after the end, and the next Open finds no damage.
func TestReplicaZeroesRefusedBytes(t *testing.T) {
	m := fillMaster(t, 40)
	dir := t.TempDir()
	r := openReplica(t, dir, replicaTestSegment)
	data := masterBytes(t, m, 0, 20000)
	if err := r.AppendReplica(0, data[:5000]); err != nil {
		t.Fatal(err)
	}
	// Break the magic code of the first record that starts in the next
	// piece.
	next := r.MaxOffset()
	for next < 5000 {
		n, err := RecordSize(data[next:])
		if err != nil {
			t.Fatal(err)
		}
		next += int64(n)
	}
	bad := bytes.Clone(data[5000:])
	bad[next-5000+4] ^= 0xff
	if err := r.AppendReplica(5000, bad); !errors.Is(err, ErrBadMagic) && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a piece with a bad magic code: %v", err)
	}
	whole := r.MaxOffset()
	if r.ReplicaOffset() != whole {
		t.Fatalf("after the refusal ReplicaOffset %d, MaxOffset %d", r.ReplicaOffset(), whole)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openReplica(t, dir, replicaTestSegment)
	defer r.Close()
	if info := r.RecoveryInfo(); info.CutReason != nil || info.CutBytes != 0 || r.MaxOffset() != whole {
		t.Fatalf("reopened after a clean Close: %+v, MaxOffset %d, want a clean end at %d", info, r.MaxOffset(), whole)
	}
	stream(t, m, r, rand.New(rand.NewPCG(7, 8)), 7000)
	sameRecords(t, m, r, 0)
}

// A slave killed (SIGKILL: the mapping's bytes stay in the page cache)
// after any piece keeps, after recovery, only the master's whole records:
// a record a piece cut short reads as the log's end, never as a record
// whose lengths and body CRC hold while its properties end in zeros. The
// replica keeps an unfinished record's size and magic out of the mapping
// until its last byte arrived.
func TestAReplicaKilledMidRecordKeepsOnlyWholeRecords(t *testing.T) {
	m := fillMaster(t, 12)
	var starts []int64
	rd := m.NewReader(0)
	for {
		e, err := rd.Next()
		if err != nil {
			break
		}
		starts = append(starts, e.Offset)
	}
	rd.Close()
	if len(starts) < 4 {
		t.Fatalf("the master holds %d records, want at least 4", len(starts))
	}
	// The third record, cut at every byte of its header and then every
	// 13th byte, its properties' last bytes included; the piece that cuts
	// it starts inside the record before it, so a piece both completes a
	// record and starts another.
	start, end := starts[2], starts[3]
	var cuts []int64
	for c := start + 1; c < end; c++ {
		if c < start+12 || (c-start)%13 == 0 || c > end-40 {
			cuts = append(cuts, c)
		}
	}
	for _, cut := range cuts {
		dir := t.TempDir()
		r := openReplica(t, dir, replicaTestSegment)
		for from := int64(0); from < cut; {
			to := min(from+int64(100+(cut%7)*50), cut)
			if from < start-30 && to > start-30 {
				to = start - 30 // the last piece starts in the record before
			}
			v, err := m.ReadStream(from, int(to-from))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.AppendReplica(from, v.Data); err != nil {
				t.Fatalf("AppendReplica(%d, %d bytes): %v", from, len(v.Data), err)
			}
			v.Release()
			from = to
		}
		if r.MaxOffset() != start || r.ReplicaOffset() != cut {
			t.Fatalf("cut at %d: MaxOffset %d ReplicaOffset %d, want %d and %d", cut, r.MaxOffset(), r.ReplicaOffset(), start, cut)
		}
		// What the slave compares with its master on a reconnect is the
		// master's bytes, the held ones included.
		own, err := r.ReadReplica(start-5, int(cut-start+5))
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := m.ReadStream(start-5, int(cut-start+5))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(own.Data, theirs.Data) {
			t.Fatalf("cut at %d: ReadReplica gives bytes other than the master's", cut)
		}
		own.Release()
		theirs.Release()
		image, err := os.ReadFile(segPath(dir, 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		killed := testConfig(t, replicaTestSegment)
		killed.Replica = true
		if err := os.MkdirAll(filepath.Dir(segPath(killed.Dir, 0)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(segPath(killed.Dir, 0), image, 0o644); err != nil {
			t.Fatal(err)
		}
		markAbort(t, killed.Dir)
		k := mustOpen(t, killed)
		if k.MaxOffset() != start {
			k.Close()
			t.Fatalf("cut at byte %d of a %d-byte record: the killed slave recovered to %d, want the record's start %d", cut-start, end-start, k.MaxOffset(), start)
		}
		for i, off := range starts[:2] {
			mv, err := m.ReadRecord(off)
			if err != nil {
				t.Fatal(err)
			}
			kv, err := k.ReadRecord(off)
			if err != nil {
				t.Fatalf("cut at %d: record %d of the killed slave: %v", cut, i, err)
			}
			if !bytes.Equal(mv.Data, kv.Data) {
				t.Fatalf("cut at %d: record %d of the killed slave differs from the master's", cut, i)
			}
			mv.Release()
			kv.Release()
		}
		k.Close()
	}
}

func TestDiscardUnfinished(t *testing.T) {
	m := fillMaster(t, 40)
	dir := t.TempDir()
	r := openReplica(t, dir, replicaTestSegment)
	start := m.MaxOffset() - m.MaxOffset()%replicaTestSegment
	v, err := m.ReadStream(start, int(m.MaxOffset()-start)-10) // the last record cut short
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AppendReplica(start, v.Data); err != nil {
		t.Fatal(err)
	}
	v.Release()
	if r.ReplicaOffset() == r.MaxOffset() {
		t.Fatalf("no unfinished record: both ends at %d", r.MaxOffset())
	}
	end := r.MaxOffset()
	r.DiscardUnfinished()
	if r.ReplicaOffset() != end || r.MaxOffset() != end {
		t.Fatalf("after DiscardUnfinished: MaxOffset %d, ReplicaOffset %d, want both %d", r.MaxOffset(), r.ReplicaOffset(), end)
	}
	// The master sends the record again, whole, from MaxOffset.
	stream(t, m, r, rand.New(rand.NewPCG(3, 4)), 5000)
	sameRecords(t, m, r, start)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	again := openReplica(t, dir, replicaTestSegment)
	defer again.Close()
	if again.MaxOffset() != m.MaxOffset() {
		t.Fatalf("reopened at %d, master at %d", again.MaxOffset(), m.MaxOffset())
	}
}

package kvindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// A POP state copy carries a POP service's in-flight state from a master's
// index to its slave's, so that a promoted slave re-delivers what was in
// flight and not what was acknowledged, and keeps orderly queues locked
// (RocketMQ replicates the same state as checkpoint messages in its
// CommitLog). It holds every key of the keyspaces in popStatePrefixes,
// read from one snapshot:
//
//	copy:  version (1 byte, popCopyVersion) | pair*
//	pair:  uvarint len(key) | key | uvarint len(value) | value
//
// Keys are in ascending order and each starts with one of popStatePrefixes.

// popCopyVersion is the version byte a copy starts with.
const popCopyVersion = 1

// popStatePrefixes are the keyspaces a POP state copy holds: positions,
// orderly batches, checkpoints with their deadline index, and revive
// batches. Request modes (0x54) travel with RocketMQ's own request, and
// the schema-2 and legacy keyspaces (0x50, 0x51, 0x57) are never written
// by a running broker.
var popStatePrefixes = []byte{prefixPopPosition, prefixPopOrder, prefixPopCKDue, prefixPopCK, prefixPopReviveBatch}

// ErrPopStateTooBig is returned by AppendPopState when the state passes
// the size asked for.
var ErrPopStateTooBig = errors.New("the POP in-flight state is larger than a copy may be")

// ErrBadPopState is wrapped by ReplacePopState's error for a copy that
// does not decode.
var ErrBadPopState = errors.New("bad POP state copy")

// AppendPopState appends a copy of the POP in-flight state to dst, read
// from one snapshot, and returns it with the number of keys. It fails with
// ErrPopStateTooBig when the copy would pass max bytes by more than its
// last pair.
func (d *DB) AppendPopState(dst []byte, max int) ([]byte, int, error) {
	r := d.NewPopStateReader()
	defer r.Close()
	dst, n, done, err := r.Page(dst, max)
	if err != nil || done {
		return dst, n, err
	}
	if _, more, done, err := r.Page(nil, 1); err != nil || more > 0 || !done {
		return dst, n, errors.Join(fmt.Errorf("%w (%d bytes)", ErrPopStateTooBig, max), err)
	}
	return dst, n, nil
}

// PopStateReader reads a copy of the POP in-flight state in pages, all
// from the snapshot taken when it was opened: joined with
// AppendPopStatePage, its pages are the copy AppendPopState would have
// made then, however the state changed meanwhile. Close it.
type PopStateReader struct {
	snap   *pebble.Snapshot
	prefix int    // the keyspace being read, an index into popStatePrefixes
	after  []byte // the last key read in it, nil before the first
}

// NewPopStateReader opens a reader on a snapshot of the index.
func (d *DB) NewPopStateReader() *PopStateReader {
	return &PopStateReader{snap: d.pdb.NewSnapshot()}
}

// Page appends to dst the version byte and the next pairs of the copy,
// stopping once they pass max bytes (a page holds at least one pair when
// any is left), and returns it with the number of pairs and whether the
// copy is complete.
func (r *PopStateReader) Page(dst []byte, max int) ([]byte, int, bool, error) {
	dst = append(dst, popCopyVersion)
	start, n := len(dst), 0
	for ; r.prefix < len(popStatePrefixes); r.prefix, r.after = r.prefix+1, nil {
		p := []byte{popStatePrefixes[r.prefix]}
		lower := p
		if r.after != nil {
			lower = append(slices.Clip(r.after), 0) // the first key after it
		}
		it, err := r.snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(p)})
		if err != nil {
			return dst, n, false, fmt.Errorf("copy POP state %x: %w", p, err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			if len(dst)-start >= max && n > 0 {
				return dst, n, false, it.Close()
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return dst, n, false, errors.Join(fmt.Errorf("copy POP state %x: %w", p, err), it.Close())
			}
			k := it.Key()
			dst = binary.AppendUvarint(dst, uint64(len(k)))
			dst = append(dst, k...)
			dst = binary.AppendUvarint(dst, uint64(len(v)))
			dst = append(dst, v...)
			r.after = append(r.after[:0], k...)
			n++
		}
		if err := it.Close(); err != nil {
			return dst, n, false, fmt.Errorf("copy POP state %x: %w", p, err)
		}
	}
	return dst, n, true, nil
}

// Close releases the reader's snapshot.
func (r *PopStateReader) Close() error { return r.snap.Close() }

// AppendPopStatePage appends a page of a PopStateReader to the copy made
// of the pages before it (nil for the first). The joined copy is checked
// whole by ReplacePopState.
func AppendPopStatePage(copy, page []byte) ([]byte, error) {
	if len(page) == 0 || page[0] != popCopyVersion {
		return copy, fmt.Errorf("%w: page version %v, want %d", ErrBadPopState, page[:min(len(page), 1)], popCopyVersion)
	}
	if len(copy) == 0 {
		return append(copy, page...), nil
	}
	return append(copy, page[1:]...), nil
}

// decodePopState calls fn for every pair of a copy, in order, until fn
// fails; the slices alias state. It checks the version, every length (in
// its shortest form), that every key starts with one of popStatePrefixes
// and that the keys ascend, and fails at the first pair that does not.
func decodePopState(state []byte, fn func(k, v []byte) error) error {
	if len(state) == 0 || state[0] != popCopyVersion {
		return fmt.Errorf("%w: version %v, want %d", ErrBadPopState, state[:min(len(state), 1)], popCopyVersion)
	}
	rest := state[1:]
	var prev []byte
	next := func(what string) ([]byte, error) {
		l, n := binary.Uvarint(rest)
		// A length ending in a zero byte after others is longer than the
		// shortest form AppendPopState writes.
		if n <= 0 || n > 1 && rest[n-1] == 0 || l > uint64(len(rest)-n) {
			return nil, fmt.Errorf("%w: %s length at byte %d", ErrBadPopState, what, len(state)-len(rest))
		}
		b := rest[n : n+int(l)]
		rest = rest[n+int(l):]
		return b, nil
	}
	for len(rest) > 0 {
		k, err := next("key")
		if err != nil {
			return err
		}
		v, err := next("value")
		if err != nil {
			return err
		}
		if len(k) == 0 || !slices.Contains(popStatePrefixes, k[0]) {
			return fmt.Errorf("%w: key %x is not of the POP state", ErrBadPopState, k)
		}
		if prev != nil && string(k) <= string(prev) {
			return fmt.Errorf("%w: key %x after %x", ErrBadPopState, k, prev)
		}
		prev = k
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// ReplacePopState replaces this index's POP in-flight state with a copy
// AppendPopState made, in one synced batch, and returns the number of keys
// it holds now and how many keys it wrote or deleted: the copy is merged
// with the state in key order, so a key that holds the copy's value
// already is not written again (a slave's sync copies a state that mostly
// stays). A copy that does not decode changes nothing: the batch is
// dropped uncommitted. It is for a slave, whose POP service writes
// nothing: a POP service writing meanwhile would lose its writes.
func (d *DB) ReplacePopState(state []byte) (keys, written int, err error) {
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{popStatePrefixes[0]},
		UpperBound: []byte{popStatePrefixes[len(popStatePrefixes)-1] + 1}})
	if err != nil {
		return 0, 0, fmt.Errorf("replace POP state: %w", err)
	}
	b := d.pdb.NewBatch()
	defer b.Close()
	// own is the state's next key (of the POP keyspaces: request modes
	// and legacy keys lie between them and stay), nil past the last.
	ok := it.First()
	own := func() []byte {
		for ; ok; ok = it.Next() {
			if slices.Contains(popStatePrefixes, it.Key()[0]) {
				return it.Key()
			}
		}
		return nil
	}
	err = decodePopState(state, func(k, v []byte) error {
		keys++
		for o := own(); o != nil && string(o) < string(k); o = own() {
			if err := b.Delete(o, nil); err != nil {
				return err
			}
			ok = it.Next()
		}
		if o := own(); o != nil && string(o) == string(k) {
			cur, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			same := string(cur) == string(v) // before Next: cur is the iterator's
			ok = it.Next()
			if same {
				return nil
			}
		}
		return b.Set(k, v, nil)
	})
	if err == nil {
		for o := own(); o != nil; o = own() {
			if err = b.Delete(o, nil); err != nil {
				break
			}
			ok = it.Next()
		}
	}
	err = errors.Join(err, it.Close())
	if err != nil {
		return 0, 0, fmt.Errorf("replace POP state: %w", err)
	}
	written = int(b.Count())
	if written == 0 {
		return keys, 0, nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, 0, fmt.Errorf("replace POP state: %w", err)
	}
	// The caches derived from the replaced keys would answer from the old
	// state.
	d.positions.purge()
	d.floors.purge()
	d.cks.purge()
	return keys, written, nil
}

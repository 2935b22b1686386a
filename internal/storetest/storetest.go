// Package storetest opens a CommitLog and its KV index side by side in a
// test's directory, and starts dispatchers over them, for the tests of
// packages that sit on both (timer, txn). Everything it opens is closed
// at the test's cleanup.
package storetest

import (
	"errors"
	"net/netip"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
)

// SegmentSize is the CommitLog segment size of a test store: small, so
// that tests stay light on disk.
const SegmentSize = 1 << 20

// StoreHost is the store host written into a test store's records.
var StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")

// Store is a CommitLog under Dir and its KV index under Dir/kvindex.
type Store struct {
	Dir string
	Log *commitlog.Log
	DB  *kvindex.DB
}

// Open opens a new store in a fresh temporary directory of t.
func Open(t testing.TB) *Store {
	t.Helper()
	return OpenWithClock(t, nil)
}

// OpenWithClock is Open with now as the CommitLog's clock for store
// timestamps and retention (nil: time.Now).
func OpenWithClock(t testing.TB, now func() time.Time) *Store {
	t.Helper()
	s := &Store{Dir: t.TempDir()}
	db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(s.Dir, "kvindex"), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("open the KV index: %v", err)
	}
	s.DB = db
	cfg := commitlog.DefaultConfig(s.Dir)
	cfg.SegmentSize = SegmentSize
	cfg.StoreHost = StoreHost
	cfg.Logger = zerolog.Nop()
	cfg.Now = now
	if s.Log, err = commitlog.Open(cfg); err != nil {
		_ = db.Close()
		t.Fatalf("open the CommitLog: %v", err)
	}
	t.Cleanup(func() {
		_ = s.Log.Close()
		_ = s.DB.Close()
	})
	return s
}

// StartDispatcher starts a dispatcher from the store's CommitLog into its
// index with the hooks of opts (its Log, DB and Store are the store's,
// its logger discards) once it has recovered; it is closed before the
// store at cleanup.
func (s *Store) StartDispatcher(t testing.TB, opts kvindex.DispatcherOptions) *kvindex.Dispatcher {
	t.Helper()
	opts.Log, opts.DB, opts.Store, opts.Logger = s.Log, s.DB, s.DB.ConsumeQueue(1024), zerolog.Nop()
	d, err := kvindex.NewDispatcher(opts)
	if err != nil {
		t.Fatalf("new dispatcher: %v", err)
	}
	if _, err := d.Recover(); err != nil {
		t.Fatalf("dispatcher recovery: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	d.Start()
	return d
}

// ReadMessage decodes the record at a CommitLog offset into a copy; false
// when the offset is past the log's end.
func (s *Store) ReadMessage(phy int64) (commitlog.Message, bool, error) {
	v, err := s.Log.ReadRecord(phy)
	if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
		return commitlog.Message{}, false, nil
	}
	if err != nil {
		return commitlog.Message{}, false, err
	}
	defer v.Release()
	m, err := commitlog.Decode(append([]byte(nil), v.Data...))
	return m, err == nil, err
}

// Offsets is a commitlog.QueueOffsetAssigner that numbers each queue's
// records from 0, for tests that append without a broker. The log calls
// Assign under its append lock.
type Offsets map[string]int64

// Assign implements commitlog.QueueOffsetAssigner.
func (o Offsets) Assign(topic string, queueID int32, n int) int64 {
	k := topic + "/" + strconv.Itoa(int(queueID))
	off := o[k]
	o[k] = off + int64(n)
	return off
}

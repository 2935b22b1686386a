package pop_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/edsrzf/mmap-go"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/pop"
)

// dumpPopState logs the POP state of a stopped store and its CommitLog
// records, to diagnose a failed crash test: the records with one of the
// given bodies, or, when none is given, those not of the load's topic
// (revived copies).
func dumpPopState(t *testing.T, dir, topic string, bodies []string) {
	db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(dir, kvindex.DirName), ReadOnly: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Log(err)
		return
	}
	defer db.Close()
	n := 0
	_ = db.Pop().EachInFlight(func(r kvindex.InFlight) bool { n++; t.Logf("inflight %+v", r); return n < 20 })
	for _, ks := range []byte{kvindex.PrefixPopPosition, kvindex.PrefixConsumerOffset} {
		_ = db.Scan([]byte{ks}, func(k, v []byte) bool {
			r, _ := kvindex.DecodeKey(k, v)
			t.Log(r)
			return true
		})
	}
	_ = db.QueueRanges("", func(q kvindex.QueueRange) bool { t.Logf("range %+v", q); return true })
	cqs := db.ConsumeQueue(0)
	l, err := commitlog.OpenReadOnly(dir)
	if err != nil {
		t.Log(err)
		return
	}
	defer l.Close()
	it := l.NewIterator(0)
	for {
		e, err := it.Next()
		if err != nil {
			t.Logf("log end: %v", err)
			break
		}
		m, _ := commitlog.Decode(e.Data)
		if len(bodies) > 0 && slices.Contains(bodies, string(m.Body)) || len(bodies) == 0 && m.Topic != topic {
			// A staged copy names when it may go out; the index entry at
			// the record's queue offset should point back at it.
			visibleAt, _ := commitlog.LookupProperty(m.Properties, pop.PropertyVisibleAt)
			index := "no index entry"
			if es, err := cqs.Get(m.Topic, m.QueueID, m.QueueOffset, 1); err != nil {
				index = err.Error()
			} else if len(es) == 1 {
				index = fmt.Sprintf("index entry at %d (%d bytes)", es[0].PhyOffset, es[0].Size)
			}
			t.Logf("LOG %s/%d@%d %s reconsume %d at %d stored %d visibleAt %q, %s", m.Topic, m.QueueID, m.QueueOffset,
				m.Body, m.ReconsumeTimes, e.Offset, m.StoreTimestamp, visibleAt, index)
		}
	}
}

// childDebugLog is the file, in a crash test's store directory, its child
// brokers append their debug log to; each life starts with a line of
// childReadyMessage.
const (
	childDebugLog     = "child-debug.log"
	childReadyMessage = "crash child serving"
)

// mappedLogSize is the size of a crash test's child debug log: some
// 260 KB a run are written to it.
const mappedLogSize = 64 << 20

// mappedLog is an append-only log file written through a shared mapping:
// a line costs a copy, not a write system call, so logging every pop,
// ack and checkpoint write changes the child's timing far less (a failure
// seen once without the traces did not come back in 760 runs with them
// written by a system call each), and what was copied survives a SIGKILL
// in the page cache. Lines are reserved with an atomic add; space
// reserved by a child killed before it copied stays zero, which the
// reader skips. Each life appends after the last non-zero byte.
type mappedLog struct {
	f    *os.File
	data mmap.MMap
	off  atomic.Int64
}

// openMappedLog maps the log at path, made mappedLogSize long, to be
// written after what earlier lives of the child wrote there.
func openMappedLog(path string) (*mappedLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(mappedLogSize); err != nil {
		f.Close()
		return nil, err
	}
	data, err := mmap.Map(f, mmap.RDWR, 0)
	if err != nil {
		f.Close()
		return nil, err
	}
	l := &mappedLog{f: f, data: data}
	l.off.Store(int64(mappedEnd(data)))
	return l, nil
}

// mappedEnd returns the end of what earlier lives wrote to data: the
// first run of 64 KiB of zeros ends it (a hole a killed child left is one
// line at most), and the last non-zero byte before that run is its end.
func mappedEnd(data []byte) int {
	const chunk = 64 << 10
	off := 0
	for ; off < len(data); off += chunk {
		if !slices.ContainsFunc(data[off:min(off+chunk, len(data))], func(c byte) bool { return c != 0 }) {
			break
		}
	}
	end := min(off, len(data))
	for end > 0 && data[end-1] == 0 {
		end--
	}
	return end
}

// Write copies p into the mapping; past its end it drops p.
func (l *mappedLog) Write(p []byte) (int, error) {
	end := l.off.Add(int64(len(p)))
	if end > int64(len(l.data)) {
		return len(p), nil
	}
	copy(l.data[end-int64(len(p)):end], p)
	return len(p), nil
}

// Close unmaps and closes the log.
func (l *mappedLog) Close() error {
	return errors.Join(l.data.Unmap(), l.f.Close())
}

// tracedQueue names a queue and a window of pop times whose reads of it
// the failure dump lists.
type tracedQueue struct {
	topic    string
	queue    int32
	from, to int64
}

// dumpQueueReads logs the pops' reads of the traced queues (the "pop: read
// a queue" debug lines of the children, each with the group's position,
// committed offset and the queue's bounds as the pop saw them), the acks
// of their messages ("pop: ack", by the popTime of the pop acked) and the
// writes of their checkpoints within their windows, and when each child life began, to tell how a
// record came to be handed out twice or re-delivered after its ack.
func dumpQueueReads(t *testing.T, dir string, traced []tracedQueue) {
	if len(traced) == 0 {
		return
	}
	f, err := os.Open(filepath.Join(dir, childDebugLog))
	if err != nil {
		t.Log(err)
		return
	}
	defer f.Close()
	// Zero bytes are space reserved and never written (mappedLog).
	sc := bufio.NewScanner(bufio.NewReader(zeroSkipper{f}))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	shown := 0
	for sc.Scan() {
		var line struct {
			Message string `json:"message"`
			Topic   string `json:"topic"`
			Queue   int32  `json:"queue"`
			PopTime int64  `json:"popTime"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if line.Message == childReadyMessage {
			t.Logf("LIFE %s", sc.Bytes())
			continue
		}
		switch line.Message {
		case "pop: read a queue", "pop: ack", "pop state: checkpoint written":
		default:
			continue
		}
		for _, q := range traced {
			if line.Topic == q.topic && line.Queue == q.queue && line.PopTime >= q.from && line.PopTime <= q.to {
				t.Logf("READ %s", sc.Bytes())
				shown++
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Log(err)
	}
	t.Logf("%d queue reads listed", shown)
}

// zeroSkipper reads r without its zero bytes.
type zeroSkipper struct{ r io.Reader }

func (z zeroSkipper) Read(p []byte) (int, error) {
	for {
		n, err := z.r.Read(p)
		kept := 0
		for _, c := range p[:n] {
			if c != 0 {
				p[kept] = c
				kept++
			}
		}
		if kept > 0 || err != nil {
			return kept, err
		}
	}
}

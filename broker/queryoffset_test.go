package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rocketkv/rocketkv/remoting"
)

// dropSegmentFromPageCache drops the CommitLog segment holding phy, which
// must be full (the log writes on in a later one), from the page cache:
// the broker's mapping's pages first, then the file's, after a flush (the
// kernel drops clean, unmapped pages only, and a large folio only whole).
// It reports false when the pages stayed (a file system that ignores the
// advice).
func dropSegmentFromPageCache(t *testing.T, b *testBroker, phy int64) bool {
	t.Helper()
	if err := b.clog.Flush(); err != nil {
		t.Fatal(err)
	}
	segSize := b.clog.SegmentSize()
	segStart := phy - phy%segSize
	if b.clog.MaxOffset() < segStart+segSize {
		t.Fatalf("segment %d is not full: the log ends at %d", segStart, b.clog.MaxOffset())
	}
	v, err := b.clog.Read(segStart, int32(segSize))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if err := unix.Madvise(v.Data, unix.MADV_DONTNEED); err != nil {
		t.Fatalf("madvise: %v", err)
	}
	f, err := os.Open(filepath.Join(b.cfg.CommitLogDir(), fmt.Sprintf("%020d", segStart)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("fadvise: %v", err)
	}
	in, err := v.Resident()
	if err != nil {
		t.Fatal(err)
	}
	return !in
}

// TestQueryConsumerOffsetNotFoundAnswers checks QUERY_CONSUMER_OFFSET for
// a group that never committed on a queue that holds messages, against
// RocketMQ 5.3's ConsumerManageProcessor.queryConsumerOffset: with
// setZeroIfNotFound=false, QUERY_NOT_FOUND with its own remark before any
// look at the queue; otherwise 0 only while the queue starts at 0 and its
// first message is in the page cache (mincore, as RocketMQ 5's
// checkInMemByConsumeOffset asks), else QUERY_NOT_FOUND.
func TestQueryConsumerOffsetNotFoundAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dropped bool // the first message's pages dropped from the page cache
		ext     map[string]string
		code    int32
		remark  string
	}{
		{"young queue", false, nil, remoting.Success, ""},
		{"setZeroIfNotFound=false", false, map[string]string{"setZeroIfNotFound": "false"},
			remoting.QueryNotFound, "Not found, do not set to zero, maybe this group boot first"},
		{"first message not in memory", true, nil,
			remoting.QueryNotFound, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startTestBroker(t, map[string]string{"mappedFileSizeCommitLog": "65536"})
			c := b.client(nil)
			createTopic(t, c, "QO", 1, 1)
			for i := 0; i < 3; i++ {
				mustSend(t, c, "QO", 0, "m", "")
			}
			for i := 0; i < 20; i++ { // into the next segment
				mustSend(t, c, "QOFill", 0, strings.Repeat("f", 4096), "")
			}
			b.caughtUp()
			if tc.dropped {
				first, err := b.cqs.Get("QO", 0, 0, 1)
				if err != nil || len(first) != 1 {
					t.Fatalf("first entry of QO/0: %v %v", first, err)
				}
				if !dropSegmentFromPageCache(t, b, first[0].PhyOffset) {
					t.Skip("the page cache kept the first segment's pages")
				}
			}
			h := map[string]string{"consumerGroup": "fresh", "topic": "QO", "queueId": "0"}
			for k, v := range tc.ext {
				h[k] = v
			}
			r := call(t, c, remoting.QueryConsumerOffset, h, nil)
			if r.Code != tc.code || r.Remark != tc.remark {
				t.Fatalf("%d %q, want %d %q", r.Code, r.Remark, tc.code, tc.remark)
			}
			if r.Code == remoting.Success && header(t, r, "offset") != 0 {
				t.Fatalf("offset %v, want 0", r.ExtFields)
			}
		})
	}
}

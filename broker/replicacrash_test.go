package broker

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// A slave broker SIGKILLed while its master streams large records keeps,
// once it starts again, only the master's whole records, byte for byte: a
// record a transfer cut short (pieces of 32 KiB end inside records of
// 16-35 KiB, mostly in their properties) reads as the log's
// end, never as a record whose lengths and body CRC hold while its
// properties end in zeros. No whole record a killed slave had is lost by
// a later kill, and the slave finally holds the master's log.
func TestASlaveSIGKILLedMidTransferKeepsOnlyWholeRecords(t *testing.T) {
	segment := strconv.Itoa(childSegmentSize)
	master := startTestBroker(t, withHA(map[string]string{"mappedFileSizeCommitLog": segment}))
	mc := master.client(nil)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	// Records mostly properties: the old fault (a record whose body and
	// its CRC arrived while its properties' end had not) needs a piece to
	// end inside them.
	sent := 0
	sendBacklog := func(bytes int) {
		for n := 0; n < bytes; sent++ {
			body := fmt.Sprintf("message %d %s", sent, strings.Repeat("b", rng.IntN(4<<10)))
			props := "LONG\x01" + strings.Repeat(string(rune('a'+sent%26)), 16<<10+rng.IntN(14<<10))
			mustSend(t, mc, "TopicSlaveCrash", int32(sent%4), body, props)
			n += len(body) + len(props)
		}
	}

	store := t.TempDir()
	slave := &childBroker{t: t, store: store, port: freeTCPPort(t), extra: []string{
		"brokerRole=SLAVE", "brokerId=1", "haMasterAddress=" + master.haServerAddr(), "haSendHeartbeatInterval=50"}}
	t.Cleanup(slave.kill)
	var lastEnd int64
	midRecord := 0
	kills := 0
	for ; kills < 40 && (kills < 10 || midRecord < 3); kills++ {
		sendBacklog(4 << 20)
		slave.start()
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		slave.kill()
		end, torn := checkKilledSlave(t, master, store, childSegmentSize)
		if end < lastEnd {
			t.Fatalf("kill %d: the slave recovered to %d, having held whole records up to %d before", kills, end, lastEnd)
		}
		lastEnd = end
		if torn {
			midRecord++
		}
	}
	t.Logf("%d kills, %d inside a record, %d messages", kills, midRecord, sent)
	if midRecord == 0 {
		t.Fatalf("none of %d kills landed inside a record: the test proved nothing (is the transfer finished before the kill?)", kills)
	}

	// Started once more, the slave catches up and its log is the master's.
	slave.start()
	end := master.clog.MaxOffset()
	waitFor(t, "the slave caught up with the master", func() bool {
		for _, s := range master.repl.server.Slaves(end) {
			if s.AckOffset == end {
				return true
			}
		}
		return false
	})
	slave.kill()
	if got, _ := checkKilledSlave(t, master, store, childSegmentSize); got != end {
		t.Fatalf("the caught-up slave recovered to %d, the master ends at %d", got, end)
	}
}

// checkKilledSlave starts a broker on a copy of a killed slave's store,
// checks that each record it recovered is the master's record at the same
// offset and that its end is a record boundary of the master's log, and
// returns that end with whether the killed store held bytes of an
// unfinished unit past it (the kill landed inside a record).
func checkKilledSlave(t *testing.T, master *testBroker, store string, segmentSize int64) (int64, bool) {
	t.Helper()
	end, torn := int64(-1), false
	func() {
		copied := testutil.CopyStore(t, store)
		recovered := startTestBrokerAt(t, copied, map[string]string{"brokerRole": "SLAVE", "brokerId": "1",
			"mappedFileSizeCommitLog": strconv.FormatInt(segmentSize, 10)})
		defer recovered.stop()
		end = recovered.clog.MaxOffset()
		if end > master.clog.MaxOffset() {
			t.Fatalf("the killed slave recovered to %d, past the master's end %d", end, master.clog.MaxOffset())
		}
		boundary := end == master.clog.MaxOffset() || end%segmentSize == 0
		rd := recovered.clog.NewReader(recovered.clog.MinOffset())
		defer rd.Close()
		for {
			e, err := rd.Next()
			if err != nil {
				break
			}
			mv, err := master.clog.ReadRecord(e.Offset)
			if err != nil {
				t.Fatalf("the killed slave holds a record at %d the master cannot read: %v", e.Offset, err)
			}
			same := bytes.Equal(mv.Data, e.Data)
			if e.Offset+int64(e.Size) == end {
				boundary = true
			}
			mv.Release()
			if !same {
				t.Fatalf("the killed slave's record at %d differs from the master's", e.Offset)
			}
		}
		if !boundary {
			t.Fatalf("the killed slave recovered to %d, which is no record boundary of the master's log", end)
		}
	}()
	// Bytes past the end in the killed slave's own file (not the copy a
	// recovery cut) are an unfinished unit: the kill came mid-record.
	seg := filepath.Join(store, "commitlog", fmt.Sprintf("%020d", end-end%segmentSize))
	if data, err := os.ReadFile(seg); err == nil && end%segmentSize < int64(len(data)) {
		rel := end % segmentSize
		tail := data[rel:min(int64(len(data)), rel+64<<10)]
		torn = len(bytes.Trim(tail, "\x00")) > 0
	}
	return end, torn
}

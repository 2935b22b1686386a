package autoswitch

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/ha"

	"github.com/rs/zerolog"
)

// The peers in these tests write and check every frame as hex laid out
// by hand from RocketMQ's AutoSwitchHAClient and AutoSwitchHAConnection
// (field by field, big-endian), never with this package's encoders, and
// behave as RocketMQ's do where they differ from rocketkv's.

// readHex reads len(want)/2 bytes and compares them with want.
func readHex(t *testing.T, c net.Conn, what, want string) {
	t.Helper()
	w := unhex(t, want)
	got := make([]byte, len(w))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(got, w) {
		t.Fatalf("%s:\n got % x\nwant % x", what, got, w)
	}
}

// javaTransfer is buildTransferHeaderBuffer's layout: state, bodySize,
// offset, epoch, epochStartOffset, confirmOffset.
func javaTransfer(size int, offset int64, epoch int32, start, confirm int64) string {
	return fmt.Sprintf("%08x %08x %016x %08x %016x %016x", 2, size, uint64(offset), uint32(epoch), start, confirm)
}

// A RocketMQ master, played by hand: it answers the handshake, and labels
// the last piece of an epoch with the next epoch (as its
// transferToSlave does after changeTransferEpochToNext).
func TestClientFollowsARocketMQMaster(t *testing.T) {
	src := openLog(t, logConfig(t.TempDir(), false))
	appendN(t, src, 0, 30, 0)
	boundary := src.MaxOffset() // epoch 2 starts here
	appendN(t, src, 30, 30, 0)
	end := src.MaxOffset()
	confirm := boundary + 1000

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		served <- func() error {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			defer c.Close()
			// The slave's handshake: HANDSHAKE, syncFromLastFile 0,
			// asyncLearner 0, brokerId 2.
			readHex(t, c, "slave handshake", "00000001 0000 0000 0000000000000002")
			// Handshake answer: HANDSHAKE, 2 entries, max offset, last epoch 2.
			hello := fmt.Sprintf("00000001 00000018 %016x 00000002 00000001 %016x 00000002 %016x", end, 0, boundary)
			if _, err := c.Write(unhex(t, hello)); err != nil {
				return err
			}
			// An empty slave asks from 0.
			readHex(t, c, "slave's first report", "00000002 0000000000000000")
			for off := int64(0); off < end; {
				size := min(int64(7000), end-off)
				epoch, start := int32(1), int64(0)
				if off >= boundary {
					epoch, start = 2, boundary
				}
				if off < boundary && off+size >= boundary {
					size = boundary - off
					epoch, start = 2, boundary // RocketMQ's label of an epoch's last piece
				}
				v, err := src.ReadStream(off, int(size))
				if err != nil {
					return err
				}
				frame := append(unhex(t, javaTransfer(len(v.Data), off, epoch, start, confirm)), v.Data...)
				off += int64(len(v.Data))
				v.Release()
				if _, err := c.Write(frame); err != nil {
					return err
				}
			}
			// A heartbeat at the end; then the slave's reports reach it.
			if _, err := c.Write(unhex(t, javaTransfer(0, end, 2, boundary, confirm))); err != nil {
				return err
			}
			var last int64
			b := make([]byte, SlaveReportSize)
			for last != end {
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.ReadFull(c, b); err != nil {
					return fmt.Errorf("slave reports: %w", err)
				}
				if !bytes.Equal(b[:4], unhex(t, "00000002")) {
					return fmt.Errorf("slave report % x is not in TRANSFER state", b)
				}
				last = int64(b[4])<<56 | int64(b[5])<<48 | int64(b[6])<<40 | int64(b[7])<<32 | int64(b[8])<<24 | int64(b[9])<<16 | int64(b[10])<<8 | int64(b[11])
			}
			return nil
		}()
	}()

	rl := openLog(t, logConfig(t.TempDir(), true))
	rEpochs := openEpochs(t, t.TempDir())
	s := startSlave(t, ln.Addr().String(), 2, rl, rEpochs)
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the RocketMQ master's script did not finish")
	}
	sameBytes(t, src, rl, 0)
	if got := rEpochs.Entries(); !slices.Equal(got, entries(1, 0, 2, boundary)) {
		t.Fatalf("slave epochs %v, want 1-0, 2-%d", got, boundary)
	}
	if got := s.c.ConfirmOffset(); got != confirm {
		t.Fatalf("slave's confirm offset %d, want %d", got, confirm)
	}
}

// A RocketMQ slave, played by hand: an async learner that asks from the
// start of epoch 2.
func TestServerAnswersARocketMQSlave(t *testing.T) {
	ml := openLog(t, logConfig(t.TempDir(), false))
	mEpochs := openEpochs(t, t.TempDir())
	if err := BecomeMaster(mEpochs, 1, 0, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	appendN(t, ml, 0, 20, 0)
	boundary := ml.MaxOffset()
	if err := BecomeMaster(mEpochs, 2, boundary, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	appendN(t, ml, 20, 3, 0)
	end := ml.MaxOffset()
	if boundary/testSegment != (end-1)/testSegment {
		t.Fatalf("epoch 2 [%d, %d) crosses a segment: the test wants one transfer", boundary, end)
	}
	m := startMaster(t, ml, mEpochs, func(c *ServerConfig) { c.TransferBatchSize = 1 << 20 })

	c, err := net.Dial("tcp", m.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// HANDSHAKE, syncFromLastFile 0, asyncLearner 1, brokerId 3.
	if _, err := c.Write(unhex(t, "00000001 0000 0001 0000000000000003")); err != nil {
		t.Fatal(err)
	}
	readHex(t, c, "master handshake", fmt.Sprintf("00000001 00000018 %016x 00000002 00000001 %016x 00000002 %016x", end, 0, boundary))
	// TRANSFER, the slave's end: epoch 2's start.
	if _, err := c.Write(unhex(t, fmt.Sprintf("00000002 %016x", boundary))); err != nil {
		t.Fatal(err)
	}
	// The master's SyncStateSet is itself alone: its confirm offset is
	// its end.
	readHex(t, c, "transfer header", javaTransfer(int(end-boundary), boundary, 2, boundary, end))
	v, err := ml.ReadStream(boundary, int(end-boundary))
	if err != nil {
		t.Fatal(err)
	}
	readHex(t, c, "transfer body", fmt.Sprintf("%x", v.Data))
	v.Release()
	// Caught up, the learner is not proposed for the SyncStateSet.
	if _, err := c.Write(unhex(t, fmt.Sprintf("00000002 %016x", end))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ack", func() bool {
		sl := m.srv.Slaves()
		return len(sl) == 1 && sl[0].AckOffset == end && sl[0].BrokerID == 3 && sl[0].AsyncLearner
	})
	// An idle master sends heartbeats at the slave's end.
	readHex(t, c, "heartbeat", javaTransfer(0, end, 2, boundary, end))
	time.Sleep(100 * time.Millisecond) // several SyncStateSet checks
	if p := m.props.last(); p != nil {
		t.Fatalf("an async learner was proposed: %v", p)
	}
}

// A slave that reports without waiting for the handshake answer still
// gets the answer first, then the transfers.
func TestServerAnswersAHandshakeBeforeTransfers(t *testing.T) {
	ml := openLog(t, logConfig(t.TempDir(), false))
	mEpochs := openEpochs(t, t.TempDir())
	if err := BecomeMaster(mEpochs, 4, 0, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	appendN(t, ml, 0, 2, 0)
	end := ml.MaxOffset()
	m := startMaster(t, ml, mEpochs, nil)
	for range 20 {
		c, err := net.Dial("tcp", m.srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(unhex(t, "00000001 0000 0000 0000000000000005 00000002 0000000000000000")); err != nil {
			t.Fatal(err)
		}
		readHex(t, c, "master handshake", fmt.Sprintf("00000001 0000000c %016x 00000004 00000004 %016x", end, 0))
		readHex(t, c, "first transfer", javaTransfer(int(end), 0, 4, 0, end))
		c.Close()
	}
}

// An AutoSwitch slave pointed at a classic master (package ha) is told
// so, and so is the classic master's log.
func TestClientRefusesAClassicMaster(t *testing.T) {
	ml := openLog(t, logConfig(t.TempDir(), false))
	appendN(t, ml, 0, 5, 0)
	out := &syncLog{}
	srv := ha.NewServer(ha.ServerConfig{Addr: "127.0.0.1:0", Log: ml, HeartbeatInterval: 50 * time.Millisecond, Logger: zerolog.New(out)})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	s := startSlave(t, srv.Addr().String(), 2, openLog(t, logConfig(t.TempDir(), true)), openEpochs(t, t.TempDir()))
	waitFor(t, "the slave's refusal", func() bool {
		return strings.Contains(s.out.String(), "a classic HA master")
	})
}

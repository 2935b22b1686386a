package autoswitch

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// unhex reads hex written by hand with spaces between fields.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The vectors below are laid out by hand from AutoSwitchHAClient
// (sendHandshakeHeader: putInt(HANDSHAKE.ordinal()=1), putShort(
// isSyncFromLastFile), putShort(isAsyncLearner), putLong(brokerId);
// reportSlaveOffset: putInt(TRANSFER.ordinal()=2), putLong(offset)) and
// AutoSwitchHAConnection (buildHandshakeBuffer: putInt(state),
// putInt(entries*12), putLong(maxPhyOffset), putInt(lastEpoch), then
// putInt(epoch), putLong(startOffset) per entry; buildTransferHeaderBuffer:
// putInt(state), putInt(bodySize), putLong(offset), putInt(epoch),
// putLong(epochStartOffset), putLong(confirmOffset)), all big-endian.
const (
	vecSlaveHandshake = "00000001 0000 0001 0000000000000002"
	vecSlaveReport    = "00000002 0000000000001234"
	vecMasterHello    = "00000001 00000018 0000000000003000 00000003" +
		" 00000001 0000000000000000" +
		" 00000003 0000000000001000"
	vecTransfer = "00000002 00000005 0000000000001000 00000003 0000000000001000 0000000000000fff 68656c6c6f"
	vecBeat     = "00000002 00000000 ffffffffffffffff 00000001 0000000000000000 0000000000000000"
)

func TestFrameVectors(t *testing.T) {
	if got := AppendSlaveHandshake(nil, SlaveHandshake{AsyncLearner: true, BrokerID: 2}); !bytes.Equal(got, unhex(t, vecSlaveHandshake)) {
		t.Errorf("slave handshake % x", got)
	}
	if got := AppendSlaveReport(nil, 0x1234); !bytes.Equal(got, unhex(t, vecSlaveReport)) {
		t.Errorf("slave report % x", got)
	}
	hello := MasterHandshake{MaxOffset: 0x3000, LastEpoch: 3, Entries: entries(1, 0, 3, 0x1000)}
	if got := AppendMasterHandshake(nil, hello); !bytes.Equal(got, unhex(t, vecMasterHello)) {
		t.Errorf("master handshake % x", got)
	}
	th := TransferHeader{BodySize: 5, Offset: 0x1000, Epoch: 3, EpochStartOffset: 0x1000, ConfirmOffset: 0xfff}
	if got := append(AppendTransferHeader(nil, th), "hello"...); !bytes.Equal(got, unhex(t, vecTransfer)) {
		t.Errorf("transfer % x", got)
	}

	// The slave's stream, fed a byte at a time.
	var sr SlaveReader
	var got []SlaveFrame
	for _, c := range unhex(t, vecSlaveHandshake+vecSlaveReport) {
		sr.Feed([]byte{c})
		f, ok, err := sr.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = append(got, f)
		}
	}
	want := []SlaveFrame{{State: StateHandshake, Handshake: SlaveHandshake{AsyncLearner: true, BrokerID: 2}}, {State: StateTransfer, Offset: 0x1234}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("slave frames %+v, want %+v", got, want)
	}

	// The master's stream, in one piece.
	var mr MasterReader
	mr.Feed(unhex(t, vecMasterHello+vecTransfer+vecBeat))
	f, ok, err := mr.Next()
	if err != nil || !ok || f.State != StateHandshake || !reflect.DeepEqual(f.Handshake, hello) {
		t.Fatalf("master handshake %+v %v %v", f, ok, err)
	}
	f, ok, err = mr.Next()
	if err != nil || !ok || f.State != StateTransfer || f.Transfer != th || string(f.Body) != "hello" {
		t.Fatalf("transfer %+v %v %v", f, ok, err)
	}
	f, ok, err = mr.Next()
	beat := TransferHeader{Offset: -1, Epoch: 1}
	if err != nil || !ok || f.Transfer != beat || len(f.Body) != 0 {
		t.Fatalf("heartbeat %+v %v %v", f, ok, err)
	}
	if _, ok, err := mr.Next(); ok || err != nil || mr.Buffered() != 0 {
		t.Fatalf("after the last frame: %v %v, %d buffered", ok, err, mr.Buffered())
	}
}

func TestFrameGarbage(t *testing.T) {
	for _, tc := range []struct{ name, hex, want string }{
		{"state 0", "00000000 0000000000001234", "state READY"},
		{"state 9", "00000009 0000000000001234", "State(9)"},
		{"negative report", "00000002 ffffffffffffffff", "offset -1"},
		{"flag 2", "00000001 0002 0000 0000000000000002", "syncFromLastFile=2"},
		{"negative broker id", "00000001 0000 0000 ffffffffffffffff", "broker id -1"},
		{"http", hex.EncodeToString([]byte("GET / HTTP/1.1\r\n")), "State(1195725856)"},
	} {
		t.Run("slave "+tc.name, func(t *testing.T) {
			var r SlaveReader
			r.Feed(unhex(t, tc.hex))
			_, ok, err := r.Next()
			if ok || !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Next = %v, %v; want ErrProtocol mentioning %q", ok, err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ name, hex, want string }{
		{"state 3", "00000003 00000000 0000000000000000 00000001", "SUSPEND"},
		{"odd entries", "00000001 0000000d 0000000000000000 00000001", "13 bytes of epoch entries"},
		{"too many entries", "00000001 00002ee4 0000000000000000 00000001", "12004 bytes"},
		{"entries out of order", "00000001 00000018 0000000000003000 00000003 00000003 0000000000000000 00000001 0000000000001000", "after"},
		{"negative size", "00000002 ffffffff 0000000000000000 00000001 0000000000000000 0000000000000000", "-1 bytes"},
		{"huge body", "00000002 00400000 0000000000000000 00000001 0000000000000000 0000000000000000", "4194304 bytes"},
		{"body at -1", "00000002 00000001 ffffffffffffffff 00000001 0000000000000000 0000000000000000 00", "offset -1"},
	} {
		t.Run("master "+tc.name, func(t *testing.T) {
			var r MasterReader
			r.Feed(unhex(t, tc.hex))
			_, ok, err := r.Next()
			if ok || !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Next = %v, %v; want ErrProtocol mentioning %q", ok, err, tc.want)
			}
		})
	}
}

func FuzzSlaveReader(f *testing.F) {
	f.Add(unhex(f, vecSlaveHandshake+vecSlaveReport))
	f.Add(unhex(f, "00000002 ffffffffffffffff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r SlaveReader
		r.Feed(b)
		var out []byte
		for {
			fr, ok, err := r.Next()
			if err != nil {
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("error %v does not wrap ErrProtocol", err)
				}
				return
			}
			if !ok {
				break
			}
			if fr.State == StateHandshake {
				out = AppendSlaveHandshake(out, fr.Handshake)
			} else {
				out = AppendSlaveReport(out, fr.Offset)
			}
		}
		if !bytes.HasPrefix(b, out) || len(b)-len(out) >= SlaveHandshakeSize {
			t.Fatalf("frames re-encode to % x, input % x", out, b)
		}
	})
}

func FuzzMasterReader(f *testing.F) {
	f.Add(unhex(f, vecMasterHello+vecTransfer+vecBeat))
	f.Add(unhex(f, "00000001 0000000d 0000000000000000 00000001"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r MasterReader
		r.Feed(b)
		var out []byte
		for {
			fr, ok, err := r.Next()
			if err != nil {
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("error %v does not wrap ErrProtocol", err)
				}
				return
			}
			if !ok {
				break
			}
			if fr.State == StateHandshake {
				out = AppendMasterHandshake(out, fr.Handshake)
			} else {
				if int(fr.Transfer.BodySize) != len(fr.Body) {
					t.Fatalf("body of %d bytes, header says %d", len(fr.Body), fr.Transfer.BodySize)
				}
				out = append(AppendTransferHeader(out, fr.Transfer), fr.Body...)
			}
		}
		if !bytes.HasPrefix(b, out) {
			t.Fatalf("frames re-encode to % x, input % x", out, b)
		}
	})
}

package ha

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// transfer is one transfer of the master's stream.
type transfer struct {
	off  int64
	body []byte
}

// modelTransfers cuts a whole stream by the HA protocol's layout (int64
// offset, int32 size, body): the whole transfers and whether a header
// that cannot be valid stops it.
func modelTransfers(data []byte) (out []transfer, bad bool) {
	for p := 0; len(data)-p >= TransferHeaderSize; {
		off := int64(binary.BigEndian.Uint64(data[p:]))
		size := int64(int32(binary.BigEndian.Uint32(data[p+8:])))
		if off < 0 || size < 0 || size > MaxTransferBody {
			return out, true
		}
		if int64(len(data)-p-TransferHeaderSize) < size {
			return out, false
		}
		out = append(out, transfer{off, data[p+TransferHeaderSize : p+TransferHeaderSize+int(size)]})
		p += TransferHeaderSize + int(size)
	}
	return out, false
}

// FuzzTransferReader feeds arbitrary master bytes, cut at arbitrary
// points, to the slave's transfer decoder: no panic, every byte either
// consumed or still buffered, and the transfers (and the protocol error,
// if any) those of the whole stream cut by the protocol's layout; a
// transfer written by the master's writer reads back as written.
func FuzzTransferReader(f *testing.F) {
	f.Add(append(appendTransferHeader(nil, 0, 3), 1, 2, 3), uint8(2), int64(5), []byte("x"))
	f.Add(appendTransferHeader(nil, 1<<40, 0), uint8(1), int64(1<<40), []byte{})
	f.Add(appendTransferHeader(nil, 0, MaxTransferBody+1), uint8(5), int64(-1), []byte("y"))
	f.Add(append(appendTransferHeader(append(appendTransferHeader(nil, 7, 1), 9), 8, 2), 1), uint8(13), int64(0), []byte("zz"))
	f.Fuzz(func(t *testing.T, data []byte, step uint8, off int64, body []byte) {
		if off >= 0 && len(body) <= MaxTransferBody {
			var r transferReader
			r.feed(append(appendTransferHeader(nil, off, len(body)), body...))
			got, b, ok, err := r.next()
			if !ok || err != nil || got != off || !bytes.Equal(b, body) || r.buffered() != 0 {
				t.Fatalf("transfer at %d of %d bytes read back at %d with %d bytes, %v %v", off, len(body), got, len(b), ok, err)
			}
		}
		want, bad := modelTransfers(data)
		n := max(1, int(step))
		var r transferReader
		var got []transfer
		consumed := 0
		for i := 0; i < len(data); i += n {
			r.feed(data[i:min(i+n, len(data))])
			for {
				off, body, ok, err := r.next()
				if err != nil {
					if !errors.Is(err, ErrProtocol) {
						t.Fatalf("error %v does not wrap ErrProtocol", err)
					}
					if !bad || len(got) != len(want) {
						t.Fatalf("protocol error %v after %d transfers; the layout says bad %v after %d", err, len(got), bad, len(want))
					}
					return
				}
				if !ok {
					break
				}
				if len(got) >= len(want) || want[len(got)].off != off || !bytes.Equal(want[len(got)].body, body) {
					t.Fatalf("transfer %d at %d with %d bytes, not in the layout's %d transfers", len(got), off, len(body), len(want))
				}
				got = append(got, transfer{off, bytes.Clone(body)})
				consumed += TransferHeaderSize + len(body)
			}
		}
		if bad || len(got) != len(want) {
			t.Fatalf("read %d transfers without error; the layout says %d, bad %v", len(got), len(want), bad)
		}
		if consumed+r.buffered() != len(data) {
			t.Fatalf("consumed %d + buffered %d != %d fed", consumed, r.buffered(), len(data))
		}
	})
}

// FuzzDecodeReports feeds arbitrary slave bytes, in two reads, to the
// master's report decoder: it fails exactly when a whole report is
// negative, and otherwise knows the last whole report of the stream (an
// int64 every 8 bytes) and keeps the bytes of an unfinished one.
func FuzzDecodeReports(f *testing.F) {
	f.Add(appendReport(appendReport(nil, 1), 2), uint8(3))
	f.Add([]byte{0x80, 0, 0, 0, 0, 0, 0, 0}, uint8(0))
	f.Add(appendReport(appendReport(nil, 1<<40), 0)[:13], uint8(8))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		whole := len(data) / ReportSize
		negative := false
		for i := range whole {
			negative = negative || int64(binary.BigEndian.Uint64(data[i*ReportSize:])) < 0
		}
		at := min(int(cut), len(data))
		last1, ok1, rest, err1 := decodeReports(nil, data[:at])
		if err1 == nil && (ok1 && last1 < 0 || len(rest) >= ReportSize) {
			t.Fatalf("first read: last %d ok %v rest %d", last1, ok1, len(rest))
		}
		var last2 int64
		var ok2 bool
		err2 := err1
		if err1 == nil {
			last2, ok2, rest, err2 = decodeReports(rest, data[at:])
		}
		if (err2 != nil) != negative {
			t.Fatalf("%x: error %v, a negative report %v", data, err2, negative)
		}
		if err2 != nil {
			if !errors.Is(err2, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err2)
			}
			return
		}
		last, ok := last1, ok1
		if ok2 {
			last, ok = last2, true
		}
		if ok != (whole > 0) || ok && last != int64(binary.BigEndian.Uint64(data[(whole-1)*ReportSize:])) {
			t.Fatalf("%x: last report %d (%v), %d whole reports", data, last, ok, whole)
		}
		if !bytes.Equal(rest, data[whole*ReportSize:]) {
			t.Fatalf("%x: left %x", data, rest)
		}
	})
}

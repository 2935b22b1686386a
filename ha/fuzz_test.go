package ha

import (
	"errors"
	"testing"
)

// FuzzTransferReader feeds arbitrary master bytes, cut at arbitrary
// points, to the slave's transfer decoder: no panic, bodies within bounds,
// and every byte either consumed or still buffered.
func FuzzTransferReader(f *testing.F) {
	f.Add(append(appendTransferHeader(nil, 0, 3), 1, 2, 3), uint8(2))
	f.Add(appendTransferHeader(nil, 1<<40, 0), uint8(1))
	f.Add(appendTransferHeader(nil, 0, MaxTransferBody+1), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		n := max(1, int(step))
		var r transferReader
		consumed := 0
		for i := 0; i < len(data); i += n {
			r.feed(data[i:min(i+n, len(data))])
			for {
				off, body, ok, err := r.next()
				if err != nil {
					if !errors.Is(err, ErrProtocol) {
						t.Fatalf("error %v does not wrap ErrProtocol", err)
					}
					return
				}
				if !ok {
					break
				}
				if off < 0 || len(body) > MaxTransferBody {
					t.Fatalf("transfer at %d with %d bytes", off, len(body))
				}
				consumed += TransferHeaderSize + len(body)
			}
		}
		if consumed+r.buffered() != len(data) {
			t.Fatalf("consumed %d + buffered %d != %d fed", consumed, r.buffered(), len(data))
		}
	})
}

// FuzzDecodeReports feeds arbitrary slave bytes, in two reads, to the
// master's report decoder.
func FuzzDecodeReports(f *testing.F) {
	f.Add(appendReport(appendReport(nil, 1), 2), uint8(3))
	f.Add([]byte{0x80, 0, 0, 0, 0, 0, 0, 0}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		at := min(int(cut), len(data))
		last, ok, rest, err := decodeReports(nil, data[:at])
		if err != nil {
			return
		}
		if ok && last < 0 || len(rest) >= ReportSize {
			t.Fatalf("first read: last %d ok %v rest %d", last, ok, len(rest))
		}
		last, ok, rest, err = decodeReports(rest, data[at:])
		if err != nil {
			return
		}
		if (ok && last < 0) || len(rest) != len(data)%ReportSize {
			t.Fatalf("second read: last %d ok %v rest %d of %d", last, ok, len(rest), len(data))
		}
	})
}

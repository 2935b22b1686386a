package commitlog

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

const hexUpper = "0123456789ABCDEF"

// MessageID returns RocketMQ's offset message id: uppercase hex of the
// store host IP (4 or 16 bytes), its port as int32 and phyOffset as int64;
// 32 characters for IPv4, 56 for IPv6. IPv4-mapped IPv6 counts as IPv4.
func MessageID(storeHost netip.AddrPort, phyOffset int64) string {
	var raw [28]byte
	n := appendMessageIDBytes(raw[:0], storeHost, phyOffset)
	var out [56]byte
	for i, c := range n {
		out[2*i] = hexUpper[c>>4]
		out[2*i+1] = hexUpper[c&0xF]
	}
	return string(out[:2*len(n)])
}

func appendMessageIDBytes(dst []byte, h netip.AddrPort, phyOffset int64) []byte {
	ip, n := hostIP(h)
	dst = append(dst, ip[:n]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.Port()))
	return binary.BigEndian.AppendUint64(dst, uint64(phyOffset))
}

// ParseMessageID decodes an offset message id (32 or 56 hex digits, either
// case) into the store host and the CommitLog offset. It returns
// ErrBadMessageID for anything else.
func ParseMessageID(id string) (netip.AddrPort, int64, error) {
	if len(id) != 32 && len(id) != 56 {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: length %d", ErrBadMessageID, len(id))
	}
	var raw [28]byte
	b := raw[:len(id)/2]
	for i := range b {
		hi, ok1 := unhex(id[2*i])
		lo, ok2 := unhex(id[2*i+1])
		if !ok1 || !ok2 {
			return netip.AddrPort{}, 0, fmt.Errorf("%w: non-hex digit near position %d", ErrBadMessageID, 2*i)
		}
		b[i] = hi<<4 | lo
	}
	var a netip.Addr
	ipLen := len(b) - 12
	if ipLen == 4 {
		a = netip.AddrFrom4([4]byte(b[:4]))
	} else {
		a = netip.AddrFrom16([16]byte(b[:16]))
	}
	port := binary.BigEndian.Uint32(b[ipLen:])
	if port > 0xFFFF {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: port %d", ErrBadMessageID, port)
	}
	off := int64(binary.BigEndian.Uint64(b[ipLen+4:]))
	return netip.AddrPortFrom(a, uint16(port)), off, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

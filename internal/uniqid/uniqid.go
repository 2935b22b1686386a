// Package uniqid makes message ids (the UNIQ_KEY property) in the layout
// of RocketMQ's MessageClientIDSetter, 16 bytes as 32 upper-case hex
// digits:
//
//	+---------+-------+--------------+---------------------------+---------+
//	| IPv4 4B | pid 2B| per-process 4B| ms since month start 4B  | count 2B|
//	+---------+-------+--------------+---------------------------+---------+
//
// Clients read the time part back to bound a query by id, so the layout is
// kept exactly.
package uniqid

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Gen makes ids for one process; safe for concurrent use.
type Gen struct {
	prefix  [10]byte
	counter atomic.Uint32
}

// New returns a generator for a process on the host with address ip.
func New(ip [4]byte) *Gen {
	g := &Gen{}
	copy(g.prefix[:4], ip[:])
	binary.BigEndian.PutUint16(g.prefix[4:], uint16(os.Getpid()))
	binary.BigEndian.PutUint32(g.prefix[6:], uint32(time.Now().UnixNano()))
	return g
}

// Next returns a new id.
func (g *Gen) Next() string {
	var b [16]byte
	copy(b[:10], g.prefix[:])
	now := time.Now()
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, now.Location())
	binary.BigEndian.PutUint32(b[10:], uint32(now.Sub(monthStart).Milliseconds()))
	binary.BigEndian.PutUint16(b[14:], uint16(g.counter.Add(1)))
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

// ErrBadID is returned by Parse for a string that is not a message id of
// this layout: 32 hex digits, or 56 for one made on an IPv6 host (its
// address then takes 16 bytes).
var ErrBadID = errors.New("uniqid: not a client message id")

// Parse reads back what an id carries, as RocketMQ's MessageClientIDSetter
// does: the address of the host that made it, and when it was made. The
// id holds only the milliseconds since the start of a month, so the month
// is taken to be the one of now (local time), or the month before when
// that would put the id at or after now.
func Parse(id string, now time.Time) (ip netip.Addr, at time.Time, err error) {
	raw, err := hex.DecodeString(id)
	if err != nil || (len(raw) != 16 && len(raw) != 28) {
		return netip.Addr{}, time.Time{}, fmt.Errorf("%w: %q", ErrBadID, id)
	}
	ipLen := 4
	if len(raw) == 28 {
		ipLen = 16
	}
	ip, _ = netip.AddrFromSlice(raw[:ipLen])
	span := time.Duration(binary.BigEndian.Uint32(raw[ipLen+6:])) * time.Millisecond
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, now.Location())
	if !monthStart.Add(span).Before(now) {
		monthStart = monthStart.AddDate(0, -1, 0)
	}
	return ip, monthStart.Add(span), nil
}

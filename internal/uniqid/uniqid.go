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

package commitlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"net/netip"
)

// Magic codes of the first 8 bytes of every record.
const (
	// MagicV1 marks a record whose topic length is one byte (topics up to
	// 127 bytes).
	MagicV1 uint32 = 0xDAA320A7
	// MagicV2 marks a record whose topic length is a big-endian int16.
	MagicV2 uint32 = 0xDAA320AB
	// BlankMagic marks the 8-byte end-of-segment filler.
	BlankMagic uint32 = 0xCBD43194
)

// SysFlag bits (RocketMQ MessageSysFlag).
const (
	// FlagCompressed: the body is compressed (see CompressionType).
	FlagCompressed int32 = 0x1
	// FlagMultiTags: the TAGS property holds several tags.
	FlagMultiTags int32 = 0x2
	// TransactionNotType: not a transactional record (or a half message,
	// which 4.3+ brokers store with the type reset).
	TransactionNotType int32 = 0x0
	// TransactionPrepared: an old-style prepared (half) record; stored with
	// queue offset 0 and never dispatched to a ConsumeQueue.
	TransactionPrepared int32 = 0x4
	// TransactionCommit: the committed copy of a transactional message.
	TransactionCommit int32 = 0x8
	// TransactionRollback: a rolled-back record; queue offset 0, never
	// dispatched.
	TransactionRollback int32 = 0xC
	// FlagBornHostV6: the born host is 16 IP bytes + port.
	FlagBornHostV6 int32 = 0x10
	// FlagStoreHostV6: the store host is 16 IP bytes + port.
	FlagStoreHostV6 int32 = 0x20
	// FlagNeedUnwrap: batch marker.
	FlagNeedUnwrap int32 = 0x40
	// FlagInnerBatch: one record stands for INNER_NUM messages (BatchCQ).
	FlagInnerBatch int32 = 0x80
	// CompressionMask selects the compression type bits.
	CompressionMask int32 = 0x700
	// CompressionLZ4, CompressionZSTD and CompressionZLIB are the values of
	// the compression bits. 0 with FlagCompressed set means ZLIB.
	CompressionLZ4  int32 = 0x100
	CompressionZSTD int32 = 0x200
	CompressionZLIB int32 = 0x300

	transactionMask int32 = 0xC
)

// TransactionType returns the transaction bits of sysFlag: one of
// TransactionNotType, TransactionPrepared, TransactionCommit and
// TransactionRollback.
func TransactionType(sysFlag int32) int32 { return sysFlag & transactionMask }

// CompressionType returns the compression bits of sysFlag (0 when the body
// is not compressed; CompressionZLIB also for old clients that set
// FlagCompressed without type bits).
func CompressionType(sysFlag int32) int32 {
	if sysFlag&FlagCompressed == 0 {
		return 0
	}
	if t := sysFlag & CompressionMask; t != 0 {
		return t
	}
	return CompressionZLIB
}

// Fixed byte positions inside a record (the same in V1 and V2).
const (
	posTotalSize      = 0
	posMagic          = 4
	posBodyCRC        = 8
	posQueueID        = 12
	posFlag           = 16
	posQueueOffset    = 20
	posPhyOffset      = 28
	posSysFlag        = 36
	posBornTimestamp  = 40
	posBornHost       = 48
	minRecordV1V4V4   = 91 // V1, both hosts IPv4, empty body, topic and properties
	maxPropertiesLen  = MaxPropertiesLen
	maxTopicLenV1     = 127
	maxTopicLenV2     = 32767
	blankFillerLength = 8 // [remaining:4][BlankMagic:4]
)

// Message is one CommitLog record with every stored field.
//
// The integer fields are Java ints and longs, kept signed. Decode fills
// every field from the bytes. Encode reads Topic, Body, Properties,
// QueueID, Flag, QueueOffset, PhyOffset, SysFlag (except the two host-V6
// bits, which it derives from the addresses), BornTimestamp, BornHost,
// StoreTimestamp, StoreHost, ReconsumeTimes, PreparedTransactionOffset and
// Magic (MagicV2 forces V2); it computes StoreSize and BodyCRC itself.
type Message struct {
	// StoreSize is TOTALSIZE: the record length including this field.
	StoreSize int32
	// Magic is MagicV1 or MagicV2 (BlankMagic only with ErrBlank).
	Magic uint32
	// BodyCRC is CRC-32 IEEE of Body masked with 0x7FFFFFFF.
	BodyCRC uint32
	// QueueID is the queue inside Topic.
	QueueID int32
	// Flag is the producer's user flag.
	Flag int32
	// QueueOffset is the logical offset in the ConsumeQueue (0 for
	// prepared and rollback records).
	QueueOffset int64
	// PhyOffset is the absolute CommitLog offset of the record.
	PhyOffset int64
	// SysFlag holds the bits Flag*, Transaction*, Compression*.
	SysFlag int32
	// BornTimestamp is the producer's clock, ms since the epoch.
	BornTimestamp int64
	// BornHost is the producer's address. IPv4-mapped IPv6 addresses are
	// stored as IPv4.
	BornHost netip.AddrPort
	// StoreTimestamp is the broker's clock at append, ms since the epoch.
	StoreTimestamp int64
	// StoreHost is the broker's address.
	StoreHost netip.AddrPort
	// ReconsumeTimes counts redeliveries.
	ReconsumeTimes int32
	// PreparedTransactionOffset is the CommitLog offset of the half message
	// of a committed/rolled-back transaction, otherwise 0.
	PreparedTransactionOffset int64
	// Body is the payload as stored (compressed if FlagCompressed is set).
	Body []byte
	// Topic is the topic name (UTF-8).
	Topic string
	// Properties is the raw properties string exactly as stored: pairs
	// "key\x01value" separated by (and possibly ending with) 0x02. See
	// ParseProperties and LookupProperty.
	Properties string
}

// hostLen returns the stored length (IP + port) of a born or store host.
func hostLen(sysFlag, v6bit int32) int {
	if sysFlag&v6bit != 0 {
		return 20
	}
	return 8
}

// storeTimestampPos returns the position of STORETIMESTAMP for sysFlag.
func storeTimestampPos(sysFlag int32) int {
	return posBornHost + hostLen(sysFlag, FlagBornHostV6)
}

// BlankSize reports whether b starts with a blank filler and, if so, the
// remaining segment length it records.
func BlankSize(b []byte) (int32, bool) {
	if len(b) < blankFillerLength || binary.BigEndian.Uint32(b[posMagic:]) != BlankMagic {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(b)), true
}

// RecordSize returns the TOTALSIZE field of the record starting at b[0]
// after checking the magic code. It returns ErrBlank with the filler's
// remaining length, ErrTruncated when fewer than 8 bytes are given, and
// ErrBadMagic for anything else. It does not check that b holds the whole
// record.
func RecordSize(b []byte) (int32, error) {
	if len(b) < 8 {
		return 0, ErrTruncated
	}
	size := int32(binary.BigEndian.Uint32(b))
	switch binary.BigEndian.Uint32(b[posMagic:]) {
	case MagicV1, MagicV2:
		return size, nil
	case BlankMagic:
		return size, ErrBlank
	default:
		return 0, ErrBadMagic
	}
}

// layout holds the variable positions of one record, found by parse.
type layout struct {
	size                         int
	magic                        uint32
	sysFlag                      int32
	bornHost, storeTS, storeHost int
	reconsume, prepared          int
	body, bodyLen                int
	topic, topicLen              int
	props, propsLen              int
}

// parse validates the structure of the record at b[0] without allocating.
func parse(b []byte) (layout, error) {
	var l layout
	if len(b) < 8 {
		return l, ErrTruncated
	}
	total := int64(int32(binary.BigEndian.Uint32(b)))
	l.magic = binary.BigEndian.Uint32(b[posMagic:])
	switch l.magic {
	case MagicV1, MagicV2:
	case BlankMagic:
		return l, ErrBlank
	default:
		return l, fmt.Errorf("%w %#08x", ErrBadMagic, l.magic)
	}
	if total < minRecordV1V4V4 {
		return l, fmt.Errorf("%w: total size %d below the minimum %d", ErrCorrupt, total, minRecordV1V4V4)
	}
	if total > int64(len(b)) {
		return l, fmt.Errorf("%w: total size %d, %d bytes available", ErrTruncated, total, len(b))
	}
	rec := b[:total]
	l.size = int(total)
	l.sysFlag = int32(binary.BigEndian.Uint32(rec[posSysFlag:]))
	l.bornHost = posBornHost
	l.storeTS = l.bornHost + hostLen(l.sysFlag, FlagBornHostV6)
	l.storeHost = l.storeTS + 8
	l.reconsume = l.storeHost + hostLen(l.sysFlag, FlagStoreHostV6)
	l.prepared = l.reconsume + 4
	p := l.prepared + 8
	if p+4 > len(rec) {
		return l, fmt.Errorf("%w: fixed fields run past total size %d", ErrCorrupt, total)
	}
	bodyLen := int64(int32(binary.BigEndian.Uint32(rec[p:])))
	p += 4
	if bodyLen < 0 || bodyLen > int64(len(rec)-p) {
		return l, fmt.Errorf("%w: body length %d in a record of %d bytes", ErrCorrupt, bodyLen, total)
	}
	l.body, l.bodyLen = p, int(bodyLen)
	p += l.bodyLen
	if l.magic == MagicV1 {
		if p+1 > len(rec) {
			return l, fmt.Errorf("%w: topic length runs past total size %d", ErrCorrupt, total)
		}
		l.topicLen = int(rec[p])
		p++
	} else {
		if p+2 > len(rec) {
			return l, fmt.Errorf("%w: topic length runs past total size %d", ErrCorrupt, total)
		}
		l.topicLen = int(int16(binary.BigEndian.Uint16(rec[p:])))
		p += 2
	}
	if l.topicLen < 0 || l.topicLen > len(rec)-p {
		return l, fmt.Errorf("%w: topic length %d in a record of %d bytes", ErrCorrupt, l.topicLen, total)
	}
	l.topic = p
	p += l.topicLen
	if p+2 > len(rec) {
		return l, fmt.Errorf("%w: properties length runs past total size %d", ErrCorrupt, total)
	}
	l.propsLen = int(int16(binary.BigEndian.Uint16(rec[p:])))
	p += 2
	if l.propsLen < 0 || l.propsLen > len(rec)-p {
		return l, fmt.Errorf("%w: properties length %d in a record of %d bytes", ErrCorrupt, l.propsLen, total)
	}
	l.props = p
	p += l.propsLen
	if p != len(rec) {
		return l, fmt.Errorf("%w: total size %d, fields add up to %d", ErrCorrupt, total, p)
	}
	return l, nil
}

// BodyCRC returns the body CRC RocketMQ stores: CRC-32 IEEE masked with
// 0x7FFFFFFF.
func BodyCRC(body []byte) uint32 { return crc32.ChecksumIEEE(body) & 0x7FFFFFFF }

// checkFailed is what Check and CheckPropCRC return when parse failed
// with err: a blank filler's remaining length with ErrBlank, else 0 and
// err. (The checks call parse themselves: a wrapper returning the layout
// was not inlined and made the default recovery check 7 % slower.)
func checkFailed(b []byte, err error) (int32, error) {
	if err == ErrBlank {
		n, _ := BlankSize(b)
		return n, ErrBlank
	}
	return 0, err
}

// Check validates the record at b[0] without allocating and returns its
// size. It returns the same errors as Decode; with verifyCRC it also
// checks the body CRC (ErrCRC). For a blank filler it returns the
// remaining length and ErrBlank.
func Check(b []byte, verifyCRC bool) (int32, error) {
	l, err := parse(b)
	if err != nil {
		return checkFailed(b, err)
	}
	if verifyCRC {
		if stored, got := binary.BigEndian.Uint32(b[posBodyCRC:]), BodyCRC(b[l.body:l.body+l.bodyLen]); stored != got {
			return 0, fmt.Errorf("%w: stored %#x, computed %#x", ErrCRC, stored, got)
		}
	}
	return int32(l.size), nil
}

// DecodeOptions tunes DecodeWith.
type DecodeOptions struct {
	// VerifyCRC makes the decoder check the body CRC (ErrCRC).
	VerifyCRC bool
	// Topics, when set, gives the topic string for the topic's bytes, so
	// that a caller decoding many records of few topics (the dispatcher)
	// can hand out one string per topic instead of allocating one per
	// record. It must return a string equal to its argument and must not
	// keep the argument, which aliases the record.
	Topics func(topic []byte) string
}

// decodeTopic returns the topic string of a record's topic bytes, through
// topics when it is set.
func decodeTopic(b []byte, topics func([]byte) string) string {
	if topics != nil {
		return topics(b)
	}
	return string(b)
}

// Decode decodes the record starting at b[0] without verifying the body
// CRC; see DecodeWith.
func Decode(b []byte) (Message, error) { return DecodeWith(b, DecodeOptions{}) }

// DecodeAll decodes b as whole records one after another, the body of a
// pull, pop, peek or query answer, without verifying body CRCs. Each
// Message's Body aliases b. A record that does not decode (a torn tail
// included) is an error naming its position; nothing of b is skipped.
func DecodeAll(b []byte) ([]Message, error) {
	var out []Message
	for off := 0; off < len(b); {
		m, err := Decode(b[off:])
		if err != nil {
			return out, fmt.Errorf("record %d at byte %d of %d: %w", len(out), off, len(b), err)
		}
		out = append(out, m)
		off += int(m.StoreSize)
	}
	return out, nil
}

// DecodeWith decodes the record starting at b[0]; b may extend past it.
//
// Message.Body aliases b (it is not copied): keep b alive and unchanged
// while using it (for a View, until Release). Topic and Properties are
// copied into new strings (two allocations; Topic none with
// DecodeOptions.Topics).
//
// Errors: ErrBlank (the Message then carries Magic == BlankMagic and
// StoreSize == the filler's remaining length), ErrTruncated, ErrBadMagic,
// ErrCorrupt and, with VerifyCRC, ErrCRC. Decode never panics and never
// reads outside b.
func DecodeWith(b []byte, opts DecodeOptions) (Message, error) {
	l, err := parse(b)
	if err != nil {
		if err == ErrBlank {
			n, _ := BlankSize(b)
			return Message{StoreSize: n, Magic: BlankMagic}, ErrBlank
		}
		return Message{}, err
	}
	rec := b[:l.size]
	be := binary.BigEndian
	m := Message{
		StoreSize:                 int32(l.size),
		Magic:                     l.magic,
		BodyCRC:                   be.Uint32(rec[posBodyCRC:]),
		QueueID:                   int32(be.Uint32(rec[posQueueID:])),
		Flag:                      int32(be.Uint32(rec[posFlag:])),
		QueueOffset:               int64(be.Uint64(rec[posQueueOffset:])),
		PhyOffset:                 int64(be.Uint64(rec[posPhyOffset:])),
		SysFlag:                   l.sysFlag,
		BornTimestamp:             int64(be.Uint64(rec[posBornTimestamp:])),
		BornHost:                  decodeHost(rec[l.bornHost:l.storeTS]),
		StoreTimestamp:            int64(be.Uint64(rec[l.storeTS:])),
		StoreHost:                 decodeHost(rec[l.storeHost:l.reconsume]),
		ReconsumeTimes:            int32(be.Uint32(rec[l.reconsume:])),
		PreparedTransactionOffset: int64(be.Uint64(rec[l.prepared:])),
		Body:                      rec[l.body : l.body+l.bodyLen : l.body+l.bodyLen],
		Topic:                     decodeTopic(rec[l.topic:l.topic+l.topicLen], opts.Topics),
		Properties:                string(rec[l.props : l.props+l.propsLen]),
	}
	if opts.VerifyCRC {
		if got := BodyCRC(m.Body); got != m.BodyCRC {
			return m, fmt.Errorf("%w: stored %#x, computed %#x", ErrCRC, m.BodyCRC, got)
		}
	}
	return m, nil
}

// decodeHost decodes 8 (IPv4) or 20 (IPv6) bytes: address then int32 port.
// A port outside 0..65535 keeps its low 16 bits.
func decodeHost(b []byte) netip.AddrPort {
	var a netip.Addr
	if len(b) == 20 {
		a = netip.AddrFrom16([16]byte(b[:16]))
	} else {
		a = netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrPortFrom(a, uint16(binary.BigEndian.Uint32(b[len(b)-4:])))
}

// hostBytes returns the address bytes to store for h: 4 for IPv4 (and
// IPv4-mapped IPv6, as Java does), 16 for IPv6, 4 zero bytes for an
// invalid address.
func hostIP(h netip.AddrPort) (ip [16]byte, n int) {
	a := h.Addr().Unmap()
	switch {
	case a.Is4():
		v := a.As4()
		copy(ip[:], v[:])
		return ip, 4
	case a.Is6():
		return a.As16(), 16
	default:
		return ip, 4
	}
}

// EncodedSize returns the size of the record Encode would produce for m.
func EncodedSize(m *Message) (int, error) {
	_, _, size, err := encodePlan(m, 0)
	return size, err
}

// encodePlan chooses the magic and sysFlag and computes the record size,
// for properties extraProps bytes longer than m's (the CRC property's
// reserve).
func encodePlan(m *Message, extraProps int) (magic uint32, sysFlag int32, size int, err error) {
	tl := len(m.Topic)
	if tl == 0 || tl > maxTopicLenV2 {
		return 0, 0, 0, fmt.Errorf("%w: %d bytes", ErrTopicTooLong, tl)
	}
	if pl := len(m.Properties) + extraProps; pl > maxPropertiesLen {
		return 0, 0, 0, fmt.Errorf("%w: %d bytes", ErrPropertiesTooLarge, pl)
	}
	magic = MagicV1
	topicLenWidth := 1
	if tl > maxTopicLenV1 || m.Magic == MagicV2 {
		magic, topicLenWidth = MagicV2, 2
	}
	sysFlag = m.SysFlag &^ (FlagBornHostV6 | FlagStoreHostV6)
	if _, n := hostIP(m.BornHost); n == 16 {
		sysFlag |= FlagBornHostV6
	}
	if _, n := hostIP(m.StoreHost); n == 16 {
		sysFlag |= FlagStoreHostV6
	}
	size = minRecordV1V4V4 - 1 + topicLenWidth + len(m.Body) + tl + len(m.Properties) + extraProps
	size += hostLen(sysFlag, FlagBornHostV6) - 8 + hostLen(sysFlag, FlagStoreHostV6) - 8
	if int64(size) > 1<<31-1 {
		return 0, 0, 0, fmt.Errorf("%w: record of %d bytes", ErrMessageTooLarge, size)
	}
	return magic, sysFlag, size, nil
}

// AppendRecord encodes m as a record and appends it to dst, returning the
// extended slice. It picks V1, or V2 when the topic is longer than 127
// bytes (RocketMQ's autoMessageVersionOnTopicLen) or m.Magic is MagicV2;
// sets the host V6 sysFlag bits from the address families (IPv4-mapped IPv6
// is stored as IPv4); and computes TOTALSIZE and the body CRC. It allocates
// only when dst lacks capacity.
func AppendRecord(dst []byte, m *Message) ([]byte, error) {
	return appendRecord(dst, m, false)
}

// appendRecord is AppendRecord; with propCRC the properties end with the
// room for the CRC property (a 0x02 first when m's do not end with one,
// see propCRCReserve), zeroed, for putPropCRC to fill once every other
// byte of the record is final.
func appendRecord(dst []byte, m *Message, propCRC bool) ([]byte, error) {
	extra := 0
	if propCRC {
		extra = propCRCReserve(m.Properties)
	}
	magic, sysFlag, size, err := encodePlan(m, extra)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = grow(dst, size)
	rec := dst[start : start+size]
	be := binary.BigEndian
	be.PutUint32(rec[posTotalSize:], uint32(size))
	be.PutUint32(rec[posMagic:], magic)
	be.PutUint32(rec[posBodyCRC:], BodyCRC(m.Body))
	be.PutUint32(rec[posQueueID:], uint32(m.QueueID))
	be.PutUint32(rec[posFlag:], uint32(m.Flag))
	be.PutUint64(rec[posQueueOffset:], uint64(m.QueueOffset))
	be.PutUint64(rec[posPhyOffset:], uint64(m.PhyOffset))
	be.PutUint32(rec[posSysFlag:], uint32(sysFlag))
	be.PutUint64(rec[posBornTimestamp:], uint64(m.BornTimestamp))
	p := putHost(rec, posBornHost, m.BornHost)
	be.PutUint64(rec[p:], uint64(m.StoreTimestamp))
	p = putHost(rec, p+8, m.StoreHost)
	be.PutUint32(rec[p:], uint32(m.ReconsumeTimes))
	be.PutUint64(rec[p+4:], uint64(m.PreparedTransactionOffset))
	p += 12
	be.PutUint32(rec[p:], uint32(len(m.Body)))
	p += 4
	p += copy(rec[p:], m.Body)
	if magic == MagicV1 {
		rec[p] = byte(len(m.Topic))
		p++
	} else {
		be.PutUint16(rec[p:], uint16(len(m.Topic)))
		p += 2
	}
	p += copy(rec[p:], m.Topic)
	be.PutUint16(rec[p:], uint16(len(m.Properties)+extra))
	p += 2
	p += copy(rec[p:], m.Properties)
	if extra > PropCRCReservedLen {
		rec[p] = PropertySeparator
		p++
	}
	clear(rec[p:])
	return dst, nil
}

// grow extends b by n bytes, reallocating only when capacity is short.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, 2*cap(b)+n)
	copy(nb, b)
	return nb
}

func putHost(rec []byte, p int, h netip.AddrPort) int {
	ip, n := hostIP(h)
	copy(rec[p:], ip[:n])
	binary.BigEndian.PutUint32(rec[p+n:], uint32(h.Port()))
	return p + n + 4
}

// Encoder encodes messages into a buffer it reuses, so that steady-state
// encoding does not allocate. An Encoder is not safe for concurrent use.
type Encoder struct {
	buf []byte
}

// Encode encodes m (see AppendRecord). The result aliases the Encoder's
// buffer and is valid until the next call.
func (e *Encoder) Encode(m *Message) ([]byte, error) {
	b, err := AppendRecord(e.buf[:0], m)
	if err != nil {
		return nil, err
	}
	e.buf = b
	return b, nil
}

// PatchQueueOffset overwrites QUEUEOFFSET of the encoded record rec.
func PatchQueueOffset(rec []byte, queueOffset int64) {
	binary.BigEndian.PutUint64(rec[posQueueOffset:], uint64(queueOffset))
}

// PhyOffsetOf returns the physical offset field of an encoded record; ok
// is false when rec is too short to hold one.
func PhyOffsetOf(rec []byte) (off int64, ok bool) {
	if len(rec) < posPhyOffset+8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(rec[posPhyOffset:])), true
}

// PatchPhyOffset overwrites PHYSICALOFFSET of the encoded record rec.
func PatchPhyOffset(rec []byte, phyOffset int64) {
	binary.BigEndian.PutUint64(rec[posPhyOffset:], uint64(phyOffset))
}

// PatchStoreTimestamp overwrites STORETIMESTAMP of the encoded record rec.
// Its position depends on the born host width, read from rec's SYSFLAG.
func PatchStoreTimestamp(rec []byte, storeTimestamp int64) {
	sf := int32(binary.BigEndian.Uint32(rec[posSysFlag:]))
	binary.BigEndian.PutUint64(rec[storeTimestampPos(sf):], uint64(storeTimestamp))
}

// recordSysFlag returns the SYSFLAG of an encoded record.
func recordSysFlag(rec []byte) int32 { return int32(binary.BigEndian.Uint32(rec[posSysFlag:])) }

// recordStoreTimestamp returns the STORETIMESTAMP of an encoded record.
func recordStoreTimestamp(rec []byte) int64 {
	return int64(binary.BigEndian.Uint64(rec[storeTimestampPos(recordSysFlag(rec)):]))
}

// recordPhyOffset returns the PHYSICALOFFSET of an encoded record.
func recordPhyOffset(rec []byte) int64 { return int64(binary.BigEndian.Uint64(rec[posPhyOffset:])) }

// MaxPropertiesLen is the longest properties string a record holds (its
// length is a 2-byte signed field).
const MaxPropertiesLen = 32767

// TopicAndProperties returns the topic and the properties of the record at
// rec[0], aliasing rec, without decoding the rest. Errors are Decode's
// (ErrBlank, ErrTruncated, ErrBadMagic, ErrCorrupt).
func TopicAndProperties(rec []byte) (topic, props []byte, err error) {
	l, err := parse(rec)
	if err != nil {
		return nil, nil, err
	}
	return rec[l.topic : l.topic+l.topicLen], rec[l.props : l.props+l.propsLen], nil
}

// AppendWithProperties appends to dst the record at rec[0] with props in
// place of its properties: every other byte as stored (the body CRC, the
// offsets, the hosts and flags), TOTALSIZE and the properties length
// those of props. Errors are Decode's, or ErrCorrupt for props longer
// than a record holds (32767 bytes).
func AppendWithProperties(dst, rec []byte, props string) ([]byte, error) {
	l, err := parse(rec)
	if err != nil {
		return dst, err
	}
	if len(props) > math.MaxInt16 {
		return dst, fmt.Errorf("%w: %d bytes of properties, at most %d", ErrCorrupt, len(props), math.MaxInt16)
	}
	start := len(dst)
	dst = append(dst, rec[:l.props-2]...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(props)))
	dst = append(dst, props...)
	binary.BigEndian.PutUint32(dst[start+posTotalSize:], uint32(len(dst)-start))
	return dst, nil
}

// PatchPreparedTransactionOffset overwrites the PreparedTransactionOffset
// field of the encoded record rec (its place depends on the host widths).
// Errors are Decode's.
func PatchPreparedTransactionOffset(rec []byte, off int64) error {
	l, err := parse(rec)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint64(rec[l.prepared:], uint64(off))
	return nil
}

package commitlog

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The property CRC (RocketMQ 5's enabledAppendPropCRC and
// forceVerifyPropCRC). With Config.AppendPropCRC every appended record
// ends with one more property, in the last PropCRCReservedLen bytes of
// the record:
//
//	+----------+------+----------------------------+------+
//	| __CRC32# | 0x01 | 10 ASCII digits            | 0x02 |
//	+----------+------+----------------------------+------+
//	 8 bytes    1      10                           1      = 20 bytes
//
// The digits are the decimal value of CRC-32 IEEE, masked with 0x7FFFFFFF,
// of the record's bytes [0, TOTALSIZE-20): every field, the offsets and
// the store timestamp included, up to the property. The least significant
// digit comes first and '0's fill the right (123 is "3210000000").
// PROPLEN counts the 20 bytes; when the properties before them are not
// empty and do not end with 0x02, a 0x02 is put between.

// PropertyCRC32 is the property that holds a record's CRC
// (MessageConst.PROPERTY_CRC32).
const PropertyCRC32 = "__CRC32#"

// PropCRCReservedLen is the size of the CRC property at the end of a
// record's properties: key, 0x01, ten digits, 0x02 (CommitLog's
// CRC32_RESERVED_LEN).
const PropCRCReservedLen = len(PropertyCRC32) + 1 + 10 + 1

// propCRCDigits is the number of decimal digits of the property's value.
const propCRCDigits = 10

// PropCRC returns the CRC the property of the record rec holds when it is
// right: CRC-32 IEEE of rec[:len(rec)-PropCRCReservedLen] masked with
// 0x7FFFFFFF. rec must be exactly one record of at least
// PropCRCReservedLen bytes.
func PropCRC(rec []byte) uint32 {
	return crc32.ChecksumIEEE(rec[:len(rec)-PropCRCReservedLen]) & 0x7FFFFFFF
}

// putPropCRC writes the CRC property of the record rec (exactly one
// record, its last PropCRCReservedLen bytes reserved for it) over those
// bytes. It allocates nothing.
func putPropCRC(rec []byte) {
	formatPropCRC(rec[len(rec)-PropCRCReservedLen:], PropCRC(rec))
}

// formatPropCRC writes the CRC property of value crc into t, which is
// PropCRCReservedLen bytes long (MessageDecoder.createCrc32).
func formatPropCRC(t []byte, crc uint32) {
	n := copy(t, PropertyCRC32)
	t[n] = NameValueSeparator
	n++
	for i := 0; i < propCRCDigits; i++ {
		t[n+i] = '0' + byte(crc%10)
		crc /= 10
	}
	t[n+propCRCDigits] = PropertySeparator
}

// propCRCReserve returns how many bytes the CRC property adds to the
// properties props: a 0x02 when props is not empty and does not end with
// one, and the property itself.
func propCRCReserve(props string) int {
	if props != "" && props[len(props)-1] != PropertySeparator {
		return 1 + PropCRCReservedLen
	}
	return PropCRCReservedLen
}

// propCRCValue reads the value of a CRC property as RocketMQ's recovery
// does: the characters taken as decimal digits, the last one the most
// significant, in Java int arithmetic (it wraps). A character that is no
// digit counts as its code minus '0', as Java's does; the value is walked
// as Java's UTF-16 characters (an invalid UTF-8 byte reads as U+FFFD).
// Any value but RocketMQ's ten digits is, in practice, a mismatch.
func propCRCValue(v []byte) int32 {
	var e int32
	for i := len(v); i > 0; {
		r, size := utf8.DecodeLastRune(v[:i])
		i -= size
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			e = e*10 + int32(lo) - '0'
			e = e*10 + int32(hi) - '0'
			continue
		}
		e = e*10 + int32(r) - '0'
	}
	return e
}

// lookupPropertyBytes is LookupProperty on the bytes of a record's
// properties, without allocating.
func lookupPropertyBytes(props []byte, key string) ([]byte, bool) {
	var val []byte
	found := false
	for i := 0; i < len(props); {
		end := bytes.IndexByte(props[i:], PropertySeparator)
		if end < 0 {
			end = len(props)
		} else {
			end += i
		}
		seg := props[i:end]
		if sep := bytes.IndexByte(seg, NameValueSeparator); sep > 0 && sep < len(seg)-1 && string(seg[:sep]) == key {
			val, found = seg[sep+1:], true
		}
		i = end + 1
	}
	return val, found
}

// CheckPropCRC validates the record at b[0] as Check does, but in place
// of the body CRC it verifies the record's CRC property, as RocketMQ's
// recovery does with forceVerifyPropCRC (and checkCRCOnRecover): the
// value of the last __CRC32# property (ParseProperties' rules) must be
// PropCRC of the record. A record without the property fails, as it does
// in RocketMQ, whatever else it holds: under forceVerifyPropCRC a record
// appended without enabledAppendPropCRC ends the recovered log. Errors:
// Check's, and ErrPropCRC for a property that is missing, not a number
// or not the record's CRC. It allocates nothing.
func CheckPropCRC(b []byte) (int32, error) {
	l, err := parse(b)
	if err != nil {
		return checkFailed(b, err)
	}
	rec := b[:l.size]
	v, ok := lookupPropertyBytes(rec[l.props:l.props+l.propsLen], PropertyCRC32)
	if !ok {
		return 0, fmt.Errorf("%w: no %s property", ErrPropCRC, PropertyCRC32)
	}
	want := propCRCValue(v)
	if want < 0 {
		// RocketMQ takes a negative value for no value at all.
		return 0, fmt.Errorf("%w: %s value %q reads as %d", ErrPropCRC, PropertyCRC32, v, want)
	}
	if got := PropCRC(rec); uint32(want) != got {
		return 0, fmt.Errorf("%w: property says %d, the record's CRC is %d", ErrPropCRC, want, got)
	}
	return int32(l.size), nil
}

// dropPropCRC returns props without its __CRC32# properties, as
// RocketMQ's single-message put drops them before it appends its own
// (MessageUtils.deleteProperty): each "__CRC32#" that starts the string
// or follows a 0x02 and is followed by 0x01 is cut up to and including
// the next 0x02 (to the end when there is none). The rest is kept byte
// for byte. It allocates only when there is something to cut.
func dropPropCRC(props string) string {
	const key = PropertyCRC32 + string(NameValueSeparator)
	if !strings.Contains(props, key) {
		return props
	}
	var b strings.Builder
	from := 0 // start of what is not copied yet
	for i := 0; ; {
		j := strings.Index(props[i:], key)
		if j < 0 {
			break
		}
		j += i
		if j > 0 && props[j-1] != PropertySeparator {
			i = j + len(PropertyCRC32)
			continue
		}
		b.WriteString(props[from:j])
		end := strings.IndexByte(props[j+len(key):], PropertySeparator)
		if end < 0 {
			return b.String()
		}
		from = j + len(key) + end + 1
		i = from
	}
	b.WriteString(props[from:])
	return b.String()
}

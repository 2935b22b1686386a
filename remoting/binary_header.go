package remoting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrBadBinaryHeader is returned (wrapped, with details) when a ROCKETMQ
// binary header is shorter than its fixed part or one of its lengths points
// outside the header.
var ErrBadBinaryHeader = errors.New("bad ROCKETMQ header")

// ErrNotEncodable is returned by Encode when a command cannot be written in
// the requested header encoding: a code or version outside int16 in a
// ROCKETMQ header, or a key longer than 32767 bytes.
var ErrNotEncodable = errors.New("command not encodable")

// binaryFixedLen is the size of the fixed part of a ROCKETMQ header: code 2,
// language 1, version 2, opaque 4, flag 4, remark length 4, ext length 4.
const binaryFixedLen = 21

// appendBinaryHeader appends the ROCKETMQ header of c to dst. Ext fields are
// written in key order so the output is deterministic.
func appendBinaryHeader(dst []byte, c *Command) ([]byte, error) {
	if c.Code < math.MinInt16 || c.Code > math.MaxInt16 {
		return dst, fmt.Errorf("%w: code %d does not fit the int16 of a ROCKETMQ header", ErrNotEncodable, c.Code)
	}
	if c.Version < math.MinInt16 || c.Version > math.MaxInt16 {
		return dst, fmt.Errorf("%w: version %d does not fit the int16 of a ROCKETMQ header", ErrNotEncodable, c.Version)
	}
	lang := c.Language
	if lang == "" {
		lang = DefaultLanguage
	}
	langCode, _ := LanguageCode(lang)
	dst = binary.BigEndian.AppendUint16(dst, uint16(int16(c.Code)))
	dst = append(dst, langCode)
	dst = binary.BigEndian.AppendUint16(dst, uint16(int16(c.Version)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Opaque))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Remark)))
	dst = append(dst, c.Remark...)
	extLenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for k, v := range c.ExtFields { // in the map's order, as appendJSONHeader
		if len(k) > math.MaxInt16 {
			return dst, fmt.Errorf("%w: ext field key of %d bytes", ErrNotEncodable, len(k))
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	binary.BigEndian.PutUint32(dst[extLenAt:], uint32(len(dst)-extLenAt-4))
	return dst, nil
}

// decodeBinaryHeader fills the header fields of c from a ROCKETMQ header.
// Code and version are read as signed int16, as Java does. Bytes after the
// ext-field area are ignored, as Java ignores them.
func decodeBinaryHeader(h []byte, c *Command) error {
	if len(h) < binaryFixedLen {
		return fmt.Errorf("%w: %d bytes, the fixed part alone is %d", ErrBadBinaryHeader, len(h), binaryFixedLen)
	}
	c.Code = int32(int16(binary.BigEndian.Uint16(h[0:])))
	c.Language = LanguageName(h[2])
	c.Version = int32(int16(binary.BigEndian.Uint16(h[3:])))
	c.Opaque = int32(binary.BigEndian.Uint32(h[5:]))
	c.Flag = int32(binary.BigEndian.Uint32(h[9:]))
	p := 13
	remarkLen := int64(int32(binary.BigEndian.Uint32(h[p:])))
	p += 4
	if remarkLen < 0 || remarkLen > int64(len(h)-p-4) {
		return fmt.Errorf("%w: remark length %d with %d header bytes left", ErrBadBinaryHeader, remarkLen, len(h)-p)
	}
	c.Remark = string(h[p : p+int(remarkLen)])
	p += int(remarkLen)
	extLen := int64(int32(binary.BigEndian.Uint32(h[p:])))
	p += 4
	if extLen < 0 || extLen > int64(len(h)-p) {
		return fmt.Errorf("%w: ext-field area of %d bytes with %d header bytes left", ErrBadBinaryHeader, extLen, len(h)-p)
	}
	if extLen == 0 {
		return nil
	}
	area := h[p : p+int(extLen)]
	c.ExtFields = make(map[string]string, extFieldsHint)
	for q := 0; q < len(area); {
		if len(area)-q < 2 {
			return fmt.Errorf("%w: truncated ext key length at ext offset %d", ErrBadBinaryHeader, q)
		}
		kl := int(int16(binary.BigEndian.Uint16(area[q:])))
		q += 2
		if kl < 0 || kl > len(area)-q {
			return fmt.Errorf("%w: ext key length %d at ext offset %d", ErrBadBinaryHeader, kl, q-2)
		}
		k := string(area[q : q+kl])
		q += kl
		if len(area)-q < 4 {
			return fmt.Errorf("%w: truncated ext value length for key %q", ErrBadBinaryHeader, k)
		}
		vl := int64(int32(binary.BigEndian.Uint32(area[q:])))
		q += 4
		if vl < 0 || vl > int64(len(area)-q) {
			return fmt.Errorf("%w: ext value length %d for key %q", ErrBadBinaryHeader, vl, k)
		}
		c.ExtFields[k] = string(area[q : q+int(vl)])
		q += int(vl)
	}
	return nil
}

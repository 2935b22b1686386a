package commitlog

import (
	"encoding/binary"
	"fmt"
)

// BatchItem is one message of a client batch-send body.
type BatchItem struct {
	// Magic and BodyCRC are what the client sent (clients send 0; the
	// broker computes the CRC itself).
	Magic   int32
	BodyCRC int32
	// Flag is the message's user flag.
	Flag int32
	// Body aliases the batch body passed to DecodeBatch.
	Body []byte
	// Properties is the message's own raw properties string.
	Properties string
}

// batchItemOverhead is the size of the fixed fields of a batch item:
// total, magic, body CRC, flag, body length (4 each) and properties length (2).
const batchItemOverhead = 22

// DecodeBatch splits a batch-send body (request code 320, batch=true) into
// its messages. Each item is
//
//	[total:4][magic:4][bodyCRC:4][flag:4][bodyLen:4][body][propLen:2][props]
//
// with total == 22 + bodyLen + propLen. Bodies alias body; properties are
// copied. Errors wrap ErrTruncated (an item runs past the end) or
// ErrCorrupt (a length does not add up); DecodeBatch never panics.
func DecodeBatch(body []byte) ([]BatchItem, error) {
	var items []BatchItem
	be := binary.BigEndian
	for p := 0; p < len(body); {
		rest := body[p:]
		if len(rest) < batchItemOverhead {
			return nil, fmt.Errorf("batch item %d at %d: %w: %d bytes left", len(items), p, ErrTruncated, len(rest))
		}
		total := int64(int32(be.Uint32(rest)))
		if total < batchItemOverhead {
			return nil, fmt.Errorf("batch item %d at %d: %w: total size %d", len(items), p, ErrCorrupt, total)
		}
		if total > int64(len(rest)) {
			return nil, fmt.Errorf("batch item %d at %d: %w: total size %d, %d bytes left", len(items), p, ErrTruncated, total, len(rest))
		}
		it := rest[:total]
		bodyLen := int64(int32(be.Uint32(it[16:])))
		if bodyLen < 0 || bodyLen > total-batchItemOverhead {
			return nil, fmt.Errorf("batch item %d at %d: %w: body length %d in an item of %d bytes", len(items), p, ErrCorrupt, bodyLen, total)
		}
		q := 20 + int(bodyLen)
		propLen := int64(int16(be.Uint16(it[q:])))
		if propLen < 0 || 20+bodyLen+2+propLen != total {
			return nil, fmt.Errorf("batch item %d at %d: %w: total size %d, fields add up to %d", len(items), p, ErrCorrupt, total, 22+bodyLen+propLen)
		}
		items = append(items, BatchItem{
			Magic:      int32(be.Uint32(it[4:])),
			BodyCRC:    int32(be.Uint32(it[8:])),
			Flag:       int32(be.Uint32(it[12:])),
			Body:       it[20:q:q],
			Properties: string(it[q+2 : total]),
		})
		p += int(total)
	}
	return items, nil
}

// AppendBatchItem encodes one batch item (the client side of DecodeBatch)
// and appends it to dst. Properties longer than 32,767 bytes are refused.
func AppendBatchItem(dst []byte, flag int32, body []byte, properties string) ([]byte, error) {
	if len(properties) > maxPropertiesLen {
		return dst, fmt.Errorf("%w: %d bytes", ErrPropertiesTooLarge, len(properties))
	}
	total := batchItemOverhead + len(body) + len(properties)
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(total))
	dst = be.AppendUint32(dst, 0)
	dst = be.AppendUint32(dst, 0)
	dst = be.AppendUint32(dst, uint32(flag))
	dst = be.AppendUint32(dst, uint32(len(body)))
	dst = append(dst, body...)
	dst = be.AppendUint16(dst, uint16(len(properties)))
	return append(dst, properties...), nil
}

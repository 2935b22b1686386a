package commitlog

import "unicode/utf8"

// TagsCode returns the ConsumeQueue tag code of a TAGS value: Java's
// String.hashCode (h = 31*h + c over UTF-16 code units, int32 arithmetic)
// sign-extended to int64; 0 for the empty string. Runes above U+FFFF count
// as their two surrogates. Invalid UTF-8 bytes count as U+FFFD each (Java's
// decoder may group a malformed sequence differently).
func TagsCode(tags string) int64 {
	var h int32
	for i := 0; i < len(tags); {
		c := tags[i]
		if c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(tags[i:])
		i += n
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return int64(h)
}

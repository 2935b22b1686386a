package commitlog

import (
	"iter"
	"sort"
	"strconv"
	"strings"
)

// Separators of the properties string.
const (
	// NameValueSeparator (0x01) separates a key from its value.
	NameValueSeparator = '\x01'
	// PropertySeparator (0x02) separates (and may terminate) pairs.
	PropertySeparator = '\x02'
)

// Property names the storage layer and the dispatcher read.
const (
	PropertyTags   = "TAGS"
	PropertyKeys   = "KEYS"
	PropertyUniqID = "UNIQ_KEY"
	PropertyWait   = "WAIT"
	// PropertyRealTopic and PropertyRealQueueID name where a message
	// parked in a system topic (delay level, timer, transaction half) is
	// bound.
	PropertyRealTopic   = "REAL_TOPIC"
	PropertyRealQueueID = "REAL_QID"
	// PropertyInnerNum is how many messages a record of a BatchCQ topic
	// stands for (with FlagInnerBatch).
	PropertyInnerNum = "INNER_NUM"
)

// RealDestination returns the topic and queue a parked message is bound
// for (its REAL_TOPIC and REAL_QID); ok is false when either is missing
// or not valid.
func RealDestination(props string) (topic string, queueID int32, ok bool) {
	topic, _ = LookupProperty(props, PropertyRealTopic)
	qs, _ := LookupProperty(props, PropertyRealQueueID)
	q, err := strconv.ParseInt(qs, 10, 32)
	if topic == "" || err != nil || q < 0 {
		return "", 0, false
	}
	return topic, int32(q), true
}

// nextPair returns the key and value of the segment of props starting at
// i, and the start of the next segment. ok is false when the segment is
// not a valid pair: RocketMQ keeps a segment only if its first 0x01 lies
// strictly inside it (non-empty key and non-empty value).
func nextPair(props string, i int) (key, value string, next int, ok bool) {
	end := strings.IndexByte(props[i:], PropertySeparator)
	if end < 0 {
		end = len(props)
	} else {
		end += i
	}
	seg := props[i:end]
	if sep := strings.IndexByte(seg, NameValueSeparator); sep > 0 && sep < len(seg)-1 {
		return seg[:sep], seg[sep+1:], end + 1, true
	}
	return "", "", end + 1, false
}

// ParseProperties parses a properties string with RocketMQ's rules
// (string2messageProperties): split on 0x02; keep a segment only if its
// first 0x01 falls strictly inside it (key and value not empty; the value
// may contain further 0x01 bytes); later duplicates win. A trailing 0x02 is
// accepted but not required.
func ParseProperties(props string) map[string]string {
	m := make(map[string]string)
	for i := 0; i < len(props); {
		k, v, next, ok := nextPair(props, i)
		if ok {
			m[k] = v
		}
		i = next
	}
	return m
}

// LookupProperty returns the value of key in props without building a
// map or allocating, with the same rules as ParseProperties (the last
// occurrence wins).
func LookupProperty(props, key string) (string, bool) {
	var val string
	found := false
	for i := 0; i < len(props); {
		k, v, next, ok := nextPair(props, i)
		if ok && k == key {
			val, found = v, true
		}
		i = next
	}
	return val, found
}

// PropertyPairs yields the pairs of props in their order, with the rules of
// ParseProperties (a pair without a key or a value is skipped; a key that
// repeats is yielded again, the last one being the one that counts). It
// reads the string once where several LookupProperty calls would each
// scan all of it.
func PropertyPairs(props string) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for i := 0; i < len(props); {
			k, v, next, ok := nextPair(props, i)
			if ok && !yield(k, v) {
				return
			}
			i = next
		}
	}
}

// FormatProperties builds a properties string from m: keys in sorted
// order, each pair written as key 0x01 value 0x02 (so the result always
// ends with 0x02, like RocketMQ 4.4.0 and the Java client). Pairs with an
// empty key or value are skipped, since no reader would keep them. Keys and
// values must not contain 0x01 or 0x02 in the key, nor 0x02 in the value.
func FormatProperties(m map[string]string) string {
	keys := make([]string, 0, len(m))
	n := 0
	for k, v := range m {
		if k == "" || v == "" {
			continue
		}
		keys = append(keys, k)
		n += len(k) + len(v) + 2
	}
	sort.Strings(keys)
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(NameValueSeparator)
		b.WriteString(m[k])
		b.WriteByte(PropertySeparator)
	}
	return b.String()
}

// RewriteProperties returns props without the keys drop names (and
// without the keys set names), followed by the pairs of set in order, in
// one pass and one allocation. The client's order of the pairs it keeps is
// preserved, so an unchanged message is stored as sent. Pairs of set with
// an empty value are left out.
func RewriteProperties(props string, drop []string, set ...[2]string) string {
	skip := func(k string) bool {
		for _, d := range drop {
			if k == d {
				return true
			}
		}
		for _, s := range set {
			if k == s[0] {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	b.Grow(len(props) + 64)
	pair := func(k, v string) {
		b.WriteString(k)
		b.WriteByte(NameValueSeparator)
		b.WriteString(v)
		b.WriteByte(PropertySeparator)
	}
	for i := 0; i < len(props); {
		k, v, next, ok := nextPair(props, i)
		if ok && !skip(k) {
			pair(k, v)
		}
		i = next
	}
	for _, s := range set {
		if s[0] != "" && s[1] != "" {
			pair(s[0], s[1])
		}
	}
	return b.String()
}

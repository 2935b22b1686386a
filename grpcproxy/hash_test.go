package grpcproxy

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestJavaStringHash checks groupHash against Java's String.hashCode,
// s[0]*31^(n-1) + s[1]*31^(n-2) + ... + s[n-1] over UTF-16 code units in
// int32 arithmetic, with values derived by hand from that definition (and
// well-known Java values for the overflowing cases).
func TestJavaStringHash(t *testing.T) {
	tests := []struct {
		name string
		s    string
		want int32
	}{
		{"empty", "", 0},
		{"one ASCII letter", "a", 97},
		{"two letters: 97*31 + 98", "ab", 3105},
		{"three letters: 3105*31 + 99", "abc", 96354},
		{"hello", "hello", 99162322},
		{"overflows int32", "Hello World", -862545276},
		{"overflows to Integer.MIN_VALUE", "polygenelubricants", math.MinInt32},
		{"Latin-1 letter is one code unit U+00E9", "\u00e9", 233},
		{"BMP CJK: 0x4E2D*31 + 0x6587", "中文", 646394},
		// U+1F600 is the surrogate pair D83D DE00: 55357*31 + 56832.
		{"non-BMP emoji as a surrogate pair", "\U0001F600", 1772899},
		// ((97*31 + 55357)*31 + 56832)*31 + 98.
		{"surrogate pair between letters", "a\U0001F600b", 57849694},
		// U+10000 is D800 DC00: 55296*31 + 56320.
		{"first supplementary code point", "\U00010000", 1770496},
		// U+10FFFF is DBFF DFFF: 56319*31 + 57343.
		{"last code point", "\U0010FFFF", 1803232},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := int32(groupHash(tc.s)); got != tc.want {
				t.Fatalf("groupHash(%q) = %d, want %d", tc.s, got, tc.want)
			}
		})
	}
}

// TestConsistentHashGuavaGolden checks consistentHash against the golden
// values Guava publishes for Hashing.consistentHash(long, int)
// (HashingTest.testConsistentHash_linearCongruentialGeneratorCompatibility
// in google/guava), so that a message group picks the same queue through
// RocketMQ's proxy and this one.
func TestConsistentHashGuavaGolden(t *testing.T) {
	golden100 := []int{
		0, 55, 62, 8, 45, 59, 86, 97, 82, 59,
		73, 37, 17, 56, 86, 21, 90, 37, 38, 83,
	}
	for i, want := range golden100 {
		if got := consistentHash(int64(i), 100); got != want {
			t.Errorf("consistentHash(%d, 100) = %d, want %d", i, got, want)
		}
	}
	tests := []struct {
		input   int64
		buckets int
		want    int
	}{
		{10863919174838991, 11, 6},
		{2016238256797177309, 11, 3},
		{1673758223894951030, 11, 5},
		{2, 100001, 80343},
		{2201, 100001, 22152},
		{2202, 100001, 15018},
	}
	for _, tc := range tests {
		if got := consistentHash(tc.input, tc.buckets); got != tc.want {
			t.Errorf("consistentHash(%d, %d) = %d, want %d", tc.input, tc.buckets, got, tc.want)
		}
	}
}

// TestConsistentHashProperties checks what any jump consistent hash must
// do, over many inputs including the int64 extremes and the
// sign-extended Java hashes of message groups: the bucket lies in
// [0, buckets), one bucket is always 0, and growing from n to n+1 buckets
// either keeps a key's bucket or moves it to the new bucket n.
func TestConsistentHashProperties(t *testing.T) {
	inputs := []int64{0, 1, -1, 2, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32,
		groupHash("order-1"), groupHash("polygenelubricants")}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		inputs = append(inputs, int64(rng.Uint64()))
	}
	const maxBuckets = 300
	for _, in := range inputs {
		if got := consistentHash(in, 1); got != 0 {
			t.Fatalf("consistentHash(%d, 1) = %d, want 0", in, got)
		}
		prev := 0
		for n := 2; n <= maxBuckets; n++ {
			got := consistentHash(in, n)
			if got < 0 || got >= n {
				t.Fatalf("consistentHash(%d, %d) = %d, outside [0, %d)", in, n, got, n)
			}
			if got != prev && got != n-1 {
				t.Fatalf("consistentHash(%d, %d) = %d but consistentHash(%d, %d) = %d: a key may only stay or move to the new bucket %d",
					in, n-1, prev, in, n, got, n-1)
			}
			prev = got
		}
	}
}

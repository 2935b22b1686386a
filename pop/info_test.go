package pop

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The info parsers walk their input in place. These tests hold them to
// the plain reading of the format: split on ';', then on ' ' into
// exactly three parts, then the offsets on ','.

// splitInfoBySplit is the plain reading, for comparison.
func splitInfoBySplit(s string, fn func(key, value string) error) error {
	if s == "" {
		return nil
	}
	for _, one := range strings.Split(s, ";") {
		p := strings.Split(one, " ")
		if len(p) != 3 {
			return fmt.Errorf("%w: entry %q", ErrBadInfo, one)
		}
		if err := fn(p[0]+"@"+p[1], p[2]); err != nil {
			return err
		}
	}
	return nil
}

// parseMsgOffsetInfoBySplit is ParseMsgOffsetInfo by the plain reading.
func parseMsgOffsetInfoBySplit(s string) (map[string][]int64, error) {
	out := map[string][]int64{}
	err := splitInfoBySplit(s, func(k, v string) error {
		if _, dup := out[k]; dup {
			return fmt.Errorf("%w: duplicate %s", ErrBadInfo, k)
		}
		var offs []int64
		for _, o := range strings.Split(v, ",") {
			n, err := strconv.ParseInt(o, 10, 64)
			if err != nil {
				return fmt.Errorf("%w: offset %q", ErrBadInfo, o)
			}
			offs = append(offs, n)
		}
		out[k] = offs
		return nil
	})
	return out, err
}

// parseCountsBySplit is ParseStartOffsetInfo (bits 64) or
// ParseOrderCountInfo (bits 32) by the plain reading.
func parseCountsBySplit(s string, bits int) (map[string]int64, error) {
	out := map[string]int64{}
	err := splitInfoBySplit(s, func(k, v string) error {
		if _, dup := out[k]; dup {
			return fmt.Errorf("%w: duplicate %s", ErrBadInfo, k)
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return fmt.Errorf("%w: value %q", ErrBadInfo, v)
		}
		out[k] = n
		return nil
	})
	return out, err
}

// checkInfoParsers fails t when a parser and its plain reading disagree on
// s: on the maps when both succeed, on failing at all otherwise.
func checkInfoParsers(t *testing.T, s string) {
	t.Helper()
	agree := func(name string, got, want any, gotErr, wantErr error) {
		t.Helper()
		if (gotErr == nil) != (wantErr == nil) {
			t.Errorf("%s(%q): error %v, plain reading %v", name, s, gotErr, wantErr)
			return
		}
		if gotErr != nil {
			if !errors.Is(gotErr, ErrBadInfo) {
				t.Errorf("%s(%q): %v is not ErrBadInfo", name, s, gotErr)
			}
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s(%q) = %v, plain reading %v", name, s, got, want)
		}
	}
	widen := func(m map[string]int32) map[string]int64 {
		out := make(map[string]int64, len(m))
		for k, v := range m {
			out[k] = int64(v)
		}
		return out
	}
	so, soErr := ParseStartOffsetInfo(s)
	soWant, soWantErr := parseCountsBySplit(s, 64)
	agree("ParseStartOffsetInfo", so, soWant, soErr, soWantErr)
	mo, moErr := ParseMsgOffsetInfo(s)
	moWant, moWantErr := parseMsgOffsetInfoBySplit(s)
	agree("ParseMsgOffsetInfo", mo, moWant, moErr, moWantErr)
	oc, ocErr := ParseOrderCountInfo(s)
	ocWant, ocWantErr := parseCountsBySplit(s, 32)
	agree("ParseOrderCountInfo", widen(oc), ocWant, ocErr, ocWantErr)
}

func TestInfoParsersMatchPlainReading(t *testing.T) {
	for _, s := range []string{
		"", "0 1 2", "1 0 4,5;0 2 10,11,12", "0 qo2%10 1;0 2 0", "0 1 2;0 1 3",
		";", "0 1 2;", ";0 1 2", "0 1 2;;0 3 4", " ", "  ", "0 1", "0 1 2 3", "0  1 2", "0 1  2", " 0 1", "0 1 ",
		"0 1 4,", "0 1 ,4", "0 1 4,,5", "0 1 a", "0 1 99999999999", "0 1 -7", "a@b c d 5", "0 1 2\n",
		"0 1 9223372036854775807", "0 1 9223372036854775808",
	} {
		checkInfoParsers(t, s)
	}
}

func FuzzParseInfo(f *testing.F) {
	f.Add("1 0 4,5;0 2 10,11,12")
	f.Add("0 qo2%10 1;0 2 0")
	f.Add("0 1 2;;0  3 4,")
	f.Fuzz(func(t *testing.T, s string) {
		checkInfoParsers(t, s)
	})
}

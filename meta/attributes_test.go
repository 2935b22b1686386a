package meta

import (
	"reflect"
	"testing"
)

func TestParseAttributeModifications(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    map[string]string
		refusal string
	}{
		{"", map[string]string{}, ""},
		{"+message.type=FIFO,-reserve.time", map[string]string{"+message.type": "FIFO", "-reserve.time": ""}, ""},
		{"+a=1,", map[string]string{"+a": "1"}, ""}, // a trailing comma, as Java's split drops it
		{"a=1", nil, "add/alter attribute format is wrong: a"},
		{"+a=", nil, "add/alter attribute format is wrong: +a="},
		{"a", nil, "delete attribute format is wrong: a"},
		{"+a=1,,+b=2", nil, "delete attribute format is wrong: "},
		{"+a=1,+a=2", nil, "key duplication: +a"},
	} {
		got, refusal := ParseAttributeModifications(tc.in)
		if refusal != tc.refusal || (tc.refusal == "" && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("%q: %v %q, want %v %q", tc.in, got, refusal, tc.want, tc.refusal)
		}
	}
}

func TestAlterAttributes(t *testing.T) {
	current := map[string]string{"message.type": "FIFO", "queue.type": "SimpleCQ"}
	for _, tc := range []struct {
		name    string
		create  bool
		mods    map[string]string
		want    map[string]string
		refusal string
	}{
		{"create", true, map[string]string{"+message.type": "NORMAL", "+queue.type": "SimpleCQ"},
			map[string]string{"message.type": "NORMAL", "queue.type": "SimpleCQ"}, ""},
		{"create without attributes", true, nil, map[string]string{}, ""},
		{"change keeps the others", false, map[string]string{"+message.type": "DELAY"},
			map[string]string{"message.type": "DELAY", "queue.type": "SimpleCQ"}, ""},
		{"add", false, map[string]string{"+reserve.time": "3600"},
			map[string]string{"message.type": "FIFO", "queue.type": "SimpleCQ", "reserve.time": "3600"}, ""},
		{"remove", false, map[string]string{"-message.type": ""}, map[string]string{"queue.type": "SimpleCQ"}, ""},
		{"no modification keeps all", false, map[string]string{}, current, ""},
		{"remove on create", true, map[string]string{"-message.type": ""}, nil, "only add attribute is supported while creating topic. key: message.type"},
		{"remove what is not there", false, map[string]string{"-reserve.time": ""}, nil, "attempt to delete a nonexistent key: reserve.time"},
		{"no sign", false, map[string]string{"*message.type": "FIFO"}, nil, "wrong format key: message.type"},
		{"sign inside", true, map[string]string{"+a+b": "1"}, nil, "kv string format wrong."},
		{"empty name", true, map[string]string{"+": "1"}, nil, "kv string format wrong."},
		{"both signs", false, map[string]string{"+message.type": "FIFO", "-message.type": ""}, nil, "alter duplication key. key: message.type"},
		{"unknown", true, map[string]string{"+priority": "1"}, nil, "unsupported key: priority"},
		{"unchangeable", false, map[string]string{"+queue.type": "SimpleCQ"}, nil, "attempt to update an unchangeable attribute. key: queue.type"},
		{"remove an unchangeable one", false, map[string]string{"-queue.type": ""}, nil, "attempt to update an unchangeable attribute. key: queue.type"},
		{"value out of the set", true, map[string]string{"+message.type": "URGENT"}, nil,
			"value is not in set: [DELAY, FIFO, MIXED, NORMAL, TRANSACTION, UNSPECIFIED]"},
		{"value out of range", true, map[string]string{"+reserve.time": "-2"}, nil, "value is not in range(-1, 9223372036854775807)"},
		{"not a number", true, map[string]string{"+reserve.time": "soon"}, nil, `For input string: "soon"`},
		{"BatchCQ, which rocketkv cannot honour", true, map[string]string{"+queue.type": "BatchCQ"}, nil,
			"queue.type=BatchCQ is not supported by rocketkv: its ConsumeQueue holds one entry per message (SimpleCQ)"},
	} {
		cur := current
		if tc.create {
			cur = nil
		}
		got, refusal := AlterAttributes(tc.create, TopicAttributes, cur, tc.mods)
		if refusal != tc.refusal || (tc.refusal == "" && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("%s: %v %q, want %v %q", tc.name, got, refusal, tc.want, tc.refusal)
		}
	}
	if current["message.type"] != "FIFO" || len(current) != 2 {
		t.Fatalf("the current attributes were changed: %v", current)
	}
	// A group has no attribute at all.
	if _, refusal := AlterAttributes(true, GroupAttributes, nil, map[string]string{"+b": "1", "+a": "2"}); refusal != "unsupported key: a" {
		t.Fatalf("group attribute: %q", refusal)
	}
}

// FuzzAttributeModifications: any attributes header a client sends is
// parsed and applied, to a new topic or an existing one, without a panic;
// what is applied keeps only known attributes.
func FuzzAttributeModifications(f *testing.F) {
	for _, s := range []string{"", "+message.type=FIFO,-reserve.time", "+=", "-", ",,", "+a=b=c", "+queue.type=BatchCQ", "+reserve.time=9223372036854775808"} {
		f.Add(s)
	}
	current := map[string]string{"message.type": "FIFO", "queue.type": "SimpleCQ"}
	f.Fuzz(func(t *testing.T, s string) {
		mods, refusal := ParseAttributeModifications(s)
		if refusal != "" {
			return
		}
		for _, create := range []bool{true, false} {
			attrs, refusal := AlterAttributes(create, TopicAttributes, current, mods)
			if refusal != "" {
				continue
			}
			for k := range attrs {
				if _, ok := TopicAttributes[k]; !ok {
					t.Fatalf("%q applied an unknown attribute %q: %v", s, k, attrs)
				}
			}
		}
	})
}

package meta

import (
	"reflect"
	"testing"
)

func TestGroupForbiddenWith(t *testing.T) {
	cases := []struct {
		name        string
		topics      map[string]int
		topic       string
		on          bool
		want        map[string]int
		wantChanged bool
	}{
		{"forbid a new group", nil, "T", true, map[string]int{"T": 4}, true},
		{"forbid again", map[string]int{"T": 4}, "T", true, map[string]int{"T": 4}, false},
		{"keeps other bits", map[string]int{"T": 2}, "T", true, map[string]int{"T": 6}, true},
		{"allow drops the topic", map[string]int{"T": 4, "U": 4}, "T", false, map[string]int{"U": 4}, true},
		{"allow keeps other bits", map[string]int{"T": 6}, "T", false, map[string]int{"T": 2}, true},
		{"allow what was allowed", map[string]int{"U": 4}, "T", false, map[string]int{"U": 4}, false},
		{"negative reads as none", map[string]int{"T": -1}, "T", false, map[string]int{}, true},
		{"negative then forbid", map[string]int{"T": -1}, "T", true, map[string]int{"T": 4}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := GroupForbidden{Group: "G", Topics: c.topics}
			snapshot := map[string]int{}
			for k, v := range c.topics {
				snapshot[k] = v
			}
			got, changed := before.With(c.topic, ForbidReadIndex, c.on)
			if changed != c.wantChanged {
				t.Errorf("changed = %v, want %v", changed, c.wantChanged)
			}
			if len(got.Topics) != len(c.want) || (len(c.want) > 0 && !reflect.DeepEqual(got.Topics, c.want)) {
				t.Errorf("topics %v, want %v", got.Topics, c.want)
			}
			if got.Group != "G" {
				t.Errorf("group %q", got.Group)
			}
			if c.topics != nil && !reflect.DeepEqual(c.topics, snapshot) {
				t.Errorf("With modified its receiver: %v, was %v", c.topics, snapshot)
			}
			if got.Forbidden(c.topic, ForbidReadIndex) != c.on {
				t.Errorf("Forbidden(%q) = %v after With(%v)", c.topic, !c.on, c.on)
			}
		})
	}
}

func TestGroupForbiddenReadBitIsPermRead(t *testing.T) {
	f := GroupForbidden{Topics: map[string]int{"T": PermRead, "U": PermWrite}}
	if !f.Forbidden("T", ForbidReadIndex) || f.Forbidden("U", ForbidReadIndex) || f.Forbidden("V", ForbidReadIndex) {
		t.Errorf("read bit: T %v U %v V %v", f.Forbidden("T", ForbidReadIndex), f.Forbidden("U", ForbidReadIndex), f.Forbidden("V", ForbidReadIndex))
	}
}

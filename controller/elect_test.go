package controller

import "testing"

// TestElectPolicy checks DefaultElectPolicy's rules one by one.
func TestElectPolicy(t *testing.T) {
	live := map[int64]LiveInfo{
		1: {BrokerID: 1, Epoch: 3, MaxOffset: 100, ElectionPriority: 5},
		2: {BrokerID: 2, Epoch: 4, MaxOffset: 50, ElectionPriority: 5},
		3: {BrokerID: 3, Epoch: 4, MaxOffset: 80, ElectionPriority: 5},
		4: {BrokerID: 4, Epoch: 4, MaxOffset: 80, ElectionPriority: 1},
	}
	alive := map[int64]bool{1: true, 2: true, 3: true, 4: true}
	p := electPolicy{
		alive: func(_, _ string, id int64) bool { return alive[id] },
		live: func(_, _ string, id int64) (LiveInfo, bool) {
			l, ok := live[id]
			return l, ok
		},
	}
	for _, tc := range []struct {
		name      string
		sync, all []int64
		old       int64
		hasOld    bool
		prefer    int64
		hasPrefer bool
		dead      []int64
		want      int64
		ok        bool
	}{
		{name: "higher epoch beats larger offset", sync: []int64{1, 2}, want: 2, ok: true},
		{name: "same epoch: larger offset", sync: []int64{2, 3}, want: 3, ok: true},
		{name: "same epoch and offset: lower priority value", sync: []int64{3, 4}, want: 4, ok: true},
		{name: "alive old master stays", sync: []int64{1, 4}, old: 1, hasOld: true, want: 1, ok: true},
		{name: "dead old master replaced", sync: []int64{1, 2}, old: 1, hasOld: true, dead: []int64{1}, want: 2, ok: true},
		{name: "preferred broker wins", sync: []int64{1, 4}, old: 1, hasOld: true, prefer: 1, hasPrefer: true, want: 1, ok: true},
		{name: "preferred broker over old master", sync: []int64{1, 2}, old: 2, hasOld: true, prefer: 1, hasPrefer: true, want: 1, ok: true},
		{name: "dead preferred broker: nobody", sync: []int64{1, 2}, prefer: 1, hasPrefer: true, dead: []int64{1}, ok: false},
		{name: "nobody alive in sync, unclean off", sync: []int64{1}, dead: []int64{1}, ok: false},
		{name: "nobody alive in sync, unclean on", sync: []int64{1}, all: []int64{1, 2, 3}, dead: []int64{1}, want: 3, ok: true},
	} {
		for id := range alive {
			alive[id] = true
		}
		for _, id := range tc.dead {
			alive[id] = false
		}
		got, ok := p.elect("c", "b", tc.sync, tc.all, tc.old, tc.hasOld, tc.prefer, tc.hasPrefer)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("%s: got %d %v, want %d %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

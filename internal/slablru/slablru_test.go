package slablru

import (
	"math/rand"
	"slices"
	"testing"
)

// model is the reference: keys in recency order, most recent first.
type model struct {
	order []int
	vals  map[int]int
	cap   int
}

func (m *model) touch(k int) {
	m.order = slices.DeleteFunc(m.order, func(x int) bool { return x == k })
	m.order = append([]int{k}, m.order...)
}

func (m *model) remove(k int) {
	m.order = slices.DeleteFunc(m.order, func(x int) bool { return x == k })
	delete(m.vals, k)
}

// TestAgainstModel runs random operations on a Cache and on a plain
// reference and compares every answer and, after each step, the whole
// recency order.
func TestAgainstModel(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewSource(seed))
		capacity := 1 + rng.Intn(12)
		c := New[int, int](capacity)
		m := &model{vals: map[int]int{}, cap: capacity}
		for step := 0; step < 3000; step++ {
			k := rng.Intn(20)
			switch op := rng.Intn(8); op {
			case 0: // Get
				v, ok := c.Get(k)
				mv, mok := m.vals[k]
				if ok != mok || v != mv {
					t.Fatalf("seed %d step %d: Get(%d) = %d %v, want %d %v", seed, step, k, v, ok, mv, mok)
				}
				if ok {
					m.touch(k)
				}
			case 1: // Peek
				v, ok := c.Peek(k)
				mv, mok := m.vals[k]
				if ok != mok || v != mv {
					t.Fatalf("seed %d step %d: Peek(%d) = %d %v, want %d %v", seed, step, k, v, ok, mv, mok)
				}
			case 2, 3: // Add
				v := rng.Int()
				ok, ov, ev := c.Add(k, v)
				_, had := m.vals[k]
				var wantEv bool
				var wantK, wantV int
				if !had && len(m.vals) >= m.cap {
					wantEv, wantK = true, m.order[len(m.order)-1]
					wantV = m.vals[wantK]
					m.remove(wantK)
				}
				if ev != wantEv || (ev && (ok != wantK || ov != wantV)) {
					t.Fatalf("seed %d step %d: Add(%d) evicted %d=%d %v, want %d=%d %v", seed, step, k, ok, ov, ev, wantK, wantV, wantEv)
				}
				m.vals[k] = v
				m.touch(k)
			case 4: // Remove
				ok := c.Remove(k)
				_, mok := m.vals[k]
				if ok != mok {
					t.Fatalf("seed %d step %d: Remove(%d) = %v, want %v", seed, step, k, ok, mok)
				}
				m.remove(k)
			case 5: // Ref changes in place
				p, ok := c.Ref(k)
				_, mok := m.vals[k]
				if ok != mok {
					t.Fatalf("seed %d step %d: Ref(%d) = %v, want %v", seed, step, k, ok, mok)
				}
				if ok {
					*p += 7
					m.vals[k] += 7
					m.touch(k)
				}
			case 6: // Insert past the capacity, then EvictOldest of odd values
				c.Insert(k, 2*k+1)
				m.vals[k] = 2*k + 1
				m.touch(k)
				n, budget := 1+rng.Intn(3), 1+rng.Intn(6)
				got := c.EvictOldest(n, budget, func(_ int, v *int) bool { return *v%2 == 1 })
				want := 0
				for i := len(m.order) - 1; i >= 0 && want < n && budget > 0; i, budget = i-1, budget-1 {
					if kk := m.order[i]; m.vals[kk]%2 == 1 {
						m.remove(kk)
						want++
					}
				}
				if got != want {
					t.Fatalf("seed %d step %d: EvictOldest removed %d, want %d", seed, step, got, want)
				}
			case 7: // RemoveIf of one key residue
				r := rng.Intn(5)
				got := c.RemoveIf(func(kk, _ int) bool { return kk%5 == r })
				want := 0
				for _, kk := range slices.Clone(m.order) {
					if kk%5 == r {
						m.remove(kk)
						want++
					}
				}
				if got != want {
					t.Fatalf("seed %d step %d: RemoveIf removed %d, want %d", seed, step, got, want)
				}
			}
			if got := orderOf(c); !slices.Equal(got, m.order) {
				t.Fatalf("seed %d step %d: order %v, want %v", seed, step, got, m.order)
			}
			if c.Len() != len(m.vals) {
				t.Fatalf("seed %d step %d: Len %d, want %d", seed, step, c.Len(), len(m.vals))
			}
		}
	}
}

// orderOf walks the cache's links from the most recent entry, checking
// that the backward links agree.
func orderOf(c *Cache[int, int]) []int {
	out := []int{}
	prev := int32(none)
	for i := c.head; i != none; i = c.slots[i].next {
		if c.slots[i].prev != prev {
			panic("broken back link")
		}
		out = append(out, c.slots[i].key)
		prev = i
	}
	if prev != c.tail {
		panic("tail is not the last entry")
	}
	return out
}

// TestSlotsAreReused checks that removing and adding keeps the slice at
// the number of entries ever live at once, and Purge empties it.
func TestSlotsAreReused(t *testing.T) {
	c := New[int, int](4)
	for i := 0; i < 1000; i++ {
		c.Add(i, i)
	}
	if len(c.slots) != 4 || c.Len() != 4 {
		t.Fatalf("%d slots, %d entries after 1000 adds at capacity 4", len(c.slots), c.Len())
	}
	for i := 996; i < 1000; i++ {
		if v, ok := c.Peek(i); !ok || v != i {
			t.Fatalf("key %d: %d %v", i, v, ok)
		}
	}
	c.Purge()
	if c.Len() != 0 || len(c.slots) != 0 {
		t.Fatal("purge left entries")
	}
	c.Add(1, 1)
	if v, ok := c.Get(1); !ok || v != 1 {
		t.Fatal("add after purge")
	}
}

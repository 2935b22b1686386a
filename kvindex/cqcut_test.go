package kvindex

import "testing"

// A slave's CommitLog cut (Config.CutAt) below what the cq journal still
// covers (its records were pruned once the log was flushed past them, once
// a second) drops the ConsumeQueue entries of the records cut all the
// same: Truncate sweeps every queue when the journal does not reach back to
// the cut. Before, the entries stayed, the queue's next message took the
// offset after them, and consumers read other records at their offsets.
func TestACutBelowThePrunedJournalDropsTheEntriesPastIt(t *testing.T) {
	root := t.TempDir()
	cfg := layoutsConfig(root)
	s := openStack(t, root, cfg)
	s.put(t, "T", 0, 3)
	cut := s.log.MaxOffset()
	s.put(t, "T", 0, 3)
	if err := s.log.Flush(); err != nil {
		t.Fatal(err)
	}
	// What the dispatcher's prune loop does every PruneInterval.
	if err := s.store.(*CQ).PruneJournal(min(s.log.FlushedOffset(), s.disp.Dispatched())); err != nil {
		t.Fatal(err)
	}
	s.close(t)

	cfg.CutAt = cut
	s = openStack(t, root, cfg)
	defer s.close(t)
	if end := s.log.MaxOffset(); end != cut {
		t.Fatalf("log end %d, want the cut %d", end, cut)
	}
	maxOff, err := s.store.MaxOffset("T", 0)
	if err != nil {
		t.Fatal(err)
	}
	es, err := s.store.Get("T", 0, 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.PhyOffset >= cut {
			t.Errorf("entry %d points at %d, past the cut log's end %d", e.QueueOffset, e.PhyOffset, cut)
		}
	}
	if maxOff != 3 {
		t.Fatalf("queue max offset after the cut: %d, want 3", maxOff)
	}
}

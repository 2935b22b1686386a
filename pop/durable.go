package pop

import "github.com/rocketkv/rocketkv/kvindex"

// durability tracks what the commits of one request still need before
// it is answered. A request's last commit is made with CommitDurable:
// applied under the queue's lock, waited for after it, in one pass
// through the index's commit pipeline; commits before it need nothing
// more, since the write-ahead log is written in order. Only a commit made
// without a wait after the last durable one needs a flush of the log.
type durability struct {
	waits   []func() error
	pending bool
}

// unsynced notes a commit made without a wait.
func (d *durability) unsynced() { d.pending = true }

// durable notes a CommitDurable commit, whose wait also covers every
// commit before it.
func (d *durability) durable(wait func() error) {
	d.waits = append(d.waits, wait)
	d.pending = false
}

// finish waits for the durable commits, then flushes the log when a
// commit after them was made without a wait.
func (d *durability) finish(s *Service) error {
	var first error
	for _, w := range d.waits {
		if err := w(); err != nil && first == nil {
			first = err
		}
	}
	d.waits = nil
	if first == nil && d.pending {
		first = s.sync()
	}
	d.pending = false
	return first
}

// release waits for what finish did not (a request that failed half
// way), so every batch is released; errors are the request's to report.
func (d *durability) release() {
	for _, w := range d.waits {
		_ = w()
	}
	d.waits = nil
}

// commit commits b, durably when last is set (its wait left to finish),
// else without a wait. The caller closes b as usual, a deferred Close
// under the queue's lock included: the wait releases a durable batch.
func (d *durability) commit(b *kvindex.PopBatch, last bool) error {
	if !last {
		if err := b.Commit(false); err != nil {
			return err
		}
		d.unsynced()
		return nil
	}
	wait, err := b.CommitDurable()
	if err != nil {
		return err
	}
	d.durable(wait)
	return nil
}

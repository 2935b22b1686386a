package commitlog

import (
	"errors"
	"fmt"
)

// residencyChunk is how many pages one mincore call of SampledResidency
// covers (64 MiB of 4 KiB pages): the vector it fills is this long.
const residencyChunk = 16 << 10

// PageSize returns the size of the pages SampledResidency counts in.
func PageSize() int64 { return osPageSize }

// SampledResidency tells which parts of the log are in the page cache,
// as RocketMQ 5's ColdDataCheckService scans its CommitLog files for
// cold-data flow control: for each segment, oldest first, fn gets the
// segment's start offset and one byte for each group of step pages of
// its mapping (the whole segment, written or not), the mincore(2) byte of
// the group's first page, whose bit 0 is set when the page is in the page
// cache. A segment whose mincore fails is reported all in the page cache,
// as RocketMQ reports it, and the failure is in the error returned. fn
// may keep the slice. The segments are held (not deleted) during the
// scan; fn runs without the log's locks.
func (l *Log) SampledResidency(step int, fn func(start int64, sample []byte)) error {
	if l.closedFlag.Load() {
		return ErrClosed
	}
	step = max(step, 1)
	l.segsMu.RLock()
	segs := make([]*segment, len(l.segs))
	copy(segs, l.segs)
	for _, s := range segs {
		s.acquire()
	}
	l.segsMu.RUnlock()
	var errs []error
	vec := make([]byte, residencyChunk)
	for _, s := range segs {
		sample, err := s.sampledResidency(step, vec)
		s.release()
		if err != nil {
			errs = append(errs, err)
		}
		fn(s.start, sample)
	}
	return errors.Join(errs...)
}

// sampledResidency is SampledResidency for one segment, vec the scratch
// vector of one mincore call. The caller holds a reference.
func (s *segment) sampledResidency(step int, vec []byte) ([]byte, error) {
	pages := (int64(len(s.data)) + osPageSize - 1) / osPageSize
	out := make([]byte, (pages+int64(step)-1)/int64(step))
	for first := int64(0); first < pages; first += int64(len(vec)) {
		n := min(int64(len(vec)), pages-first)
		lo, hi := first*osPageSize, min((first+n)*osPageSize, int64(len(s.data)))
		if err := mincore(s.data[lo:hi], vec[:n]); err != nil {
			for i := range out {
				out[i] = 1
			}
			return out, fmt.Errorf("mincore of [%d, %d) in segment %s: %w", s.start+lo, s.start+hi, s.path, err)
		}
		// The groups whose first page is in this chunk.
		for p := (first + int64(step) - 1) / int64(step) * int64(step); p < first+n; p += int64(step) {
			out[p/int64(step)] = vec[p-first]
		}
	}
	return out, nil
}

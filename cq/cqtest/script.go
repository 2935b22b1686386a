package cqtest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
)

// Opener opens the store kept in dir: an empty store the first time, the
// same store again after the suite closed it (the suite checks what survives
// a reopen). log is the suite's stand-in for the CommitLog; a layout that
// keeps no store timestamps reads them from log.StoreTime, others ignore it.
// An Opener that cannot open the store fails t.
type Opener func(t *testing.T, dir string, log *CommitLog) cq.Store

// RunScript runs one data-driven script against a store opened with open
// in a fresh directory, reporting every mismatch with t.Errorf. The format
// is described in the package documentation.
func RunScript(t *testing.T, open Opener, name, script string) {
	t.Helper()
	runScript(t, open, name, script, func(msg string) { t.Error(msg) })
}

type scriptCommand struct {
	line  int
	args  []string
	input []string
	want  string
}

func parseScript(text string) ([]scriptCommand, error) {
	lines := strings.Split(text, "\n")
	var cmds []scriptCommand
	for i := 0; i < len(lines); {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			i++
			continue
		}
		c := scriptCommand{line: i + 1, args: strings.Fields(l)}
		i++
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != "----"; i++ {
			if in := strings.TrimSpace(lines[i]); in != "" {
				c.input = append(c.input, in)
			}
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: command %q has no ---- line", c.line, l)
		}
		i++
		var want []string
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			want = append(want, strings.TrimSpace(lines[i]))
		}
		c.want = strings.Join(want, "\n")
		cmds = append(cmds, c)
	}
	return cmds, nil
}

type scriptRunner struct {
	t      *testing.T
	open   Opener
	dir    string
	log    *CommitLog
	s      cq.Store
	report func(string)
}

func runScript(t *testing.T, open Opener, name, text string, report func(string)) {
	t.Helper()
	cmds, err := parseScript(text)
	if err != nil {
		t.Fatalf("script %s: %v", name, err)
	}
	r := &scriptRunner{t: t, open: open, dir: t.TempDir(), log: NewCommitLog(), report: report}
	r.s = open(t, r.dir, r.log)
	defer func() {
		if err := r.s.Close(); err != nil && !errors.Is(err, cq.ErrClosed) {
			report(fmt.Sprintf("%s: close: %v", name, err))
		}
	}()
	for _, c := range cmds {
		got, err := r.exec(c)
		where := fmt.Sprintf("%s:%d: %s", name, c.line, strings.Join(c.args, " "))
		if err != nil {
			report(fmt.Sprintf("%s: %v", where, err))
			continue
		}
		if got != c.want {
			report(fmt.Sprintf("%s\nwant:\n%s\ngot:\n%s", where, indent(c.want), indent(got)))
		}
		if err := checkBounds(r.s); err != nil {
			report(fmt.Sprintf("%s: after it: %v", where, err))
		}
	}
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// checkBounds checks 0 <= min <= max for every queue the store lists.
func checkBounds(s cq.Store) error {
	var bad error
	err := s.Queues(func(topic string, queueID int32) bool {
		lo, err1 := s.MinOffset(topic, queueID)
		hi, err2 := s.MaxOffset(topic, queueID)
		if err := errors.Join(err1, err2); err != nil {
			bad = fmt.Errorf("bounds of %s/%d: %w", topic, queueID, err)
			return false
		}
		if lo < 0 || lo > hi {
			bad = fmt.Errorf("queue %s/%d has min %d, max %d", topic, queueID, lo, hi)
			return false
		}
		return true
	})
	return errors.Join(err, bad)
}

func (r *scriptRunner) exec(c scriptCommand) (string, error) {
	a := c.args
	want := func(n int) error {
		if len(a) != n+1 {
			return fmt.Errorf("%s takes %d arguments, got %d", a[0], n, len(a)-1)
		}
		return nil
	}
	switch a[0] {
	case "put":
		if err := want(0); err != nil {
			return "", err
		}
		var ds []cq.Dispatch
		for _, in := range c.input {
			d, err := parseDispatch(strings.Fields(in))
			if err != nil {
				return "", err
			}
			ds = append(ds, d)
		}
		return r.put(ds), nil
	case "put-run":
		if err := want(9); err != nil {
			return "", err
		}
		n, err := parseInts(a[3:])
		if err != nil {
			return "", err
		}
		qid, err := strconv.ParseInt(a[2], 10, 32)
		if err != nil {
			return "", fmt.Errorf("queue id: %w", err)
		}
		from, count, phy, size, tags, ts, step := n[0], n[1], n[2], n[3], n[4], n[5], n[6]
		ds := make([]cq.Dispatch, 0, count)
		for i := range count {
			ds = append(ds, cq.Dispatch{Topic: a[1], QueueID: int32(qid), Entry: cq.Entry{
				QueueOffset: from + i, PhyOffset: phy + i*size, Size: int32(size),
				TagsCode: tags, StoreTimestamp: ts + i*step,
			}})
		}
		return r.put(ds), nil
	case "get":
		if err := want(4); err != nil {
			return "", err
		}
		qid, n, err := parseQueueAndInts(a[2:])
		if err != nil {
			return "", err
		}
		es, err := r.s.Get(a[1], qid, n[0], int(n[1]))
		if err != nil {
			return "", fmt.Errorf("get: %w", err)
		}
		if err := r.checkTimestamps(es); err != nil {
			return "", err
		}
		return formatEntries(es), nil
	case "bounds":
		if err := want(2); err != nil {
			return "", err
		}
		qid, _, err := parseQueueAndInts(a[2:])
		if err != nil {
			return "", err
		}
		lo, err1 := r.s.MinOffset(a[1], qid)
		hi, err2 := r.s.MaxOffset(a[1], qid)
		if err := errors.Join(err1, err2); err != nil {
			return "", fmt.Errorf("bounds: %w", err)
		}
		return fmt.Sprintf("min=%d max=%d", lo, hi), nil
	case "bytime":
		if err := want(4); err != nil {
			return "", err
		}
		qid, n, err := parseQueueAndInts(a[2:4])
		if err != nil {
			return "", err
		}
		var b cq.Boundary
		switch a[4] {
		case "lower":
			b = cq.Lower
		case "upper":
			b = cq.Upper
		default:
			return "", fmt.Errorf("boundary %q: want lower or upper", a[4])
		}
		off, err := r.s.OffsetByTime(a[1], qid, n[0], b)
		if err != nil {
			return "", fmt.Errorf("offset by time: %w", err)
		}
		return strconv.FormatInt(off, 10), nil
	case "delete-queue":
		if err := want(2); err != nil {
			return "", err
		}
		qid, _, err := parseQueueAndInts(a[2:])
		if err != nil {
			return "", err
		}
		return r.result(r.s.DeleteQueue(a[1], qid)), nil
	case "delete-topic":
		if err := want(1); err != nil {
			return "", err
		}
		return r.result(r.s.DeleteTopic(a[1])), nil
	case "correct-min":
		if err := want(1); err != nil {
			return "", err
		}
		n, err := parseInts(a[1:])
		if err != nil {
			return "", err
		}
		r.log.SetMin(n[0])
		return r.result(r.s.CorrectMin(n[0])), nil
	case "truncate":
		if err := want(1); err != nil {
			return "", err
		}
		n, err := parseInts(a[1:])
		if err != nil {
			return "", err
		}
		r.log.Truncate(n[0])
		return r.result(r.s.Truncate(n[0])), nil
	case "queues":
		if err := want(0); err != nil {
			return "", err
		}
		qs, err := listQueues(r.s)
		if err != nil {
			return "", err
		}
		if len(qs) == 0 {
			return "(none)", nil
		}
		return strings.Join(qs, "\n"), nil
	case "flush":
		if err := want(0); err != nil {
			return "", err
		}
		return r.result(r.s.Flush()), nil
	case "reopen":
		if err := want(0); err != nil {
			return "", err
		}
		s, err := reopen(r.t, r.open, r.s, r.dir, r.log)
		r.s = s
		return r.result(err), nil
	default:
		return "", fmt.Errorf("unknown command %q", a[0])
	}
}

// reopen closes s, opens the store in dir again and makes the calls the
// broker makes at startup: Truncate to the CommitLog's end, CorrectMin to
// its minimum.
func reopen(t *testing.T, open Opener, s cq.Store, dir string, log *CommitLog) (cq.Store, error) {
	if err := s.Close(); err != nil {
		return s, fmt.Errorf("close before reopen: %w", err)
	}
	s = open(t, dir, log)
	if err := s.Truncate(log.End()); err != nil {
		return s, fmt.Errorf("truncate after reopen: %w", err)
	}
	if err := s.CorrectMin(log.Min()); err != nil {
		return s, fmt.Errorf("correct min after reopen: %w", err)
	}
	return s, nil
}

func (r *scriptRunner) put(ds []cq.Dispatch) string {
	err := r.s.Put(ds)
	if err == nil {
		for _, d := range ds {
			r.log.Add(d.PhyOffset, d.Size, d.StoreTimestamp)
		}
	}
	return r.result(err)
}

func (r *scriptRunner) result(err error) string {
	if err != nil {
		r.t.Logf("store error: %v", err)
		return "error"
	}
	return "ok"
}

// checkTimestamps checks that Get reports either no store time (0) or the
// one the record was dispatched with.
func (r *scriptRunner) checkTimestamps(es []cq.Entry) error {
	return checkEntryTimes(r.log, es)
}

func checkEntryTimes(log *CommitLog, es []cq.Entry) error {
	for _, e := range es {
		if e.StoreTimestamp == 0 {
			continue
		}
		ts, err := log.StoreTime(e.PhyOffset, e.Size)
		if err != nil {
			return fmt.Errorf("entry %d: %w", e.QueueOffset, err)
		}
		if ts != e.StoreTimestamp {
			return fmt.Errorf("entry %d: store timestamp %d, the record has %d", e.QueueOffset, e.StoreTimestamp, ts)
		}
	}
	return nil
}

func formatEntries(es []cq.Entry) string {
	if len(es) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%d %d %d %d", e.QueueOffset, e.PhyOffset, e.Size, e.TagsCode)
	}
	return b.String()
}

// listQueues returns "topic queueID" for every queue, sorted.
func listQueues(s cq.Store) ([]string, error) {
	var qs []string
	err := s.Queues(func(topic string, queueID int32) bool {
		qs = append(qs, fmt.Sprintf("%s %d", topic, queueID))
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("queues: %w", err)
	}
	slices.Sort(qs)
	return qs, nil
}

func parseDispatch(f []string) (cq.Dispatch, error) {
	if len(f) != 7 {
		return cq.Dispatch{}, fmt.Errorf("entry %q: want topic queueID queueOffset phyOffset size tagsCode storeTimestamp", strings.Join(f, " "))
	}
	qid, n, err := parseQueueAndInts(f[1:])
	if err != nil {
		return cq.Dispatch{}, err
	}
	return cq.Dispatch{Topic: f[0], QueueID: qid, Entry: cq.Entry{
		QueueOffset: n[0], PhyOffset: n[1], Size: int32(n[2]), TagsCode: n[3], StoreTimestamp: n[4],
	}}, nil
}

func parseQueueAndInts(f []string) (int32, []int64, error) {
	qid, err := strconv.ParseInt(f[0], 10, 32)
	if err != nil {
		return 0, nil, fmt.Errorf("queue id: %w", err)
	}
	n, err := parseInts(f[1:])
	return int32(qid), n, err
}

func parseInts(f []string) ([]int64, error) {
	n := make([]int64, len(f))
	for i, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("number %q: %w", s, err)
		}
		n[i] = v
	}
	return n, nil
}

package txn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// Config holds the broker settings of transactions (RocketMQ's
// BrokerConfig names and defaults).
type Config struct {
	// Timeout is transactionTimeOut: how old an open half must be, from
	// its born time, before its producer is asked about it (default 6 s).
	Timeout time.Duration
	// CheckInterval is transactionCheckInterval: the time between two
	// checks of one half (default 30 s).
	CheckInterval time.Duration
	// CheckMax is transactionCheckMax: a half is given up right after its
	// CheckMax-th check, at least one (default 15). Here 0 or less means
	// the default; Limits, when set, gives the value in force, 0 and
	// negative values included (each gives a half one check, as on
	// RocketMQ).
	CheckMax int
	// Dispatched, when set, returns the CommitLog offset before which the
	// dispatcher committed every record (kvindex.Dispatcher.Dispatched):
	// the checker then starts its passes after the halves that ended,
	// instead of stepping over their deletions again every second.
	Dispatched func() int64
	// OnEnd, when set, is called once for each transaction an
	// END_TRANSACTION ends (not for a repeated end, nor for a half given
	// up after its checks), with the topic the message was sent to and its
	// born timestamp (Unix ms): the broker's commit and rollback metrics.
	OnEnd func(realTopic string, state kvindex.TxnState, bornMs int64)
	// HalfQueueMin, when set, returns the first queue offset of the half
	// topic's queue 0 that retention left: the op keys of the halves
	// before it are dropped with the transactions below the CommitLog
	// minimum.
	HalfQueueMin func() (int64, error)
	// NewUniqID, when set, gives each op message its UNIQ_KEY, as
	// RocketMQ 5 gives one.
	NewUniqID func() string
	// WaitDispatched, when set, waits until the dispatcher indexed every
	// record before a CommitLog offset (kvindex.Dispatcher.WaitFor): a
	// commit's end is recorded only after its message is indexed.
	WaitDispatched func(ctx context.Context, end int64) error
	// FileReservedTime, when set, returns fileReservedTime as in force
	// (the CommitLog's retention): an open half born longer ago than
	// that is given up without a check, stored in
	// TRANS_CHECK_MAX_TIME_TOPIC as one given up after transactionCheckMax
	// checks, as RocketMQ's checker gives it up (needSkip). Unset, halves
	// are never given up for their age.
	FileReservedTime func() time.Duration
	// Limits, when set, returns transactionTimeOut, transactionCheckInterval
	// and transactionCheckMax as in force (UPDATE_BROKER_CONFIG changes
	// them), read at each use as RocketMQ's checker reads them at each
	// pass; unset, the fields above, and so for a Timeout or
	// CheckInterval not positive (CheckMax is taken as it is). A
	// longer timeout puts off, when next due, the halves younger than it;
	// a shorter one brings forward only the first check of halves stored
	// after the change (a first check time is set when a half is
	// indexed); a new interval applies from each half's next check.
	Limits func() Limits
}

// Limits are the check settings UPDATE_BROKER_CONFIG may change while
// the checker runs (Config's fields of the same names).
type Limits struct {
	Timeout       time.Duration
	CheckInterval time.Duration
	CheckMax      int
}

// limits returns the check settings in force.
func (s *Service) limits() Limits {
	l := Limits{Timeout: s.cfg.Timeout, CheckInterval: s.cfg.CheckInterval, CheckMax: s.cfg.CheckMax}
	if s.cfg.Limits == nil {
		return l
	}
	cur := s.cfg.Limits()
	if cur.Timeout > 0 {
		l.Timeout = cur.Timeout
	}
	if cur.CheckInterval > 0 {
		l.CheckInterval = cur.CheckInterval
	}
	l.CheckMax = cur.CheckMax
	return l
}

// DefaultConfig returns RocketMQ's defaults.
func DefaultConfig() Config {
	return Config{Timeout: 6 * time.Second, CheckInterval: 30 * time.Second, CheckMax: 15}
}

// Store is what the service needs of the broker's message store.
type Store interface {
	// Put stores a message in its topic and queue and returns when it is
	// as durable as an acknowledged send. A message stored but not
	// durable in the time a send waits (SYNC_FLUSH's syncFlushTimeout)
	// is an error wrapping ErrNotDurable, with the AppendResult of what
	// was stored.
	Put(ctx context.Context, m *commitlog.Message) (commitlog.AppendResult, error)
	// Read returns the record at a CommitLog offset; ok is false when
	// there is none there (retention deleted it, or never a record).
	Read(phy int64) (m commitlog.Message, ok bool, err error)
	// WaitDurable reports whether everything stored before end is
	// durable, waiting at most as long as a send waits for its flush.
	WaitDurable(ctx context.Context, end int64) bool
}

// ErrNotDurable is wrapped by a Store's Put that stored a message but
// could not confirm it durable in time. A commit stored so is not stored
// again: the transaction ends once it is durable.
var ErrNotDurable = errors.New("stored, but not durable within the flush timeout")

// Check is one CHECK_TRANSACTION_STATE for a producer group.
type Check struct {
	ProducerGroup string
	// TranStateTableOffset is the half's queue offset in the half topic.
	TranStateTableOffset int64
	// CommitLogOffset is the half's CommitLog offset.
	CommitLogOffset int64
	// MsgID and TransactionID are the half's UNIQ_KEY.
	MsgID, TransactionID string
	// Topic is the half topic, as RocketMQ sends it.
	Topic string
	// Body is the half as a stored record with its real topic and queue.
	Body []byte
}

// Asker sends a check to one live producer of the group and reports
// whether one was connected. It must not block long.
type Asker func(Check) bool

// Service ends transactions and checks the open ones. It is safe for
// concurrent use; Run is the checker and is started once.
type Service struct {
	cfg   Config
	state *kvindex.Transactions
	store Store
	ask   Asker
	log   zerolog.Logger
	now   func() time.Time

	// locks serialise End and the checker per half (by CommitLog offset),
	// so a transaction is committed once and a check never rewrites a
	// half that just ended.
	locks [64]sync.Mutex

	// progress is the check progress of the Apache RocketMQ store this
	// index was migrated from (see kvindex.RocketMQCheckProgress), read
	// once, by the dispatcher's first half message.
	progressOnce sync.Once
	progress     int64
	hasProgress  bool

	// scanFrom is where the checker's passes start: no open half lies
	// before it (the checker's goroutine only).
	scanFrom int64
	// nextDue is, after a pass that listed every open half (listed), the
	// earliest time one of them is due; a pass before it and before
	// addedDue lists nothing (the checker's goroutine only).
	nextDue int64
	listed  bool
	// listings counts the passes that listed the open halves.
	listings int
	// addedDue is the earliest time a half indexed since the last listing
	// began, or not yet visible to it, is due (written under addedMu).
	addedDue atomic.Int64
	// addedMu guards addedDue's writes and unlisted: the halves HalfHook
	// recorded whose dispatch batch may not have been committed when the
	// last listing began (at or past the dispatch progress it read), so
	// that a listing that could not see them keeps their due time.
	addedMu  sync.Mutex
	unlisted []halfDue
	// pruneAt is the length of unlisted at which HalfHook drops the
	// halves below the dispatch progress itself: a broker whose checker
	// does not run (a slave) indexes halves all the same.
	pruneAt int

	// ops is set once the index holds an op message: only then do ends
	// need looking up by queue offset.
	ops     atomic.Bool
	opsOnce sync.Once
	// unsettled maps the CommitLog offset of a half whose committed
	// message was stored but is not yet durable (ErrNotDurable) or not yet
	// indexed to that message: its transaction ends once the message is
	// both, and is neither stored again nor asked about meanwhile.
	// Entries go when the transaction ends: End, the checker visiting the
	// open half, or its sweep (sweepUnsettled) for a half no longer open
	// (a given-up one's late commit, one retention took).
	unsettledMu sync.Mutex
	unsettled   map[int64]storedCommit
}

// storedCommit is where a committed message was stored: [phy, end).
type storedCommit struct{ phy, end int64 }

// New returns a service over the index's transaction state.
func New(cfg Config, state *kvindex.Transactions, store Store, ask Asker, log zerolog.Logger) *Service {
	def := DefaultConfig()
	if cfg.Timeout <= 0 {
		cfg.Timeout = def.Timeout
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = def.CheckInterval
	}
	if cfg.CheckMax <= 0 {
		cfg.CheckMax = def.CheckMax
	}
	return &Service{cfg: cfg, state: state, store: store, ask: ask, now: time.Now, pruneAt: minUnlistedPrune,
		log: log.With().Str("component", "txn").Logger()}
}

func (s *Service) lock(phy int64) func() {
	m := &s.locks[uint64(phy)%uint64(len(s.locks))]
	m.Lock()
	return m.Unlock
}

// HalfHook is the dispatcher hook of RMQ_SYS_TRANS_HALF_TOPIC: it records
// each half as open, first checked when its check immunity has passed
// (checkImmunity: counted from its born time, not its store time), its
// checks counted from its TRANSACTION_CHECK_TIMES (checksOf). In a store
// migrated from Apache RocketMQ, halves below RocketMQ's check progress
// were handled there and are not recorded.
func (s *Service) HalfHook() kvindex.Hook {
	return kvindex.HookFunc(func(w *pebble.Batch, m *commitlog.Message) error {
		s.progressOnce.Do(func() {
			var err error
			if s.progress, s.hasProgress, err = s.state.RocketMQCheckProgress(); err != nil {
				s.log.Warn().Err(err).Msg("read RocketMQ's transaction check progress; every half message counts as open")
				s.hasProgress = false
			}
		})
		if s.hasProgress && m.QueueOffset < s.progress {
			return nil
		}
		checks, counted := checksCarried(m.Properties)
		h := kvindex.TxnHalf{
			PhyOffset:      m.PhyOffset,
			QueueOffset:    m.QueueOffset,
			StoreTimestamp: m.StoreTimestamp,
			NextCheckAt:    s.firstCheckAt(m),
			Checks:         checks,
		}
		if counted && int(h.Checks) >= s.limits().CheckMax {
			// Checked enough already (a RocketMQ re-put copy in a store
			// migrated from it): given up at the first pass, immune or
			// not, as RocketMQ counts checks before it looks at times.
			h.NextCheckAt = m.StoreTimestamp
		}
		s.addedMu.Lock()
		s.unlisted = append(s.unlisted, halfDue{phy: h.PhyOffset, due: h.NextCheckAt})
		if h.NextCheckAt < s.addedDue.Load() {
			s.addedDue.Store(h.NextCheckAt)
		}
		if len(s.unlisted) >= s.pruneAt && s.cfg.Dispatched != nil {
			// As a pass that does not list: addedDue keeps their due time.
			s.dropDispatched(s.cfg.Dispatched())
			s.pruneAt = max(minUnlistedPrune, 2*len(s.unlisted))
		}
		s.addedMu.Unlock()
		return s.state.AddHalf(w, h)
	})
}

// OpHook is the dispatcher hook of RMQ_SYS_TRANS_OP_HALF_TOPIC: an op
// message (tag "d"), written by Apache RocketMQ or by rocketkv's putOp,
// ends the halves whose queue offsets its body lists, comma-separated.
// Anything else in the topic is ignored.
func (s *Service) OpHook() kvindex.Hook {
	return kvindex.HookFunc(func(w *pebble.Batch, m *commitlog.Message) error {
		if tag, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyTags); tag != opTag {
			return nil
		}
		for _, off := range opOffsets(m.Body) {
			if err := s.state.AddRocketMQOp(w, off, m.PhyOffset); err != nil {
				return err
			}
			s.ops.Store(true)
		}
		return nil
	})
}

// opOffsets decodes the body of a RocketMQ op message: the queue offsets
// of the halves it ends, in decimal, comma-separated, usually with a
// comma after the last ("12,13,"). Fields that are not a non-negative
// offset (the empty field after the last comma, foreign bytes, spaces)
// are skipped, as RocketMQ's Long.parseLong skips them.
func opOffsets(body []byte) []int64 {
	var offs []int64
	for f := range strings.SplitSeq(string(body), ",") {
		off, err := strconv.ParseInt(f, 10, 64)
		if err != nil || off < 0 {
			continue
		}
		offs = append(offs, off)
	}
	return offs
}

// opTag is the tag of RocketMQ's op messages that end halves.
const opTag = "d"

// endedByOp reports whether an op message ended the half: by its queue
// offset, an op stored after the half (one stored before it is about an
// older half that had the offset, before the half queue's numbering
// started again), or by the original's (TRAN_PREPARED_QUEUE_OFFSET) for
// an Apache RocketMQ immunity re-put, any op of that offset (the
// original's CommitLog offset is not known, and its op may precede the
// re-put copy). On a master the index's own end
// (0x61) is found first; the ops tell a promoted slave and a store
// migrated from RocketMQ.
func (s *Service) endedByOp(half *commitlog.Message) (bool, error) {
	s.opsOnce.Do(func() {
		if has, err := s.state.HasRocketMQOps(); err != nil || has {
			s.ops.Store(true) // on an error, look them up
		}
	})
	if !s.ops.Load() {
		return false, nil
	}
	if ok, err := s.state.RocketMQOpEnded(half.QueueOffset, half.PhyOffset); err != nil || ok {
		return ok, err
	}
	v, ok := commitlog.LookupProperty(half.Properties, PropPreparedQueueOffset)
	if !ok {
		return false, nil
	}
	orig, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false, nil
	}
	return s.state.RocketMQOpEnded(orig, -1)
}

// CommitHook is the dispatcher's hook for committed records: each ends the
// transaction of the half its PREPARED TX OFFSET names, when that record
// is a half of the same message (UNIQ_KEY) whose transaction has not
// ended, or was given up (a late commit stores its message: End). Copies
// of a committed message keep its COMMIT bits but not always the offset
// (a consumer's retry, a delayed delivery: offset 0), and a transaction
// that ended otherwise stays as it ended.
func (s *Service) CommitHook() kvindex.Hook {
	return kvindex.HookFunc(func(w *pebble.Batch, m *commitlog.Message) error {
		phy := m.PreparedTransactionOffset
		half, ok, err := s.store.Read(phy)
		if err != nil {
			// Not the dispatcher's error: the record is indexed all
			// the same, and the transaction is left to END_TRANSACTION.
			s.log.Warn().Err(err).Int64("half", phy).Int64("record", m.PhyOffset).Msg("committed record names an unreadable half")
			return nil
		}
		uniq, _ := commitlog.LookupProperty(m.Properties, propUniqKey)
		if halfUniq, _ := commitlog.LookupProperty(half.Properties, propUniqKey); !ok ||
			half.Topic != meta.TransHalfTopic || halfUniq != uniq {
			return nil
		}
		if e, ended, err := s.state.Ended(phy); err != nil || (ended && e.State != kvindex.TxnDiscarded) {
			return err
		}
		return s.state.AddCommitted(w, phy, m.PhyOffset)
	})
}

// checkImmunity is how long after its born time a half is left unchecked
// and whether the half names its own (CHECK_IMMUNITY_TIME_IN_SECONDS), as
// RocketMQ's checker reads it (TransactionalMessageServiceImpl.check and
// its own getImmunityTime, not TransactionalMessageUtil's): the named
// seconds, shorter than transactionTimeOut or not, else transactionTimeOut
// (as well for a value that is not a number, or is -1). Milliseconds past
// the int64 range are its largest value, never reached.
func (s *Service) checkImmunity(props string) (ms int64, named bool) {
	timeout := s.limits().Timeout
	v, named := commitlog.LookupProperty(props, PropCheckImmunitySecs)
	if !named {
		return timeout.Milliseconds(), false
	}
	secs, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil || secs == -1:
		return timeout.Milliseconds(), true
	case secs > math.MaxInt64/1000:
		return math.MaxInt64, true
	case secs < math.MinInt64/1000:
		return math.MinInt64, true
	}
	return secs * 1000, true
}

// checksOf is the check count a half carries in TRANSACTION_CHECK_TIMES,
// as RocketMQ's checker reads it (needDiscard): 0 without the property
// (RocketMQ counts its first check 1), -1 for a value that is not a 32-bit
// number (its getInt's answer then, which its next check counts 0). A
// half stored by a producer carries none; one RocketMQ stored again after
// a check (a store migrated from it) carries its checks so far, and one
// RESUME_CHECK_HALF_MESSAGE stored carries 0.
func checksOf(props string) int32 {
	n, _ := checksCarried(props)
	return n
}

// checksCarried is checksOf, and whether the half carries the property at
// all (RocketMQ's needDiscard compares only a count carried).
func checksCarried(props string) (n int32, carried bool) {
	v, ok := commitlog.LookupProperty(props, PropCheckTimes)
	if !ok {
		return 0, false
	}
	c, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return -1, true
	}
	return int32(c), true
}

// expiresAt is the first time (Unix ms) a half is born longer than
// fileReservedTime before, and is given up without a check; ok is false
// when Config.FileReservedTime is unset.
func (s *Service) expiresAt(half *commitlog.Message) (int64, bool) {
	if s.cfg.FileReservedTime == nil {
		return 0, false
	}
	return satAdd(satAdd(half.BornTimestamp, s.cfg.FileReservedTime().Milliseconds()), 1), true
}

// expired reports whether a half is given up for its age at now (Unix
// ms): RocketMQ's needSkip, now-born longer than fileReservedTime.
func (s *Service) expired(half *commitlog.Message, now int64) bool {
	at, ok := s.expiresAt(half)
	return ok && now >= at
}

// immuneUntil reports whether a half is not to be checked at now (Unix
// ms), and if so the first time it may be (or is given up for its age,
// expiresAt, when that comes first). It is RocketMQ's checker rule,
// counted from the half's born time (the producer's clock): a half naming
// an immunity is checked once now-born exceeds it; one that does not is
// left alone while 0 <= now-born <= transactionTimeOut, so a half born
// in the future (a producer clock ahead of the broker's) is checked at
// once until its born time comes, and one born long before it was stored
// (a clock behind) as soon as it is indexed.
func (s *Service) immuneUntil(half *commitlog.Message, now int64) (int64, bool) {
	imm, named := s.checkImmunity(half.Properties)
	age := satSub(now, half.BornTimestamp)
	if age > imm || (!named && age < 0) {
		return 0, false
	}
	until := satAdd(satAdd(half.BornTimestamp, imm), 1)
	if at, ok := s.expiresAt(half); ok {
		until = min(until, at)
	}
	return until, true
}

// firstCheckAt is when the checker first looks at a half just stored: at
// the end of its immunity, or at its store time when it is not immune then
// (a check at a pass finding the half immune is put off: checkHalf).
func (s *Service) firstCheckAt(half *commitlog.Message) int64 {
	if until, immune := s.immuneUntil(half, half.StoreTimestamp); immune {
		return until
	}
	return half.StoreTimestamp
}

// satAdd is a+b, held at the int64 limits instead of wrapping.
func satAdd(a, b int64) int64 {
	c := a + b
	switch {
	case b > 0 && c < a:
		return math.MaxInt64
	case b < 0 && c > a:
		return math.MinInt64
	}
	return c
}

// satSub is a-b, held at the int64 limits instead of wrapping.
func satSub(a, b int64) int64 {
	switch {
	case b < 0 && a > math.MaxInt64+b:
		return math.MaxInt64
	case b > 0 && a < math.MinInt64+b:
		return math.MinInt64
	}
	return a - b
}

// endImmunity is the immunity an END_TRANSACTION is measured against
// (RocketMQ's TransactionalMessageUtil.getImmunityTime):
// transactionTimeOut, or the message's CHECK_IMMUNITY_TIME_IN_SECONDS
// when longer.
func (s *Service) endImmunity(props string) time.Duration {
	timeout := s.limits().Timeout
	if v, ok := commitlog.LookupProperty(props, PropCheckImmunitySecs); ok {
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
			// Past about 292 years the product overflows a Duration: take
			// the longest one.
			d := time.Duration(math.MaxInt64)
			if secs < int64(d/time.Second) {
				d = time.Duration(secs) * time.Second
			}
			if d > timeout {
				return d
			}
		}
	}
	return timeout
}

// EndRequest is an END_TRANSACTION with commit or rollback.
type EndRequest struct {
	ProducerGroup        string
	TranStateTableOffset int64
	CommitLogOffset      int64
	// State is kvindex.TxnCommit or kvindex.TxnRollback.
	State                kvindex.TxnState
	FromTransactionCheck bool
	// MsgID is the UNIQ_KEY, for logs.
	MsgID string
}

// Errors of End. Each is answered with RocketMQ's response code for it
// (ErrTooLate ILLEGAL_OPERATION, the others SYSTEM_ERROR) and its remark.
var (
	// ErrHalfNotFound: no half message at the CommitLog offset.
	ErrHalfNotFound = errors.New("Find prepared transaction message failed")
	// ErrWrongGroup: the half's PGROUP is another producer group.
	ErrWrongGroup = errors.New("The producer group wrong")
	// ErrWrongQueueOffset: the half's queue offset differs.
	ErrWrongQueueOffset = errors.New("The transaction state table offset wrong")
	// ErrTooLate: the half names a check immunity time, the request is
	// not from a check and comes after it; the check decides.
	ErrTooLate = errors.New("the commit or rollback comes after the message's check immunity time; waiting for the check")
	// ErrAlreadyEnded: the transaction ended the other way.
	ErrAlreadyEnded = errors.New("the transaction has already ended")
)

// End commits or rolls back the transaction of a half message. A request
// for a transaction that already ended the same way changes nothing and
// succeeds; so does a rollback of one given up after its checks, and a
// late commit of such a one stores its message, as RocketMQ's does.
func (s *Service) End(ctx context.Context, req EndRequest) error {
	if req.State != kvindex.TxnCommit && req.State != kvindex.TxnRollback {
		return fmt.Errorf("end transaction: state %d is neither commit nor rollback", req.State)
	}
	unlock := s.lock(req.CommitLogOffset)
	defer unlock()
	half, ok, err := s.readNamed(req.CommitLogOffset)
	if err != nil {
		return fmt.Errorf("end transaction: read half at %d: %w", req.CommitLogOffset, err)
	}
	if !ok || half.Topic != meta.TransHalfTopic || half.PhyOffset != req.CommitLogOffset {
		return ErrHalfNotFound
	}
	// The immunity time first, as RocketMQ's EndTransactionProcessor
	// refuses a late request before it checks the group and offsets.
	if !req.FromTransactionCheck && s.pastImmunity(&half) {
		return ErrTooLate
	}
	if g, _ := commitlog.LookupProperty(half.Properties, PropProducerGroup); g != req.ProducerGroup {
		return ErrWrongGroup
	}
	if half.QueueOffset != req.TranStateTableOffset {
		return ErrWrongQueueOffset
	}
	// How the index says the transaction ended comes first: an op
	// message does not say which way.
	ended, ok, err := s.state.Ended(req.CommitLogOffset)
	if err != nil {
		return fmt.Errorf("end transaction: %w", err)
	}
	givenUp := ok && ended.State == kvindex.TxnDiscarded
	switch {
	case givenUp && req.State == kvindex.TxnCommit:
		// A late commit of a transaction given up after its checks:
		// RocketMQ's give-up only copies the half aside, and its
		// END_TRANSACTION stores the commit, so this stores it too (the
		// op message of the give-up is not a rollback).
	case givenUp:
		return nil // a rollback: nothing was stored
	case ok:
		s.forgetUnsettled(req.CommitLogOffset) // ended by its record's dispatch
		if ended.State != req.State {
			return fmt.Errorf("%w: %s", ErrAlreadyEnded, ended.State)
		}
		return nil
	}
	if sc, ok := s.unsettledCommit(req.CommitLogOffset); ok {
		// The message of an earlier commit is stored: it ends the
		// transaction once durable and indexed, and is not stored again.
		if req.State != kvindex.TxnCommit {
			return fmt.Errorf("%w: %s (its message is stored, not yet flushed)", ErrAlreadyEnded, kvindex.TxnCommit)
		}
		if err := s.settle(ctx, sc); err != nil {
			return fmt.Errorf("end transaction: %w", err)
		}
		return s.recordEnd(ctx, &half, req, sc.phy)
	}
	if byOp, err := s.endedByOp(&half); err != nil {
		return fmt.Errorf("end transaction: %w", err)
	} else if byOp && !givenUp {
		// An op message ended it (a migrated store's, or a master's
		// before this broker was promoted) and no commit is indexed: a
		// commit's message precedes its op in the CommitLog, so the
		// transaction was rolled back or given up.
		if req.State == kvindex.TxnCommit {
			return fmt.Errorf("%w: rolled back or given up (an op message ended it, and no committed message names it)", ErrAlreadyEnded)
		}
		return nil
	}
	if req.State == kvindex.TxnCommit {
		m, err := committedMessage(&half)
		if err != nil {
			return fmt.Errorf("end transaction: %w", err)
		}
		if req.FromTransactionCheck {
			// RocketMQ stores the half again at each check, with its
			// check count, and its check names that copy: the answer
			// commits it with its TRANSACTION_CHECK_TIMES.
			n, err := s.checksAsked(&half, ended, givenUp)
			if err != nil {
				return fmt.Errorf("end transaction: %w", err)
			}
			if n > 0 {
				m.Properties = withCheckTimes(m.Properties, n)
			}
		}
		res, err := s.store.Put(ctx, m)
		sc := storedCommit{phy: res.PhyOffset, end: res.PhyOffset + res.WroteBytes}
		if errors.Is(err, ErrNotDurable) {
			s.noteUnsettled(req.CommitLogOffset, sc)
		}
		if err != nil {
			return fmt.Errorf("end transaction: store the committed message: %w", err)
		}
		if err := s.waitDispatched(ctx, sc.end); err != nil {
			s.noteUnsettled(req.CommitLogOffset, sc)
			return fmt.Errorf("end transaction: %w", err)
		}
		return s.recordEnd(ctx, &half, req, sc.phy)
	}
	return s.recordEnd(ctx, &half, req, 0)
}

// checksAsked is the check count an answer to a check commits with: that
// of the open half, or, for a half given up (givenUp, its end e), that of
// its copy in TRANS_CHECK_MAX_TIME_TOPIC (e.By), as RocketMQ commits the
// copy its last check named, the one it gave up. 0 when there is none
// (never checked; a give-up recorded without where its copy is, or whose
// copy a recovery cut). A half given up for its age carries one more
// check than its producer was asked, as RocketMQ's copy in that topic
// does, where RocketMQ's answer would commit with the count asked.
func (s *Service) checksAsked(half *commitlog.Message, e kvindex.TxnEnd, givenUp bool) (int32, error) {
	if !givenUp {
		h, open, err := s.state.Half(half.PhyOffset)
		if err != nil || !open {
			return 0, err
		}
		return h.Checks, nil
	}
	if e.By <= half.PhyOffset {
		return 0, nil
	}
	c, ok, err := s.readNamed(e.By)
	if err != nil {
		return 0, fmt.Errorf("read the copy of the half given up at %d: %w", e.By, err)
	}
	uniq, _ := commitlog.LookupProperty(half.Properties, propUniqKey)
	copyUniq, _ := commitlog.LookupProperty(c.Properties, propUniqKey)
	if !ok || c.Topic != meta.TransCheckMaxTopic || copyUniq != uniq {
		return 0, nil
	}
	return checksOf(c.Properties), nil // 0 when the copy carries none
}

// settle waits until the committed message sc is durable and indexed.
func (s *Service) settle(ctx context.Context, sc storedCommit) error {
	if !s.store.WaitDurable(ctx, sc.end) {
		return fmt.Errorf("the committed message stored at %d: %w", sc.phy, ErrNotDurable)
	}
	return s.waitDispatched(ctx, sc.end)
}

// waitDispatched waits until the dispatcher indexed every record before
// end (Config.WaitDispatched): an end recorded after is durable only with
// the dispatch progress past its committed message, so a recovery whose
// CommitLog lost that message finds the index ahead of the log and opens
// the transaction again (kvindex.Transactions.DropAbove).
func (s *Service) waitDispatched(ctx context.Context, end int64) error {
	if s.cfg.WaitDispatched == nil {
		return nil
	}
	if err := s.cfg.WaitDispatched(ctx, end); err != nil {
		return fmt.Errorf("wait until the committed message before %d is indexed: %w", end, err)
	}
	return nil
}

// recordEnd records the end of the transaction of half, whose committed
// message (for a commit; at CommitLog offset by) is durable and indexed,
// and stores its op message.
func (s *Service) recordEnd(ctx context.Context, half *commitlog.Message, req EndRequest, by int64) error {
	if err := s.state.End(req.CommitLogOffset, kvindex.TxnEnd{State: req.State, At: s.now().UnixMilli(), By: by}); err != nil {
		return fmt.Errorf("end transaction: %w", err)
	}
	s.forgetUnsettled(req.CommitLogOffset)
	s.putOp(ctx, half)
	s.log.Debug().Str("group", req.ProducerGroup).Str("msgId", req.MsgID).Int64("half", req.CommitLogOffset).
		Stringer("state", req.State).Bool("fromCheck", req.FromTransactionCheck).Msg("transaction ended")
	if s.cfg.OnEnd != nil {
		topic, _, _ := commitlog.RealDestination(half.Properties)
		s.cfg.OnEnd(topic, req.State, half.BornTimestamp)
	}
	return nil
}

// noteUnsettled notes that the committed message of the half at phy is
// stored at sc but not yet durable or indexed.
func (s *Service) noteUnsettled(phy int64, sc storedCommit) {
	s.unsettledMu.Lock()
	defer s.unsettledMu.Unlock()
	if s.unsettled == nil {
		s.unsettled = map[int64]storedCommit{}
	}
	s.unsettled[phy] = sc
}

// unsettledCommit returns where the committed message of the half at phy
// was stored when it is not yet durable or indexed; ok is false when
// there is none.
func (s *Service) unsettledCommit(phy int64) (sc storedCommit, ok bool) {
	s.unsettledMu.Lock()
	defer s.unsettledMu.Unlock()
	sc, ok = s.unsettled[phy]
	return sc, ok
}

// sweepUnsettled drops the notes of transactions that ended meanwhile
// (their committed messages indexed: CommitHook recorded the commit), and
// of halves retention took: the checker, which forgets a note when it
// visits its half, does not visit a given-up half a late commit noted.
func (s *Service) sweepUnsettled() error {
	s.unsettledMu.Lock()
	phys := make([]int64, 0, len(s.unsettled))
	for phy := range s.unsettled {
		phys = append(phys, phy)
	}
	s.unsettledMu.Unlock()
	for _, phy := range phys {
		e, ended, err := s.state.Ended(phy)
		if err != nil {
			return err
		}
		_, open, err := s.state.Half(phy)
		if err != nil {
			return err
		}
		if (ended && e.State != kvindex.TxnDiscarded) || (!ended && !open) {
			s.forgetUnsettled(phy)
		}
	}
	return nil
}

// forgetUnsettled drops the note of the half at phy: its transaction
// ended, or the half is gone.
func (s *Service) forgetUnsettled(phy int64) {
	s.unsettledMu.Lock()
	defer s.unsettledMu.Unlock()
	delete(s.unsettled, phy)
}

// putOp stores the op message of a half whose end was just recorded, in
// RocketMQ's format, without waiting for its flush, as RocketMQ writes
// it: a slave learns from it that the transaction ended
// (it copies the CommitLog, not the index), and so does Apache RocketMQ
// reading an exported store. The end recorded in the index is what this
// broker goes by, so a failed put is logged, not answered: a promoted
// slave or RocketMQ would then ask the producer about the half again, as
// RocketMQ's own failed op puts make it do.
func (s *Service) putOp(ctx context.Context, half *commitlog.Message) {
	uniq := ""
	if s.cfg.NewUniqID != nil {
		uniq = s.cfg.NewUniqID()
	}
	if _, err := s.store.Put(ctx, opMessage(half, uniq, s.now())); err != nil {
		s.log.Warn().Err(err).Int64("half", half.PhyOffset).Int64("halfQueueOffset", half.QueueOffset).
			Msg("store the op message of an ended transaction; a promoted slave would ask the producer about it again")
	}
}

// ErrNotHalf: the message named is not a transaction's half (neither in
// the half topic nor given up into TRANS_CHECK_MAX_TIME_TOPIC).
var ErrNotHalf = errors.New("the message is not the half message of a transaction")

// Resume stores the half message at phy (typically one given up into
// TRANS_CHECK_MAX_TIME_TOPIC) again as an open half with its check count
// at 0, so its producer group is asked about it again
// (RESUME_CHECK_HALF_MESSAGE, mqadmin resumeCheckHalfMessage). The copy
// keeps the born time, as RocketMQ's: a half born longer than
// fileReservedTime ago is given up again at the next pass.
func (s *Service) Resume(ctx context.Context, phy int64) error {
	m, ok, err := s.readNamed(phy)
	if err != nil {
		return fmt.Errorf("resume check of %d: %w", phy, err)
	}
	if !ok || (m.Topic != meta.TransHalfTopic && m.Topic != meta.TransCheckMaxTopic) {
		return ErrNotHalf
	}
	if _, _, err := realDestination(&m); err != nil {
		return fmt.Errorf("%w: %w", ErrNotHalf, err)
	}
	half := &commitlog.Message{
		Topic: meta.TransHalfTopic, QueueID: 0, Flag: m.Flag, SysFlag: m.SysFlag &^ commitlog.TransactionRollback,
		BornTimestamp: m.BornTimestamp, BornHost: m.BornHost, ReconsumeTimes: m.ReconsumeTimes, Body: m.Body,
		Properties: commitlog.RewriteProperties(m.Properties, nil, [2]string{PropCheckTimes, "0"}),
	}
	if _, err := s.store.Put(ctx, half); err != nil {
		return fmt.Errorf("resume check of %d: %w", phy, err)
	}
	s.log.Info().Int64("from", phy).Msg("half message stored again for transaction checks")
	return nil
}

// readNamed reads the record at an offset a client named: no record
// starting there is "not found".
func (s *Service) readNamed(phy int64) (commitlog.Message, bool, error) {
	m, ok, err := s.store.Read(phy)
	if commitlog.NoRecordAt(err) {
		return commitlog.Message{}, false, nil
	}
	return m, ok, err
}

// pastImmunity is RocketMQ's rejectCommitOrRollback: a half naming a check
// immunity time, born longer ago than that.
func (s *Service) pastImmunity(half *commitlog.Message) bool {
	if _, ok := commitlog.LookupProperty(half.Properties, PropCheckImmunitySecs); !ok {
		return false
	}
	return s.now().UnixMilli()-half.BornTimestamp > s.endImmunity(half.Properties).Milliseconds()
}

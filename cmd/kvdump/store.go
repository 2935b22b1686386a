package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/tlsconf"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// globalOptions are the flags every command takes.
type globalOptions struct {
	store          string
	broker         string
	checkpointDir  string
	keepCheckpoint bool
	json           bool
	timeout        time.Duration
	// accessKey and secretKey sign the checkpoint request for a broker
	// with the ACL on.
	accessKey, secretKey string
	// tls dials the broker with TLS, with the tls.client.* keys of
	// tlsConfigFile (tls.config.file); without them the broker's
	// certificate is not verified and none is presented.
	tls           bool
	tlsConfigFile string
	// storeSet is true when --store was given explicitly.
	storeSet bool
	// commitLog is --commitlog: the CommitLog segment directory
	// (storePathCommitLog); empty means <store>/commitlog, or with
	// --broker the directory the broker reports.
	commitLog string
}

// store is an opened store: the index (the store's own, or a broker's
// checkpoint) and, when present, the CommitLog, both read-only.
type store struct {
	// root is the store root.
	root string
	// clogDir is the CommitLog segment directory: root/commitlog unless
	// storePathCommitLog put it elsewhere.
	clogDir string
	// indexDir is the index database read: root/kvindex or a checkpoint.
	indexDir string
	// broker is the broker asked for the checkpoint, empty for a stopped
	// store.
	broker string
	db     *kvindex.DB
	// log is nil when the store has no CommitLog; logErr says why.
	log    *commitlog.ReadOnlyLog
	logErr error
	// logEnd is the end of the CommitLog found when it was opened, before
	// a broker checkpoint clamped it to the dispatched offset.
	logEnd     int64
	dispatched int64

	lock       io.Closer
	checkpoint string // to remove on close, empty when kept or local
	stderr     io.Writer
}

// lockedMessage is what kvdump says when a running broker holds the store.
func lockedMessage(root string) string {
	return fmt.Sprintf("store %s is locked by a running broker; use --broker host:port to read a checkpoint, or stop the broker", root)
}

// openStore opens the store the options name: the checkpoint of a running
// broker with --broker, otherwise the stopped store at --store.
func openStore(ctx context.Context, o *globalOptions, stderr io.Writer) (*store, error) {
	log := zerolog.New(stderr).Level(zerolog.WarnLevel)
	if o.broker != "" {
		return openBrokerCheckpoint(ctx, o, log, stderr)
	}
	root := o.store
	lock, err := commitlog.LockShared(root)
	if errors.Is(err, commitlog.ErrLocked) {
		return nil, errors.New(lockedMessage(root))
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", root, err)
	}
	s := &store{root: root, clogDir: cmp.Or(o.commitLog, commitlog.SegmentDirOf(root)),
		indexDir: filepath.Join(root, kvindex.DirName), lock: lock, stderr: stderr}
	s.db, err = kvindex.Open(kvindex.Options{Dir: s.indexDir, ReadOnly: true, CacheSize: 32 << 20, Logger: log})
	if err != nil {
		_ = lock.Close()
		switch {
		case errors.Is(err, kvindex.ErrLocked):
			return nil, errors.New(lockedMessage(root))
		case errors.Is(err, kvindex.ErrNotFound):
			return nil, fmt.Errorf("store %s has no index at %s (a rocketkv broker builds it when it first opens the store)", root, s.indexDir)
		}
		return nil, fmt.Errorf("open store %s: %w", root, err)
	}
	if err := s.openLog(false); err != nil {
		_ = s.close()
		return nil, err
	}
	return s, nil
}

// openBrokerCheckpoint asks the broker for a checkpoint of its index and
// opens it, with the broker's CommitLog clamped to the checkpoint's
// dispatched offset.
func openBrokerCheckpoint(ctx context.Context, o *globalOptions, log zerolog.Logger, stderr io.Writer) (*store, error) {
	path, root, clogDir, err := requestCheckpoint(ctx, o, o.broker, o.checkpointDir, o.timeout)
	if err != nil {
		return nil, err
	}
	if o.storeSet {
		root = o.store
		clogDir = commitlog.SegmentDirOf(root)
	}
	if o.commitLog != "" {
		clogDir = o.commitLog
	}
	s := &store{root: root, clogDir: clogDir, indexDir: path, broker: o.broker, stderr: stderr, lock: nopCloser{}}
	if !o.keepCheckpoint {
		s.checkpoint = path
	}
	s.db, err = kvindex.Open(kvindex.Options{Dir: path, ReadOnly: true, CacheSize: 32 << 20, Logger: log})
	if err != nil {
		_ = s.close()
		return nil, fmt.Errorf("open checkpoint %s of broker %s (kvdump must run on the broker's machine): %w", path, o.broker, err)
	}
	if err := s.openLog(true); err != nil {
		_ = s.close()
		return nil, err
	}
	return s, nil
}

// openLog opens the CommitLog read-only when the store has one. A broker's
// log is clamped to the checkpoint's dispatched offset: the broker keeps
// appending, and everything below that offset is complete.
func (s *store) openLog(clamp bool) error {
	var err error
	s.dispatched, err = s.db.Dispatched()
	if err != nil {
		return err
	}
	s.log, err = commitlog.OpenReadOnlyDir(s.clogDir)
	if errors.Is(err, os.ErrNotExist) {
		s.log, s.logErr = nil, fmt.Errorf("store %s has no CommitLog at %s (storePathCommitLog elsewhere? give --commitlog)", s.root, s.clogDir)
		return nil
	}
	if err != nil {
		return err
	}
	s.logEnd = s.log.MaxOffset()
	if clamp {
		s.log.Clamp(s.dispatched)
	}
	return nil
}

// needLog returns the CommitLog or the reason there is none.
func (s *store) needLog() (*commitlog.ReadOnlyLog, error) {
	if s.log == nil {
		return nil, s.logErr
	}
	return s.log, nil
}

// close closes everything and removes a checkpoint kvdump asked for.
func (s *store) close() error {
	var errs []error
	if s.log != nil {
		errs = append(errs, s.log.Close())
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
	}
	if s.checkpoint != "" {
		if err := removeCheckpoint(s.checkpoint); err != nil {
			fmt.Fprintf(s.stderr, "kvdump: checkpoint %s not removed: %v\n", s.checkpoint, err)
		}
	}
	return errors.Join(errs...)
}

// requestCheckpoint asks a broker for a checkpoint of its index and returns
// the checkpoint directory, the broker's store root and its CommitLog
// segment directory (root/commitlog from a broker that does not say).
func requestCheckpoint(ctx context.Context, o *globalOptions, addr, dir string, timeout time.Duration) (path, root, clogDir string, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := remoting.ClientOptions{BeforeRequest: acl.RequestSigner(
		cmp.Or(o.accessKey, os.Getenv(acl.EnvAccessKey)), cmp.Or(o.secretKey, os.Getenv(acl.EnvSecretKey)))}
	if opts.TLS, err = tlsconf.Client("kvdump", o.tls, configs.TLS{ConfigFile: o.tlsConfigFile}, zerolog.Nop()); err != nil {
		return "", "", "", err
	}
	// A broker stopping gracefully answers GO_AWAY: the request goes once
	// more on a new connection, as RocketMQ's clients send it
	// (enableReconnectForGoAway), which behind a load balancer reaches
	// another broker.
	c, err := remoting.DialAddr(ctx, addr, opts)
	if err != nil {
		return "", "", "", fmt.Errorf("ask broker %s for a checkpoint: %w", addr, err)
	}
	defer c.Close()
	ext := map[string]string{}
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", "", "", fmt.Errorf("checkpoint directory %s: %w", dir, err)
		}
		ext[remoting.CheckpointFieldDir] = abs
	}
	resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.CheckpointIndex, ext, nil))
	if err != nil {
		return "", "", "", fmt.Errorf("ask broker %s for a checkpoint: %w", addr, err)
	}
	switch resp.Code {
	case remoting.Success:
	case remoting.RequestCodeNotSupported:
		return "", "", "", fmt.Errorf("broker %s does not answer the checkpoint request (code %d): it is not a rocketkv broker, or an older one",
			addr, remoting.CheckpointIndex)
	default:
		return "", "", "", fmt.Errorf("broker %s could not write a checkpoint: code %d: %s", addr, resp.Code, resp.Remark)
	}
	path = resp.ExtFields[remoting.CheckpointFieldPath]
	root = resp.ExtFields[remoting.CheckpointFieldStoreRoot]
	if path == "" || root == "" {
		return "", "", "", fmt.Errorf("broker %s answered the checkpoint request without %q and %q", addr,
			remoting.CheckpointFieldPath, remoting.CheckpointFieldStoreRoot)
	}
	clogDir = cmp.Or(resp.ExtFields[remoting.CheckpointFieldCommitLog], commitlog.SegmentDirOf(root))
	return path, root, clogDir, nil
}

// removeCheckpoint deletes a checkpoint directory after checking that it
// holds nothing but Pebble's files, so that a wrong path from a broker can
// never make kvdump delete anything else.
func removeCheckpoint(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("not an absolute path")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || !isPebbleFile(e.Name()) {
			return fmt.Errorf("%s is not a file of a Pebble checkpoint", e.Name())
		}
	}
	return os.RemoveAll(dir)
}

// isPebbleFile reports whether name is one of the files a Pebble
// database directory holds.
func isPebbleFile(name string) bool {
	for _, p := range []string{"MANIFEST-", "OPTIONS-", "marker."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	for _, s := range []string{".sst", ".log", ".blob"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return name == "CURRENT" || name == "LOCK"
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

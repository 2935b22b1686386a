package logging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/vfs"
)

// Output is where a binary's log lines go: standard error, or, when its
// configuration names a log directory (configs.LogFile), the file
// <binary>.log there, rolled by size into <binary>-<UTC time>.log(.gz)
// beside it by lumberjack, as Apache RocketMQ rolls
// ~/logs/rocketmqlogs/<binary>.log. The binary owns it: Finish closes the
// file at its end.
//
// With a file, standard error keeps three things, and no log line else:
// the line naming the file at the start, the error a start or a stop ends
// with (main prints it), and the lines whose write to the file failed.
// Those are what someone who started the process with its output
// redirected (nohup broker ... &) needs to find the log and to see why it
// did not start or stopped; copying every line there as well would grow
// the redirected file, which nothing rolls, until the disk is full, the
// very thing the log file's rolling prevents.
type Output struct {
	file   *fileWriter // nil: the lines go to stderr
	stderr io.Writer
}

// OpenOutput opens binary's log output from cfg: stderr itself when
// cfg.Dir is empty, otherwise <binary>.log in cfg.Dir (a leading ~ is the
// home directory), the directory created when missing, with a line to
// stderr naming the file. A directory that cannot be created, a file that
// cannot be opened, or a file another process writes (each process needs a
// directory of its own: two would roll each other's file and lose lines)
// is an error naming the file.
func OpenOutput(binary string, cfg configs.LogFile, stderr io.Writer) (*Output, error) {
	if cfg.Dir == "" {
		return &Output{stderr: stderr}, nil
	}
	dir, err := expandHome(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("logDir %s: %w", cfg.Dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("logDir %s: create the log directory: %w", cfg.Dir, err)
	}
	path := filepath.Join(dir, binary+".log")
	// The lock file's name is not one lumberjack takes for a rolled
	// file (<binary>-<time>.log).
	lock, err := vfs.OS{}.Lock(path + ".lock")
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("logDir: the log file %s is written by another process (it holds %s.lock): give each its own logDir", path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("logDir: lock the log file %s: %w", path, err)
	}
	// Created here with the umask's mode, as RocketMQ's logback creates
	// its files, so that a log shipper of another user can read it:
	// lumberjack would create it 0600, and gives each new file of a roll
	// the mode of the one before.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("logDir: open the log file: %w", err), lock.Close())
	}
	if err := f.Close(); err != nil {
		return nil, errors.Join(fmt.Errorf("logDir: open the log file: %w", err), lock.Close())
	}
	roller := &lumberjack.Logger{
		Filename:   path,
		MaxSize:    cfg.MaxSizeMiB,
		MaxBackups: cfg.MaxRolledFiles,
		Compress:   cfg.Compress,
	}
	// An empty write opens (or creates) the file now rather than at the
	// first line, so that a file that cannot be opened stops the start.
	if _, err := roller.Write(nil); err != nil {
		return nil, errors.Join(fmt.Errorf("logDir: open the log file %s: %w", path, err), lock.Close())
	}
	fmt.Fprintf(stderr, "%s: logging to %s\n", binary, path)
	fw := &fileWriter{file: roller, lock: lock, path: path, binary: binary, stderr: stderr}
	return &Output{file: fw, stderr: stderr}, nil
}

// expandHome replaces a leading ~ of dir with the home directory, as a
// shell would (RocketMQ's logs are under ~/logs/rocketmqlogs).
func expandHome(dir string) (string, error) {
	if dir != "~" && !strings.HasPrefix(dir, "~/") {
		return dir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("logDir %s: %w", dir, err)
	}
	return filepath.Join(home, dir[1:]), nil
}

// Writer is what the binary's loggers write to.
func (o *Output) Writer() io.Writer {
	if o.file == nil {
		return o.stderr
	}
	return o.file
}

// Path is the log file's path, or "" when the lines go to stderr.
func (o *Output) Path() string {
	if o.file == nil {
		return ""
	}
	return o.file.path
}

// Start opens binary's log output from cfg (see OpenOutput) and returns a
// logger writing to it at level in format, with a first line that says
// where the lines go when that is a file.
func Start(binary string, cfg configs.LogFile, level string, format Format, stderr io.Writer) (zerolog.Logger, *Output, error) {
	out, err := OpenOutput(binary, cfg, stderr)
	if err != nil {
		return zerolog.Nop(), nil, err
	}
	log, err := New(out.Writer(), level, format)
	if err != nil {
		return zerolog.Nop(), nil, errors.Join(err, out.Close())
	}
	if out.file != nil {
		log.Info().Str("file", out.Path()).Int("logMaxSizeMiB", cfg.MaxSizeMiB).
			Int("logMaxRolledFiles", cfg.MaxRolledFiles).Bool("logCompress", cfg.Compress).Msg("logging to a file rolled by size")
	}
	return log, out, nil
}

// Finish ends the output at the end of the binary's run: runErr, the error
// the run ends with (nil for a clean stop), is logged to the file (main
// prints it to stderr), then the file is closed; a failed close is told on
// stderr. Lines logged after it go to stderr.
func (o *Output) Finish(log zerolog.Logger, runErr error) {
	if o.file == nil {
		return
	}
	if runErr != nil {
		log.Error().Err(runErr).Msg("stopped with an error")
	}
	if err := o.Close(); err != nil {
		fmt.Fprintf(o.stderr, "%s: %v\n", o.file.binary, err)
	}
}

// Close closes the log file and releases its lock; nothing when the lines
// go to stderr. Lines written after it go to stderr. The compression of a
// file rolled just before is not waited for: lumberjack compresses and
// removes old rolled files in a goroutine it starts at the first open and
// never stops (one per Output, for the process's life; lumberjack offers
// no way to end it); a compression the end of the process cuts short
// leaves the rolled file whole, and the next start compresses it again.
func (o *Output) Close() error {
	if o.file == nil {
		return nil
	}
	return o.file.close()
}

// fileWriter writes log lines to the rolled file. A line whose write fails
// (a full disk, a file removed with its directory) goes to stderr instead,
// never lost nor returned as an error to zerolog, which would only print
// its own complaint; stderr is told once when the writes start failing
// and once when they succeed again.
type fileWriter struct {
	mu   sync.Mutex
	file io.WriteCloser
	// lock is held on <path>.lock while the file is open (OpenOutput).
	lock    io.Closer
	path    string
	binary  string
	stderr  io.Writer
	failing bool
	closed  bool
	// closeErr is what close returned, for the closes after it.
	closeErr error
}

// Write implements io.Writer for one log line.
func (w *fileWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		// A line of a goroutine that outlives the run: a write to a
		// closed lumberjack.Logger would open the file again, unowned.
		_, _ = w.stderr.Write(p)
		return len(p), nil
	}
	_, err := w.file.Write(p)
	switch {
	case err == nil && w.failing:
		w.failing = false
		fmt.Fprintf(w.stderr, "%s: writing the log file %s works again\n", w.binary, w.path)
	case err != nil:
		if !w.failing {
			w.failing = true
			fmt.Fprintf(w.stderr, "%s: writing the log file %s failed: %v; lines go to stderr until a write succeeds\n", w.binary, w.path, err)
		}
		// The whole line, even if part of it reached the file.
		_, _ = w.stderr.Write(p)
	}
	return len(p), nil
}

// close closes the file, then releases its lock; the lines written after
// it go to stderr. A second close returns the first's error.
func (w *fileWriter) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.closeErr
	}
	w.closed = true
	if err := w.file.Close(); err != nil {
		w.closeErr = fmt.Errorf("close the log file %s: %w", w.path, err)
	}
	w.closeErr = errors.Join(w.closeErr, w.lock.Close())
	return w.closeErr
}

package logging

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/configs"
)

// rolledName is lumberjack's name of a rolled broker.log: its UTC time,
// to the millisecond, and .gz once compressed.
var rolledName = regexp.MustCompile(`^broker-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}\.log(\.gz)?$`)

// writeSeqLines logs n lines of about 200 bytes, each with its number.
func writeSeqLines(t *testing.T, cfg configs.LogFile, n int) *bytes.Buffer {
	t.Helper()
	var stderr bytes.Buffer
	log, out, err := Start("broker", cfg, "info", JSON, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 160)
	for i := range n {
		log.Info().Int("seq", i).Str("pad", pad).Msg("line")
	}
	out.Finish(log, nil)
	return &stderr
}

// rolledFiles waits (lumberjack compresses and removes in a goroutine of
// its own) until dir holds no rolled file left uncompressed and done says
// the count of gzipped ones is final, and returns their names; a hang
// guard fails the test if that never happens. A compression removes the
// uncompressed file once the gzipped one is whole; a removal of the
// oldest precedes the compression of the same round.
func rolledFiles(t *testing.T, dir string, done func(gz int) bool) []string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var gz, plain []string
		for _, e := range entries {
			switch name := e.Name(); {
			case name == "broker.log" || name == "broker.log.lock":
			case !rolledName.MatchString(name):
				t.Fatalf("unexpected file %s in the log directory", name)
			case strings.HasSuffix(name, ".gz"):
				gz = append(gz, name)
			default:
				plain = append(plain, name)
			}
		}
		if len(plain) == 0 && done(len(gz)) {
			return gz
		}
		if time.Now().After(deadline) {
			t.Fatalf("rolled files: gzipped %v, not %v", gz, plain)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// seqsIn returns the seq field of each line of r, counted.
func seqsIn(t *testing.T, r io.Reader, seen map[int]int) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var m struct {
			Seq     *int   `json:"seq"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		if m.Seq != nil {
			seen[*m.Seq]++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// allSeqs reads the live file and the gzipped rolled ones.
func allSeqs(t *testing.T, dir string, rolled []string) map[int]int {
	t.Helper()
	seen := map[int]int{}
	live, err := os.Open(filepath.Join(dir, "broker.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	seqsIn(t, live, seen)
	for _, name := range rolled {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		seqsIn(t, zr, seen)
		if err := zr.Close(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f.Close()
	}
	return seen
}

// Lines past the size limit roll the file into gzipped files named by
// their time beside it, and every line written is in the live file or a
// rolled one, once; stderr only says where the log is.
func TestFileRollsAndKeepsEveryLine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs", "rocketmqlogs") // created
	const n = 14000                                           // about 3.3 MiB: three rolls at 1 MiB
	stderr := writeSeqLines(t, configs.LogFile{Dir: dir, MaxSizeMiB: 1, Compress: true}, n)
	// Every roll is done when the run ends, none removed.
	rolled := rolledFiles(t, dir, func(int) bool { return true })
	if len(rolled) < 2 {
		t.Fatalf("rolled files %v: want at least 2", rolled)
	}
	seen := allSeqs(t, dir, rolled)
	for i := range n {
		if seen[i] != 1 {
			t.Fatalf("line %d is in the files %d times", i, seen[i])
		}
	}
	if len(seen) != n {
		t.Fatalf("%d numbered lines in the files, %d written", len(seen), n)
	}
	if want := "broker: logging to " + filepath.Join(dir, "broker.log") + "\n"; stderr.String() != want {
		t.Fatalf("stderr %q, want %q", stderr, want)
	}
	// The mode the umask leaves of 0644, as RocketMQ's files: readable
	// by a log shipper of another user.
	mode := os.FileMode(0o644 &^ umask())
	for _, name := range append(rolled, "broker.log") {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 1<<20 || fi.Mode().Perm() != mode {
			t.Fatalf("%s: %d bytes, mode %v; want at most 1 MiB, %v", name, fi.Size(), fi.Mode().Perm(), mode)
		}
	}
}

// Past logMaxRolledFiles rolled files the oldest go: what remains is the
// newest lines, without a gap.
func TestFileKeepsMaxRolledFiles(t *testing.T) {
	dir := t.TempDir()
	const n = 22000 // about 5 MiB: five rolls at 1 MiB
	writeSeqLines(t, configs.LogFile{Dir: dir, MaxSizeMiB: 1, MaxRolledFiles: 2, Compress: true}, n)
	seen := allSeqs(t, dir, rolledFiles(t, dir, func(gz int) bool { return gz == 2 }))
	first := n - len(seen)
	if first <= 0 {
		t.Fatalf("all %d lines kept with logMaxRolledFiles 2", len(seen))
	}
	for i := first; i < n; i++ {
		if seen[i] != 1 {
			t.Fatalf("line %d is in the files %d times (kept %d..%d)", i, seen[i], first, n-1)
		}
	}
}

// A log directory that cannot be created, or a file another process
// writes, is an error of the start that names it.
func TestUnusableLogDirIsAStartError(t *testing.T) {
	base := t.TempDir()
	notDir := filepath.Join(base, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"under a file": filepath.Join(notDir, "logs"),
		"a file":       notDir,
	}
	if _, err := os.Stat("/dev/full"); err == nil { // a file whose writes fail
		full := filepath.Join(base, "full")
		if err := os.Mkdir(full, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/dev/full", filepath.Join(full, "broker.log")); err != nil {
			t.Fatal(err)
		}
		cases["full"] = full
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(base, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		cases["not writable"] = ro
	}
	for name, dir := range cases {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			_, out, err := Start("broker", configs.LogFile{Dir: dir, MaxSizeMiB: 1}, "info", JSON, &stderr)
			if err == nil {
				out.Close()
				t.Fatalf("log directory %s accepted", dir)
			}
			if !strings.Contains(err.Error(), "logDir") || !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %q does not name logDir and %s", err, dir)
			}
			if stderr.Len() != 0 {
				t.Fatalf("stderr %q", stderr.String())
			}
		})
	}

	t.Run("held by another", func(t *testing.T) {
		dir := filepath.Join(base, "shared")
		first, err := OpenOutput("broker", configs.LogFile{Dir: dir, MaxSizeMiB: 1}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		_, err = OpenOutput("broker", configs.LogFile{Dir: dir, MaxSizeMiB: 1}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "another process") {
			t.Fatalf("second writer of %s: %v", dir, err)
		}
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}
		again, err := OpenOutput("broker", configs.LogFile{Dir: dir, MaxSizeMiB: 1}, io.Discard)
		if err != nil {
			t.Fatalf("after the first closed: %v", err)
		}
		again.Close()
	})
}

// Without logDir the lines go to stderr, as before, and no file is made.
func TestNoLogDirKeepsStderr(t *testing.T) {
	t.Chdir(t.TempDir())
	var stderr bytes.Buffer
	log, out, err := Start("broker", configs.LogFile{MaxSizeMiB: 128, MaxRolledFiles: 20, Compress: true}, "info", JSON, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if out.Writer() != io.Writer(&stderr) || out.Path() != "" {
		t.Fatalf("writer %T, path %q", out.Writer(), out.Path())
	}
	log.Info().Msg("to stderr")
	out.Finish(log, errors.New("boom"))
	if s := stderr.String(); strings.Count(s, "\n") != 1 || !strings.Contains(s, `"message":"to stderr"`) {
		t.Fatalf("stderr %q: want the one line (main prints the run's error)", s)
	}
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Fatalf("files made: %v", entries)
	}
}

// A line the file refuses (lumberjack's: a line longer than the size at
// which the file rolls) goes to stderr with a line saying so, rather than
// being lost; the next lines go to the file again.
func TestRefusedLineGoesToStderr(t *testing.T) {
	dir := t.TempDir()
	var stderr bytes.Buffer
	log, out, err := Start("broker", configs.LogFile{Dir: dir, MaxSizeMiB: 1}, "info", JSON, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Int("seq", 1).Msg("one")
	log.Info().Int("seq", 2).Str("pad", strings.Repeat("x", 3<<19)).Msg("two")
	log.Info().Int("seq", 3).Msg("three")
	out.Finish(log, errors.New("boom"))
	path := filepath.Join(dir, "broker.log")
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 4 || lines[0] != "broker: logging to "+path ||
		!strings.HasPrefix(lines[1], "broker: writing the log file "+path+" failed: ") ||
		!strings.Contains(lines[2], `"seq":2`) || lines[3] != "broker: writing the log file "+path+" works again" {
		t.Fatalf("stderr:\n%.600s", stderr.String())
	}
	seen := allSeqs(t, dir, nil)
	if seen[1] != 1 || seen[3] != 1 || seen[2] != 0 {
		t.Fatalf("lines in the file: %v", seen)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(file, []byte(`"error":"boom"`)) {
		t.Fatalf("the run's error is not in the file:\n%s", file)
	}
}

// failingFile fails the writes while fail is set.
type failingFile struct {
	bytes.Buffer
	fail bool
}

func (f *failingFile) Write(p []byte) (int, error) {
	if f.fail {
		return 0, fmt.Errorf("no space left on device")
	}
	return f.Buffer.Write(p)
}

func (f *failingFile) Close() error { return nil }

// countedLock counts its releases.
type countedLock struct{ closes int }

func (l *countedLock) Close() error { l.closes++; return nil }

// Stderr is told once when writes start failing and once when they work
// again; each line is in the file or on stderr. After the close, lines go
// to stderr; the close releases the file's lock, once however often it
// is called.
func TestWriteFailureAndRecovery(t *testing.T) {
	var stderr bytes.Buffer
	file := &failingFile{}
	lock := &countedLock{}
	w := &fileWriter{file: file, lock: lock, path: "/logs/broker.log", binary: "broker", stderr: &stderr}
	write := func(s string) {
		if n, err := w.Write([]byte(s + "\n")); err != nil || n != len(s)+1 {
			t.Fatalf("write %q: %d, %v", s, n, err)
		}
	}
	write("a")
	file.fail = true
	write("b")
	write("c")
	file.fail = false
	write("d")
	for range 2 {
		if err := w.close(); err != nil {
			t.Fatal(err)
		}
	}
	if lock.closes != 1 {
		t.Fatalf("the lock was released %d times, want 1", lock.closes)
	}
	write("e")
	if file.String() != "a\nd\n" {
		t.Fatalf("file %q", file.String())
	}
	want := "broker: writing the log file /logs/broker.log failed: no space left on device; lines go to stderr until a write succeeds\n" +
		"b\nc\nbroker: writing the log file /logs/broker.log works again\ne\n"
	if stderr.String() != want {
		t.Fatalf("stderr %q\nwant %q", stderr.String(), want)
	}
}

// A leading ~ of logDir is the home directory (RocketMQ's logs are in
// ~/logs/rocketmqlogs).
func TestLogDirUnderHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	out, err := OpenOutput("namesrv", configs.LogFile{Dir: "~/logs/rocketmqlogs", MaxSizeMiB: 100}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	want := filepath.Join(home, "logs", "rocketmqlogs", "namesrv.log")
	if out.Path() != want {
		t.Fatalf("path %s, want %s", out.Path(), want)
	}
	if _, err := os.Stat(want); err != nil {
		t.Fatalf("the file is not created at the start: %v", err)
	}
}

// umask reads the process's umask.
func umask() int {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return m
}

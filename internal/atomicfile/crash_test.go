package atomicfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// childEnv makes the test binary a child that replaces one file with
// version after version until it is killed.
const childEnv = "ATOMICFILE_CRASH_CHILD"

func TestMain(m *testing.M) {
	if arg := os.Getenv(childEnv); arg != "" {
		path, base, _ := strings.Cut(arg, ",")
		first, _ := strconv.Atoi(base)
		runChild(path, first)
		return
	}
	os.Exit(m.Run())
}

// version builds the content of version v: a header naming it, 64 KiB of
// bytes derived from it, and a checksum line, so that a mix of two
// versions or a cut is detected.
func version(v int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "version %d\n", v)
	body := bytes.Repeat([]byte{byte('a' + v%26)}, 64<<10)
	b.Write(body)
	sum := sha256.Sum256(b.Bytes())
	fmt.Fprintf(&b, "\n%s\n", hex.EncodeToString(sum[:]))
	return b.Bytes()
}

// parseVersion returns the version a file holds, or an error when it is
// not one whole version.
func parseVersion(data []byte) (int, error) {
	head, _, ok := bytes.Cut(data, []byte("\n"))
	if !ok || !bytes.HasPrefix(head, []byte("version ")) {
		return 0, fmt.Errorf("no version header in %d bytes", len(data))
	}
	v, err := strconv.Atoi(string(head[len("version "):]))
	if err != nil {
		return 0, fmt.Errorf("bad header %q", head)
	}
	if !bytes.Equal(data, version(v)) {
		return 0, fmt.Errorf("%d bytes are not version %d whole", len(data), v)
	}
	return v, nil
}

// runChild writes versions first, first+1, ... to path until killed,
// reporting each on stdout once WriteFile returned.
func runChild(path string, first int) {
	fmt.Println("ready")
	for v := first; ; v++ {
		if err := WriteFile(path, version(v), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		fmt.Println("wrote", v)
	}
}

// TestWriteFileSurvivesSIGKILL: a child replaces a file over and over and
// is SIGKILLed at random moments; after every kill the file holds one
// whole version, at least the last one the child reported written, and
// the next child goes on from it.
func TestWriteFileSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	path := filepath.Join(t.TempDir(), "state.json")
	if err := WriteFile(path, version(0), 0o644); err != nil {
		t.Fatal(err)
	}
	const kills = 20
	last := 0 // the newest version any child reported written
	for k := 0; k < kills; k++ {
		first := (k + 1) * 1_000_000 // versions of child k: first, first+1, ...
		cmd, _, lines := testutil.StartChildLines(t, fmt.Sprintf("%s=%s,%d", childEnv, path, first))
		time.Sleep(time.Duration(rand.IntN(30_000)) * time.Microsecond)
		testutil.KillChild(cmd)
		for l := range lines {
			if n, ok := strings.CutPrefix(l, "wrote "); ok {
				last, _ = strconv.Atoi(n)
			}
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("kill %d: %v", k, err)
		}
		v, err := parseVersion(data)
		if err != nil {
			t.Fatalf("kill %d: the file is not one whole version: %v", k, err)
		}
		// The file holds the newest version reported written or the one
		// after it (written, not yet reported), never an older one.
		if v != last && v != last+1 && !(last < first && v == first) {
			t.Fatalf("kill %d: the file holds version %d, the newest reported written is %d", k, v, last)
		}
		last = v
	}
}

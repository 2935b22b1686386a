package rocksread

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readScan parses `ldb --hex scan` output: "0xKEY : 0xVALUE" lines.
func readScan(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " : ")
		if !ok {
			t.Fatalf("%s: line %q", path, sc.Text())
		}
		out = append(out, strings.ToLower(strings.TrimPrefix(k, "0x"))+" "+strings.ToLower(strings.TrimPrefix(v, "0x")))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func scanAll(db *DB, cf string) ([]string, error) {
	var out []string
	err := db.Scan(cf, func(k, v []byte) error {
		out = append(out, hex.EncodeToString(k)+" "+hex.EncodeToString(v))
		return nil
	})
	return out, err
}

// TestScanMatchesLDB reads every column family of the databases ldb wrote
// (testdata/gen.sh) and compares with what `ldb scan` printed for them.
func TestScanMatchesLDB(t *testing.T) {
	for _, name := range []string{"cq", "topics"} {
		db, err := Open(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, cf := range db.ColumnFamilies() {
			t.Run(name+"/"+cf.Name, func(t *testing.T) {
				want := readScan(t, filepath.Join("testdata", fmt.Sprintf("%s.%s.scan", name, cf.Name)))
				got, err := scanAll(db, cf.Name)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("scan differs from ldb's:\n got %d entries\nwant %d entries\n%s", len(got), len(want), diffLines(got, want))
				}
			})
		}
		_ = db.Close()
	}
}

func diffLines(got, want []string) string {
	var b strings.Builder
	g := map[string]bool{}
	for _, l := range got {
		g[l] = true
	}
	w := map[string]bool{}
	for _, l := range want {
		w[l] = true
		if !g[l] {
			fmt.Fprintf(&b, "missing %s\n", l)
		}
	}
	for _, l := range got {
		if !w[l] {
			fmt.Fprintf(&b, "extra   %s\n", l)
		}
	}
	return b.String()
}

func TestScanUnknownColumnFamily(t *testing.T) {
	db, err := Open(filepath.Join("testdata", "cq"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Scan("popState", func(k, v []byte) error { return nil }); !errors.Is(err, ErrNoColumnFamily) {
		t.Fatalf("Scan(popState) = %v, want ErrNoColumnFamily", err)
	}
}

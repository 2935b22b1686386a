package rocksdbcq

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// ldbCQ is a RocksDB ConsumeQueue written by ldb (internal/rocksread's
// gen.sh): TopicA queues 0-2, TopicC queue 0, TopicB's queue deleted by a
// range deletion, unit TopicA/0@7 deleted, TopicA/0@5 overwritten to point
// at phy 999999, the checkpoint 50220 in the WAL.
var ldbCQ = filepath.Join("..", "..", "internal", "rocksread", "testdata", "cq")

func render(v *View) string {
	var b strings.Builder
	fmt.Fprintf(&b, "checkpoint=%d foreign=%d orphans=%d\n", v.Checkpoint, v.Foreign, v.Orphans)
	for _, q := range v.Queues {
		fmt.Fprintf(&b, "%s/%d min=%d max=%d firstPhy=%d lastEnd=%d written=%d\n", q.Topic, q.QueueID, q.Min, q.Max, q.FirstPhy, q.LastEnd, q.Written)
	}
	return b.String()
}

func TestRead(t *testing.T) {
	for _, c := range []struct {
		name           string
		minPhy, endPhy int64
		want           string
	}{
		{"whole log", 0, math.MaxInt64, `checkpoint=50220 foreign=0 orphans=0
TopicA/0 min=0 max=60 firstPhy=0 lastEnd=12000 written=60
TopicA/1 min=0 max=20 firstPhy=20000 lastEnd=23000 written=20
TopicA/2 min=0 max=1 firstPhy=50000 lastEnd=50060 written=1
TopicC/0 min=0 max=2 firstPhy=50060 lastEnd=50220 written=2
`},
		// Retention deleted everything below 20000: TopicA/0 keeps its
		// numbering with no unit left (its unit 5, overwritten to point
		// past the log's end, does not count).
		{"retention", 20000, 60000, `checkpoint=50220 foreign=0 orphans=0
TopicA/0 min=60 max=60 firstPhy=0 lastEnd=12000 written=60
TopicA/1 min=0 max=20 firstPhy=20000 lastEnd=23000 written=20
TopicA/2 min=0 max=1 firstPhy=50000 lastEnd=50060 written=1
TopicC/0 min=0 max=2 firstPhy=50060 lastEnd=50220 written=2
`},
		// The CommitLog ends at 23000: units past it are cut, and queues
		// whose max record lies past it with no unit below end at 0.
		{"short log", 0, 23000, `checkpoint=50220 foreign=0 orphans=0
TopicA/0 min=0 max=60 firstPhy=0 lastEnd=12000 written=60
TopicA/1 min=0 max=20 firstPhy=20000 lastEnd=23000 written=20
TopicA/2 min=0 max=0 firstPhy=0 lastEnd=0 written=1
TopicC/0 min=0 max=0 firstPhy=0 lastEnd=0 written=2
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := Read(ldbCQ, c.minPhy, c.endPhy)
			if err != nil {
				t.Fatal(err)
			}
			if got := render(v); got != c.want {
				t.Errorf("got\n%swant\n%s", got, c.want)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	k := []byte("\x00\x00\x00\x06\x01TopicA\x01max\x01\x00\x00\x00\x02")
	if got := DescribeKey(OffsetsColumnFamily, k); got != "TopicA max 2" {
		t.Errorf("DescribeKey = %q", got)
	}
	if got := DescribeKey(UnitsColumnFamily, k); got != "" {
		t.Errorf("an offset key described as a unit key: %q", got)
	}
}

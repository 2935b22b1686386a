package cqcompare

import (
	"fmt"
	"strings"
)

// summaryDifferences is the number of differences String lists.
const summaryDifferences = 10

// String summarises the report in a few lines, for a log line or an admin
// tool: a first line saying whether the stores agree and what was
// compared, then the first differences, one a line.
//
//	kv and file differ: 3 differences in 2 of 5 queues (2 topics, 1200 entries compared)
//	TopicA/0: max offset: kv 12, file 10
//	TopicA/0 at 7: entry: kv {phy 700 size 80 tags 0}, file {phy 700 size 81 tags 0}
//	TopicB/3: queue only in kv (max 4)
func (r Report) String() string {
	if r.OK() {
		return fmt.Sprintf("%s and %s agree: %d topics, %d queues, %d entries compared",
			r.Names[0], r.Names[1], r.Topics, r.Queues, r.Entries)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s and %s differ: %d differences in %d of %d queues (%d topics, %d entries compared)",
		r.Names[0], r.Names[1], r.DifferenceCount, r.QueuesWithDifferences, r.Queues, r.Topics, r.Entries)
	for i, d := range r.Differences {
		if i == summaryDifferences {
			break
		}
		b.WriteString("\n")
		b.WriteString(d.String())
	}
	if more := r.DifferenceCount - int64(min(len(r.Differences), summaryDifferences)); more > 0 {
		fmt.Fprintf(&b, "\n... and %d more", more)
	}
	return b.String()
}

package broker

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's list of the keys UPDATE_BROKER_CONFIG changes while the
// broker runs (between its "runtime keys" markers) names every key of
// runtimeKeys and no other, so that it cannot fall behind the code again:
// it once lacked maxMsgsNumBatch and fifteen other keys.
func TestREADMEListsTheRuntimeKeys(t *testing.T) {
	const start, end = "<!-- runtime keys:", "<!-- end of the runtime keys -->"
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatalf("read the README: %v", err)
	}
	text := string(raw)
	from := strings.Index(text, start)
	to := strings.Index(text, end)
	if from < 0 || to < from {
		t.Fatalf("the README has no list of runtime keys between %q and %q", start, end)
	}
	// Every `key` between the markers, the comment line left out.
	list := text[from:to]
	list = list[strings.Index(list, "-->")+len("-->"):]
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("`([A-Za-z0-9]+)`").FindAllStringSubmatch(list, -1) {
		listed[m[1]] = true
	}
	var missing, extra []string
	for k := range runtimeKeys {
		if !listed[k] {
			missing = append(missing, k)
		}
	}
	for k := range listed {
		if !runtimeKeys[k] {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 {
		t.Errorf("README's runtime keys lack %v, which UPDATE_BROKER_CONFIG changes (runtimeKeys)", missing)
	}
	if len(extra) > 0 {
		t.Errorf("README's runtime keys name %v, which UPDATE_BROKER_CONFIG refuses (not in runtimeKeys)", extra)
	}
}

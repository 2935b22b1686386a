package kvindex

import (
	"reflect"
	"testing"
)

// FileQueuesBehind names a queue only when its files end below both the
// RocksDB ConsumeQueue's end and its minimum (records between gone); a
// queue whose missing records are all still in the CommitLog, one whose
// files go as far, one without files, and one only the files hold are
// not named.
func TestFileQueuesBehind(t *testing.T) {
	files := map[string]map[int32]QueueBounds{
		"T": {0: {Min: 0, Max: 5}, 1: {Min: 0, Max: 5}, 2: {Min: 0, Max: 9}, 3: {Min: 5, Max: 5}, 4: {Min: 0, Max: 3}},
		"F": {0: {Min: 0, Max: 7}},
	}
	rocks := map[string]map[int32]QueueBounds{
		"T": {
			0: {Min: 9, Max: 9},  // emptied by retention past the files' end
			1: {Min: 5, Max: 12}, // records from the files' end on still there
			2: {Min: 9, Max: 9},  // files as far
			3: {Min: 8, Max: 11}, // some records past the files' end gone
			4: {Min: 3, Max: 3},  // files as far as the emptied queue's end
		},
		"R": {0: {Min: 4, Max: 4}}, // no files
	}
	got := FileQueuesBehind(files, rocks)
	want := []FileQueueBehind{
		{Topic: "T", QueueID: 0, FilesEnd: 5, RocksEnd: 9, RocksMin: 9},
		{Topic: "T", QueueID: 3, FilesEnd: 5, RocksEnd: 11, RocksMin: 8},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FileQueuesBehind = %+v, want %+v", got, want)
	}
	if s := want[0].String(); s != "T/0 (files end at 5, RocksDB ConsumeQueue at 9, CommitLog records from 9)" {
		t.Errorf("String() = %q", s)
	}
}

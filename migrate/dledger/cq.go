package dledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// translateConsumeQueue writes RocketMQ's file ConsumeQueue of a DLedger
// store (src, <root>/consumequeue: <topic>/<queueId>/<files> of 20-byte
// units [phyOffset:8][size:4][tagsCode:8]) to dst with each unit's
// physical offset replaced by the record's new one (offsets), so that a
// broker's first open reads the same queues, bounds and first entries
// over the new CommitLog. Units of records below firstOld (deleted by
// retention before the import) keep their offset, which lies below the
// new CommitLog's start too; blank and zero units stay as they are; a
// unit naming a record at or past oldEnd (past the imported end: a torn
// tail) is zeroed with every later unit of its queue, as RocketMQ's start
// cuts the ConsumeQueue back to its CommitLog. A unit naming an offset
// between where no imported record begins is an error naming the file.
func translateConsumeQueue(src, dst string, offsets *offsetMap, firstOld, oldEnd int64) (files int, cut int64, err error) {
	topics, err := os.ReadDir(src)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("import dledger: read consumequeue: %w", err)
	}
	for _, t := range topics {
		if !t.IsDir() {
			continue
		}
		queues, err := os.ReadDir(filepath.Join(src, t.Name()))
		if err != nil {
			return files, cut, fmt.Errorf("import dledger: read consumequeue: %w", err)
		}
		for _, q := range queues {
			if !q.IsDir() {
				continue
			}
			rel := filepath.Join(t.Name(), q.Name())
			n, c, err := translateQueue(filepath.Join(src, rel), filepath.Join(dst, rel), offsets, firstOld, oldEnd)
			files += n
			cut += c
			if err != nil {
				return files, cut, err
			}
		}
	}
	return files, cut, nil
}

// translateQueue translates one queue's files (translateConsumeQueue).
func translateQueue(src, dst string, offsets *offsetMap, firstOld, oldEnd int64) (files int, cut int64, err error) {
	ents, err := os.ReadDir(src)
	if err != nil {
		return 0, 0, fmt.Errorf("import dledger: read consumequeue: %w", err)
	}
	var names []string
	for _, e := range ents {
		if _, ok := parseFileName(e.Name()); ok && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return 0, 0, nil
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, 0, fmt.Errorf("import dledger: %w", err)
	}
	ended := false // a unit past the imported end was met: the rest is cut
	for _, name := range names {
		path := filepath.Join(src, name)
		b, err := os.ReadFile(path)
		if err != nil {
			return files, cut, fmt.Errorf("import dledger: %w", err)
		}
		for i := 0; i+filecq.UnitSize <= len(b); i += filecq.UnitSize {
			u := b[i : i+filecq.UnitSize]
			phy := int64(binary.BigEndian.Uint64(u))
			size := int32(binary.BigEndian.Uint32(u[8:]))
			tags := int64(binary.BigEndian.Uint64(u[12:]))
			switch {
			case ended:
				if phy != 0 || size != 0 || tags != 0 {
					cut++
				}
				clear(u)
				continue
			case phy < 0 || size <= 0:
				// RocketMQ's scan ends here: the file's unwritten rest.
				continue
			case phy == 0 && size == math.MaxInt32 && tags == 0:
				continue // a blank unit below a queue's first entry
			case phy < firstOld || firstOld < 0 && phy < oldEnd:
				continue // retention deleted the record before the import
			case phy >= oldEnd:
				ended = true
				cut++
				clear(u)
				continue
			}
			to, ok := offsets.find(phy)
			if !ok {
				return files, cut, fmt.Errorf("import dledger: consumequeue file %s, unit %d: offset %d, where no message of the DLedger log begins "+
					"(move the store's consumequeue/ aside to import without it: the queues are rebuilt from the messages, "+
					"and a queue whose messages retention had all deleted restarts at 0)", path, i/filecq.UnitSize, phy)
			}
			binary.BigEndian.PutUint64(u, uint64(to))
		}
		if err := writeFileSync(filepath.Join(dst, name), b); err != nil {
			return files, cut, err
		}
		files++
	}
	return files, cut, nil
}

package rocksread

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// Table magic numbers (the last 8 bytes of a table file).
const (
	magicBlockBased       = 0x88e241b785f4cff7
	magicLegacyBlockBased = 0xdb4775248b80fb57
	magicPlain            = 0x8242229663bf9564
	magicLegacyPlain      = 0x4f3418eb7a8f13b8
	magicCuckoo           = 0x926789d0c5f17873

	footerSize        = 53 // checksum type, two handles padded to 40, version, magic
	minFormatVersion  = 2
	maxFormatVersion  = 5
	indexBinarySearch = 0
	indexHashSearch   = 1
	indexTwoLevel     = 2
	indexWithFirstKey = 3
)

// Meta block names and table properties the reader uses.
const (
	metaProperties       = "rocksdb.properties"
	metaRangeDel         = "rocksdb.range_del"
	metaCompressionDict  = "rocksdb.compression_dict"
	propIndexType        = "rocksdb.block.based.table.index.type"
	propIndexUserKey     = "rocksdb.index.key.is.user.key"
	propIndexDelta       = "rocksdb.index.value.is.delta.encoded"
	propColumnFamilyID   = "rocksdb.column.family.id"
	propComparator       = "rocksdb.comparator"
	propExternalVersion  = "rocksdb.external_sst_file.version"
	propColumnFamilyName = "rocksdb.column.family.name"
)

// footer is the fixed-size end of a block-based table.
type footer struct {
	checksum      byte
	metaindex     blockHandle
	index         blockHandle
	formatVersion uint32
}

// decodeFooter parses the last footerSize bytes of a table file.
func decodeFooter(b []byte) (footer, error) {
	var f footer
	if len(b) < 8 {
		return f, corruptf("table footer of %d bytes", len(b))
	}
	switch magic := binary.LittleEndian.Uint64(b[len(b)-8:]); magic {
	case magicBlockBased:
	case magicLegacyBlockBased:
		return f, unsupportedf("block-based table format_version 0")
	case magicPlain, magicLegacyPlain:
		return f, unsupportedf("plain table format")
	case magicCuckoo:
		return f, unsupportedf("cuckoo table format")
	default:
		return f, corruptf("table magic %#x", magic)
	}
	if len(b) != footerSize {
		return f, corruptf("table footer of %d bytes", len(b))
	}
	f.formatVersion = binary.LittleEndian.Uint32(b[footerSize-12:])
	if f.formatVersion < minFormatVersion || f.formatVersion > maxFormatVersion {
		return f, unsupportedf("block-based table format_version %d (reads %d-%d)", f.formatVersion, minFormatVersion, maxFormatVersion)
	}
	f.checksum = b[0]
	if f.checksum > checksumXXH3 {
		return f, unsupportedf("block checksum type %d", f.checksum)
	}
	r := byteReader{b: b[1 : footerSize-12]}
	f.metaindex = decodeHandle(&r)
	f.index = decodeHandle(&r)
	if !r.ok() {
		return f, corruptf("table footer: bad block handles")
	}
	return f, nil
}

// table is one open SST file.
type table struct {
	f         *os.File
	name      string
	size      uint64
	footer    footer
	dec       *decompressor
	props     map[string][]byte
	userIndex bool // index keys are user keys (no seqno)
	delta     bool // index values are delta-encoded
	tombs     []tombstone
}

// openTable opens and checks an SST: footer, metaindex, properties and
// range tombstones. Data blocks are read later, one at a time.
func openTable(path, name string, dec *decompressor) (*table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open table %s: %w", name, err)
	}
	t := &table{f: f, name: name, dec: dec}
	if err := t.load(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return t, nil
}

func (t *table) close() error { return t.f.Close() }

func (t *table) load() error {
	st, err := t.f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", t.name, err)
	}
	t.size = uint64(st.Size())
	if t.size < footerSize {
		return corruptf("%s: %d bytes is shorter than a table footer", t.name, t.size)
	}
	buf := make([]byte, footerSize)
	if _, err := t.f.ReadAt(buf, int64(t.size-footerSize)); err != nil {
		return fmt.Errorf("read %s footer: %w", t.name, err)
	}
	if t.footer, err = decodeFooter(buf); err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	meta, err := t.readBlock(t.footer.metaindex, "metaindex")
	if err != nil {
		return err
	}
	it, err := newBlockIter(meta, t.name+" metaindex", false)
	if err != nil {
		return err
	}
	handles := map[string]blockHandle{}
	for it.next() {
		r := byteReader{b: it.value}
		h := decodeHandle(&r)
		if !r.ok() {
			return corruptf("%s metaindex: bad handle for %q", t.name, it.key)
		}
		handles[string(it.key)] = h
	}
	if it.err != nil {
		return it.err
	}
	if _, ok := handles[metaCompressionDict]; ok {
		return unsupportedf("%s: compression dictionary (max_dict_bytes)", t.name)
	}
	h, ok := handles[metaProperties]
	if !ok {
		return corruptf("%s: no properties block", t.name)
	}
	if err := t.loadProperties(h); err != nil {
		return err
	}
	if h, ok := handles[metaRangeDel]; ok {
		if err := t.loadTombstones(h); err != nil {
			return err
		}
	}
	return nil
}

func (t *table) loadProperties(h blockHandle) error {
	b, err := t.readBlock(h, "properties")
	if err != nil {
		return err
	}
	it, err := newBlockIter(b, t.name+" properties", false)
	if err != nil {
		return err
	}
	t.props = map[string][]byte{}
	for it.next() {
		t.props[string(it.key)] = append([]byte(nil), it.value...)
	}
	if it.err != nil {
		return it.err
	}
	if _, ok := t.props[propExternalVersion]; ok {
		return unsupportedf("%s: an ingested external SST file", t.name)
	}
	if c, ok := t.props[propComparator]; ok && string(c) != bytewiseComparator {
		return unsupportedf("%s: comparator %q", t.name, c)
	}
	if v, ok := t.props[propIndexType]; ok {
		if len(v) != 4 {
			return corruptf("%s: index type property of %d bytes", t.name, len(v))
		}
		switch typ := binary.LittleEndian.Uint32(v); typ {
		case indexBinarySearch, indexHashSearch:
		case indexTwoLevel:
			return unsupportedf("%s: partitioned index (kTwoLevelIndexSearch)", t.name)
		case indexWithFirstKey:
			return unsupportedf("%s: index with first keys (kBinarySearchWithFirstKey)", t.name)
		default:
			return corruptf("%s: index type %d", t.name, typ)
		}
	}
	t.userIndex = t.propUint(propIndexUserKey) == 1
	t.delta = t.propUint(propIndexDelta) == 1
	return nil
}

// propUint decodes a numeric table property (a varint64); 0 if absent or bad.
func (t *table) propUint(name string) uint64 {
	v, ok := t.props[name]
	if !ok {
		return 0
	}
	r := byteReader{b: v}
	n := r.uvarint64()
	if !r.ok() {
		return 0
	}
	return n
}

// columnFamilyID is the id the table was written for, if recorded.
func (t *table) columnFamilyID() (uint32, bool) {
	v, ok := t.props[propColumnFamilyID]
	if !ok {
		return 0, false
	}
	r := byteReader{b: v}
	id := r.uvarint64()
	// 0x7fffffff (kUnknownColumnFamily) marks a table written outside a DB.
	if !r.ok() || id > 0xffffffff || id == 0x7fffffff {
		return 0, false
	}
	return uint32(id), true
}

// readBlock reads the block h points to, verifies its checksum and
// decompresses it.
func (t *table) readBlock(h blockHandle, what string) ([]byte, error) {
	if h.size > maxBlockSize || h.offset > t.size || h.size+blockTrailerSize > t.size-h.offset {
		return nil, corruptf("%s %s block: handle [%d, +%d) outside a %d-byte file", t.name, what, h.offset, h.size, t.size)
	}
	buf := make([]byte, h.size+blockTrailerSize)
	if _, err := t.f.ReadAt(buf, int64(h.offset)); err != nil && err != io.EOF {
		return nil, fmt.Errorf("read %s %s block at %d: %w", t.name, what, h.offset, err)
	}
	return checkBlock(buf, t.footer.checksum, t.dec, fmt.Sprintf("%s %s block at %d", t.name, what, h.offset))
}

// checkBlock verifies a block with its trailer and returns its contents.
func checkBlock(buf []byte, checksum byte, dec *decompressor, where string) ([]byte, error) {
	if len(buf) < blockTrailerSize {
		return nil, corruptf("%s: %d bytes", where, len(buf))
	}
	n := len(buf) - blockTrailerSize
	data, kind := buf[:n], buf[n]
	if checksum != checksumNone {
		want := binary.LittleEndian.Uint32(buf[n+1:])
		got, ok := blockChecksum(checksum, data, kind)
		if !ok {
			return nil, unsupportedf("%s: checksum type %d", where, checksum)
		}
		if got != want {
			return nil, corruptf("%s: %s checksum %#08x, trailer says %#08x", where, checksumName(checksum), got, want)
		}
	}
	out, err := dec.decompress(kind, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return out, nil
}

// tombstone is a range deletion: user keys in [start, end) written before
// seq are deleted.
type tombstone struct {
	start, end []byte
	seq        uint64
}

func (t *table) loadTombstones(h blockHandle) error {
	b, err := t.readBlock(h, "range deletion")
	if err != nil {
		return err
	}
	it, err := newBlockIter(b, t.name+" range deletion", false)
	if err != nil {
		return err
	}
	for it.next() {
		ik, err := parseInternalKey(it.key)
		if err != nil {
			return fmt.Errorf("%s range deletion: %w", t.name, err)
		}
		if ik.kind != kindRangeDeletion {
			return corruptf("%s range deletion: entry of type %d", t.name, ik.kind)
		}
		t.tombs = append(t.tombs, tombstone{
			start: append([]byte(nil), ik.userKey...),
			end:   append([]byte(nil), it.value...),
			seq:   ik.seq,
		})
	}
	return it.err
}

// tableIter yields a table's internal entries in order, one data block at
// a time.
type tableIter struct {
	t     *table
	index *blockIter
	data  *blockIter
	err   error
	ent   entry
}

func (t *table) iter() (*tableIter, error) {
	b, err := t.readBlock(t.footer.index, "index")
	if err != nil {
		return nil, err
	}
	idx, err := newBlockIter(b, t.name+" index", t.delta)
	if err != nil {
		return nil, err
	}
	return &tableIter{t: t, index: idx}, nil
}

// next advances to the next entry; false at the end or on error (ti.err).
func (ti *tableIter) next() bool {
	for {
		if ti.err != nil {
			return false
		}
		if ti.data != nil && ti.data.next() {
			ik, err := parseInternalKey(ti.data.key)
			if err != nil {
				ti.err = fmt.Errorf("%s: %w", ti.t.name, err)
				return false
			}
			ti.ent = entry{key: ik.userKey, seq: ik.seq, kind: ik.kind, value: ti.data.value}
			return true
		}
		if ti.data != nil && ti.data.err != nil {
			ti.err = ti.data.err
			return false
		}
		if !ti.index.next() {
			ti.err = ti.index.err
			return false
		}
		h := ti.index.handle
		if !ti.t.delta {
			r := byteReader{b: ti.index.value}
			h = decodeHandle(&r)
			if !r.ok() {
				ti.err = corruptf("%s index: bad block handle", ti.t.name)
				return false
			}
		}
		b, err := ti.t.readBlock(h, "data")
		if err != nil {
			ti.err = err
			return false
		}
		if ti.data, err = newBlockIter(b, fmt.Sprintf("%s data block at %d", ti.t.name, h.offset), false); err != nil {
			ti.err = err
			return false
		}
	}
}

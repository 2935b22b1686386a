// Package rocksread reads a RocksDB directory, read-only and in pure Go, so
// a RocketMQ 5.3 store kept in RocksDB (the ConsumeQueue in consumequeue/,
// config in config/topics/, config/subscriptionGroups/,
// config/consumerOffsets/ or config/rdb/, KV POP state in kvStore/) can be
// moved to rocketkv without RocketMQ's tools.
//
// Usage:
//
//	db, err := rocksread.Open(dir) // CURRENT, MANIFEST, WAL replay
//	if err != nil { ... }
//	defer db.Close()
//	err = db.Scan("offset", func(key, value []byte) error {
//		// key, value: valid during the call only
//		return nil
//	})
//
// Open never writes, locks or deletes anything, so it can read a copy, or
// the directory of a stopped broker. (Reading a running RocksDB works only
// until a compaction deletes a file under the reader.) A DB is not safe for
// concurrent use. Scan streams: it collects the range deletions of every
// SST first, then merges the level-0 files and each deeper level (whose
// files do not overlap, read one after another), holding one block per
// open file; the unflushed WAL writes are held in memory from Open on.
//
// # What is read
//
// CURRENT names the MANIFEST. The MANIFEST is a log (below) of VersionEdit
// records; replaying them gives the column families (id, name, comparator,
// log number) and each one's live SST files by level:
//
//	VersionEdit := (tag:varint32 field)*
//	  1 comparator:string        2 log number:varint64     4 last sequence
//	  6 deleted file: level:varint32 number:varint64
//	  7/100/102/103 new file: level number [path id] size smallest largest
//	                [smallest seqno largest seqno] [custom fields, 103 only]
//	  200 column family id:varint32  201 add:name  202 drop
//	  300 in atomic group:remaining  tags with bit 13 set: string, ignored
//
// Edits in an atomic group apply together; a group the MANIFEST ends
// inside of was never committed and is dropped, as is a torn last record.
//
// Each column family reads its SST files (all levels, merged) plus the
// writes of every WAL file numbered at or above its log number: those were
// not flushed. The newest version of each user key wins; a deletion, a
// single deletion or a range deletion with a higher sequence number hides
// the older versions.
//
// # Log files (MANIFEST and WAL)
//
// A log is a run of 32 KiB blocks. A logical record is split into
// fragments that never cross a block; a block's tail shorter than a header
// is zero padding:
//
//	+----------+----------+------+------------+----------------+
//	| CRC32C   | length   | type | [log num]  | payload        |
//	| 4, masked| 2, LE    | 1    | 4, types   | length bytes   |
//	|          |          |      | 5-8 only   |                |
//	+----------+----------+------+------------+----------------+
//	type: 1 full, 2 first, 3 middle, 4 last, 5-8 the same in a recycled
//	file, 9 WAL compression (refused unless "none"), 10/11 timestamp sizes
//	(refused unless all 0)
//
// A WAL record is a write batch; its operations take consecutive sequence
// numbers from the header's:
//
//	+-----------+---------+-----------------------------------------------+
//	| sequence  | count   | ops: tag [cf:varint32 for tags 4-8, 0xE]      |
//	| 8, LE     | 4, LE   |      key:string [value:string]                |
//	+-----------+---------+-----------------------------------------------+
//	tags: 1/5 put, 0/4 delete, 7/8 single delete, 0xF/0xE range delete
//	(value = end key), 3 log data and 0xD no-op skipped; 2/6 merge,
//	0x10/0x11 blob index, 0x16/0x17 entities, 2PC markers refused
//
// A log that ends inside its last record (a writer that stopped mid-write)
// is read up to that record, as RocksDB's recovery does; a bad record
// anywhere else fails Open.
//
// # SST files (block-based table, format_version 2 to 5)
//
//	+--------------+-----+--------------+-------------+-----------+-------+-------+
//	| data block 1 | ... | range_del    | properties  | metaindex | index | footer|
//	| + trailer    |     | block        | block (and  | block     | block | 53 B  |
//	|              |     |              | filters ...)|           |       |       |
//	+--------------+-----+--------------+-------------+-----------+-------+-------+
//
//	footer: checksum type:1 | metaindex handle | index handle | pad to 41
//	        | format_version:4 LE | magic 0x88e241b785f4cff7:8 LE
//	handle: offset:varint64 size:varint64 (size without the trailer)
//	trailer: compression type:1 | checksum:4 LE over the block and the
//	         type byte (CRC32C masked, XXH32, low half of XXH64, or XXH3
//	         of the block with the type byte mixed in as type*0x6b9083d9)
//
// A compressed block (type 1 snappy, 2 zlib as raw deflate, 4/5 lz4, 7
// zstd) starts, from format_version 2 on, with its uncompressed size as a
// varint32, except snappy, which carries its own. A block is a run of
// prefix-compressed entries, then the restart offsets:
//
//	entry: shared:varint32 non_shared:varint32 [value length:varint32]
//	       key delta | value
//	block: entries | restart offsets:4 LE each | [hash buckets:1 each |
//	       bucket count:2 LE] | restarts:4 LE (bit 31: hash index present)
//
// Data block keys are internal keys, the user key followed by 8 LE bytes
// seq<<8|type (0 delete, 1 put, 7 single delete, 0xF range delete; 2 merge
// and the rest refused). Index entries point to data blocks; with
// format_version 4 and 5 (property rocksdb.index.value.is.delta.encoded)
// they have no value length, and a value is a full handle at a restart
// point and otherwise only the size difference to the previous block
// (zigzag varint; the offset follows the previous block and its trailer).
// From format_version 3 index keys may be user keys; the reader never
// needs them. The range deletion block's entries are a range's start (an
// internal key of type 0xF) and its end.
//
// # What is refused
//
// Open or Scan return an error wrapping ErrUnsupported, naming the file,
// for: table format_version 0, 1 or 6 and above; plain and cuckoo tables;
// partitioned indexes and indexes with first keys; compression
// dictionaries; bzip2 and xpress blocks; blob files; merge operands as the
// newest version of a key (RocketMQ configures a string-append merge
// operator but never merges); wide-column entities; user-defined
// timestamps; WAL compression; two-phase-commit markers in the WAL;
// ingested SST files; SSTs outside the first db_path; comparators other
// than the bytewise one. Damage (a checksum, a varint, an edit for a
// column family that does not exist) returns an error wrapping ErrCorrupt.
//
// RocketMQ's options (RocksDBOptionsFactory, ConfigHelper): block-based
// format_version 5, binary-search index, data-block hash index in the CQ
// column family, lz4 with zstd at the bottommost level there and no
// compression elsewhere, the bytewise comparator, RocksDB's default
// checksum. The CQ database writes no WAL; the config databases do.
package rocksread

package rocksread

import (
	"errors"
	"fmt"
)

// Errors returned while opening a directory or scanning a column family.
// Every error the package returns wraps one of them (or an os error for a
// file that cannot be read) and names the file and offset it comes from.
var (
	// ErrCorrupt is returned when bytes on disk contradict the format: a
	// block checksum that does not match, a varint that runs past its
	// buffer, a manifest edit for a column family that does not exist.
	ErrCorrupt = errors.New("rocksread: corrupt RocksDB data")

	// ErrUnsupported is returned for RocksDB features this reader does not
	// implement: table formats other than block-based format_version 2-5,
	// partitioned indexes, compression dictionaries, blob files, merge
	// operands, user-defined timestamps, ingested files, WAL compression,
	// comparators other than the bytewise one. RocketMQ's stores use none
	// of them (see the package doc).
	ErrUnsupported = errors.New("rocksread: unsupported RocksDB feature")

	// ErrNoColumnFamily is returned by Scan for a name the manifest does not
	// hold (or one that was dropped).
	ErrNoColumnFamily = errors.New("rocksread: no such column family")
)

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}

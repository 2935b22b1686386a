package configs

import "strconv"

// LogFile is where a binary writes its log lines: standard error (Dir
// empty, the default) or a file in Dir, rolled by size. Apache RocketMQ
// writes each server's log under ~/logs/rocketmqlogs (broker.log,
// namesrv.log, controller.log, proxy.log) and rolls it at a size into
// numbered gzip files; these keys give rocketkv's binaries the same, as
// rocketkv's own keys (RocketMQ sets its log files in logback XML, not in
// its configuration files).
type LogFile struct {
	// Dir is logDir: the directory of the log file; empty writes the
	// lines to standard error.
	Dir string
	// MaxSizeMiB is logMaxSizeMiB: the size in MiB at which the file is
	// rolled (logback's maxFileSize).
	MaxSizeMiB int
	// MaxRolledFiles is logMaxRolledFiles: how many rolled files are
	// kept, the oldest removed beyond it (logback's maxIndex); 0 keeps
	// them all.
	MaxRolledFiles int
	// Compress is logCompress: whether rolled files are gzipped.
	Compress bool
}

// The sizes and counts RocketMQ 5.3's logback files give each server's
// main log: rmq.broker.logback.xml's broker.log (128MB, maxIndex 20),
// rmq.namesrv.logback.xml's namesrv.log and rmq.controller.logback.xml's
// controller.log (100MB, 5), rmq.proxy.logback.xml's proxy.log (128MB,
// 10). logback's MB is a MiB.
const (
	brokerLogMaxSizeMiB     = 128
	brokerLogMaxRolled      = 20
	namesrvLogMaxSizeMiB    = 100
	namesrvLogMaxRolled     = 5
	controllerLogMaxSizeMiB = 100
	controllerLogMaxRolled  = 5
	proxyLogMaxSizeMiB      = 128
	proxyLogMaxRolled       = 10
	// The bounds: 1 TiB is past any sane log file.
	maxLogFileSizeMiB = 1 << 20
	maxLogRolledFiles = 1 << 16
)

// logFileFields are the keys of a LogFile, with the defaults of the binary
// (its file's size and count of rolled files in RocketMQ).
func logFileFields[T any](maxSizeMiB, maxRolled int, ptr func(*T) *LogFile) []field[T] {
	return []field[T]{
		str("logDir", "", func(c *T) *string { return &ptr(c).Dir }),
		intRange("logMaxSizeMiB", strconv.Itoa(maxSizeMiB), 1, maxLogFileSizeMiB, func(c *T) *int { return &ptr(c).MaxSizeMiB }),
		intRange("logMaxRolledFiles", strconv.Itoa(maxRolled), 0, maxLogRolledFiles, func(c *T) *int { return &ptr(c).MaxRolledFiles }),
		boolean("logCompress", "true", func(c *T) *bool { return &ptr(c).Compress }),
	}
}

package remoting

// Request codes of rocketkv's own. RocketMQ does not define them; they sit
// above 10000, away from Java's RequestCode values, and a RocketMQ broker
// answers them REQUEST_CODE_NOT_SUPPORTED.
const (
	// CheckpointIndex asks a rocketkv broker for a consistent copy of its
	// index, so that kvdump can inspect a running broker (an admin tool
	// sends it; clients never do).
	//
	// Request ext fields:
	//
	//	dir   optional: the directory to write the checkpoint to, which
	//	      must not exist. Default: a new directory under
	//	      <storePathRootDir>/checkpoints/.
	//
	// The broker writes a Pebble checkpoint of its index database there
	// (kvindex.DB.Checkpoint: hard links where possible, so it is cheap,
	// and consistent: the dispatched offset it holds matches its entries)
	// and answers SUCCESS with the ext fields:
	//
	//	path              the checkpoint directory (absolute); it holds a
	//	                  Pebble database openable with kvindex.Open
	//	                  (ReadOnly)
	//	storePathRootDir  the broker's store root, where the CommitLog lives
	//	                  (<storePathRootDir>/commitlog)
	//
	// or SYSTEM_ERROR with the failure in the remark. Both paths are on
	// the broker's machine: the caller must run there to read them. The
	// checkpoint is the caller's to delete once read.
	CheckpointIndex int32 = 10001

	// GetTimerWatermark asks a rocketkv master which parked timer
	// messages it has delivered (a rocketkv slave asks it with its
	// metadata sync: deliveries live in the master's index only, and a
	// promoted slave would deliver them again). No ext fields; the answer
	// is SUCCESS with a JSON body
	//
	//	{"cursorMs":..,"cursorPhy":..,"belowPhy":..,"copiesEnd":..}
	//
	// every parked message before (cursorMs, cursorPhy) in delivery
	// order whose record lies below CommitLog offset belowPhy was
	// delivered (or dropped), and its copy lies below copiesEnd.
	GetTimerWatermark int32 = 10002

	// GetPopState asks a rocketkv master for a copy of its POP in-flight
	// state (a rocketkv slave asks it with its metadata sync, after the
	// consumer offsets: the state lives in the master's index only, and a
	// promoted slave without it pops every message again from each queue's
	// smallest in-flight offset, acknowledged ones included, and frees the
	// queues orderly batches lock). Without ext fields the answer is
	// SUCCESS with the copy as its body (kvindex.DB.AppendPopState's
	// format), or SYSTEM_ERROR when the state is larger than one answer
	// may be. With paged=true (and session=<id> after the first page) it
	// is one page of a copy read from one snapshot, with the ext fields
	// session and done (broker/popcopy.go).
	GetPopState int32 = 10003
)

// Ext field names of CheckpointIndex.
const (
	// CheckpointFieldDir is the request's optional target directory.
	CheckpointFieldDir = "dir"
	// CheckpointFieldPath is the response's checkpoint directory.
	CheckpointFieldPath = "path"
	// CheckpointFieldStoreRoot is the response's store root.
	CheckpointFieldStoreRoot = "storePathRootDir"
	// CheckpointFieldCommitLog is the response's CommitLog segment
	// directory (storePathCommitLog resolved); absent from brokers that
	// predate it, whose segments are in <store root>/commitlog.
	CheckpointFieldCommitLog = "storePathCommitLog"
)

// FieldSlave is a response ext field of rocketkv's own. A rocketkv broker
// that is a slave following its master (not its group's acting master)
// sets it to "true" on its answers to POP_MESSAGE, ACK_MESSAGE,
// BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME. RocketMQ's slave
// answers these as its master would, without a word of its role (a pop
// read-only, an ack that changes nothing), and so does rocketkv's; the
// field tells a client that took the broker for its group's master (the
// gRPC proxy, whose cached route predates a controller-mode switch that
// demoted it) that it is not. RocketMQ's clients decode only the fields of
// their header classes, and pass over it.
const FieldSlave = "rocketkvSlave"

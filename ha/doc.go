// Package ha replicates a master broker's CommitLog to its slaves over
// RocketMQ's classic HA protocol (DefaultHAService: brokerRole
// ASYNC_MASTER or SYNC_MASTER with SLAVE brokers of the same brokerName),
// byte for byte as Apache RocketMQ does, so a rocketkv slave can follow
// an Apache RocketMQ master and the other way round.
//
// # The connection
//
// The slave connects to the master's HA port (haListenPort, listenPort+1
// by default; the name server hands the address to slaves as
// haServerAddr) and the two streams run independently:
//
//	slave -> master: reports, 8 bytes each, big-endian
//	+--------------------------------+
//	| slave's CommitLog end (int64)  |
//	+--------------------------------+
//
//	master -> slave: transfers
//	+--------------------------------+----------------+----------------------+
//	| physical offset (int64)        | body size int32| body: CommitLog bytes|
//	+--------------------------------+----------------+----------------------+
//
// The slave reports when it connects, after every transfer that moved its
// end and every haSendHeartbeatInterval (5 s). The master starts at the
// first report: from that offset, or from the start of its newest segment
// when the slave reports 0 (an empty slave does not copy the whole log).
// A transfer carries at most haTransferBatchSize bytes (32 KiB) of one
// segment, cut anywhere (inside a record too); with nothing to send the
// master sends a transfer with an empty body every heartbeat interval. The
// slave refuses a transfer whose offset is not its own end (unless it is
// empty), and either side closes a connection that has been silent for
// haHousekeepingInterval (20 s).
//
// # A reconnecting slave compares its tail
//
// A slave that holds bytes first reports the message start at or below
// VerifyWindow (64 KiB) under its end (never 0, which asks for the newest
// segment; never a segment's blank filler, which any two logs with a
// record ending at the same offset share), and compares what the master
// sends up to its end with its own bytes before it appends the rest;
// until then it reports only the bytes compared. A master whose retention
// deleted that start sends from its first offset, and the slave compares
// from there. A heartbeat before the slave's end (the master has nothing
// more) and bytes that differ both mean the slave holds records its
// master does not have: a demoted master rejoining as the slave of the
// one that replaced it, or the slave of a master that lost its unflushed
// tail and took new sends at the same offsets (then the slave's records
// may be messages that master acknowledged: which history to keep is the
// operator's call). Such a slave takes nothing
// (ErrDiverged). When the first compared record's header agreed, the logs
// part at the slave's record holding the first differing byte
// (Divergence.At, exact): the slave logs it and dials again after a
// minute, and started once with that cut (commitlog.Config.CutAt, the
// broker's --cut-commitlog-at) it drops the records from there and
// follows the master. When the bytes differ from the first compared, the
// next connection compares from four times as far back, down to the
// slave's first record or the master's, where logs that share nothing
// are refused for good. Without the check the master's records would follow the orphans
// whenever a record boundary of the master falls on the slave's end
// (records of equal sizes put one there), and the slave's log would hold
// both histories. RocketMQ's classic HA has no such check (its controller
// mode truncates by epoch); a RocketMQ master serves the earlier start
// like any other.
//
//	slave:   ...shared | orphan records |            (end E)
//	report:        ^ a record start near E - 64 KiB
//	master:  ...shared | new records          | ...
//	                   ^ Divergence.At: cut here
//
// # Acknowledgement
//
// A slave's last report is its acknowledged offset. A slave whose first
// report is past the master's end holds bytes this master never wrote (a
// demoted master, or a master that lost its unflushed tail; a RocketMQ
// slave reports its end as is, a rocketkv slave finds it by itself): its
// acknowledgements never count, and it is never in sync. RocketMQ counts
// them and finds it in sync, so its SYNC_MASTER answers SEND_OK for sends
// that slave does not hold; rocketkv's answers FLUSH_SLAVE_TIMEOUT for
// them unless another slave holds them (slaveConn.ahead says why). A
// SYNC_MASTER with
// inSyncReplicas >= 2 answers a send only once inSyncReplicas-1 slaves
// have acknowledged the end of its records, or answers FLUSH_SLAVE_TIMEOUT
// after slaveTimeout (3 s) with the records stored (RocketMQ 5's rule; a
// 4.x SYNC_MASTER always waited for one slave). A slave counts as in sync
// while the master's end is less than haMaxGapNotInSync (256 MiB) ahead of
// its acknowledgement.
package ha

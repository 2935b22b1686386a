// Package txn implements RocketMQ's transactional messages: half messages,
// END_TRANSACTION, and the checker that asks producers about transactions
// left open.
//
// # How a transaction travels
//
//	producer                      broker                                  index (kvindex)
//	   | send, TRAN_MSG=true  -->  ToHalf: RMQ_SYS_TRANS_HALF_TOPIC q0,
//	   |                           REAL_TOPIC, REAL_QID, __transactionId__
//	   |                           dispatcher ---------------------------> 0x60 open half
//	   | local transaction
//	   | END_TRANSACTION 8/12 -->  End: read the half by its CommitLog offset,
//	   |                           check group, queue offset, offset;
//	   |                           commit: store the real message with
//	   |                           sysFlag COMMIT, PREPARED TX OFFSET = half
//	   |                           dispatcher (committed record) --------> 0x61 commit
//	   |                           synced end ---------------------------> 0x61 end, 0x60 deleted
//	   |                           op message (RMQ_SYS_TRANS_OP_HALF_TOPIC,
//	   |                           tag d, body = half queue offset)
//	   |                           dispatcher (op) ----------------------> 0x62 ended by op
//	   |
//	   | <-- CHECK_TRANSACTION_STATE   checker: open halves born longer
//	   |     (half, real topic)        than transactionTimeOut (or their
//	   |                               CHECK_IMMUNITY_TIME_IN_SECONDS) ago, every
//	   | END_TRANSACTION, fromCheck    transactionCheckInterval, at most
//	   |                               transactionCheckMax times (at least
//	   |                               once; or until born fileReservedTime
//	   |                               ago), given up in the pass of the
//	   |                               last: TRANS_CHECK_MAX_TIME_TOPIC ----> 0x61 discarded
//
// RocketMQ keeps the end of each transaction as an op message in
// RMQ_SYS_TRANS_OP_HALF_TOPIC and re-puts every half it checks at the end
// of the half queue; rocketkv keeps both in the index (keyspaces 0x60 and
// 0x61, described in kvindex/doc.go), so a check is a rewrite of one key
// and the half is stored once. It writes the op message all the same,
// after the end is recorded: a slave copies the CommitLog, not the
// index, and learns from the ops (0x62) which transactions its master
// ended; Apache RocketMQ reading an exported store does too. It writes
// one for a give-up as well, where RocketMQ writes none (its checker
// moves its half-queue progress past the half instead, a progress
// rocketkv, which checks halves out of queue order, cannot express):
// without it a promoted slave, or RocketMQ reading the export from an
// open half before the give-up, would check the half again.
//
// # Guarantees
//
// A committed transaction's message is stored once: End holds a lock per
// half for the whole commit, an END_TRANSACTION for an ended transaction
// changes nothing, and the dispatcher ends the transaction of every
// committed record it indexes, so a crash between storing the message and
// the synced end cannot make the checker ask again. A commit whose
// message was stored but not confirmed durable in time (SYNC_FLUSH with a
// slow disk; the dispatcher indexes only flushed records then) is noted
// in memory: the producer is not asked about the half, a repeated commit
// waits for the flush instead of storing again, and the transaction ends
// once the message is durable. A rolled-back transaction never stores its
// message; one given up after transactionCheckMax checks stores it when
// its producer commits late, as RocketMQ does (its give-up only copies
// the half aside). The give-up comes in the pass of the last check, as
// RocketMQ's pass meets the copy it stored again for that check and gives
// it up there, so the producer's answer to the last check is such a late
// commit, its message carrying the count of checks as RocketMQ's does. An open half is checked until it ends, is discarded,
// or leaves the CommitLog with retention; one born longer than
// fileReservedTime ago is discarded without a check, as RocketMQ's
// checker skips it (needSkip), its TRANSACTION_CHECK_TIMES one more than
// the checks asked, as RocketMQ counts the check before it skips.
package txn

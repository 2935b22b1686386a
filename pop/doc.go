// Package pop is rocketkv's POP consumption: RocketMQ 5's pop, ack, batch
// ack, change of invisible time, revive and orderly pop, with all state in
// the kvindex database (keyspaces 0x52-0x57, laid out in kvindex/doc.go).
//
// A pop reads messages of a queue from the group's pop position (keyspace
// 0x52), records one checkpoint for them (0x56, named by the receipt
// handle's ckQueueOffset and popTime, with an entry at its visibility
// deadline in 0x55), moves the position, and returns only once all of it
// is durable (synced, or with kvindex.WALSyncInterval written to the
// kernel: it survives a crash of the process either way). An ack removes its offsets from the checkpoint its handle
// names, deleting it with the last one (a stale or unknown handle changes
// nothing), and moves the group's committed consumer offset to the
// smallest offset still in flight. A change of invisible time moves its
// message to a checkpoint of its own under the new deadline. Revive, a
// goroutine of the Service, scans the checkpoints whose deadline passed,
// in deadline order, and re-puts their messages to the group's pop-retry
// topic (reconsumeTimes + 1) or, past the group's retryMaxTimes, its DLQ,
// exactly once: each checkpoint gives way to a revive batch (0x58) in one
// durable commit before the put, holding the ConsumeQueue max offsets of
// the topics the put can store to; each put message names its delivery
// (kvindex.PropertyRevivedFrom); the batch is deleted once the put
// returns. A batch a crash or a failed put left is settled from the
// records above its floors once the dispatcher has indexed them: the
// messages they name were stored, the others go back to their checkpoint.
// A crash's batches are settled when the service starts again, due at
// once; a failed put's right after it, or, when the dispatcher is more
// than Config.GiveBackWait behind, before a later round once it has caught up,
// due after reviveBackoff. A message whose record retention deleted is
// not re-delivered; nor is one whose record cannot be decoded (logged as
// an error and counted in ReviveStats.Undecodable), as RocketMQ's revive
// drops a message it cannot get from its own store. A read that fails
// for another reason goes back to the checkpoint, retried with the
// backoff; so does a failed put. Under Config.DropExhaustedRevives a
// message is dropped at its failure after maxReviveAttempts.
//
// With Config.StageAhead, revive also works ahead (stage.go): when what
// comes due would take it longer to re-put than the time left, it copies
// the messages to the pop-retry topic before their deadline with
// PropertyVisibleAt, marking their checkpoints staged, and pops hand a
// copy out from that time on, and only while its message is still in its
// staged checkpoint.
//
// A topic's deletion (kvindex.PopStore.DeleteTopic, after the broker
// deleted its config) deletes every group's state of it. Every write of a
// queue's state holds the queue's topic (kvindex.PopStore.HoldTopic) from
// before its reads until its commit, so the deletion comes wholly before
// or after it; a pop that checked its topic before a deletion that ended
// since checks it again and writes nothing when it is gone. Revive drops
// the checkpoints of a topic that no longer exists, as RocketMQ's does.
//
// Orderly pops keep one batch per group and queue (0x53) and lock the
// queue until the batch is acknowledged or expired; see order.go. Both
// call Config.OnQueueReady for the queue, the expiry from a timer per
// locked queue (orderwake.go), so that pops held on it wake then.
//
// With Config.InFlightLimit on (RocketMQ's enablePopMessageThreshold), a
// non-orderly pop skips a queue of which the group has more messages in
// flight than the limit, counted from its checkpoints; see threshold.go.
// On a slave the count is of what its own read-only pops, orderly ones
// included, handed out and is in flight there, in memory
// (slaveinflight.go), and it limits its orderly pops too.
//
// A slave's read-only pops (PopReadOnly) write none of the master's
// state and keep what they handed out in memory (handedout.go), with a
// timer per queue that calls Config.OnQueueReady when the earliest of it
// becomes poppable again. Its orderly pops keep their batch, and its
// orderly acks and changes of invisible time their effect on it and on
// the group's offset on the slave (one for its orderly and non-orderly
// pops, replaced by the next copy of the master's), in memory and in a
// keyspace of the slave's own (0x59), loaded again when the slave
// restarts (readonlyorder.go).
//
// A slave acting for its master that is down runs the revive on the
// master's state it copied, with its puts sent to another broker group's
// master (RunActingRevive, acting.go): its non-orderly pops then start
// past the master's copied pop position, and its non-orderly acks remove
// messages from the copied checkpoints.
//
// The wire forms live here too: the receipt handle (Handle, the POP_CK
// property and ack extraInfo), the pop response header strings
// (InfoBuilder and its parsers) and the BATCH_ACK_MESSAGE body
// (DecodeBatchAck). The broker's request processors translate requests to
// Service calls and results to responses.
//
// Typical use by a broker:
//
//	svc, err := pop.New(pop.Config{DB: db, CQ: cqs, Log: clog, Offsets: db.ConsumerOffsets(), Broker: adapter, ...})
//	svc.Start()              // revive
//	res, err := svc.Pop(pop.PopRequest{Group: "g", Topic: "T", QueueID: -1, MaxMsgNums: 32, InvisibleTime: 60000})
//	_, err = svc.Ack("g", "T", 0, 17, handle)
//	svc.Close()
package pop

// Package kvindex is rocketkv's index and state database: one Pebble
// database, under <storePathRootDir>/kvindex, holding everything that is
// not a message body.
//
// This comment is the single description of every key and value. keys.go
// implements it, and inspect.go decodes every keyspace into typed records
// (DecodeKey, Keyspaces) for the kvdump tool; a change to one is a change
// to all three.
//
// # Conventions
//
// Every key starts with a one-byte keyspace prefix. Integers are
// fixed-width big-endian, so byte order is numeric order for non-negative
// values. Strings inside keys are preceded by their byte length as a uint16
// (topic, group, key), which keeps keys of different strings from
// interleaving. Values are fixed-width big-endian too, except configs,
// which are RocketMQ's JSON.
//
// "Derivable" keyspaces can be rebuilt by re-dispatching the CommitLog and
// are written without sync; they are always at or behind the dispatched
// offset, which is written in the same batch. The other keyspaces are
// written with sync before the update is acknowledged, so it survives a
// crash (consumer offsets piggybacked on pulls excepted: see
// ConsumerOffsets.SetLazy). A write or sync of the write-ahead log that
// fails stops the process (walfailstop.go): Pebble cannot go on after
// one, and a restart recovers both kinds from the log and the CommitLog.
//
// # Keyspaces
//
//	prefix  name            derivable  written by
//	0x01    meta            -          dispatcher, Open
//	0x10    cq entry        yes        dispatcher (KV ConsumeQueue)
//	0x11    cq min          yes/no     retention, DeleteQueue; SeedStarts (migration)
//	0x12    cq journal      yes        dispatcher; pruned once the CommitLog is flushed past it
//	0x20    key index       yes        dispatcher; range-deleted by retention
//	0x21    key bucket      yes        dispatcher
//	0x30    consumer offset no         broker (offset commits)
//	0x40    topic config    no         broker (create/update/delete topic)
//	0x41    group config    no         broker (create/update/delete group)
//	0x42    auth user       no         broker (ACL 2.0: AUTH_*_USER, initAuthenticationUser, migration)
//	0x43    auth acl        no         broker (ACL 2.0: AUTH_*_ACL, AUTH_DELETE_USER, migration)
//	0x44    group forbidden no         broker (UPDATE_AND_GET_GROUP_FORBIDDEN, delete group, migration)
//	0x45    queue mapping   no         broker (UPDATE_AND_CREATE_STATIC_TOPIC, delete topic)
//	0x50    pop in-flight   no         schema 2 only: moved to 0x55/0x56 when opened for writing
//	0x51    pop ack index   no         schema 2 only: deleted with 0x50
//	0x52    pop position    no         pop service (pop)
//	0x53    pop order       no         pop service (orderly pop, ack, change invisible time)
//	0x54    request mode    no         broker (SET_MESSAGE_REQUEST_MODE)
//	0x55    pop ck deadline no         pop service, in the same batches as 0x56
//	0x56    pop checkpoint  no         pop service (pop, ack, change invisible time, revive)
//	0x57    pop revive      no         earlier versions' revive; deleted by the dispatcher, the pop service's start and topic deletion
//	0x58    revive batch    no         pop service (revive)
//	0x59    pop slave own   no         pop service of a slave (its own pops, orderly acks, changes of invisible time)
//	0x60    txn half        no         dispatcher (half messages); transaction service (checks, end)
//	0x61    txn end         no         transaction service (END_TRANSACTION, discard); dispatcher (committed records)
//	0x62    txn RocketMQ op yes        dispatcher (op messages, RocketMQ's or rocketkv's); deleted below the half queue's minimum
//	0x70    timer           yes        dispatcher (rmq_sys_wheel_timer records); deleted by the timer at delivery, on a slave by the master's watermark
//	0x80    compacted       no         dispatcher (records of compacted topics); superseded copies deleted by it
//	0x81    compaction key  no         dispatcher, with 0x80
//	0x82    compaction exp. no         dispatcher, with 0x80; deleted with the copies it names below the CommitLog minimum
//
// When recovery finds the index ahead of the CommitLog (a tail a power
// failure lost, or a slave's log cut where it parted from its master's,
// commitlog.Config.CutAt), the dispatcher deletes what records past the
// log's end wrote: ConsumeQueue and key-index entries, 0x60 and 0x61 of
// halves past it, 0x62 ops of half queue offsets past the half queue's
// new end, 0x70 entries past it, and 0x80-0x82 copies of records past it
// with the key entries naming them, copying again the message before a
// cut one of its key when the key index finds it in the log
// (Dispatcher.Recover). Of the ends records past the log's end recorded
// for halves before it, commits (0x61 naming their committed message) and
// op keys (0x62 naming their op message) are undone, the halves recorded
// open again, so their producers are asked about them; rollbacks, give-ups
// and ends written before the offsets were recorded stay.
//
// Prefixes 0x50-0x5F are reserved for POP, 0x60-0x6F for transactions,
// 0x70-0x7F for timers, 0x80-0x8F for compacted topics.
//
// # 0x01 meta
//
//	key:   0x01 | name (ASCII)
//
//	"schema"      value: version uint32        (currently 3; 1 = key-index values held the
//	                                           store time; 1 and 2 = one POP record per
//	                                           message in 0x50/0x51. Older stores are read;
//	                                           opened for writing, their POP records move
//	                                           to checkpoints and they are marked 3, in
//	                                           one synced batch)
//	"dispatched"  value: offset int64          next CommitLog offset to dispatch:
//	                                           every record before it is indexed
//	"cqWritten.kv" value: offset int64         the KV ConsumeQueue (0x10-0x12) holds the
//	                                           entry of every record before it; written in
//	                                           each dispatch batch that writes the KV
//	                                           ConsumeQueue, so it stays behind
//	                                           "dispatched" while reads use the file one
//	"cqWritten.file" value: offset int64       the same for the file ConsumeQueue
//	                                           (consumequeue/), written after each flush of
//	                                           its files (every flushIntervalConsumeQueue)
//	                                           and at a clean stop. At start every layout
//	                                           the broker writes that stands below
//	                                           "dispatched" gets the entries it misses from
//	                                           the CommitLog; absent (stores of earlier
//	                                           builds): the end of the newest record its
//	                                           queues hold
//	"topicDeleted.<topic>" value: offset int64 the topic was deleted when the CommitLog
//	                                           ended here: dispatch (live, or again after
//	                                           a restart) leaves the topic's records below
//	                                           the offset out of the ConsumeQueue, the key
//	                                           index and the compacted copies; a layout not
//	                                           written then drops it when it catches up,
//	                                           and no catch-up puts those records back;
//	                                           moved back to the CommitLog's end when a
//	                                           recovery cut the log below it; dropped once
//	                                           retention passes the offset; the first
//	                                           open of a RocketMQ store writes one per
//	                                           topic of its consumequeue/, at the topic's
//	                                           first entry there: the records below it are
//	                                           of a topic RocketMQ deleted
//	                                           (RecordRocketMQConsumeQueue)
//	"rmqQueueBegin.<topic>/<queueId>" value: offset int64 | queue offset int64
//	                                           where the queue began in that consumequeue/
//	                                           (its first entry): dispatch leaves out its
//	                                           records below the offset whose queue offset is
//	                                           the entry's or above (an earlier numbering), and
//	                                           keeps those below it; "rmqQueueBegin.<topic>/"
//	                                           (offset | 0): where the topic began, for its
//	                                           queues with no key of their own; kept with the
//	                                           topic's "topicDeleted", which holds the highest
//	                                           of them; a deletion of the topic removes them
//	"deletingTopic.<topic>" value: empty     a deletion of the topic (its config, its
//	                                           queues, every group's offsets and POP
//	                                           state on it) began and has not ended:
//	                                           written, synced, before its first step and
//	                                           deleted after its last; the broker completes
//	                                           a deletion it finds at start (a crash half
//	                                           way through)
//	"rebuildStart.<layout>.<queueId>.<topic>" value: queue offset int64
//	                                           where the queue stood in that layout when a
//	                                           rebuild of it (the layout missed records
//	                                           retention deleted) began, written before the
//	                                           rebuild drops the queues and dropped with
//	                                           the layout's "cqWritten" in one batch once it
//	                                           is complete: a rebuild a crash interrupted
//	                                           still gives emptied queues their numbering
//	"topicsVer"   value: counter int64 | timestamp int64   topic table DataVersion
//	"groupsVer"   value: counter int64 | timestamp int64   group table DataVersion
//	                                           (on a slave, set to its master's by
//	                                           Replace with the table it copies)
//	"groupForbiddenVer" value: as groupsVer                group forbidden table DataVersion
//	"cqMinApplied" value: offset int64         the CommitLog minimum the KV ConsumeQueue
//	                                           minima were last corrected to (so a restart
//	                                           does not visit every queue again)
//	"rmqConfigImported" value: ms int64        when the config files of an Apache RocketMQ
//	                                           store (config/*.json) were imported; absent
//	                                           until the broker first opened the store
//	"rmqCQComplete" value: offset int64        below it the consumequeue/ of the Apache
//	                                           RocketMQ store first opened held an entry of
//	                                           every record of its topics; written with the
//	                                           rmqTopic keys, removed with them once the
//	                                           queues of the topics RocketMQ had deleted
//	                                           are dropped (RocketMQTopics)
//	"rmqTopic.<topic>" value: empty            the topic has queues in that consumequeue/
//	"rmqTimerReadMs" value: ms int64           that store's timer progress (config/timercheck
//	                                           lastReadTimeMs): it delivered every timer
//	                                           message it had taken in (below
//	                                           rmqTimerQueueOffset) due before it, which
//	                                           the timer index (0x70) leaves out
//	"rmqTimerQueueOffset" value: offset int64  how far that timer had taken in
//	                                           rmq_sys_wheel_timer (timercheck
//	                                           lastTimerQueueOffset); absent: all of it
//	"timerReadMs" value: ms int64              the timer's read time as last saved (RocketMQ's
//	                                           timercheck lastReadTimeMs): a master's rounds
//	                                           save it every second, a slave the read time of
//	                                           its master's checkpoint as it copies it; a start
//	                                           resumes the read time there (timerReadBehind),
//	                                           or at rmqTimerReadMs without it
//	"timerHold" value: phy int64 | queueOffset int64
//	                                           the timer holds back the parked messages from
//	                                           the record at CommitLog offset phy (queue offset
//	                                           queueOffset of rmq_sys_wheel_timer) on
//	                                           (timerStopEnqueue): their entries (0x70) wait
//	                                           undelivered; written in the dispatch batch of
//	                                           that record, deleted once the hold is lifted
//	"rmqPopImported" value: ms int64           when that store's POP in-flight state (the
//	                                           check-points and acks of its revive topic,
//	                                           and the records of its KV POP kvStore/)
//	                                           became pop checkpoints (0x55/0x56), in the
//	                                           batch that wrote them
//	"popStageFrontier" value: ms int64         the latest RKV_VISIBLE_AT a staged revive gave
//	                                           its copies, in the commit of their staged
//	                                           checkpoints: staging after a restart starts
//	                                           there, so copies stay in order of that time
//	"popRollback" value: from int64 | at int64 | topic
//	                                           the last POP_ROLLBACK wrote the checkpoints in
//	                                           flight as of at (ms) to queue 0 of the revive
//	                                           topic as RocketMQ check-points, from queue
//	                                           offset from on (the way back)
//	"slaveTopicsAt" value: offset int64        on a store serving as a slave: its topic table
//	                                           holds the config of every topic with a record
//	                                           below it (the log end before it asked for the
//	                                           last master's table it took, in the batch of the
//	                                           table's Replace; at its first start as a slave,
//	                                           the log end then); deleted once it
//	                                           started as the master and gave the topics with
//	                                           entries at or past it and no config one
//
// # 0x10 cq entry: one ConsumeQueue unit
//
//	key:   0x10 | topicLen uint16 | topic | queueId int32 | queueOffset int64
//	value: phyOffset int64 | size int32 | tagsCode int64 | storeTimestamp int64   (28 bytes)
//
// The value is RocketMQ's RocksDB ConsumeQueue value. A queue's entries
// are contiguous keys, so a read of N entries is one seek and N steps. The
// queue's max offset is derived from its last key (one reverse seek), not
// stored: a dispatch writes one key per message and nothing else per queue.
//
// # 0x11 cq min
//
//	key:   0x11 | topicLen uint16 | topic | queueId int32
//	value: minOffset int64
//
// Written when retention (CorrectMin) deletes the entries below a new
// minimum (one by one for up to 16 entries, with one range deletion for
// more), so that the minimum outlives them: when retention empties a
// queue no entry is left, and this key alone holds where it stands (max
// offset = min offset). No entry lies below it. SeedStarts writes it for a queue
// of a migrated Apache RocketMQ store whose records retention had all
// deleted: the queue holds no entry, and the key alone says where it
// stands (max offset = min offset = RocketMQ's ConsumeQueue end). That
// one is not derivable from the CommitLog.
//
// # 0x12 cq journal: which queues a dispatch batch touched
//
//	key:   0x12 | firstPhyOffset int64
//	value: endPhyOffset int64 | repeated (topicLen uint16 | topic | queueId int32 | firstQueueOffset int64)
//
// One record per Put (dispatch batch): the CommitLog range it covered and,
// per queue, the first queue offset it wrote. Truncate(p), run when a
// recovered CommitLog ends before what was dispatched (power loss before a
// flush), reads the records whose range ends past p to find every entry to
// delete without scanning all queues. Records wholly below the CommitLog's
// flushed offset can never be needed and are range-deleted (PruneJournal).
//
// # 0x20 key index: message keys and unique ids
//
//	key:   0x20 | bucket int64 | topicLen uint16 | topic | kind uint8 | keyLen uint16 | key | phyOffset int64
//	value: empty; or storeTimestamp int64 in entries written by earlier builds
//
// bucket is phyOffset >> 26 (64 MiB of CommitLog). kind is 0 for a word of
// the KEYS property and 1 for UNIQ_KEY. Grouping by bucket lets retention
// drop whole buckets below the CommitLog's new minimum with one range
// deletion, like RocketMQ drops whole IndexFiles; a lookup seeks once per
// bucket whose time range (0x21) overlaps the query. Lookups also check the
// record itself, so an entry left pointing at a truncated record is never
// returned; that check also applies a query's time range to the record's
// store time, which the entry does not repeat (8 bytes a message).
//
// # 0x21 key bucket: time range of a key-index bucket
//
//	key:   0x21 | bucket int64
//	value: minStoreTimestamp int64 | maxStoreTimestamp int64
//
// # 0x30 consumer offset
//
//	key:   0x30 | groupLen uint16 | group | topicLen uint16 | topic | queueId int32
//	value: offset int64   (the next offset to consume, as RocketMQ's offsetTable)
//
// # 0x40 topic config, 0x41 group config
//
//	key:   0x40 | topic         value: TopicConfig JSON (meta.TopicConfig)
//	key:   0x41 | group         value: SubscriptionGroupConfig JSON (meta.SubscriptionGroupConfig)
//
// # 0x42 auth user, 0x43 auth acl (ACL 2.0)
//
//	key:   0x42 | username      value: UserInfo JSON (meta.UserInfo: username, password, userType, userStatus)
//	key:   0x43 | subject       value: AclInfo JSON (meta.AclInfo: subject "User:<name>", policies)
//
// RocketMQ 5.3's users and access lists, in the JSON of its admin requests'
// bodies. The password is kept as given: it is the HMAC key of the
// request signatures, so it cannot be stored hashed. Their data versions
// are the meta keys authUsersVer and authAclsVer (as topicsVer). Deleting a
// user deletes its access list in the same request.
//
// # 0x44 group forbidden
//
//	key:   0x44 | group         value: GroupForbidden JSON (meta.GroupForbidden: group, topics {topic: bits})
//
// RocketMQ's forbiddenTable of subscriptionGroup.json: per group and topic
// a bit set, bit i forbidding the permission of PermName index i (2:
// read). A group's entry lives apart from its 0x41 config (it may exist
// without one) and goes when the group is deleted. Its data version is
// the meta key groupForbiddenVer.
//
// # 0x45 topic queue mapping (static topics)
//
//	key:   0x45 | topic         value: TopicQueueMappingDetail JSON (meta.TopicQueueMappingDetail)
//
// RocketMQ's topicQueueMapping.json: a static topic's logic queues and
// the items of each that concern this broker group. Its data version is
// the meta key topicQueueMappingVer; a change also bumps topicsVer, so
// that the next registration carries it to the name servers. Deleting
// the topic deletes its entry.
//
// # 0x50 pop in-flight, 0x51 pop ack index (schema 2)
//
//	key:   0x50 | visibleAt int64 | groupLen uint16 | group | topicLen uint16 | topic | queueId int32 | queueOffset int64
//	value: popTime int64 | invisibleTime int64 | ckOffset int64 | retryFlag uint8 | attempts uint32   (29 bytes)
//	key:   0x51 | groupLen uint16 | group | topicLen uint16 | topic | queueId int32 | queueOffset int64
//	value: visibleAt int64 | popTime int64 | invisibleTime int64
//
// One record and one ack-index entry per popped message: a pop of 32
// messages and its ack cost 128 key writes, and the tombstones they left
// made the acks' seeks and the compactions the larger part of the broker's
// CPU under pop+ack load. Opening such a store for writing groups the
// records of each pop into a checkpoint (the earliest deadline and most
// attempts of its records, so nothing is re-delivered late) and deletes
// both keyspaces. kvdump decodes them in a store not yet migrated.
//
// # 0x56 pop checkpoint: one per pop of one queue with messages in flight
//
//	key:   0x56 | groupLen uint16 | group | topicLen uint16 | topic | queueId int32 | ckOffset int64 | popTime int64
//	value: visibleAt int64 | invisibleTime int64 | retryFlag uint8 (top bit: staged) | attempts uint32 |
//	       count uvarint | count x delta uvarint   (offsets still in flight: the first
//	       minus ckOffset, each next minus the one before)
//
// RocketMQ's PopCheckPoint, with acknowledged offsets removed from the list
// instead of set in a bit map. The key is what a receipt handle names:
// group, topic (the pop-retry topic for retried messages, whose retryFlag
// is 1 for V1 %RETRY%<group>_<topic> names and 2 for V2
// %RETRY%<group>+<topic>), queue, ckOffset (the first offset the pop read,
// the handle's ckQueueOffset) and popTime. An ack reads the checkpoint its
// handle names and, when the handle's invisibleTime matches, removes its
// offsets: one rewrite, or the deletion of both keys when none is left. A
// handle naming no checkpoint, or with another invisibleTime (stale after
// a change of invisible time), changes nothing. Every offset lies in
// [ckOffset, ckOffset + 4096) (MaxCheckpointSpan; a pop reads at most that
// many entries of a queue), so the smallest offset in flight of a queue is
// found by a seek at most 4096 offsets below the committed offset (in
// practice from a cached floor, popfloor.go). The group's committed
// consumer offset (0x30) follows it: it advances over the contiguous
// prefix of handled messages. A change of invisible time moves its message
// to a checkpoint of its own (ckOffset = its offset, popTime = now).
// visibleAt is popTime + invisibleTime, except after a failed revive,
// which moves the checkpoint with the offsets it could not re-deliver to a
// later deadline with attempts + 1. Written with sync before the pop is
// answered (an fdatasync, or under WALSyncInterval the write to the
// kernel; see walsync.go); rewritten or deleted by ack (synced before the
// answer) and by
// revive after its messages were re-put to the pop-retry topic or the
// DLQ. Orderly pops write none (see 0x53). A staged checkpoint (the top
// bit of retryFlag) is one whose messages a staged revive copied to the
// pop-retry topic before their deadline (popTime + invisibleTime): a pop
// hands a copy out only while its offset is still in the checkpoint,
// removing it then (an ack or a change of invisible time before that
// leaves the copy to be skipped), and its visibleAt is a backstop: revive
// re-delivers then, as any due checkpoint, what no pop took the copy of
// (a copy filtered out, gone to retention, passed by an offset reset).
//
// # 0x55 pop checkpoint deadline: the revive order
//
//	key:   0x55 | visibleAt int64 | groupLen uint16 | group | topicLen uint16 | topic | queueId int32 | ckOffset int64 | popTime int64
//	value: count uvarint   (the checkpoint's offsets when the entry was written)
//
// Exactly one per 0x56 checkpoint, at its visibleAt, written and deleted
// in the same batches. The deadline comes first, so the checkpoints due for
// revive are one range scan from the start of the keyspace (in practice
// from the revive cursor) up to now; each names its checkpoint, which
// revive reads under the queue's lock. The count, not updated by acks,
// sizes revive rounds without reading the checkpoints.
//
// # 0x58 pop revive batch: the messages of one checkpoint being re-delivered
//
//	key:   0x58 | groupLen uint16 | group | topicLen uint16 | topic | queueId int32 | ckOffset int64 | popTime int64 | first offset int64
//	value: retryV1 floor int64 | retryV2 floor int64 | dlq floor int64 | the 0x56 value of the checkpoint
//	       (visibleAt, invisibleTime, retryFlag, attempts, the offsets being put)
//
// Revive deletes a due checkpoint and writes its batch in one durable
// commit, then puts the messages to the pop-retry topic or the DLQ, each
// with the property RKV_REVIVED_FROM naming it (queueId/queueOffset/
// len(group)/group topic; the broker's answers to readers leave it out,
// AppendShown), and deletes the batch, unsynced, once the put
// returned. The floors are the ConsumeQueue max offsets, read before the
// put, of queue 0 of the group's pop-retry topic of either naming and of
// its DLQ: every message the put stores lies at or above them. A batch
// left by a crash (found when the POP service starts, after the
// dispatcher caught up) or by a failed put is settled by reading those
// queues from the floors: the messages their records name were stored;
// the others go back to their checkpoint, due at once at start (the next
// revive round puts them) or after the revive backoff after a failed put. Neither a crash nor a failed put delivers a revived
// message twice or loses it. The first offset tells apart two batches of
// one checkpoint (a part given back and revived again).
//
// A slave's 0x52, 0x55, 0x56 and 0x58 are its master's, copied at each
// sync (replaced wholesale). A slave acting for its master that is down
// revives them too (pop.Service.RunActingRevive), with its puts sent to
// another broker group's master without RKV_REVIVED_FROM: what such a
// put stored is what the send said it stored, not found in the log, so
// a batch a crash of the acting master leaves is put again in full, and
// a send that timed out after the other master stored it is put again.
//
// # 0x57 pop revive intent: an earlier version's message being re-delivered
//
//	key:   0x57 | groupLen uint16 | group | topicLen uint16 | topic | queueId int32 | queueOffset int64
//	value: popTime int64 | invisibleTime int64 | ckOffset int64 | retryFlag uint8 | attempts int32
//	       (the fields of the checkpoint the message was in; 0x50's value)
//
// Written by the versions before 0x58, one per message, and deleted by the
// dispatcher in the batch that indexed the put message naming it. No
// longer written: a store opened with 0x57 keys has the dispatcher delete
// them as before until the POP service, at its start (after the
// dispatcher caught up, so every intent left is a message not put), has
// given their messages back to their checkpoints, due at once.
//
// # 0x52 pop position: where a group's next pop of a queue starts
//
//	key:   0x52 | groupLen uint16 | group | topicLen uint16 | topic | queueId int32
//	value: nextOffset int64
//
// Separate from the committed consumer offset (0x30): messages between the
// two are in flight. Written with the 0x56 checkpoint of the pop that moved
// it; absent for a group that never popped the queue (the pop then starts
// from the committed offset, or from the queue's min or max by initMode).
//
// # 0x53 pop order: the in-flight batch of an orderly pop
//
//	key:   0x53 | groupLen uint16 | group | topicLen uint16 | topic | queueId int32
//	value: popTime int64 | invisibleTime int64 | ackedBits uint64 | attemptIdLen uint16 | attemptId
//	       | n uint16 | n x (queueOffset int64 | consumedCount int32 | nextVisibleAt int64)
//	       [ | m uint16 | m x (queueOffset int64 | consumedCount int32) ]   carried counts, m >= 1
//
// RocketMQ's ConsumerOrderInfoManager entry. While a message of the batch
// is neither acknowledged (bit i of ackedBits) nor past its deadline
// (nextVisibleAt, or popTime + invisibleTime when 0), the queue is locked
// for the group: orderly pops of it return nothing (unless they repeat the
// batch's attemptId). An expired batch is popped again from the committed
// offset, and messages delivered before count one more consumption
// (consumedCount, reported in orderCountInfo). A pop repeating the batch's
// attemptId keeps its counts as they are, those of offsets the new batch
// no longer holds included: the carried counts, written only when there
// are some (a value without them has the layout older versions wrote).
// Synced before the pop, ack
// or change of invisible time is answered. A batch whose messages are all
// acknowledged stays, locking nothing, until the queue's next orderly pop
// replaces it (an ack carrying another popTime then commits nothing, as
// RocketMQ keeps its OrderInfo); an offset reset leaves an empty batch of
// popTime -1 (no ack commits until the next pop). The first open of an Apache RocketMQ store imports its
// config/consumerOrderInfo.json here, and kvdump export-rocketmq writes
// it back; a batch imported without an invisible time has 0, and is
// judged by each pop's invisible time, as RocketMQ does.
//
// # 0x59 pop slave own: what a slave's own pops keep of a group's queue
//
//	key:   0x59 | groupLen uint16 | group | topicLen uint16 | topic | queueId int32
//	value: committed int64 (-1: none) [ | the 0x53 value of the orderly batch ]
//
// Written only by a slave, whose 0x30 and 0x53 hold what it copies from
// its master. committed is the slave's own entry of its offset table:
// where a pop on it of a group without an offset started, the start of
// its last orderly batch, past what its orderly acks acknowledged; the
// batch is the last one its orderly pops handed out, with the acks and
// moved deadlines of the slave's requests (Apache RocketMQ's slave keeps
// both in consumerOffset.json and consumerOrderInfo.json). While
// committed is there the slave's pops go by it rather than by the copied
// 0x30 offset. A sync of the master's offsets that carries the group and
// topic sets committed to -1 on each of its queues (the master's table
// put over the slave's), as does a client's UPDATE_CONSUMER_OFFSET of the
// queue on the slave, in the write of its 0x30 offset; the batch stays, as RocketMQ's sync leaves
// consumerOrderInfo.json alone. Synced before the request is answered;
// an entry left with neither is deleted, and a batch unused for a day
// is dropped (at the slave's start at the latest). Loaded by a slave's
// POP service at start. A broker started as a master on the store (a
// promoted slave) takes it over at start, in one synced batch: committed
// goes to 0x30 (and raises a 0x52 position behind it), the batch to 0x53
// unless the copied batch there was popped later, and the keys are
// deleted. Not part of the POP state copy (popStatePrefixes).
//
// # 0x54 request mode: SET_MESSAGE_REQUEST_MODE
//
//	key:   0x54 | topicLen uint16 | topic | groupLen uint16 | group
//	value: SetMessageRequestModeRequestBody JSON ({"topic","consumerGroup","mode","popShareQueueNum"})
//
// # 0x60 txn half: a half message whose transaction has not ended
//
//	key:   0x60 | halfPhyOffset int64
//	value: halfQueueOffset int64 | storeTimestamp int64 | nextCheckAt int64 | checks uint32   (28 bytes)
//
// Written by the dispatcher, in the batch that indexes a record of
// RMQ_SYS_TRANS_HALF_TOPIC, with nextCheckAt = the message's born
// timestamp plus transactionTimeOut (or its CHECK_IMMUNITY_TIME_IN_SECONDS)
// plus 1 ms, or storeTimestamp for a half already due then (born in the
// future or long before; see txn's immuneUntil). The transaction checker
// scans the keyspace (CommitLog order,
// oldest first), asks the producer group about each half whose nextCheckAt
// has passed, and rewrites it (without sync) with checks + 1 and the next
// check time. Deleted, in one synced batch with its 0x61 entry, when the
// transaction ends; range-deleted below the CommitLog minimum by
// retention. A half re-dispatched after a crash is written again; the
// checker then finds its 0x61 entry and deletes it.
//
// # 0x61 txn end: how the transaction of a half message ended
//
//	key:   0x61 | halfPhyOffset int64
//	value: state uint8 (8 commit, 12 rollback, 1 discarded) | endTimestamp int64
//	       [| byPhyOffset int64]   (9 bytes, or 17 naming a record: a commit's
//	                                committed message, a give-up's copy in
//	                                TRANS_CHECK_MAX_TIME_TOPIC)
//
// Written with sync by END_TRANSACTION (after the committed message is
// stored, flushed as a send's and indexed, so the dispatch progress past
// it is durable with the end) and by the checker when it gives up (after
// the half is stored in TRANS_CHECK_MAX_TIME_TOPIC). The dispatcher also
// writes a commit, with endTimestamp 0, for every record whose transaction
// type is COMMIT, from its PREPARED TX OFFSET: a crash between storing the
// committed message and the synced write still ends the transaction, so
// no check asks the producer again and no second copy is stored. A
// commit's committedPhyOffset lets a recovery whose CommitLog lost that
// message (a power failure before its flush, a slave's cut) open the
// transaction again; a give-up's byPhyOffset is read by a late commit
// answering a check, which carries the copy's TRANSACTION_CHECK_TIMES (a
// recovery that lost the copy leaves the give-up as it is, the commit
// then without the count). An END_TRANSACTION for a
// transaction that already ended changes nothing. Kept while the half
// message is in the CommitLog; range-deleted below its minimum by
// retention.
//
// # 0x62 txn RocketMQ op: a half message an op message ended
//
//	key:   0x62 | halfQueueOffset int64
//	value: opPhyOffset int64 (the op message's CommitLog offset; 0x01 in indexes written before it was kept)
//
// An op message in RMQ_SYS_TRANS_OP_HALF_TOPIC, tag "d", ends the halves
// whose queue offsets its body lists, comma-separated ("1203,1204,", or
// "1203" as RocketMQ 4 and rocketkv write one). Apache RocketMQ writes one
// for every transaction that ends; rocketkv writes one after each end it
// records in 0x61 (commit, rollback, given up), so a slave, which copies
// the CommitLog but not this index, and Apache RocketMQ reading an
// exported store learn which transactions ended. The dispatcher writes
// one key per offset when it indexes an op message, and the checker and
// END_TRANSACTION forget a half whose queue offset (or, for RocketMQ's
// immunity re-puts, whose TRAN_PREPARED_QUEUE_OFFSET) has one. Halves
// below RocketMQ's check progress (the consumer offset of
// CID_RMQ_SYS_TRANS on the half topic, imported with the store's
// consumerOffset.json) were handled by RocketMQ, ended or stored again,
// and are not recorded open at all.
//
// Keyed by half-queue offset, not CommitLog offset, the keys are
// range-deleted below the half topic's ConsumeQueue minimum after
// retention (Transactions.DropOpsBelow), not with 0x60 and 0x61.
// Dispatching an op message again rewrites the same keys.
//
// # 0x70 timer: a timer message waiting for its delivery time
//
//	key:   0x70 | deliverMs int64 | phyOffset int64
//	value: size int32
//
// Written by the dispatcher, in the batch that indexes a record of
// rmq_sys_wheel_timer, at the record's TIMER_OUT_MS, or at a roll point
// when that is timerRollWindowSlot or more after the record's store time
// (timer.Service.Hook). The delivery time
// comes first, so the messages due are one range scan up to now, from
// the position the last round left (moved back to entries indexed behind
// it; from the keyspace's start after a restart or when too many were):
// the timer re-puts each to its REAL_TOPIC and REAL_QID (at a roll point:
// to rmq_sys_wheel_timer again, TIMER_ROLL_TIMES counted up, so that a
// record of it stays younger than fileReservedTime, as RocketMQ rolls it)
// and deletes its entry (one synced batch per round). With
// timerCongestNumEachSlot set, a timer send counts the keys of its
// delivery slot (Timers.Count) for RocketMQ's flow control. A slave deletes the
// entries its master's watermark says were delivered
// (Timers.ForgetDelivered), and recovery those of records past a cut
// log's end (DropAbove). RocketMQ's timerlog and timerwheel files have no
// counterpart (a store migrated from RocketMQ, or a crash between a roll
// and its entry's deletion, can hold a message and its roll at one time:
// the timer delivers it once). An entry whose record left the CommitLog
// is dropped when it comes due (a forced deletion of a nearly full disk
// can lose a parked message, in RocketMQ too).
// The entries are derivable, but which were delivered is recorded only by
// their deletion: re-dispatching records already delivered (after a crash
// right after their dispatch) delivers them again, at least once.
//
// # 0x80 compacted: the copy of a message of a compacted topic
//
//	key:   0x80 | topicLen uint16 | topic | queueId uint32 | queueOffset int64
//	value: the message's record, as the CommitLog holds it
//
// For a topic whose attribute cleanup.policy is COMPACTION, the
// dispatcher copies each record here in the batch that indexes it, so the
// messages outlive CommitLog retention, and deletes the copy of the
// message with the same KEYS value it supersedes. A pull of a compacted
// topic reads these copies (the newest message of each key, plus what
// 0x82 keeps) instead of the ConsumeQueue, as RocketMQ's compaction store
// answers its getMessage. Deleted with the topic, and with the queue when
// a replica's log starts it anew (restart.go).
//
// # 0x81 compaction key: the newest message of a key
//
//	key:   0x81 | topicLen uint16 | topic | queueId uint32 | key (the KEYS value)
//	value: queueOffset int64
//
// Written with each copy of a message that has a key, tombstones (empty
// bodies) included; deleted with the topic (or the queue, as 0x80), and with the tombstone it
// names when that expires. A recovery that cuts the message an entry
// names sets the value to the single byte 0x00 (restore pending) until
// it has copied the key's message before again, so a crash in between
// leaves the next recovery the key to restore; readers take any value
// but 8 bytes as no entry.
//
// # 0x82 compaction expiry: copies kept while their record is in the CommitLog
//
//	key:   0x82 | phyOffset int64 | the 0x80 key of the copy
//	value: the message's key ("" for none)
//
// Messages without a key and tombstones are kept only as long as their
// records: retention deletes, below the CommitLog's new minimum, these
// entries, the copies they name and a tombstone's 0x81 entry when it still
// names the tombstone.
package kvindex

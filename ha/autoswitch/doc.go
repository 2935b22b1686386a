// Package autoswitch is RocketMQ's AutoSwitch HA: the replication between
// the brokers of a group in controller mode (enableControllerMode), byte
// for byte as Apache RocketMQ 5's AutoSwitchHAService, and the epoch file
// it keeps beside the CommitLog. The classic protocol (package ha) is
// for brokerRole masters and slaves; the two do not talk to each other (a
// classic slave's 8-byte report is refused here as a frame in state
// READY).
//
// The controller elects each group's master in an epoch. The master
// records the epoch and the CommitLog offset it starts at in its epoch
// file (BecomeMaster); its slaves record the same entries from the
// transfers they receive. A slave that meets a master compares both
// files: the end of the newest epoch both hold with the same start is the
// consistent point, and the slave's records past it (of an epoch the
// master does not share) go before it follows.
//
// # The epoch file
//
// storePathRootDir/epochFileCheckpoint (RocketMQ's storePathEpochFile),
// text, one entry a line in ascending epochs, with a backup of the
// previous content in epochFileCheckpoint.bak:
//
//	2              number of entries
//	773307083      CRC-32 (IEEE) of the entry lines, "\n" included, & 0x7fffffff
//	7-7000         epoch-startOffset
//	8-8000
//
// An entry ends where the next starts, the last at the log's end. Epochs
// and start offsets both grow (an epoch in which the master took no
// record gets no entry: its start would equal the last one's).
//
// # The connection
//
// The slave connects to the master's HA port (haListenPort) and the
// exchange runs in two states, HANDSHAKE (1) then TRANSFER (2), the
// ordinals of RocketMQ's HAConnectionState; every frame starts with the
// state. All integers are big-endian.
//
//	slave -> master: handshake (16 bytes), once per connection
//	+-------------+------------------------+--------------------+----------------+
//	| state=1 i32 | syncFromLastFile i16   | asyncLearner i16   | brokerId i64   |
//	+-------------+------------------------+--------------------+----------------+
//
//	master -> slave: handshake answer (20 bytes + 12 per epoch entry)
//	+-------------+--------------+-------------------+---------------+
//	| state=1 i32 | bodySize i32 | maxOffset i64     | lastEpoch i32 |
//	+-------------+--------------+-------------------+---------------+
//	| epoch i32 | startOffset i64 |  ... bodySize/12 entries, at most 1000
//	+-----------+-----------------+
//
//	slave -> master: report (12 bytes), after the handshake answer, after
//	every transfer that moved the slave's end, and every
//	haSendHeartbeatInterval (5 s)
//	+-------------+-----------------------+
//	| state=2 i32 | slave's end i64       |
//	+-------------+-----------------------+
//
//	master -> slave: transfer (36 bytes + body)
//	+-------------+--------------+------------+-----------+----------------------+--------------------+------+
//	| state=2 i32 | bodySize i32 | offset i64 | epoch i32 | epochStartOffset i64 | confirmOffset i64  | body |
//	+-------------+--------------+------------+-----------+----------------------+--------------------+------+
//
// The master answers the handshake with its epochs; the slave computes
// the consistent point (its last entry ending at its CommitLog's end, the
// master's at maxOffset), truncates its epoch file there and reports its
// end. The slave first drops its epochs that begin at or past its end
// (they hold none of its records: RocketMQ keeps them, and a slave whose
// only epoch is one it was master of without writing never finds a point
// with a master that did not see it). A slave with an empty epoch file
// is new and compares nothing. The
// master transfers from the first report: from there, or when it is 0
// from its first offset (its newest segment's start if syncFromLastFile).
// A transfer carries at most haTransferBatchSize (32 KiB) of one segment
// and never crosses the end of an epoch; its header names the epoch entry
// holding its bytes, and the slave appends that entry to its epoch file
// when the epoch changes. (RocketMQ's master labels the last piece of an
// epoch with the next epoch; both slaves record the same entries from
// either.) With nothing to send the master sends an empty transfer every
// haSendHeartbeatInterval; either side drops a connection silent for
// haHousekeepingInterval (20 s).
//
// # The slave's cut
//
// A slave holding records past the consistent point stops (Client.Run
// returns *CutError): RocketMQ truncates the CommitLog there at once, but
// rocketkv's index has dispatched those records, and only a restart with
// the CommitLog cut there (commitlog.Config.CutAt, --cut-commitlog-at)
// removes them from both. The point is an epoch's start, so a record
// start. A slave whose first report is past the master's end (no epoch
// to compare, bytes the master never wrote) is served as RocketMQ serves
// it but never joins the SyncStateSet.
//
// # The SyncStateSet and the confirm offset
//
// The master tracks each slave by the broker id of its handshake. A slave
// that is not an async learner is proposed for the group's SyncStateSet
// when it acknowledges the master's confirm offset and the current
// epoch's start; it is proposed out when it has not caught up for
// haMaxTimeSlaveNotCatchup (15 s, checked every checkSyncStateSetPeriod)
// or disconnects. Proposals go to ServerConfig.SyncStateSetChanged (the
// broker sends CONTROLLER_ALTER_SYNC_STATE_SET); the controller's answer
// comes back through Server.SetSyncStateSet. The confirm offset sent in
// every transfer is the master's end, or with allAckInSyncStateSet the
// lowest acknowledgement of the set's slaves.
//
// # Use
//
//	epochs, err := autoswitch.OpenEpochFile(filepath.Join(storeRoot, autoswitch.EpochFileName))
//	log.OnMinOffsetChange(epochs.FollowRetention(logger))
//
//	// master, elected in epoch 7
//	err := autoswitch.BecomeMaster(epochs, 7, log.MaxOffset(), logger)
//	srv := autoswitch.NewServer(autoswitch.ServerConfig{Addr: ":10912", Log: log, Epochs: epochs,
//		BrokerID: 1, SyncStateSet: []int64{1}, SyncStateSetChanged: alterSyncStateSet})
//	err = srv.Start()
//	defer srv.Close()
//
//	// slave of a master of epoch 7
//	err := autoswitch.BecomeSlave(epochs, 7)
//	c := autoswitch.NewClient(autoswitch.ClientConfig{MasterAddr: haAddr, BrokerID: 2,
//		Log: replica, Epochs: epochs})
//	err = c.Run(ctx) // *CutError: restart with the CommitLog cut at its At
//
// A broker in controller mode runs one of the two at a time: a change of
// role restarts the broker in its process (broker.Supervisor), which
// starts the Server or the Client anew.
package autoswitch

// Package controller is a RocketMQ 5 controller: the service that brokers
// started with enableControllerMode=true register with. It hands out broker
// ids, elects each broker group's master, keeps the group's sync state set
// (the replicas in sync with the master) and tells brokers of role changes.
// It speaks RocketMQ's controller requests over Remoting with RocketMQ's
// headers, bodies and response codes, as RocketMQ's source lays them out
// (the tests send requests shaped as RocketMQ's BrokerOuterAPI sends them
// and read bodies as fastjson writes them; no running Java broker has been
// tried against it).
//
// # State
//
// The replicated state (State) holds, per broker name (RocketMQ keys groups
// by broker name alone, the cluster is recorded beside it):
//
//	Replicas    cluster, brokerName, nextBrokerId,
//	            brokers: id -> {addr, registerCheckCode}
//	SyncState   cluster, brokerName, masterEpoch, syncStateSetEpoch,
//	            syncStateSet (ids), master id (or none)
//
// Ids start at 1 (FirstBrokerID). masterEpoch grows with every election,
// also with one that leaves the group without a master; syncStateSetEpoch
// with every change of the set (an election resets the set to the new
// master alone). Every change is an Event (apply an id, update an address,
// elect, alter the set, clean a group) that raft replicates and State.Apply
// applies, in the same order on every controller. Apply checks each event
// again against the state it lands on (an alter and an election carry the
// epochs they were checked at): one that landed after a change its check
// did not see (behind a raft apply that timed out and committed later)
// changes nothing, and its request gets the refusal RocketMQ's check gives
// against that state, never SUCCESS.
//
// Not replicated, local to each controller: the broker live table fed by
// BROKER_HEARTBEAT (904): per (cluster, brokerName, brokerId) the address,
// the last heartbeat and its timeout (heartbeatTimeoutMills, 10 s when
// absent), epoch, maxOffset, confirmOffset, electionPriority and the
// connection. Brokers send heartbeats to every controller. A broker is
// alive while its last heartbeat is younger than its timeout; every
// scanNotActiveBrokerInterval the expired ones are dropped (their
// connections closed) and, when one was its group's master, the leader
// elects a new one; a closed connection counts at once. Every
// scanInactiveMasterInterval the leader also re-elects in groups whose
// master is not alive while another member is.
//
// # Requests
//
//	1012 CONTROLLER_GET_NEXT_BROKER_ID   the id a new broker should apply for
//	1013 CONTROLLER_APPLY_BROKER_ID      take an id with a registerCheckCode ("addr;time");
//	                                     the same code may take its id again
//	1003 CONTROLLER_REGISTER_BROKER      a broker with an id says it is up (address updated);
//	                                     answers the master if alive, and the sync state set
//	1002 CONTROLLER_ELECT_MASTER         elect (first election: the asking broker)
//	1001 CONTROLLER_ALTER_SYNC_STATE_SET the master reports its in-sync replicas
//	1004 CONTROLLER_GET_REPLICA_INFO     master, epoch and sync state set of a group
//	1005 CONTROLLER_GET_METADATA_INFO    the controller cluster: leader, peers (any peer answers)
//	1006 CONTROLLER_GET_SYNC_STATE_DATA  groups with every member's liveness (mqadmin)
//	1009/1010 UPDATE/GET_CONTROLLER_CONFIG
//	1011 CLEAN_BROKER_DATA               forget a group or some of its ids (mqadmin)
//	904  BROKER_HEARTBEAT                liveness, epoch, offsets, priority
//
// Every request but 1005, 904 and the config pair is answered
// CONTROLLER_NOT_LEADER (2007) by a controller that does not lead, so a
// broker tries the next controller address. After a successful election
// the members of the group whose heartbeats are current get
// NOTIFY_BROKER_ROLE_CHANGED (1008, oneway: header masterAddress,
// masterEpoch, syncStateSetEpoch, masterBrokerId; body the SyncStateSet)
// when notifyBrokerRoleChanged is on.
//
// # Elections
//
// As RocketMQ's DefaultElectPolicy: candidates are the alive members of the
// sync state set, then (only with enableElectUncleanMaster) every alive
// member. The old master stays if it is a candidate and no other broker is
// designated; a designated broker (mqadmin electMaster) wins if it is a
// candidate, else nobody; otherwise the highest epoch wins, then the
// largest maxOffset, then the lowest electionPriority.
//
// # Replication
//
// The peers are controllerDLegerPeers ("n0-host:port;n1-host:port") and
// this one is controllerDLegerSelfId. Each peer serves brokers on its
// host:port, as RocketMQ's DLedger controller does; raft (hashicorp/raft)
// runs between the peers on port+1 of the same hosts. One peer is a
// one-member raft with an in-memory transport. The raft log, its stable
// store (bbolt, raft.db) and snapshots (the State as JSON) are kept under
// controllerStorePath, so a restarted controller has its state back; the
// first start of a peer bootstraps the cluster with every peer (a first
// start killed in the middle of the bootstrap bootstraps again); the
// membership is then the store's (a changed controllerDLegerPeers is logged
// as a warning and needs empty stores on every peer to take effect). A new
// leader answers requests only once it has applied everything committed
// before (a raft barrier, tried again while it leads). Requests are
// checked and replicated one at a time, as RocketMQ's single event thread
// does.
//
// # Metrics
//
// With Options.Metrics (metricsExporterType=PROM) the controller keeps
// RocketMQ's ControllerMetricsManager metrics (package metrics, Controller)
// and StartHost serves them: each request answered, or refused where
// RocketMQ's handler throws (result.status), each election the leader
// runs, each wait for the raft log where RocketMQ appends to DLedger, and
// at a scrape its role, the brokers alive and the store's size
// (metrics.go).
//
// Safe for concurrent use.
package controller

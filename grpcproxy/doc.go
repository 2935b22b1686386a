// Package grpcproxy serves RocketMQ 5's gRPC protocol (apache.rocketmq.v2,
// the protocol of the Java 5.x, Go v5, C++, .NET, Node.js, Python and Rust
// clients) in front of rocketkv brokers, as RocketMQ's proxy does in its
// cluster mode: a stateless translator that finds brokers through the name
// servers and speaks Remoting to them.
//
//	gRPC client ──gRPC :8081──▶ grpcproxy ──Remoting──▶ broker masters
//	                              │
//	                              └──Remoting──▶ name servers (routes)
//
// Requests map onto the Remoting requests RocketMQ's proxy sends:
//
//	QueryRoute               GET_ROUTEINFO_BY_TOPIC (+ GET_TOPIC_CONFIG for
//	                         the topic's message type); every queue is
//	                         answered with the proxy's own endpoint
//	QueryAssignment          one queue -1 per readable broker group (every
//	                         queue of the group when the group is FIFO)
//	SendMessage              SEND_MESSAGE_V2 of a single message, to a
//	                         queue chosen round-robin or by its message
//	                         group; SEND_BATCH_MESSAGE of several, to the
//	                         next queue round-robin
//	ReceiveMessage           POP_MESSAGE (queue -1) with long polling
//	AckMessage               ACK_MESSAGE per entry
//	ChangeInvisibleDuration  CHANGE_MESSAGE_INVISIBLETIME
//	ForwardMessageToDLQ      CONSUMER_SEND_MSG_BACK (delay level -1), then
//	                         ACK_MESSAGE
//	Heartbeat                HEART_BEAT (simple consumers as
//	                         CONSUME_ACTIVELY, push consumers as
//	                         CONSUME_PASSIVELY, their subscriptions of
//	                         the version of their settings; producers
//	                         under each topic as their group)
//	NotifyClientTermination  UNREGISTER_CLIENT
//	EndTransaction           END_TRANSACTION, with the half message's place
//	                         remembered from its send or its check
//	(broker's check)         CHECK_TRANSACTION_STATE on the proxy's
//	                         connection becomes a
//	                         RecoverOrphanedTransactionCommand on a
//	                         producer's telemetry stream
//	RecallMessage            RECALL_MESSAGE
//	Telemetry                the client's settings in, the merged settings
//	                         out (retry policy, batch size, long polling);
//	                         HEART_BEAT for a producer or a consumer, as
//	                         its heartbeat registers it
//
// A receipt handle is the POP_CK extraInfo of the broker's pop plus the
// message's CommitLog offset, nine space-separated fields as RocketMQ's
// proxy writes them (see Handle), so that a handle names its broker group,
// queue and message without any state in the proxy: proxies can be
// restarted or load-balanced freely. What a proxy does keep, as
// RocketMQ's does: the clients' settings and telemetry streams, the
// renewal of handles received with auto_renew (push consumers), and the
// half messages of transactions until they end (an EndTransaction must
// come through the proxy that saw the send or the check, as with
// RocketMQ's).
//
// With ACL 2.0 on (Config.Authentication, Config.Authorization) every
// call is checked before its handler: the clients sign a date-time header
// with the user's password, users and access lists come from the brokers
// (AUTH_GET_USER, AUTH_GET_ACL), and what a call needs (Pub on a send's
// topic, Sub on a receive's topic and group, ...) is decided by package
// auth as the broker decides Remoting requests. The proxy's own Remoting
// requests are signed with its inner account when one is configured.
//
// Not served, as by RocketMQ 5.3's proxy (gRPC's UNIMPLEMENTED):
// PullMessage and the offset requests of the lite pull consumer.
package grpcproxy

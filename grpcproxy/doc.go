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
//	SendMessage              SEND_MESSAGE_V2, one per message, to a queue
//	                         chosen round-robin or by the message group
//	ReceiveMessage           POP_MESSAGE (queue -1) with long polling
//	AckMessage               ACK_MESSAGE per entry
//	ChangeInvisibleDuration  CHANGE_MESSAGE_INVISIBLETIME
//	ForwardMessageToDLQ      CONSUMER_SEND_MSG_BACK (delay level -1), then
//	                         ACK_MESSAGE
//	Heartbeat                HEART_BEAT (consumers, CONSUME_POP)
//	NotifyClientTermination  UNREGISTER_CLIENT
//	Telemetry                the client's settings in, the merged settings
//	                         out (retry policy, batch size, long polling)
//
// A receipt handle is the POP_CK extraInfo of the broker's pop plus the
// message's CommitLog offset, nine space-separated fields as RocketMQ's
// proxy writes them (see Handle), so that a handle names its broker group,
// queue and message without any state in the proxy: proxies can be
// restarted or load-balanced freely. The one piece of state is the
// auto-renewal of handles received with auto_renew (push consumers),
// which lives with the client's connection.
//
// Not served (answered UNSUPPORTED with a message naming it): transactional
// messages (EndTransaction and the orphaned-transaction check need the
// broker's check to reach a gRPC client), PullMessage and the offset
// requests of the 5.x lite pull consumer, RecallMessage.
package grpcproxy

package metrics

import "testing"

// Every metric rocketkv serves, under the name a RocketMQ 5.3.3 broker
// serves it (its units, its OpenTelemetry exporter 1.29.0-alpha) and the
// name of RocketMQ 5.0 to 5.1.3.
func TestNamesOfEveryMetric(t *testing.T) {
	for _, c := range []struct{ bare, suffixed string }{
		{MessagesInTotal, "rocketmq_messages_in_total"},
		{MessagesOutTotal, "rocketmq_messages_out_total"},
		{ThroughputInTotal, "rocketmq_throughput_in_total"},
		{ThroughputOutTotal, "rocketmq_throughput_out_total"},
		{SendToDLQTotal, "rocketmq_send_to_dlq_messages_total"},
		{CommitMessagesTotal, "rocketmq_commit_messages_total"},
		{RollbackMessagesTotal, "rocketmq_rollback_messages_total"},
		{HalfMessages, "rocketmq_half_messages"},
		{BrokerPermission, "rocketmq_broker_permission"},
		{TopicNumber, "rocketmq_topic_number"},
		{ConsumerGroupNumber, "rocketmq_consumer_group_number"},
		{ProducerConnections, "rocketmq_producer_connections"},
		{ConsumerConnections, "rocketmq_consumer_connections"},
		{StorageDispatchBehind, "rocketmq_storage_dispatch_behind_bytes"},
		{StorageFlushBehind, "rocketmq_storage_flush_behind_bytes"},
		{StorageSize, "rocketmq_storage_size_bytes"},
		{StorageReserveTime, "rocketmq_storage_message_reserve_time_milliseconds"},
		{ConsumerLagMessages, "rocketmq_consumer_lag_messages"},
		{ConsumerLagLatency, "rocketmq_consumer_lag_latency_milliseconds"},
		{ConsumerInflight, "rocketmq_consumer_inflight_messages"},
		{ConsumerReady, "rocketmq_consumer_ready_messages"},
		{ConsumerQueueing, "rocketmq_consumer_queueing_latency_milliseconds"},
		{MessageSize, "rocketmq_message_size"},
		{FinishMessageLatency, "rocketmq_finish_message_latency_milliseconds"},
		{TopicCreateTime, "rocketmq_topic_create_execution_time_milliseconds"},
		{GroupCreateTime, "rocketmq_consumer_group_create_execution_time_milliseconds"},
		{RPCLatency, "rocketmq_rpc_latency_milliseconds"},
		{TimerEnqueueTotal, "rocketmq_timer_enqueue_total"},
		{TimerDequeueTotal, "rocketmq_timer_dequeue_total"},
		{DelayMessageLatency, "rocketmq_delay_message_latency_seconds"},
		{TimerEnqueueLag, "rocketmq_timer_enqueue_lag"},
		{TimerEnqueueLatency, "rocketmq_timer_enqueue_latency_milliseconds"},
		{TimerDequeueLag, "rocketmq_timer_dequeue_lag"},
		{TimerDequeueLatency, "rocketmq_timer_dequeue_latency_milliseconds"},
		{TimingMessages, "rocketmq_timing_messages"},
		{TimerMessageSnapshot, "rocketmq_timer_message_snapshot"},
		{PopReviveInTotal, "rocketmq_pop_revive_in_message_total"},
		{PopReviveOutTotal, "rocketmq_pop_revive_out_message_total"},
		{PopReviveRetryTotal, "rocketmq_pop_revive_retry_messages_total"},
		{PopReviveLag, "rocketmq_pop_revive_lag_milliseconds"},
		{PopReviveLatency, "rocketmq_pop_revive_latency_milliseconds"},
		// The controller's: request_total and the other counters hold
		// "total" already; the latencies declare "us", the disk usage
		// "bytes"; role, an up-down counter, is a gauge.
		{ControllerRole, "role"},
		{ControllerDiskUsage, "dledger_disk_usage_bytes"},
		{ControllerActiveBrokers, "active_broker_num"},
		{ControllerRequestTotal, "request_total"},
		{ControllerRaftOpTotal, "dledger_op_total"},
		{ControllerElectionTotal, "election_total"},
		{ControllerRequestLatency, "request_latency_microseconds"},
		{ControllerRaftOpLatency, "dledger_op_latency_microseconds"},
	} {
		if got := UnitSuffixed.Name(c.bare); got != c.suffixed {
			t.Errorf("UnitSuffixed.Name(%s) = %s, want %s", c.bare, got, c.suffixed)
		}
		if got := Bare.Name(c.bare); got != c.bare {
			t.Errorf("Bare.Name(%s) = %s", c.bare, got)
		}
		if _, ok := declared[c.bare]; !ok {
			t.Errorf("%s has no declaration", c.bare)
		}
	}
}

// The exporter's naming rules, on declarations RocketMQ does not use.
func TestUnitSuffixRules(t *testing.T) {
	for _, c := range []struct {
		name string
		d    declaration
		want string
	}{
		{"queue_depth", declaration{gauge, "{messages}"}, "queue_depth"},                            // annotation dropped
		{"sent", declaration{counter, "{messages}"}, "sent_total"},                                  // and _total added
		{"io", declaration{counter, "By"}, "io_bytes_total"},                                        // abbreviation spelled out
		{"io_bytes_total", declaration{counter, "By"}, "io_bytes_total"},                            // already there
		{"took", declaration{histogram, "s"}, "took_seconds"},                                       // a duration
		{"took_seconds_max", declaration{gauge, "s"}, "took_seconds_max"},                           // contained anywhere
		{"rate", declaration{gauge, "By/s"}, "rate_bytes_per_second"},                               // a rate
		{"load", declaration{gauge, "{req}/min"}, "load_per_min"},                                   // per-unit kept when unknown
		{"usage", declaration{gauge, "1"}, "usage_ratio"},                                           // dimensionless gauge
		{"hits", declaration{counter, "1"}, "hits_total"},                                           // dimensionless counter
		{"temp", declaration{gauge, "Cel"}, "temp_celsius"},                                         // UCUM spelling
		{"weird", declaration{gauge, "__kilo--things__"}, "weird_kilo_things"},                      // cleaned up
		{"size", declaration{histogram, "bytes"}, "size_bytes"},                                     // unknown unit kept
		{"rocketmq_x_total", declaration{counter, "milliseconds"}, "rocketmq_x_total_milliseconds"}, // unit before _total check
	} {
		if got := unitSuffixed(c.name, c.d); got != c.want {
			t.Errorf("%s with %+v: %s, want %s", c.name, c.d, got, c.want)
		}
	}
}

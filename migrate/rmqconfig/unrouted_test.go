package rmqconfig

import (
	"reflect"
	"testing"
)

// UnroutedQueues names topics without a config and queues past a
// config's count, and leaves out the topics the broker configures itself.
func TestUnroutedQueues(t *testing.T) {
	configured := map[string]int{"Orders": 8, "Short": 2}
	lookup := func(topic string) (int, bool) {
		n, ok := configured[topic]
		return n, ok
	}
	for _, tc := range []struct {
		name   string
		queues map[string]int32
		want   []string
	}{
		{"all routed", map[string]int32{"Orders": 7, "Short": 1}, nil},
		{"the broker's own", map[string]int32{"SCHEDULE_TOPIC_XXXX": 17, "rmq_sys_wheel_timer": 0, "%RETRY%GroupA": 0, "%LMQ%x": 0}, nil},
		{"missing", map[string]int32{"Lost": 3, "Orders": 0, "Gone": 0}, []string{
			"2 topics have messages in the store but no topic config: Gone (1 queues), Lost (4 queues); clients find no route to them until they are created with at least that many queues (mqadmin updateTopic -t TOPIC -r N -w N)"}},
		{"short", map[string]int32{"Short": 2, "Orders": 8}, []string{
			"2 topics have messages in queues past their config's queue count: Orders (9 queues, config 8), Short (3 queues, config 2); those queues are not routed until the topic is widened (mqadmin updateTopic -r N -w N)"}},
		{"dead letters count", map[string]int32{"%DLQ%GroupA": 0}, []string{
			"1 topics have messages in the store but no topic config: %DLQ%GroupA (1 queues); clients find no route to them until they are created with at least that many queues (mqadmin updateTopic -t TOPIC -r N -w N)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := UnroutedQueues(tc.queues, lookup); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("UnroutedQueues(%v)\n got %q\nwant %q", tc.queues, got, tc.want)
			}
		})
	}
}

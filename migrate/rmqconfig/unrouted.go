package rmqconfig

import (
	"fmt"
	"sort"

	"github.com/rocketkv/rocketkv/meta"
)

// UnroutedQueues says, in at most two lines, which queues of a store hold
// messages that no topic config routes: topics without a config (a store
// whose topics.json is missing or older than its CommitLog), and queue
// ids at or past the count their config gives. Neither loses a message,
// but clients find no route to them (or to the extra queues) until an
// operator creates or widens the topic. queues maps a topic to its
// highest queue id; queueNums gives a topic's read queue count (consumers
// read queues 0..readQueueNums-1 only, RocketMQ's
// topicRouteData2TopicSubscribeInfo, whatever the write count) and whether
// it has a config.
// System topics, light message queues and %RETRY% topics are left out:
// the broker creates their configs itself (a group's retry topic at its
// consumers' next heartbeat).
func UnroutedQueues(queues map[string]int32, queueNums func(topic string) (int, bool)) []string {
	var missing, short []string
	for topic, maxID := range queues {
		if meta.IsSystemTopic(topic) || meta.IsLMQ(topic) || meta.IsRetryTopic(topic) {
			continue
		}
		n, ok := queueNums(topic)
		switch {
		case !ok:
			missing = append(missing, fmt.Sprintf("%s (%d queues)", topic, maxID+1))
		case int(maxID) >= n:
			short = append(short, fmt.Sprintf("%s (%d queues, config %d)", topic, maxID+1, n))
		}
	}
	sort.Strings(missing)
	sort.Strings(short)
	var lines []string
	if len(missing) > 0 {
		lines = append(lines, fmt.Sprintf("%d topics have messages in the store but no topic config: %s; clients find no route to them until they are created with at least that many queues (mqadmin updateTopic -t TOPIC -r N -w N)",
			len(missing), names(missing)))
	}
	if len(short) > 0 {
		lines = append(lines, fmt.Sprintf("%d topics have messages in queues past their config's queue count: %s; those queues are not routed until the topic is widened (mqadmin updateTopic -r N -w N)",
			len(short), names(short)))
	}
	return lines
}

package pop

import "testing"

// RetryOrigin reads back the topic of a group's V1 and V2 pop-retry
// topics, and refuses the group's own retry topic and other groups'.
func TestRetryOrigin(t *testing.T) {
	for _, c := range []struct {
		retryTopic, group, want string
		ok                      bool
	}{
		{RetryTopicV1("T", "g"), "g", "T", true},
		{RetryTopicV2("T", "g"), "g", "T", true},
		{RetryTopicV1("a_b", "g"), "g", "a_b", true},
		{"%RETRY%g", "g", "", false},
		{"%RETRY%g_", "g", "", false},
		{RetryTopicV1("T", "other"), "g", "", false},
		{"%RETRY%gx_T", "g", "", false},
		{"T", "g", "", false},
	} {
		if got, ok := RetryOrigin(c.retryTopic, c.group); got != c.want || ok != c.ok {
			t.Errorf("RetryOrigin(%q, %q) = %q, %v; want %q, %v", c.retryTopic, c.group, got, ok, c.want, c.ok)
		}
	}
}

package kvindex

// topicNames hands out one shared copy of each topic name, so that the
// per-queue caches of a million queues over ten thousand topics hold ten
// thousand name strings rather than a million: each key would otherwise
// keep the string of the request or record that first named its queue,
// and the garbage collector marks every one of them on every cycle. It
// forgets everything when it reaches its bound (a deleted topic's name is
// not tracked otherwise); keys made before keep their copies, which is
// only memory. Not safe for concurrent use: its owner's lock guards it.
type topicNames struct {
	m     map[string]string
	limit int
}

// defaultTopicNames bounds a topicNames table.
const defaultTopicNames = 1 << 17

func newTopicNames(limit int) *topicNames {
	return &topicNames{m: map[string]string{}, limit: max(limit, 1)}
}

// intern returns the shared copy of name.
func (n *topicNames) intern(name string) string {
	if s, ok := n.m[name]; ok {
		return s
	}
	if len(n.m) >= n.limit {
		clear(n.m)
	}
	n.m[name] = name
	return name
}

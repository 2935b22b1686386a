package meta

// AverageShare is the run of queues RocketMQ's
// AllocateMessageQueueAveragely gives the consumer at index idx of
// consumers (their ids sorted) out of n queues (sorted): queues [start,
// end), consecutive, the first n % consumers consumers taking one more.
// A consumer past the queues (more consumers than queues), or an index
// out of range, gets an empty run.
func AverageShare(n, consumers, idx int) (start, end int) {
	if n <= 0 || consumers <= 0 || idx < 0 || idx >= consumers {
		return 0, 0
	}
	mod := n % consumers
	size := n / consumers
	if n <= consumers {
		size = 1
	} else if mod > 0 && idx < mod {
		size++
	}
	start = idx*size + mod
	if mod > 0 && idx < mod {
		start = idx * size
	}
	if start >= n {
		return 0, 0
	}
	return start, start + min(size, n-start)
}

package kvindex

import "encoding/binary"

// Writers of the schema-2 POP layout (0x50, 0x51), which this code only
// reads and migrates: the migration and decoder tests build such stores
// with them.

func popInFlightKey(dst []byte, r *InFlight) []byte {
	dst = deadlineKey(dst, prefixPopInFlight, r.VisibleAt, r.Group, r.Topic, r.QueueID)
	return binary.BigEndian.AppendUint64(dst, uint64(r.QueueOffset))
}

func popAckKey(dst []byte, group, topic string, queueID int32, offset int64) []byte {
	dst = groupTopicQueue(dst, prefixPopAckIndex, group, topic, queueID)
	return binary.BigEndian.AppendUint64(dst, uint64(offset))
}

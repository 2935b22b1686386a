package rmqpop

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ErrCheckpointTooLarge: a check-point holds more messages than
// RocketMQ's PopCheckPoint can (its count is a byte).
var ErrCheckpointTooLarge = errors.New("rmqpop: check-point holds more messages than RocketMQ's can")

// EncodeCheckpoint renders ck as the body of a revive-topic "ck" message,
// as RocketMQ's fastjson writes a PopCheckPoint: short names in name
// order, no message acknowledged (bm 0: ck.Offsets are the ones in
// flight), each offset as its distance from StartOffset, the re-put count
// as text.
func EncodeCheckpoint(ck Checkpoint) ([]byte, error) {
	if len(ck.Offsets) > maxMessages-1 {
		return nil, fmt.Errorf("%w: %d", ErrCheckpointTooLarge, len(ck.Offsets))
	}
	diffs := make([]int64, len(ck.Offsets))
	for i, off := range ck.Offsets {
		if off < ck.StartOffset {
			return nil, fmt.Errorf("rmqpop: check-point of %s/%d offset %d below its start %d", ck.Topic, ck.QueueID, off, ck.StartOffset)
		}
		diffs[i] = off - ck.StartOffset
	}
	return json.Marshal(struct {
		BitMap        int64   `json:"bm"`
		BrokerName    string  `json:"bn"`
		Group         string  `json:"c"`
		Diffs         []int64 `json:"d"`
		InvisibleTime int64   `json:"it"`
		Num           int     `json:"n"`
		PopTime       int64   `json:"pt"`
		QueueID       int32   `json:"q"`
		RePut         string  `json:"rp"`
		StartOffset   int64   `json:"so"`
		Topic         string  `json:"t"`
	}{0, ck.BrokerName, ck.Group, diffs, ck.InvisibleTime, len(ck.Offsets), ck.PopTime, ck.QueueID,
		strconv.Itoa(int(ck.RePuts)), ck.StartOffset, ck.Topic})
}

// CheckpointUniqKey is the UNIQ_KEY RocketMQ gives a check-point message
// (PopMessageProcessor.genCkUniqueId).
func CheckpointUniqKey(ck Checkpoint) string {
	return ck.Topic + "@" + strconv.Itoa(int(ck.QueueID)) + "@" + strconv.FormatInt(ck.StartOffset, 10) + "@" + ck.Group +
		"@" + strconv.FormatInt(ck.PopTime, 10) + "@" + ck.BrokerName + "@" + TagCheckpoint
}

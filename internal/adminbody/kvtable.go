package adminbody

import (
	"encoding/json"
	"fmt"
)

// DecodeKVTable reads RocketMQ's KVTable, {"table":{"key":"value",...}},
// the body of GET_BROKER_RUNTIME_INFO and of a name server's
// REGISTER_BROKER answer (ORDER_TOPIC_CONFIG). A body without the table,
// or with a null one, gives a nil map.
func DecodeKVTable(body []byte) (map[string]string, error) {
	var kv struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(body, &kv); err != nil {
		return nil, fmt.Errorf("decode KVTable: %w", err)
	}
	return kv.Table, nil
}

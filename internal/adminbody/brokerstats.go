package adminbody

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// BrokerStatsItem is what one statistic did over a window: RocketMQ's
// BrokerStatsItem.
type BrokerStatsItem struct {
	Sum   int64   `json:"sum"`
	TPS   float64 `json:"tps"`
	AvgPT float64 `json:"avgpt"`
}

// BrokerStatsData is the body of VIEW_BROKER_STATS_DATA: a statistic over
// the last minute, hour and day.
type BrokerStatsData struct {
	Minute BrokerStatsItem `json:"statsMinute"`
	Hour   BrokerStatsItem `json:"statsHour"`
	Day    BrokerStatsItem `json:"statsDay"`
}

// EncodeBrokerStatsData writes d as fastjson does, fields in alphabetical
// order:
//
//	{"statsDay":{"avgpt":0.0,"sum":0,"tps":0.0},"statsHour":{...},"statsMinute":{...}}
func EncodeBrokerStatsData(d BrokerStatsData) []byte {
	var dst []byte
	for i, w := range []struct {
		name string
		item BrokerStatsItem
	}{{"statsDay", d.Day}, {"statsHour", d.Hour}, {"statsMinute", d.Minute}} {
		if i == 0 {
			dst = append(dst, `{"`...)
		} else {
			dst = append(dst, `,"`...)
		}
		dst = append(dst, w.name...)
		dst = append(dst, `":{"avgpt":`...)
		dst = AppendDouble(dst, w.item.AvgPT)
		dst = append(dst, `,"sum":`...)
		dst = strconv.AppendInt(dst, w.item.Sum, 10)
		dst = append(dst, `,"tps":`...)
		dst = AppendDouble(dst, w.item.TPS)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// DecodeBrokerStatsData reads a VIEW_BROKER_STATS_DATA body.
func DecodeBrokerStatsData(body []byte) (BrokerStatsData, error) {
	var d BrokerStatsData
	if err := json.Unmarshal(body, &d); err != nil {
		return BrokerStatsData{}, fmt.Errorf("decode BrokerStatsData: %w", err)
	}
	return d, nil
}

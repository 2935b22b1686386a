package adminbody

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// GroupConsumeStats is one subscription group's entry of a
// ConsumeStatsList: a ConsumeStats (its offset table) per topic the group
// consumes.
type GroupConsumeStats struct {
	Group  string
	Topics []map[MessageQueue]OffsetWrapper
	// TPS is the consume rate of each table of Topics, in order; a
	// missing entry is 0.
	TPS []float64
}

// EncodeConsumeStatsList writes RocketMQ's ConsumeStatsList, the body of
// GET_BROKER_CONSUME_STATS (mqadmin brokerConsumeStats), fields in
// fastjson's order: a list of one-entry maps from a group to its
// ConsumeStats.
func EncodeConsumeStatsList(brokerAddr string, groups []GroupConsumeStats, totalDiff, totalInflightDiff int64) []byte {
	dst := append([]byte(nil), `{"brokerAddr":`...)
	dst = strconv.AppendQuote(dst, brokerAddr)
	dst = append(dst, `,"consumeStatsList":[`...)
	for i, g := range groups {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		dst = strconv.AppendQuote(dst, g.Group)
		dst = append(dst, ":["...)
		for j, table := range g.Topics {
			if j > 0 {
				dst = append(dst, ',')
			}
			var tps float64
			if j < len(g.TPS) {
				tps = g.TPS[j]
			}
			dst = append(dst, EncodeConsumeStats(table, tps)...)
		}
		dst = append(dst, "]}"...)
	}
	dst = append(dst, `],"totalDiff":`...)
	dst = strconv.AppendInt(dst, totalDiff, 10)
	dst = append(dst, `,"totalInflightDiff":`...)
	dst = strconv.AppendInt(dst, totalInflightDiff, 10)
	return append(dst, '}')
}

// DecodeConsumeStatsList reads a ConsumeStatsList.
func DecodeConsumeStatsList(body []byte) (brokerAddr string, groups []GroupConsumeStats, totalDiff int64, err error) {
	err = decodeBody(body, "ConsumeStatsList", func(name string, value []byte) error {
		switch name {
		case "brokerAddr":
			return json.Unmarshal(value, &brokerAddr)
		case "totalDiff":
			return json.Unmarshal(value, &totalDiff)
		case "consumeStatsList":
			items, err := Elements(value)
			if err != nil {
				return err
			}
			for _, item := range items {
				g, err := decodeGroupConsumeStats(item)
				if err != nil {
					return err
				}
				groups = append(groups, g...)
			}
		}
		return nil
	})
	return brokerAddr, groups, totalDiff, err
}

// decodeGroupConsumeStats reads one map of the list (one group, as
// RocketMQ writes it, or more).
func decodeGroupConsumeStats(item []byte) ([]GroupConsumeStats, error) {
	ms, err := Members(item)
	if err != nil {
		return nil, err
	}
	var out []GroupConsumeStats
	for _, m := range ms {
		var g GroupConsumeStats
		if err := json.Unmarshal(m.Key, &g.Group); err != nil {
			return nil, fmt.Errorf("group name %s: %w", m.Key, err)
		}
		stats, err := Elements(m.Value)
		if err != nil {
			return nil, fmt.Errorf("stats of group %s: %w", g.Group, err)
		}
		for _, s := range stats {
			table, _, err := DecodeConsumeStats(s)
			if err != nil {
				return nil, fmt.Errorf("stats of group %s: %w", g.Group, err)
			}
			g.Topics = append(g.Topics, table)
		}
		out = append(out, g)
	}
	return out, nil
}

// Elements splits the array in data into its raw items, which may be
// fastjson values (objects with object keys among them). Nothing but
// white space may follow the array.
func Elements(data []byte) ([][]byte, error) {
	p := parser{data: data}
	p.space()
	if p.i >= len(p.data) || p.data[p.i] != '[' {
		return nil, p.errorf("want '['")
	}
	var out [][]byte
	err := p.sequence(1, ']', func() error {
		v0 := p.i
		if err := p.value(1); err != nil {
			return err
		}
		out = append(out, p.data[v0:p.i])
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, p.end()
}

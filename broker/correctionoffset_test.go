package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// QUERY_CORRECTION_OFFSET answers as RocketMQ's broker: per queue the
// smallest offset committed by a group outside filterGroups that is not
// below the queue's minimum, Long.MAX_VALUE where compareGroup's offset
// lies under it, no comparison when compareGroup is filtered; queue ids
// unquoted as fastjson writes them. Unlike RocketMQ's, the query deletes
// no group's offsets.
func TestQueryCorrectionOffset(t *testing.T) {
	b, c := startExpiringBroker(t, nil)
	if r := call(t, c, remoting.DeleteExpiredCommitLog, nil, nil); r.Code != remoting.Success {
		t.Fatalf("DELETE_EXPIRED_COMMITLOG: %d %s", r.Code, r.Remark)
	}
	var qmin int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r := call(t, c, remoting.GetMinOffset, map[string]string{"topic": "ExpireT", "queueId": "0"}, nil)
		if qmin = header(t, r, "offset"); qmin >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue ExpireT/0 still begins at %d after DELETE_EXPIRED_COMMITLOG", qmin)
		}
	}
	mustSend(t, c, "ExpireT", 1, "x", "")
	mustSend(t, c, "ExpireT", 1, "y", "")
	mustSend(t, c, "OtherT", 0, "z", "")
	b.caughtUp()
	for _, o := range []struct {
		group string
		q     int32
		off   int64
	}{
		{"gA", 0, qmin + 2}, {"gA", 1, 1},
		{"gB", 0, qmin + 1}, {"gB", 1, 0},
		{"gC", 0, qmin - 1}, {"gC", 1, 1}, // below queue 0's minimum: not counted
		{"gD", 0, qmin}, {"gD", 1, 0},
	} {
		commit(t, c, o.group, "ExpireT", o.q, o.off)
	}
	commit(t, c, "gB", "OtherT", 0, 0) // another topic's offsets count for nothing
	query := func(filter, compare string) *remoting.Command {
		ext := map[string]string{"topic": "ExpireT", "compareGroup": compare}
		if filter != "" {
			ext["filterGroups"] = filter
		}
		return call(t, c, remoting.QueryCorrectionOffset, ext, nil)
	}
	q0 := strconv.FormatInt(qmin, 10)
	for _, tc := range []struct{ filter, compare, want string }{
		// gC's offset of queue 0 is under the smallest counted (gB's).
		{"gD", "gC", `{"correctionOffsets":{0:9223372036854775807,1:0}}`},
		{"gD", "gA", `{"correctionOffsets":{0:` + strconv.FormatInt(qmin+1, 10) + `,1:0}}`},
		// compareGroup filtered: RocketMQ deleted its offsets first, so
		// nothing is compared.
		{"gB,gC", "gC", `{"correctionOffsets":{0:` + q0 + `,1:0}}`},
		{"", "gA", `{"correctionOffsets":{0:` + q0 + `,1:0}}`},
		{"gA,gB,gC,gD", "gA", `{"correctionOffsets":{}}`},
	} {
		r := query(tc.filter, tc.compare)
		if r.Code != remoting.Success || string(r.Body) != tc.want {
			t.Errorf("filterGroups %q, compareGroup %s: %d %s %s; want %s", tc.filter, tc.compare, r.Code, r.Remark, r.Body, tc.want)
		}
	}
	// The filtered groups keep their offsets.
	if got := committedOffset(t, c, "gD", "ExpireT", 0); got != qmin {
		t.Errorf("gD's offset of ExpireT/0 after the queries: %d, want %d", got, qmin)
	}
	if got := committedOffset(t, c, "gC", "ExpireT", 1); got != 1 {
		t.Errorf("gC's offset of ExpireT/1 after the queries: %d, want 1", got)
	}
	if r := call(t, c, remoting.QueryCorrectionOffset, map[string]string{"topic": "ExpireT"}, nil); r.Code != remoting.SystemError {
		t.Errorf("no compareGroup: %d %s, want SYSTEM_ERROR", r.Code, r.Remark)
	}
}

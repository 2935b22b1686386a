package broker

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// Paged answers of GET_ALL_TOPIC_CONFIG and GET_ALL_SUBSCRIPTIONGROUP_CONFIG
// (apache/rocketmq#9467, RocketMQ 5.3.4). A client that wants pages sends
// where to start (topicSeq, groupSeq), how many it takes at most
// (maxTopicNum, maxGroupNum) and the dataVersion of the first page it
// got ("" at first). The broker answers the configs at those positions
// in name order, at most splitMetadataSize of them, starting over from
// the first when the client's version is not the table's (the table
// changed between two pages: the client sees the new version and
// restarts). Every answer, paged or not, tells the table's size in the
// response header (totalTopicNum, totalGroupNum); the client stops once
// it has that many.

// Ext fields of the paged requests and their answers.
const (
	fieldTopicSeq      = "topicSeq"
	fieldMaxTopicNum   = "maxTopicNum"
	fieldTotalTopicNum = "totalTopicNum"
	fieldGroupSeq      = "groupSeq"
	fieldMaxGroupNum   = "maxGroupNum"
	fieldTotalGroupNum = "totalGroupNum"
	fieldDataVersion   = "dataVersion"
)

// metaPage is the part of a table a GET_ALL request asks for.
type metaPage struct {
	// paged is false when the whole table is answered: enableSplitMetadata
	// is off, or the request names none of the paging fields (a client
	// before RocketMQ 5.3.4, a rocketkv slave).
	paged bool
	// from and size are the positions [from, from+size) in name order.
	from, size int
}

// readMetaPage reads the paging fields of req (seqKey and maxKey are the
// table's: topicSeq and maxTopicNum, or groupSeq and maxGroupNum) against
// the table's current version. A request that asks for pages without
// saying where from, or with a field that does not parse, is an error, as
// RocketMQ answers it SYSTEM_ERROR.
func (b *Broker) readMetaPage(req *remoting.Command, seqKey, maxKey string, current meta.DataVersion) (metaPage, error) {
	h := remoting.Header(req.ExtFields)
	cur := b.current()
	if !cur.EnableSplitMetadata || !h.Has(seqKey) && !h.Has(maxKey) && !h.Has(fieldDataVersion) {
		return metaPage{}, nil
	}
	seq, err := h.Int32(seqKey)
	if err != nil {
		return metaPage{}, fmt.Errorf("a paged request: %w", err)
	}
	limit, err := h.OptInt32(maxKey, math.MaxInt32)
	if err != nil {
		return metaPage{}, fmt.Errorf("a paged request: %w", err)
	}
	page := metaPage{paged: true, from: int(seq), size: min(cur.SplitMetadataSize, int(limit))}
	if v := h.OptString(fieldDataVersion, ""); meta.IsBlank(v) {
		page.from = 0
	} else {
		var asked meta.DataVersion
		if err := json.Unmarshal([]byte(v), &asked); err != nil {
			return metaPage{}, fmt.Errorf("a paged request: header field %q: %q is not a data version: %w", fieldDataVersion, v, err)
		}
		if asked != current {
			page.from = 0
		}
	}
	if page.from < 0 {
		return metaPage{}, fmt.Errorf("a paged request: header field %q: %d is below 0", seqKey, page.from)
	}
	return page, nil
}

// checkPageSize refuses a page of no config when the table has configs
// from its start on: splitMetadataSize or the request's maximum below 1,
// which RocketMQ answers SYSTEM_ERROR too.
func checkPageSize(p metaPage, total int) error {
	if p.size < 1 && p.from < total {
		return fmt.Errorf("a paged request: a page of %d configs: splitMetadataSize and the request's maximum must be above 0", p.size)
	}
	return nil
}

// refusePage answers a paged request that cannot be served, and logs why.
func (b *Broker) refusePage(req *remoting.Command, err error) *remoting.Command {
	b.log.Warn().Err(err).Int32("code", req.Code).Msg("metadata page request refused")
	return remoting.NewResponse(req, remoting.SystemError, err.Error())
}

// withTotal sets a GET_ALL answer's total (totalTopicNum, totalGroupNum)
// when it succeeded.
func withTotal(resp *remoting.Command, key string, total int) *remoting.Command {
	if resp.Code != remoting.Success {
		return resp
	}
	if resp.ExtFields == nil {
		resp.ExtFields = map[string]string{}
	}
	resp.ExtFields[key] = strconv.Itoa(total)
	return resp
}

package broker

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/remoting"
)

// processUpdateColdCtr answers UPDATE_COLD_DATA_FLOW_CTR_CONFIG (mqadmin
// updateColdDataFlowCtrGroupConfig): the body is a properties text of
// consumer group = cold-read threshold in bytes, each set as the group's
// own threshold. No body sets nothing. Where RocketMQ skips an entry
// whose value is not a number and answers SUCCESS, this broker refuses
// the whole body, naming the entry, and sets nothing.
func (b *Broker) processUpdateColdCtr(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if len(req.Body) == 0 {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	props, err := configs.ParseProperties(req.Body)
	if err != nil {
		b.log.Warn().Err(err).Stringer("conn", conn).Msg("update cold-data flow control: body is not a properties text")
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("update cold-data flow control: the body is not a properties text: %v", err))
	}
	groups := make([]string, 0, len(props))
	for g := range props {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	thresholds := make(map[string]int64, len(props))
	for _, g := range groups {
		if g == "" {
			b.log.Warn().Stringer("conn", conn).Msg("update cold-data flow control refused: an entry without a consumer group")
			return remoting.NewResponse(req, remoting.SystemError, "update cold-data flow control: an entry without a consumer group (a line that starts with = or :); nothing was changed")
		}
		v, err := strconv.ParseInt(props[g], 10, 64)
		if err != nil {
			b.log.Warn().Err(err).Str("group", g).Str("value", props[g]).Stringer("conn", conn).Msg("update cold-data flow control refused: a threshold is not a number")
			return remoting.NewResponse(req, remoting.SystemError,
				fmt.Sprintf("update cold-data flow control: the threshold of group %s, %q, is not a number of bytes; nothing was changed", g, props[g]))
		}
		thresholds[g] = v
	}
	b.coldReads.setGroups(thresholds)
	b.log.Info().Interface("thresholds", thresholds).Stringer("conn", conn).Msg("cold-data flow control thresholds set")
	return remoting.NewResponse(req, remoting.Success, "")
}

// processRemoveColdCtr answers REMOVE_COLD_DATA_FLOW_CTR_CONFIG (mqadmin
// removeColdDataFlowCtrGroupConfig): the body is the name of the group
// whose own threshold is dropped (the group goes back to
// cgColdReadThreshold). No body, or a group without one, changes nothing.
func (b *Broker) processRemoveColdCtr(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if len(req.Body) > 0 {
		group := string(req.Body)
		b.coldReads.removeGroup(group)
		b.log.Info().Str("group", group).Stringer("conn", conn).Msg("cold-data flow control threshold removed")
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// processColdCtrInfo answers GET_COLD_DATA_FLOW_CTR_INFO (mqadmin
// getColdDataFlowCtrInfo) with the JSON RocketMQ writes: runtimeTable
// (each group that read cold data lately: coldAcc, the bytes this period,
// lastColdReadTimeMills, createTimeMills), configTable (the thresholds
// set by administrators and, with the suffix ||adaptive, adapted ones),
// cgColdReadThreshold, globalColdReadThreshold and globalAcc.
func (b *Broker) processColdCtrInfo(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	body, err := b.coldReads.info()
	if err != nil {
		b.log.Error().Err(err).Msg("cold-data flow control info")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

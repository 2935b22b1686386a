package broker

import (
	"context"
	"fmt"

	"github.com/rocketkv/rocketkv/brokerstats"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/remoting"
)

// processViewBrokerStatsData answers VIEW_BROKER_STATS_DATA (mqadmin
// statsAll, the dashboard's topic charts): one statistic's item (statsName
// TOPIC_PUT_NUMS, GROUP_GET_NUMS, ...; statsKey a topic, "topic@group" or
// the cluster name) as what it did over the last minute, hour and day. An
// item nothing was counted in answers SYSTEM_ERROR "The stats <name> <key>
// not exist", as RocketMQ does; its tools treat that as zero traffic.
func (b *Broker) processViewBrokerStatsData(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	name, key := r.String("statsName"), r.String("statsKey")
	if err := r.Err(); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	w, ok := b.stats.Lookup(name, key)
	if !ok {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("The stats <%s> <%s> not exist", name, key))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = adminbody.EncodeBrokerStatsData(adminbody.BrokerStatsData{
		Minute: statsItem(w.Minute), Hour: statsItem(w.Hour), Day: statsItem(w.Day),
	})
	return resp
}

// statsItem is an item's windows as VIEW_BROKER_STATS_DATA reports them.
func statsItem(w brokerstats.Window) adminbody.BrokerStatsItem {
	return adminbody.BrokerStatsItem{Sum: w.Sum, TPS: w.TPS, AvgPT: w.AvgPT}
}

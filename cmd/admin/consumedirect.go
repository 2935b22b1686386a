package main

import (
	"cmp"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// consumeDirectlyResult is the JSON of RocketMQ's
// ConsumeMessageDirectlyResult, a client's answer to
// CONSUME_MESSAGE_DIRECTLY.
type consumeDirectlyResult struct {
	Order          bool    `json:"order"`
	AutoCommit     bool    `json:"autoCommit"`
	ConsumeResult  *string `json:"consumeResult"`
	Remark         *string `json:"remark"`
	SpentTimeMills int64   `json:"spentTimeMills"`
}

// String is ConsumeMessageDirectlyResult.toString, which mqadmin prints.
func (r consumeDirectlyResult) String() string {
	orNull := func(s *string) string {
		if s == nil {
			return "null"
		}
		return *s
	}
	return fmt.Sprintf("ConsumeMessageDirectlyResult [order=%t, autoCommit=%t, consumeResult=%s, remark=%s, spentTimeMills=%d]",
		r.Order, r.AutoCommit, orNull(r.ConsumeResult), orNull(r.Remark), r.SpentTimeMills)
}

// pushConsumer tells whether the client clientID of group is a push
// consumer, the only kind that consumes a message handed to it, as
// mqadmin's ConsumerRunningInfo.isPushType reads its running info
// (PROP_CONSUME_TYPE CONSUME_PASSIVELY), asked through a broker of the
// group's retry topic.
func (g *globals) pushConsumer(cmd *cobra.Command, group, clientID string) (bool, error) {
	addr, err := g.groupBroker(cmd.Context(), group)
	if err != nil {
		return false, err
	}
	info, err := g.consumerRunningInfo(cmd.Context(), addr, group, clientID, false)
	if err != nil {
		return false, err
	}
	return info.Properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY", nil
}

// consumeDirectly hands message m to the client clientID of group to
// consume, as mqadmin queryMsgById and queryMsgByUniqueKey -g -d do:
// CONSUME_MESSAGE_DIRECTLY with its offset message id, to the broker that
// stored it (its store host, or -b when given, as for a moved store), which
// relays it to the client; the client's ConsumeMessageDirectlyResult is
// printed as mqadmin prints it. topic is the header's topic, m's own when
// empty.
func (g *globals) consumeDirectly(cmd *cobra.Command, group, clientID, topic string, m *commitlog.Message) error {
	addr := m.StoreHost.String()
	if cmd.Flags().Changed("broker") {
		addr = g.broker
	}
	h := remoting.Header{"topic": cmp.Or(topic, m.Topic), "consumerGroup": group, "clientId": clientID,
		"msgId": commitlog.MessageID(m.StoreHost, m.PhyOffset)}
	resp, err := g.invoke(cmd.Context(), addr, remoting.ConsumeMessageDirectly, h, nil)
	if err != nil {
		return fmt.Errorf("consume message %s directly by %s of %s: %w", h["msgId"], clientID, group, err)
	}
	if len(resp.Body) == 0 {
		return fmt.Errorf("consume message %s directly by %s of %s: the answer has no result", h["msgId"], clientID, group)
	}
	var r consumeDirectlyResult
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		return fmt.Errorf("decode the result of consuming %s directly: %w", h["msgId"], err)
	}
	fmt.Fprintln(cmd.OutOrStdout(), r)
	return nil
}

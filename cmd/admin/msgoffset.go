package main

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/uniqid"
	"github.com/rocketkv/rocketkv/namesrv"
)

// queryMsgByOffsetCmd is mqadmin queryMsgByOffset: the message at one
// offset of one queue, pulled as mqadmin's pull consumer pulls it (group
// TOOLS_CONSUMER, subscription "*", one message, no commit, no suspend)
// and printed as queryMsgById prints.
func queryMsgByOffsetCmd(g *globals) *cobra.Command {
	var topic, brokerName, bodyFormat string
	var qid int
	var offset int64
	var showBody bool
	cmd := &cobra.Command{
		Use:   "queryMsgByOffset",
		Short: "print the message at an offset of one queue, pulled from its broker group (PULL_MESSAGE)",
		Long: `queryMsgByOffset prints the message at offset -o of queue -i of topic -t on
the broker group -b names, as mqadmin queryMsgByOffset: -b is a broker name
here (the group's master, or a slave when it has none, is found in the
topic's route), not an address. It pulls as group TOOLS_CONSUMER and
commits nothing. -f UTF-8 (or --body) prints the body too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			topic, brokerName = strings.TrimSpace(topic), strings.TrimSpace(brokerName)
			if cmd.Flags().Changed("bodyFormat") {
				switch strings.ToUpper(strings.TrimSpace(bodyFormat)) {
				case "UTF-8", "UTF8":
					showBody = true
				default:
					return fmt.Errorf("-f %q: only UTF-8 bodies are printed", bodyFormat)
				}
			}
			if qid < 0 {
				return fmt.Errorf("-i %d: a queue id is not negative", qid)
			}
			if offset < 0 {
				return fmt.Errorf("-o %d: a queue offset is not negative", offset)
			}
			route, err := g.route(cmd.Context(), topic)
			if err != nil {
				return err
			}
			addr, ok := brokerAddrOf(route, brokerName)
			if !ok {
				return fmt.Errorf("-b %s: the route of %s has no broker group of that name", brokerName, topic)
			}
			var found *commitlog.Message
			_, err = g.pullRange(cmd.Context(), toolsConsumerGroup, addr, brokerName, topic, qid, offset, offset+1, 1, func(m *commitlog.Message) {
				found = m
			})
			if err != nil {
				return fmt.Errorf("pull %s/%d@%d from %s (%s): %w", topic, qid, offset, brokerName, addr, err)
			}
			if found == nil {
				return fmt.Errorf("-o %d: no message at that offset of %s queue %d on %s", offset, topic, qid, brokerName)
			}
			printMessage(cmd.OutOrStdout(), found, showBody)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.StringVarP(&brokerName, "brokerName", "b", "", "broker name (the broker group, not an address)")
	f.IntVarP(&qid, "queueId", "i", 0, "queue id")
	f.Int64VarP(&offset, "offset", "o", 0, "queue offset")
	f.StringVarP(&bodyFormat, "bodyFormat", "f", "", "print the body decoded with this charset (UTF-8 only)")
	f.BoolVar(&showBody, "body", false, "print the body too (as text when it is UTF-8, else its length)")
	for _, name := range []string{"topic", "brokerName", "queueId", "offset"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// brokerAddrOf returns the address a client reads broker group name's
// queues from: its master's, or a slave's when it has no master (RocketMQ's
// findBrokerAddressInSubscribe without a suggestion).
func brokerAddrOf(route namesrv.TopicRouteData, name string) (string, bool) {
	for _, bd := range route.BrokerDatas {
		if bd.BrokerName == name {
			return selectBrokerAddr(bd.BrokerAddrs)
		}
	}
	return "", false
}

// decodeMessageIDCmd is mqadmin DecodeMessageId: the host and the time a
// client message id (UNIQ_KEY) was made at, read from the id alone.
func decodeMessageIDCmd() *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:     "DecodeMessageId",
		Aliases: []string{"decodeMessageId"},
		Short:   "print the host and time a client message id (UNIQ_KEY) was made at; no request is sent",
		Long: `DecodeMessageId reads a message id a client shows (its UNIQ_KEY, as
sendMessage prints it) as mqadmin DecodeMessageId: ip= the address of the
producer's host, date= when the id was made (local time, yyyy-MM-dd#HH:mm:ss:SSS).
The id holds the time within a month only: the month is taken to be this one,
or the one before when that would put the id in the future. An offset message
id (queryMsgById's) is not such an id.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ip, at, err := uniqid.Parse(strings.ToUpper(strings.TrimSpace(id)), time.Now())
			if err != nil {
				return fmt.Errorf("-i: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ip=%s\ndate=%s\n", idHostString(ip), formatMQAdminTime(at))
			return nil
		},
	}
	cmd.Flags().StringVarP(&id, "messageId", "i", "", "client message id (UNIQ_KEY)")
	_ = cmd.MarkFlagRequired("messageId")
	return cmd
}

// idHostString writes the address of a message id's host as mqadmin's
// getIPStrFromID: an IPv4 address dotted, an IPv6 one as eight groups of
// four hex digits, none left out ("2001:0000:...:0001", not "2001::1").
func idHostString(ip netip.Addr) string {
	if !ip.Is6() {
		return ip.String()
	}
	b := ip.As16()
	groups := make([]string, 8)
	for i := range groups {
		groups[i] = hex.EncodeToString(b[2*i : 2*i+2])
	}
	return strings.Join(groups, ":")
}

// formatMQAdminTime writes t as mqadmin's yyyy-MM-dd#HH:mm:ss:SSS, in
// local time.
func formatMQAdminTime(t time.Time) string {
	t = t.Local()
	return t.Format("2006-01-02#15:04:05") + fmt.Sprintf(":%03d", t.Nanosecond()/1e6)
}

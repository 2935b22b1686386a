package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/remoting"
)

// producerInfoCmd is mqadmin producer: every producer group of one broker
// and its live clients.
func producerInfoCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "producer",
		Short: "print every producer group of a broker and its live clients (GET_ALL_PRODUCER_INFO)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := g.invoke(cmd.Context(), g.broker, remoting.GetAllProducerInfo, nil, nil)
			if err != nil {
				return err
			}
			var table adminbody.ProducerTableInfo
			if err := json.Unmarshal(resp.Body, &table); err != nil {
				return fmt.Errorf("decode producer table of %s: %w", g.broker, err)
			}
			return printProducerTable(cmd.OutOrStdout(), table.Data)
		},
	}
}

// printProducerTable writes one row per client, groups by name and each
// group's clients by client id.
func printProducerTable(out io.Writer, groups map[string][]adminbody.ProducerInfo) error {
	names := make([]string, 0, len(groups))
	for name := range groups {
		names = append(names, name)
	}
	sort.Strings(names)
	w := newTable(out)
	fmt.Fprintln(w, "GROUP\tCLIENT ID\tADDRESS\tLANGUAGE\tVERSION\tLAST HEARTBEAT")
	for _, name := range names {
		clients := groups[name]
		sort.Slice(clients, func(i, j int) bool { return clients[i].ClientID < clients[j].ClientID })
		for _, c := range clients {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", name, c.ClientID, c.RemoteIP, c.Language, c.Version, formatMillis(c.LastUpdateTimestamp))
		}
	}
	return w.Flush()
}

// producerConnectionCmd is mqadmin producerConnection: the live clients
// of a producer group, as one broker of the topic's route knows them (the
// first broker group by name; mqadmin picks one at random).
func producerConnectionCmd(g *globals) *cobra.Command {
	var group, topic string
	cmd := &cobra.Command{
		Use:   "producerConnection",
		Short: "print a producer group's live clients, from a broker of a topic's route (GET_PRODUCER_CONNECTION_LIST)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group, topic = strings.TrimSpace(group), strings.TrimSpace(topic)
			route, err := g.route(cmd.Context(), topic)
			if err != nil {
				return err
			}
			addr, ok := firstBroker(route)
			if !ok {
				return fmt.Errorf("route of %s names no broker", topic)
			}
			resp, err := g.invoke(cmd.Context(), addr, remoting.GetProducerConnectionList, remoting.Header{"producerGroup": group}, nil)
			if err != nil {
				return fmt.Errorf("producer connections of %s on %s: %w", group, addr, err)
			}
			var pc adminbody.ProducerConnection
			if err := json.Unmarshal(resp.Body, &pc); err != nil {
				return fmt.Errorf("decode producer connections of %s from %s: %w", group, addr, err)
			}
			if len(pc.ConnectionSet) == 0 {
				return fmt.Errorf("not found the producer group connection: no client of %s on %s", group, addr)
			}
			sort.Slice(pc.ConnectionSet, func(i, j int) bool { return pc.ConnectionSet[i].ClientID < pc.ConnectionSet[j].ClientID })
			for i, c := range pc.ConnectionSet {
				fmt.Fprintf(cmd.OutOrStdout(), "%04d  %-32s %-22s %-8s %s\n", i+1, c.ClientID, c.ClientAddr, c.Language, remoting.VersionName(int(c.Version)))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&group, "producerGroup", "g", "", "producer group name")
	f.StringVarP(&topic, "topic", "t", "", "a topic of the group, whose route names the broker to ask")
	_ = cmd.MarkFlagRequired("producerGroup")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"

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

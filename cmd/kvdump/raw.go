package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/kvindex"
)

func rawCommand(o *globalOptions) *cobra.Command {
	var prefix string
	var limit int
	cmd := &cobra.Command{
		Use:   "raw [--prefix HEX] [--limit K]",
		Short: "Any key range, decoded where the schema knows the keyspace, hex otherwise",
		Args:  cobra.NoArgs,
		RunE: withStore(o, func(ctx context.Context, s *store, out *output) error {
			return runRaw(ctx, s, out, prefix, limit)
		}),
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "hex of the key prefix to list (e.g. 10 for the ConsumeQueue); empty lists every key")
	cmd.Flags().IntVar(&limit, "limit", 100, "most keys listed; 0 lists them all")
	return cmd
}

// rawLine is one key in JSON output. Record is the decoded record (its
// fields as kvindex declares them), absent when the keyspace is unknown or
// the key malformed.
type rawLine struct {
	Keyspace string         `json:"keyspace"`
	Key      string         `json:"key"`
	Value    string         `json:"value"`
	Record   kvindex.Record `json:"record,omitempty"`
	Error    string         `json:"error,omitempty"`
}

// rawValueCells bounds the hex of a value in a table cell.
const rawValueCells = 32

func runRaw(ctx context.Context, s *store, out *output, prefixHex string, limit int) error {
	prefix, err := hex.DecodeString(strings.TrimPrefix(prefixHex, "0x"))
	if err != nil {
		return fmt.Errorf("--prefix %q is not hex: %w", prefixHex, err)
	}
	var t *table
	if !out.json {
		t = newTable(out.w, "KEYSPACE", "KEY", "VALUE", "DECODED")
	}
	n := 0
	var werr error
	err = s.db.Scan(prefix, func(k, v []byte) bool {
		if limit > 0 && n >= limit {
			return false
		}
		n++
		ks := kvindex.Keyspace{Name: "empty-key"}
		if len(k) > 0 {
			ks, _ = kvindex.KeyspaceOf(k[0])
		}
		r, derr := kvindex.DecodeKey(k, v)
		if out.json {
			l := rawLine{Keyspace: ks.Name, Key: hex.EncodeToString(k), Value: hex.EncodeToString(v), Record: r}
			if derr != nil && !errors.Is(derr, kvindex.ErrUnknownKeyspace) {
				l.Error = derr.Error()
			}
			werr = out.object(l)
			return werr == nil && ctx.Err() == nil
		}
		decoded := "-"
		switch {
		case errors.Is(derr, kvindex.ErrUnknownKeyspace):
		case derr != nil:
			decoded = "malformed: " + derr.Error()
		default:
			decoded = r.String()
		}
		t.row(ks.Name, hex.EncodeToString(k), valueCell(v), decoded)
		return ctx.Err() == nil
	})
	if err == nil {
		err = werr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return err
	}
	if t != nil {
		return t.flush()
	}
	return nil
}

// valueCell shows a value's hex, cut after rawValueCells bytes.
func valueCell(v []byte) string {
	if len(v) == 0 {
		return "-"
	}
	if len(v) <= rawValueCells {
		return hex.EncodeToString(v)
	}
	return fmt.Sprintf("%s...(%d bytes)", hex.EncodeToString(v[:rawValueCells]), len(v))
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// output writes a command's results either as aligned tables or, with
// --json, as one JSON object per line.
type output struct {
	w    io.Writer
	json bool
	enc  *json.Encoder
}

func newOutput(w io.Writer, asJSON bool) *output {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &output{w: w, json: asJSON, enc: enc}
}

// object writes v as one JSON line.
func (o *output) object(v any) error {
	if err := o.enc.Encode(v); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// line writes one line of text.
func (o *output) line(format string, args ...any) error {
	if _, err := fmt.Fprintf(o.w, format+"\n", args...); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// tableProbe is how many rows a table holds back to size its columns
// before it starts printing.
const tableProbe = 256

// columnGap separates table columns.
const columnGap = "  "

// table writes left-aligned columns as rows arrive. It holds the header and
// the first tableProbe rows to size the columns, then prints every row as
// it comes, widening a column when a later cell is wider: small tables are
// perfectly aligned and large ones stream in bounded memory. The last
// column is never padded.
type table struct {
	w       io.Writer
	widths  []int
	held    [][]string
	rows    int // rows held, the header excluded
	holding bool
	err     error
}

// newTable starts a table; without headers it has no header row.
func newTable(w io.Writer, headers ...string) *table {
	t := &table{w: w, holding: true}
	if len(headers) > 0 {
		t.add(headers)
	}
	return t
}

// row adds a row. Errors are kept for flush.
func (t *table) row(cells ...string) {
	if t.holding {
		t.add(cells)
		if t.rows++; t.rows > tableProbe {
			t.release()
		}
		return
	}
	t.widen(cells)
	t.write(cells)
}

func (t *table) add(cells []string) {
	t.widen(cells)
	t.held = append(t.held, cells)
}

func (t *table) widen(cells []string) {
	for len(t.widths) < len(cells) {
		t.widths = append(t.widths, 0)
	}
	for i, c := range cells {
		t.widths[i] = max(t.widths[i], utf8.RuneCountInString(c))
	}
}

func (t *table) release() {
	t.holding = false
	for _, r := range t.held {
		t.write(r)
	}
	t.held = nil
}

func (t *table) write(cells []string) {
	if t.err != nil {
		return
	}
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(c)
		if i < len(cells)-1 {
			b.WriteString(strings.Repeat(" ", t.widths[i]-utf8.RuneCountInString(c)))
			b.WriteString(columnGap)
		}
	}
	b.WriteByte('\n')
	if _, err := io.WriteString(t.w, b.String()); err != nil {
		t.err = fmt.Errorf("write output: %w", err)
	}
}

// flush prints the rows still held and returns the first write error.
func (t *table) flush() error {
	if t.holding {
		t.release()
	}
	return t.err
}

// cell makes a string safe for one table cell: empty as "-", strings with
// control characters or invalid UTF-8 quoted Go-style.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f || r == utf8.RuneError {
			return strconv.Quote(s)
		}
	}
	return s
}

// num formats an integer cell.
func num[T ~int | ~int32 | ~int64](v T) string {
	return strconv.FormatInt(int64(v), 10)
}

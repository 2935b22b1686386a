package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestTableAligns(t *testing.T) {
	var b strings.Builder
	tb := newTable(&b, "TOPIC", "QUEUE", "NOTE")
	tb.row("TopicA", "0", "first")
	tb.row("T", "12", "")
	tb.row("Töpic", "3", "last column is not padded")
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"TOPIC   QUEUE  NOTE\n" +
		"TopicA  0      first\n" +
		"T       12     \n" +
		"Töpic   3      last column is not padded\n"
	if b.String() != want {
		t.Errorf("table:\n%q\nwant:\n%q", b.String(), want)
	}
}

// Past the probe rows a table prints as rows arrive, widening a column for
// a wider cell; nothing is held back.
func TestTableStreams(t *testing.T) {
	var b strings.Builder
	tb := newTable(&b, "K", "V")
	for i := 0; i < tableProbe; i++ {
		tb.row("a", "x")
	}
	if b.Len() != 0 {
		t.Fatalf("printed before the probe rows were in: %q", b.String())
	}
	tb.row("b", "x")
	if got := strings.Count(b.String(), "\n"); got != tableProbe+2 {
		t.Fatalf("%d lines printed once the probe is full, want %d", got, tableProbe+2)
	}
	tb.row("wider", "y")
	tb.row("c", "z")
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if lines[0] != "K  V" || lines[1] != "a  x" {
		t.Errorf("head %q", lines[:2])
	}
	tail := lines[len(lines)-2:]
	if fmt.Sprint(tail) != fmt.Sprint([]string{"wider  y", "c      z"}) {
		t.Errorf("tail %q", tail)
	}
}

func TestCell(t *testing.T) {
	for in, want := range map[string]string{"": "-", "a b": "a b", "tab\there": `"tab\there"`, "bad\xff": `"bad\xff"`, "ünï": "ünï"} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
}

#!/usr/bin/env bash
# Runs every go fuzz target of the module for $FUZZTIME (default 15s) each.
#
# A target fails the run when go test fails and wrote a failing input to
# its package's testdata/fuzz/<target>/. A failure that wrote none is Go's
# fuzz coordinator racing its own -fuzztime deadline ("context deadline
# exceeded" with no input; golang/go#75804, fixed in Go 1.27): it is
# reported and the target is run again once.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-15s}
# Go minimises each new interesting input for up to a minute by default;
# for a slow target (a TLS handshake, a store opened per input) that took
# the whole run, a few executions in all.
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-2s}
status=0
inputs() { ls "$1" 2>/dev/null | sort || true; }
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
		corpus="$dir/testdata/fuzz/$target"
		for attempt in 1 2; do
			echo "== $pkg $target ($FUZZTIME)"
			before=$(inputs "$corpus")
			if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg"; then
				break
			fi
			if [ "$(inputs "$corpus")" != "$before" ]; then
				echo "!! $target: failing input written to $corpus"
				status=1
				break
			fi
			echo "!! $target failed without writing a failing input (golang/go#75804's deadline race)"
			if [ "$attempt" = 2 ]; then
				status=1
			fi
		done
	done
done
exit $status

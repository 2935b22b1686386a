#!/usr/bin/env bash
# Runs every go fuzz target of the module for $FUZZTIME (default 15s) each.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-15s}
status=0
for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
		echo "== $pkg $target ($FUZZTIME)"
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"; then
			status=1
		fi
	done
done
exit $status

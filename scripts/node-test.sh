#!/usr/bin/env bash
# Runs the Node client tests: TestNodeAliOns (e2e/node_test.go) starts a
# name server and a broker from bin/ (ROCKETKV_BIN overrides) and runs
# e2e/node/test.js, which produces and consumes with ali-ons (Remoting);
# TestNodeGRPCThroughProxy (e2e/grpc_test.go) adds bin/proxy and runs
# e2e/node/grpc.js with RocketMQ 5's gRPC client, rocketmq-client-nodejs.
# Installs e2e/node's locked dependencies first when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v node >/dev/null; then
	echo "node-test: Node.js is not installed; the Node client tests are skipped" >&2
fi
if command -v npm >/dev/null && { [ ! -d e2e/node/node_modules/ali-ons ] || [ ! -d e2e/node/node_modules/rocketmq-client-nodejs ]; }; then
	(cd e2e/node && npm ci --no-audit --no-fund)
fi
bin="${ROCKETKV_BIN:-$PWD/bin}"
cd e2e
ROCKETKV_BIN="$bin" go test -count=1 -timeout 5m -run '^TestNode' -v .

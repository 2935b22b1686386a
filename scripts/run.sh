#!/usr/bin/env bash
# Starts a name server on :9876, a broker on :10911 with the store under
# ./data and the gRPC proxy for RocketMQ 5 clients on :8081, in the
# foreground; Ctrl-C stops all three cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
bin/namesrv --listen :9876 --kv-config ./data/namesrv/kvConfig.json &
ns=$!
br=
px=
stop() {
	# The proxy and the broker first, so the broker can unregister from
	# the name server.
	[ -n "$px" ] && kill -TERM "$px" 2>/dev/null && wait "$px" 2>/dev/null
	[ -n "$br" ] && kill -TERM "$br" 2>/dev/null && wait "$br" 2>/dev/null
	kill -TERM "$ns" 2>/dev/null && wait "$ns" 2>/dev/null
}
trap stop INT TERM EXIT
sleep 0.3
bin/broker -c configs/run.conf &
br=$!
bin/proxy -n 127.0.0.1:9876 --listen :8081 &
px=$!
cat <<MSG

rocketkv is starting: name server 127.0.0.1:9876, broker 127.0.0.1:10911, store ./data,
gRPC proxy for RocketMQ 5 clients (Java 5.x, Go v5, Node.js, Python, ...) 127.0.0.1:8081
Send a first message with any RocketMQ client pointed at the name server, e.g.
with the Go client (github.com/apache/rocketmq-client-go/v2):

    p, _ := rocketmq.NewProducer(producer.WithNameServer([]string{"127.0.0.1:9876"}))
    p.Start()
    p.SendSync(ctx, primitive.NewMessage("TopicTest", []byte("hello rocketkv")))

or from another terminal, without writing code:

    bin/admin sendMessage -t TopicTest -p "hello rocketkv"
    bin/admin queryMsgByUniqueKey -t TopicTest -i <the #MsgId it printed> --body

Topics are auto-created on first send. Inspect the store with bin/kvdump --store ./data summary
once the broker is stopped. RocketMQ 5's gRPC clients take 127.0.0.1:8081 as their
endpoint; create their topics first (bin/admin updateTopic -b 127.0.0.1:10911 -t T),
with -a +message.type=FIFO (or DELAY) for FIFO (or delay) messages. Ctrl-C stops all three.

MSG
wait $br

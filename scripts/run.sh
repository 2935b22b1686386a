#!/usr/bin/env bash
# Starts a name server on :9876, a broker on :10911 with the store under
# ./data and the gRPC proxy for RocketMQ 5 clients on :8081, in the
# foreground; Ctrl-C (or SIGTERM to this script) stops all three cleanly.
# Any of the three ending by itself (a port taken, a bad store) stops the
# other two and ends the run with its exit status.
#
# NAMESRV_PORT, BROKER_PORT and PROXY_PORT move them when those ports are
# taken (make run BROKER_PORT=20911 ...); the broker's fast channel and HA
# port follow BROKER_PORT (BROKER_PORT-2 and BROKER_PORT+1), as RocketMQ's.
set -euo pipefail
cd "$(dirname "$0")/.."

NAMESRV_PORT="${NAMESRV_PORT:-9876}"
BROKER_PORT="${BROKER_PORT:-10911}"
PROXY_PORT="${PROXY_PORT:-8081}"
for p in NAMESRV_PORT BROKER_PORT PROXY_PORT; do
	if ! [[ "${!p}" =~ ^[0-9]+$ ]] || [ "${!p}" -lt 1 ] || [ "${!p}" -gt 65535 ]; then
		echo "run: $p=${!p} is not a port (1-65535)" >&2
		exit 2
	fi
done
if [ "$BROKER_PORT" -lt 3 ] || [ "$BROKER_PORT" -gt 65534 ]; then
	echo "run: BROKER_PORT=$BROKER_PORT leaves no room for the fast channel (BROKER_PORT-2) and the HA port (BROKER_PORT+1)" >&2
	exit 2
fi
namesrv="127.0.0.1:$NAMESRV_PORT"
broker="127.0.0.1:$BROKER_PORT"

mkdir -p data
# Each server runs in a session of its own (setsid, where there is one),
# so that Ctrl-C reaches this script only and stop() ends them in order:
# the proxy and the broker first, so the broker can unregister from a
# name server that still answers.
detach=""
command -v setsid >/dev/null && detach=setsid
$detach bin/namesrv --listen ":$NAMESRV_PORT" --kv-config ./data/namesrv/kvConfig.json &
ns=$!
br=
px=
stop() {
	trap - INT TERM HUP EXIT
	local p
	for p in "$px" "$br" "$ns"; do
		if [ -n "$p" ] && kill -TERM "$p" 2>/dev/null; then
			wait "$p" 2>/dev/null || true
		fi
	done
}
# A stop asked for (Ctrl-C, SIGTERM, the terminal closed) is a clean end:
# exit status 0.
trap 'stop; exit 0' INT TERM HUP
trap stop EXIT
# alive tells whether the server of PID $1 still runs (bash reaps its
# children as they end, so an ended one is no longer there to signal).
alive() { kill -0 "$1" 2>/dev/null; }
sleep 0.3
# A name server that could not start (its port taken) must not leave the
# broker registering with whatever holds that port.
if ! alive "$ns"; then
	set +e
	wait "$ns"
	rc=$?
	ns=
	echo "run: the name server did not start (exit status $rc); is port $NAMESRV_PORT taken? NAMESRV_PORT moves it" >&2
	exit "$rc"
fi
# The broker writes configuration updates (bin/admin updateBrokerConfig)
# back into the file it was started with, as RocketMQ's does: it runs from
# a copy under ./data, made from configs/run.conf on the first start, so
# that such updates last with the store and never edit the repository.
if [ ! -e data/broker.conf ]; then
	cp configs/run.conf data/broker.conf
fi
$detach bin/broker -c data/broker.conf --set listenPort="$BROKER_PORT" -n "$namesrv" &
br=$!
$detach bin/proxy -n "$namesrv" --listen ":$PROXY_PORT" &
px=$!

# The bin/admin commands below name the name server only when it is not
# bin/admin's default.
adm="bin/admin"
[ "$namesrv" != "127.0.0.1:9876" ] && adm="bin/admin -n $namesrv"
cat <<MSG

rocketkv is starting: name server $namesrv, broker $broker, store ./data,
gRPC proxy for RocketMQ 5 clients (Java 5.x, Go v5, Node.js, Python, ...) 127.0.0.1:$PROXY_PORT
Send a first message with any RocketMQ client pointed at the name server, e.g.
with the Go client (github.com/apache/rocketmq-client-go/v2):

    p, _ := rocketmq.NewProducer(producer.WithNameServer([]string{"$namesrv"}))
    p.Start()
    p.SendSync(ctx, primitive.NewMessage("TopicTest", []byte("hello rocketkv")))

or from another terminal, without writing code:

    $adm sendMessage -t TopicTest -p "hello rocketkv"
    $adm queryMsgByUniqueKey -t TopicTest -i <the #MsgId it printed> --body

Topics are auto-created on first send. Inspect the store with bin/kvdump --store ./data summary
once the broker is stopped. RocketMQ 5's gRPC clients take 127.0.0.1:$PROXY_PORT as their
endpoint; create their topics first ($adm updateTopic -b $broker -t T),
with -a +message.type=FIFO (or DELAY) for FIFO (or delay) messages. Ctrl-C stops all three.

MSG
# Any server ending by itself (a port taken, a bad store) ends the run
# with its exit status, once the other two are stopped.
set +e
while alive "$ns" && alive "$br" && alive "$px"; do
	# In the background, so that a signal's trap runs at once.
	sleep 1 &
	wait $!
done
for s in "ns:name server:NAMESRV_PORT" "br:broker:BROKER_PORT" "px:proxy:PROXY_PORT"; do
	var="${s%%:*}"
	rest="${s#*:}"
	pid="${!var}"
	if ! alive "$pid"; then
		wait "$pid"
		rc=$?
		printf -v "$var" ''
		echo "run: the ${rest%%:*} ended (exit status $rc), stopping the others; if its port is taken, ${rest#*:} moves it" >&2
		exit "$rc"
	fi
done

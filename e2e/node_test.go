package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNodeAliOns runs node/test.js against a started name server and
// broker: the Node client ali-ons sends nodeCount messages tagged TagNode
// and half as many tagged TagOther (SEND_MESSAGE_V2 with numbers and
// booleans in extFields), then a push consumer subscribed to TagNode
// consumes every TagNode message and none of the others, sending every
// fifth one back once (CONSUMER_SEND_MSG_BACK) and receiving it again from
// the retry topic. The script exits 0 only when all of that held; the test
// then checks the broker's side: the queues hold what was sent and the
// group's offsets, committed by ali-ons at close, are at the end.
//
// ali-ons (3.12) answers a name server's TOPIC_NOT_EXIST with an error
// instead of falling back to TBW102 as the Java and Go clients do (so it
// cannot auto-create a topic on Apache RocketMQ either): the test creates
// the topic first, as an operator would with mqadmin.
func TestNodeAliOns(t *testing.T) {
	node, dir := aliOnsScript(t)
	t.Parallel()
	const topic, nodeCount = "NodeAliOns", 40
	ns, b := startWithTopic(t, topic, 4)

	result := runAliOns(t, node, dir, ns.addr, topic, nodeCount)
	result.checkDelivery(t, nodeCount)
	if result.Queues < 2 {
		t.Errorf("ali-ons used %d queue(s) of 4, want its round robin over several", result.Queues)
	}
	// What ali-ons sent is really in the broker: the queues' max offsets add
	// up to the number of messages.
	waitDispatched(t, b.addr, topic, 4, int64(result.Sent+result.SentOther))
	if result.SentOther != nodeCount/2 {
		t.Errorf("ali-ons sent %d TagOther messages, want %d", result.SentOther, nodeCount/2)
	}
	// ali-ons commits its offsets (UPDATE_CONSUMER_OFFSET with numbers in
	// extFields) when the consumer closes: the broker has them, at least up
	// to the last consumed message of each queue (TagOther messages behind
	// it are committed only by a later pull, as with the Java client) and
	// at most to the end. They are oneway requests: the broker may still be
	// working on them when node has exited.
	for q := 0; q < 4; q++ {
		low, high := result.ConsumedUpTo[strconv.Itoa(q)], maxOffset(t, b.addr, topic, q)
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := committedOffset(t, b.addr, "node-e2e-cg", topic, q)
			if got >= low && got <= high {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("committed offset of node-e2e-cg on %s/%d is %d, want %d to %d", topic, q, got, low, high)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// aliOnsScript returns node and the directory of test.js, or skips the
// test when Node.js or ali-ons is not installed.
func aliOnsScript(t *testing.T) (node, dir string) {
	t.Helper()
	return nodeClientScript(t, "ali-ons")
}

// aliOnsResult is the RESULT line of node/test.js.
type aliOnsResult struct {
	Sent        int `json:"sent"`
	SentOther   int `json:"sentOther"`
	Queues      int `json:"queues"`
	Consumed    int `json:"consumed"`
	Retried     int `json:"retried"`
	Redelivered int `json:"redelivered"`
	// ConsumedUpTo is, per queue id, the offset after the queue's last
	// TagNode message.
	ConsumedUpTo map[string]int64 `json:"consumedUpTo"`
}

// runAliOns runs node/test.js against the name server at ns (ali-ons signs
// every request as the account rocketkv-ak / rocketkv-sk) and returns its
// RESULT; the script must exit 0.
func runAliOns(t *testing.T, node, dir, ns, topic string, count int) aliOnsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "test.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"NAMESRV_ADDR="+ns,
		"TOPIC="+topic,
		"GROUP_PREFIX=node-e2e",
		"COUNT="+strconv.Itoa(count),
		"TIMEOUT_MS=90000",
	)
	out, err := cmd.CombinedOutput()
	t.Logf("node test.js output:\n%s", out)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("node test.js exited with %d", exit.ExitCode())
	}
	if err != nil {
		t.Fatalf("run node test.js: %v", err)
	}
	var result aliOnsResult
	readNodeResult(t, "test.js", out, &result)
	return result
}

// readNodeResult decodes the JSON of the line "RESULT {...}" a Node script
// printed into v, failing the test when there is none or it does not
// decode.
func readNodeResult(t *testing.T, script string, out []byte, v any) {
	t.Helper()
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			if err := json.Unmarshal([]byte(rest), v); err != nil {
				t.Fatalf("%s: bad RESULT line %q: %v", script, line, err)
			}
			return
		}
	}
	t.Fatalf("%s printed no RESULT line", script)
}

// checkDelivery checks that ali-ons sent and consumed count messages, got
// every fifth one again after asking for its retry, and nothing twice.
func (r aliOnsResult) checkDelivery(t *testing.T, count int) {
	t.Helper()
	if r.Sent != count || r.Consumed != count {
		t.Fatalf("ali-ons sent %d and consumed %d distinct messages, want %d each", r.Sent, r.Consumed, count)
	}
	if want := (count + 4) / 5; r.Retried != want {
		t.Errorf("ali-ons got %d messages again after asking for a retry, want %d", r.Retried, want)
	}
	if r.Redelivered != 0 {
		t.Errorf("ali-ons received %d messages twice; a single consumer of a fresh group should get each once", r.Redelivered)
	}
}

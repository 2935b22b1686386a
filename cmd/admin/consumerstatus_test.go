package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// consumerStatus asks a live consumer, through the broker, for its
// running info: one client's printed with -i, every client's written to
// a file and summed up without.
func TestConsumerStatus(t *testing.T) {
	ns, br := startCluster(t)
	var mu sync.Mutex
	var asked []map[string]string
	runningInfo := `{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","PROP_CONSUMEORDERLY":"false","PROP_CONSUMER_START_TIMESTAMP":1},` +
		`"subscriptionSet":[{"classFilterMode":false,"subString":"*","topic":"CsT"}],` +
		`"mqTable":{{"brokerName":"broker-a","queueId":0,"topic":"CsT"}:{"commitOffset":12,"cachedMsgCount":0,"lastConsumeTimestamp":1}},` +
		`"statusTable":{"CsT":{"pullRT":1.5,"pullTPS":2,"consumeRT":3,"consumeOKTPS":4,"consumeFailedTPS":0,"consumeFailedMsgs":0}},"jstack":"main: RUNNABLE"}`
	consumer, err := remoting.Dial(context.Background(), br, remoting.ClientOptions{Handler: func(_ context.Context, req *remoting.Command) *remoting.Command {
		if req.Code != remoting.GetConsumerRunningInfo {
			return nil
		}
		mu.Lock()
		asked = append(asked, req.ExtFields)
		mu.Unlock()
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte(runningInfo)
		return resp
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = consumer.Close() })
	request(t, consumer, remoting.HeartBeat, nil, []byte(`{"clientID":"10.0.0.5@cs","producerDataSet":[],"consumerDataSet":[{"groupName":"CsG",`+
		`"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",`+
		`"subscriptionDataSet":[{"topic":"CsT","subString":"*","expressionType":"TAG"}]}]}`))
	waitRoute(t, ns, "%RETRY%CsG")

	out, err := run(t, "consumerStatus", "-n", ns, "-g", "CsG", "-i", "10.0.0.5@cs", "-s")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"#Consumer Properties#\nPROP_CONSUMEORDERLY                     : false\n",
		"001 Topic: CsT                                      ClassFilter: false    SubExpression: *\n",
		"CsT                               broker-a                          0     12                  \n",
		"ProcessQueueInfo [commitOffset=12,",
		"CsT                                         1.50           2.00           3.00           4.00               0.00                         0\n",
		"\n\n#Consumer jstack#\nmain: RUNNABLE",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("consumerStatus -i lacks %q:\n%s", want, out)
		}
	}
	mu.Lock()
	if len(asked) != 1 || asked[0]["consumerGroup"] != "CsG" || asked[0]["clientId"] != "10.0.0.5@cs" || asked[0]["jstackEnable"] != "true" {
		t.Errorf("the client was asked %v", asked)
	}
	mu.Unlock()

	t.Chdir(t.TempDir())
	began := time.Now().UnixMilli()
	out, err = run(t, "consumerStatus", "-n", ns, "-g", "CsG")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	f := strings.Fields(lines[1])
	if !strings.HasPrefix(lines[0], "#Index") || len(f) != 4 || f[0] != "1" || f[1] != "10.0.0.5@cs" || !strings.HasSuffix(f[3], "/10.0.0.5@cs") ||
		!strings.Contains(out, "\n\nSame subscription in the same group of consumer\n\nRebalance OK\n") {
		t.Fatalf("consumerStatus:\n%s", out)
	}
	if ms, err := strconv.ParseInt(filepath.Dir(f[3]), 10, 64); err != nil || ms < began {
		t.Errorf("the file's directory %s is not the time of the run (>= %d)", filepath.Dir(f[3]), began)
	}
	if b, err := os.ReadFile(f[3]); err != nil || !strings.HasPrefix(string(b), "#Consumer Properties#\n") {
		t.Errorf("the running info file %s: %q %v", f[3], b, err)
	}
	mu.Lock()
	if last := asked[len(asked)-1]; last["jstackEnable"] != "false" {
		t.Errorf("without -s the client was asked %v", last)
	}
	mu.Unlock()

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-g", "CsG", "-i", "10.0.0.9@gone"}, "10.0.0.9@gone"},
		{[]string{"-g", "NoSuchGroup"}, "-g NoSuchGroup"},
		{[]string{"-i", "x"}, "consumerGroup"},
	} {
		args := append([]string{"consumerStatus", "-n", ns}, c.args...)
		if out, err := run(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q %v, want an error naming %q", strings.Join(args, " "), out, err, c.want)
		}
	}
}

// consumerStatus -b asks that broker: GET_CONSUMER_CONNECTION_LIST with
// consumerGroup, then GET_CONSUMER_RUNNING_INFO with consumerGroup,
// clientId and jstackEnable, as mqadmin's; a client that does not answer
// is reported and skipped.
func TestConsumerStatusRequests(t *testing.T) {
	addr, log := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetConsumerConnectionList: withBody(`{"connectionSet":[{"clientAddr":"10.0.0.1:1","clientId":"c1","language":"JAVA","version":479},` +
			`{"clientAddr":"10.0.0.2:1","clientId":"c2","language":"JAVA","version":479}],"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING"}`),
		remoting.GetConsumerRunningInfo: func(req *remoting.Command) *remoting.Command {
			if req.ExtFields["clientId"] == "c2" {
				return remoting.NewResponse(req, remoting.SystemError, "The Consumer <G> <c2> not online")
			}
			return withBody(`{"properties":{"PROP_CONSUME_TYPE":"CONSUME_ACTIVELY"}}`)(req)
		},
	})
	t.Chdir(t.TempDir())
	out, err := run(t, "consumerStatus", "-b", addr, "-g", "G", "-s")
	if err != nil {
		t.Fatal(err)
	}
	if r := rows(out); len(r) < 1 || len(r[0]) != 4 || r[0][1] != "c1" || r[0][2] != "V5_3_3" || strings.Contains(out, "c2") {
		t.Fatalf("consumerStatus with one client answering:\n%s", out)
	}
	if got := log.last(remoting.GetConsumerConnectionList); len(got) != 1 || got["consumerGroup"] != "G" {
		t.Errorf("GET_CONSUMER_CONNECTION_LIST header %v", got)
	}
	if got := log.last(remoting.GetConsumerRunningInfo); len(got) != 3 || got["consumerGroup"] != "G" || got["clientId"] != "c2" || got["jstackEnable"] != "true" {
		t.Errorf("GET_CONSUMER_RUNNING_INFO header %v", got)
	}
}

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

	"github.com/rocketkv/rocketkv/internal/adminbody"
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

// The user's info section is printed even when the client sent none, as
// mqadmin's (RocketMQ's userConsumerInfo is never null); the stacks only
// when sent.
func TestFormatRunningInfoSections(t *testing.T) {
	out := formatRunningInfo(&adminbody.ConsumerRunningInfo{})
	if !strings.Contains(out, "\n\n#User Consume Info#\n") || strings.Contains(out, "#Consumer jstack#") {
		t.Errorf("running info without user info or stacks:\n%s", out)
	}
	out = formatRunningInfo(&adminbody.ConsumerRunningInfo{UserConsumerInfo: map[string]string{"k": "v"}})
	if !strings.Contains(out, "\n\n#User Consume Info#\nk                                       : v\n") {
		t.Errorf("running info with user info:\n%s", out)
	}
}

// mqadmin's checks of a group's clients: push consumers started over two
// minutes ago must subscribe alike (by topic and expression); a push
// consumer's queues are flagged when an orderly one cannot lock or
// unlock them, or a concurrent one has cached messages it has not
// consumed for a minute.
func TestConsumerStatusChecks(t *testing.T) {
	now := time.UnixMilli(10 * 60 * 1000)
	info := func(started int64, consumeType string, subs ...string) *adminbody.ConsumerRunningInfo {
		ri := &adminbody.ConsumerRunningInfo{Properties: map[string]string{
			propConsumeType: consumeType, propStartTimestamp: strconv.FormatInt(started, 10)}}
		for _, s := range subs {
			topic, expr, _ := strings.Cut(s, "@")
			ri.SubscriptionSet = append(ri.SubscriptionSet, adminbody.SubscriptionData{Topic: topic, SubString: expr})
		}
		return ri
	}
	old := now.UnixMilli() - 3*60*1000
	for _, c := range []struct {
		name  string
		infos []*adminbody.ConsumerRunningInfo
		same  bool
	}{
		{"alike, in another order", []*adminbody.ConsumerRunningInfo{info(old, consumePassively, "A@*", "B@t1"), info(0, consumePassively, "B@t1", "A@*")}, true},
		{"another expression", []*adminbody.ConsumerRunningInfo{info(old, consumePassively, "A@*"), info(0, consumePassively, "A@t1")}, false},
		{"a topic more", []*adminbody.ConsumerRunningInfo{info(old, consumePassively, "A@*"), info(0, consumePassively, "A@*", "B@*")}, false},
		{"the first started lately", []*adminbody.ConsumerRunningInfo{info(now.UnixMilli()-1000, consumePassively, "A@*"), info(0, consumePassively, "B@*")}, true},
		{"pull consumers", []*adminbody.ConsumerRunningInfo{info(old, "CONSUME_ACTIVELY", "A@*"), info(0, "CONSUME_ACTIVELY", "B@*")}, true},
	} {
		infos := map[string]*adminbody.ConsumerRunningInfo{}
		var ids []string
		for i, ri := range c.infos {
			id := "c" + strconv.Itoa(i)
			infos[id], ids = ri, append(ids, id)
		}
		if got := sameSubscriptions(ids, infos, now); got != c.same {
			t.Errorf("%s: same subscriptions %v, want %v", c.name, got, c.same)
		}
	}

	q := func(id int32) adminbody.MessageQueue {
		return adminbody.MessageQueue{Topic: "T", BrokerName: "b", QueueID: id}
	}
	orderly := info(0, consumePassively)
	orderly.Properties[propConsumeOrderly] = "true"
	orderly.MQTable = map[adminbody.MessageQueue]adminbody.ProcessQueueInfo{
		q(0): {Locked: false, LastLockTimestamp: now.UnixMilli() - 5000},
		q(1): {Locked: true, Droped: true, TryUnlockTimes: 3},
		q(2): {Locked: true},
	}
	want := "c MessageQueue [topic=T, brokerName=b, queueId=0] can't lock for a while, 5000ms\n" +
		"c MessageQueue [topic=T, brokerName=b, queueId=1] unlock 3 times, still failed\n"
	if got := processQueueWarnings("c", orderly, now); got != want {
		t.Errorf("orderly consumer's warnings %q, want %q", got, want)
	}
	concurrent := info(0, consumePassively)
	concurrent.MQTable = map[adminbody.MessageQueue]adminbody.ProcessQueueInfo{
		q(0): {CachedMsgCount: 2, LastConsumeTimestamp: now.UnixMilli() - 61000},
		q(1): {CachedMsgCount: 0, LastConsumeTimestamp: 0},
		q(2): {CachedMsgCount: 2, LastConsumeTimestamp: now.UnixMilli() - 1000},
	}
	want = "c MessageQueue [topic=T, brokerName=b, queueId=0] can't consume for a while, maybe blocked, 61000ms\n"
	if got := processQueueWarnings("c", concurrent, now); got != want {
		t.Errorf("concurrent consumer's warnings %q, want %q", got, want)
	}
	pull := info(0, "CONSUME_ACTIVELY")
	pull.MQTable = concurrent.MQTable
	if got := processQueueWarnings("c", pull, now); got != "" {
		t.Errorf("a pull consumer's queues are not checked: %q", got)
	}
}

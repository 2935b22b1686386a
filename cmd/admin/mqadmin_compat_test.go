package main

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/uniqid"
	"github.com/rocketkv/rocketkv/remoting"
)

// The tests of this file hold the tool to mqadmin's command lines: the
// flag letters, defaults and semantics of Apache RocketMQ's
// tools/command/*SubCommand classes.

// fakeBroker serves answers by request code, answers every other request
// SUCCESS without a body, and records the headers of every request by
// code. It returns its address and the record.
func fakeBroker(t *testing.T, answers map[int32]func(req *remoting.Command) *remoting.Command) (string, *requestLog) {
	t.Helper()
	log := &requestLog{headers: map[int32][]map[string]string{}}
	h := remoting.RespondFunc(func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		log.add(req)
		if f, ok := answers[req.Code]; ok {
			return f(req)
		}
		return remoting.NewResponse(req, remoting.Success, "")
	})
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, h, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return srv.Addr().String(), log
}

// fakeNamesrv is a fake name server answering every GET_ROUTEINFO_BY_TOPIC
// with route (and every other request SUCCESS, as fakeBroker); it returns
// its address.
func fakeNamesrv(t *testing.T, route string) string {
	t.Helper()
	addr, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetRouteInfoByTopic: withBody(route),
	})
	return addr
}

// fakeRoute is the route of a topic on one broker group, name, whose
// master is at addr, with queueData its one queue data's JSON.
func fakeRoute(addr, name, queueData string) string {
	return `{"brokerDatas":[{"brokerAddrs":{"0":"` + addr + `"},"brokerName":"` + name + `","cluster":"C"}],"queueDatas":[` + queueData + `]}`
}

// requestLog is the headers of the requests a fake broker received.
type requestLog struct {
	mu      sync.Mutex
	headers map[int32][]map[string]string
}

func (l *requestLog) add(req *remoting.Command) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := make(map[string]string, len(req.ExtFields))
	for k, v := range req.ExtFields {
		h[k] = v
	}
	l.headers[req.Code] = append(l.headers[req.Code], h)
}

// last returns the header of the last request of code (nil when none).
func (l *requestLog) last(code int32) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	hs := l.headers[code]
	if len(hs) == 0 {
		return nil
	}
	return hs[len(hs)-1]
}

// count returns how many requests of code came.
func (l *requestLog) count(code int32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.headers[code])
}

// withBody answers SUCCESS with body.
func withBody(body string) func(*remoting.Command) *remoting.Command {
	return func(req *remoting.Command) *remoting.Command {
		r := remoting.NewResponse(req, remoting.Success, "")
		r.Body = []byte(body)
		return r
	}
}

// updateTopic -o, brokerConsumeStats -o and cloneGroupOffset -o take
// true|false as mqadmin's (Option(..., hasArg=true, ...) read with
// Boolean.parseBoolean), and the value reaches the broker.
func TestBooleanOptionsTakeTextValues(t *testing.T) {
	addr, log := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerConsumeStats: withBody(`{"brokerAddr":"x","consumeStatsList":[],"totalDiff":0}`),
	})
	for _, c := range []struct {
		args        []string
		code        int32
		field, want string
	}{
		{[]string{"updateTopic", "-b", addr, "-t", "T", "-o", "true"}, remoting.UpdateAndCreateTopic, "order", "true"},
		{[]string{"updateTopic", "-b", addr, "-t", "T", "-o", "false"}, remoting.UpdateAndCreateTopic, "order", "false"},
		{[]string{"updateTopic", "-b", addr, "-t", "T"}, remoting.UpdateAndCreateTopic, "order", "false"},
		{[]string{"brokerConsumeStats", "-b", addr, "-o", "true"}, remoting.GetBrokerConsumeStats, "isOrder", "true"},
		{[]string{"brokerConsumeStats", "-b", addr, "-o", "false"}, remoting.GetBrokerConsumeStats, "isOrder", "false"},
		{[]string{"cloneGroupOffset", "-b", addr, "-s", "GA", "-d", "GB", "-t", "T", "-o", "true"}, remoting.CloneGroupOffset, "offline", "true"},
		{[]string{"cloneGroupOffset", "-b", addr, "-s", "GA", "-d", "GB", "-t", "T", "-o", "false"}, remoting.CloneGroupOffset, "offline", "false"},
	} {
		out, err := run(t, c.args...)
		if err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(c.args, " "), err, out)
			continue
		}
		if got := log.last(c.code)[c.field]; got != c.want {
			t.Errorf("%s: %s=%q reached the broker, want %q", strings.Join(c.args, " "), c.field, got, c.want)
		}
	}
}

// brokerConsumeStats -t is mqadmin's timeoutMillis.
func TestBrokerConsumeStatsTimeoutMillis(t *testing.T) {
	addr, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerConsumeStats: func(req *remoting.Command) *remoting.Command {
			time.Sleep(300 * time.Millisecond)
			return withBody(`{"brokerAddr":"x","consumeStatsList":[],"totalDiff":0}`)(req)
		},
	})
	if _, err := run(t, "brokerConsumeStats", "-b", addr, "-t", "50"); err == nil {
		t.Error("brokerConsumeStats -t 50 waited for an answer 300ms late")
	}
	if out, err := run(t, "brokerConsumeStats", "-b", addr, "-t", "5000"); err != nil || !strings.Contains(out, "total diff: 0") {
		t.Errorf("brokerConsumeStats -t 5000: %q %v", out, err)
	}
}

// queryMsgByKey's short options are QueryMsgByKeySubCommand's: -b
// beginTimestamp, -e endTimestamp, -m maxNum, -c cluster.
func TestQueryMsgByKeyMQAdminOptions(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	c := client(t, b.Addr())
	if _, err := run(t, "updateTopic", "-b", b.Addr(), "-t", "KT", "-r", "1", "-w", "1"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "KT")
	for i := range 2 {
		request(t, c, remoting.SendMessageV2, map[string]string{
			"a": "pg", "b": "KT", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0",
			"i": "KEYS\x01k1\x02UNIQ_KEY\x01UNIQ-K" + strconv.Itoa(i) + "\x02",
		}, []byte("x"))
	}
	waitIndexed(t, c, "KT", 0, 2)
	hourAhead := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	hourAgo := strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 2},
		{[]string{"-b", hourAhead}, 0},
		{[]string{"-b", hourAgo}, 2},
		{[]string{"-b", hourAgo, "-e", hourAgo}, 0},
		{[]string{"-m", "1"}, 1},
		{[]string{"-c", "DefaultCluster"}, 2},
	} {
		args := append([]string{"queryMsgByKey", "-n", ns, "-t", "KT", "-k", "k1"}, tc.args...)
		out, err := run(t, args...)
		if tc.want == 0 {
			// mqadmin's fails when nothing is found.
			if err == nil || !strings.Contains(err.Error(), "but no message.") {
				t.Errorf("%s: %q %v, want the failure of a query that finds nothing", strings.Join(args, " "), out, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", strings.Join(args, " "), err)
			continue
		}
		if got := strings.Count(out, "UNIQ-K"); got != tc.want {
			t.Errorf("%s: %d messages, want %d:\n%s", strings.Join(args, " "), got, tc.want, out)
		}
	}
	if _, err := run(t, "queryMsgByKey", "-n", ns, "-t", "KT", "-k", "k1", "-c", "OtherCluster"); err == nil || !strings.Contains(err.Error(), "cluster OtherCluster") {
		t.Errorf("queryMsgByKey -c of a cluster without the topic: %v", err)
	}
}

// -n takes several name servers separated by ';', as mqadmin's; one that
// cannot be reached gives way to the next.
func TestSeveralNameServers(t *testing.T) {
	ns, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "MultiNs"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "MultiNs")
	dead := deadAddr(t)
	for _, list := range []string{ns + ";" + ns, dead + ";" + ns, " " + dead + " ; " + ns + " ;"} {
		for _, args := range [][]string{
			{"topicList", "-n", list},
			{"topicRoute", "-n", list, "-t", "MultiNs"},
			{"clusterList", "-n", list},
			{"queryMsgByKey", "-n", list, "-t", "MultiNs", "-k", "k"},
			{"getBrokerConfig", "-n", list, "-c", "DefaultCluster"},
		} {
			_, err := run(t, append(args, "--timeout", "3s")...)
			if err != nil && args[0] == "queryMsgByKey" && strings.Contains(err.Error(), noMessageFound) {
				// The route was found and its broker answered: no
				// message has the key, which fails as mqadmin's.
				err = nil
			}
			if err != nil {
				t.Errorf("%s: %v", strings.Join(args, " "), err)
			}
		}
	}
	if _, err := run(t, "topicList", "-n", dead+";"+dead, "--timeout", "3s"); err == nil || !strings.Contains(err.Error(), "no name server") {
		t.Errorf("topicList with no name server up: %v", err)
	}
	if _, err := run(t, "deleteTopic", "-n", dead+";"+ns, "-c", "DefaultCluster", "-t", "MultiNs", "--timeout", "3s"); err == nil || !strings.Contains(err.Error(), dead) {
		t.Errorf("deleteTopic deletes on every name server, and one is down: %v", err)
	}
}

// deadAddr returns an address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// updateTopic, deleteTopic, updateBrokerConfig, getBrokerConfig and
// resetOffsetByTime take mqadmin's -c: every master of a cluster.
func TestClusterOption(t *testing.T) {
	ns, br := startCluster(t)
	waitClusterMember(t, ns, br)
	out, err := run(t, "updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "CT", "-r", "2", "-w", "2")
	if err != nil || !strings.Contains(out, "create topic to "+br+" success.") {
		t.Fatalf("updateTopic -c: %q %v", out, err)
	}
	waitRoute(t, ns, "CT")
	out, err = run(t, "updateBrokerConfig", "-n", ns, "-c", "DefaultCluster", "-k", "fileReservedTime", "-v", "49")
	if err != nil || !strings.Contains(out, "update broker config success, "+br) {
		t.Fatalf("updateBrokerConfig -c: %q %v", out, err)
	}
	out, err = run(t, "getBrokerConfig", "-n", ns, "-c", "DefaultCluster")
	if err != nil || !strings.Contains(out, "============Master: "+br+"============\n") || !strings.Contains(out, "fileReservedTime=49\n") {
		t.Fatalf("getBrokerConfig -c: %v\n%s", err, out)
	}
	if _, err := run(t, "updateSubGroup", "-b", br, "-g", "G"); err != nil {
		t.Fatal(err)
	}
	if out, err = run(t, "resetOffsetByTime", "-n", ns, "-c", "DefaultCluster", "-g", "G", "-t", "CT", "-s", "-1"); err != nil {
		t.Fatalf("resetOffsetByTime -c: %q %v", out, err)
	}
	if _, err = run(t, "resetOffsetByTime", "-n", ns, "-c", "OtherCluster", "-g", "G", "-t", "CT", "-s", "-1"); err == nil || !strings.Contains(err.Error(), "cluster OtherCluster") {
		t.Fatalf("resetOffsetByTime -c of a cluster without the topic: %v", err)
	}
	for _, args := range [][]string{
		{"updateTopic", "-t", "X"},
		{"deleteTopic", "-t", "X"},
		{"updateBrokerConfig", "-k", "fileReservedTime", "-v", "48"},
		{"getBrokerConfig"},
	} {
		if _, err := run(t, append(args, "-n", ns, "-c", "OtherCluster")...); err == nil || !strings.Contains(err.Error(), "OtherCluster") {
			t.Errorf("%s -c OtherCluster: %v", args[0], err)
		}
	}
	out, err = run(t, "deleteTopic", "-n", ns, "-c", "DefaultCluster", "-t", "CT")
	if err != nil || !strings.Contains(out, "delete topic [CT] from cluster [DefaultCluster] success.") || !strings.Contains(out, "from NameServer success") {
		t.Fatalf("deleteTopic -c: %q %v", out, err)
	}
	if _, err := run(t, "topicRoute", "-n", ns, "-t", "CT"); err == nil || !strings.Contains(err.Error(), "code 17") {
		t.Fatalf("a topic deleted with -c still routes: %v", err)
	}
	if out, err := run(t, "topicStatus", "-b", br, "-t", "CT"); err == nil {
		t.Fatalf("a topic deleted with -c is still on its broker:\n%s", out)
	}
}

// waitClusterMember waits until the name server lists broker in its
// cluster info (a broker registers shortly after its start).
func waitClusterMember(t *testing.T, ns, broker string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := run(t, "clusterList", "-n", ns)
		if err == nil && strings.Contains(out, " "+broker+" ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the name server never listed %s: %q %v", broker, out, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// resetOffsetByTime -f is mqadmin's force, true unless -f false, sent as
// isForce.
func TestResetOffsetByTimeForce(t *testing.T) {
	addr, log := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.InvokeBrokerToResetOffset: withBody(`{"offsetTable":{}}`),
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "true"},
		{[]string{"-f", "true"}, "true"},
		{[]string{"-f", "false"}, "false"},
	} {
		args := append([]string{"resetOffsetByTime", "-b", addr, "-g", "G", "-t", "T", "-s", "now"}, c.args...)
		if out, err := run(t, args...); err != nil {
			t.Errorf("%s: %q %v", strings.Join(args, " "), out, err)
			continue
		}
		if got := log.last(remoting.InvokeBrokerToResetOffset)["isForce"]; got != c.want {
			t.Errorf("%s: isForce=%q, want %q", strings.Join(args, " "), got, c.want)
		}
	}
}

// queryMsgById -t takes the id a client shows (UNIQ_KEY), looked up by
// unique key as DefaultMQAdminExtImpl.queryMessage falls back, as well as
// an offset message id.
func TestQueryMsgByIdClientID(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	c := client(t, b.Addr())
	if _, err := run(t, "updateTopic", "-b", b.Addr(), "-t", "IT", "-r", "1", "-w", "1"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "IT")
	uniq := uniqid.New([4]byte{10, 1, 2, 3}).Next()
	resp := request(t, c, remoting.SendMessageV2, map[string]string{
		"a": "pg", "b": "IT", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0",
		"i": "UNIQ_KEY\x01" + uniq + "\x02",
	}, []byte("x"))
	waitIndexed(t, c, "IT", 0, 1)
	out, err := run(t, "queryMsgById", "-n", ns, "-t", "IT", "-i", uniq, "--timeout", "3s")
	if err != nil || !strings.Contains(out, "Topic:               IT\n") || !strings.Contains(out, "UNIQ_KEY="+uniq) {
		t.Fatalf("queryMsgById -t IT -i <a client's id>: %q %v", out, err)
	}
	// An offset message id, with or without -t (read through -b: the
	// test broker's store host is not its address).
	for _, args := range [][]string{{"-i", resp.ExtFields["msgId"]}, {"-t", "IT", "-i", resp.ExtFields["msgId"]}} {
		args = append(args, "-b", b.Addr())
		if out, err := run(t, append([]string{"queryMsgById", "-n", ns}, args...)...); err != nil || !strings.Contains(out, "UNIQ_KEY="+uniq) {
			t.Errorf("queryMsgById %v: %q %v", args, out, err)
		}
	}
	// A client's id without its topic cannot be looked up: say so.
	if _, err := run(t, "queryMsgById", "-n", ns, "-i", uniq); err == nil || !strings.Contains(err.Error(), "-t") {
		t.Errorf("queryMsgById of a client's id without -t: %v", err)
	}
	if _, err := run(t, "queryMsgById", "-n", ns, "-t", "IT", "-i", "NOT-AN-OFFSET-ID"); err == nil || !strings.Contains(err.Error(), "no message of IT") {
		t.Errorf("queryMsgById of an id nobody sent: %v", err)
	}
}

// An Apache RocketMQ broker answers CHECK_ROCKSDB_CQ_WRITE_PROGRESS at once
// with CHECK_IN_PROGRESS (2); mqadmin prints "check doing" and succeeds.
func TestCheckRocksdbCqWriteProgressInProgress(t *testing.T) {
	addr, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.CheckRocksdbCqWriteProgress: withBody(`{"checkResult":"doing","checkStatus":2}`),
	})
	out, err := run(t, "checkRocksdbCqWriteProgress", "-b", addr, "--timeout", "3s")
	if err != nil || !strings.Contains(out, addr+" check doing, please wait and get the result from log") {
		t.Errorf("checkRocksdbCqWriteProgress against an Apache broker (check started): %q %v", out, err)
	}
	failing, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.CheckRocksdbCqWriteProgress: withBody(`{"checkResult":"boom","checkStatus":3}`),
	})
	if _, err := run(t, "checkRocksdbCqWriteProgress", "-b", failing, "--timeout", "3s"); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a failed check: %v", err)
	}
}

// topicStatus -t T and consumerProgress -g G go by the name servers'
// route as mqadmin's (examineTopicStats, examineConsumeStats over every
// master) when no -b is given.
func TestStatusByRoute(t *testing.T) {
	ns, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "ST", "-r", "2", "-w", "2"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "updateSubGroup", "-b", br, "-g", "SG"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "ST")
	out, err := run(t, "topicStatus", "-n", ns, "-t", "ST", "--timeout", "3s")
	if err != nil || strings.Count(out, "broker-a ") != 2 {
		t.Errorf("topicStatus -n -t: %q %v", out, err)
	}
	out, err = run(t, "consumerProgress", "-n", ns, "-g", "SG", "-t", "ST", "--timeout", "3s")
	if err != nil || !strings.Contains(out, "total diff: 0") {
		t.Errorf("consumerProgress -n -g -t: %q %v", out, err)
	}
	if _, err := run(t, "topicStatus", "-n", ns, "-t", "NoSuchTopic", "--timeout", "3s"); err == nil || !strings.Contains(err.Error(), "route of NoSuchTopic") {
		t.Errorf("topicStatus of a topic without a route: %v", err)
	}
}

// A Java name server's cluster info writes the broker ids as bare keys
// ({0:"host:port"}, fastjson's Map<Long, String>): commands that reach a
// cluster's brokers read it.
func TestClusterInfoOfAJavaNameServer(t *testing.T) {
	brokerAddr, brokerLog := fakeBroker(t, nil)
	javaInfo := `{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"` + brokerAddr + `",1:"127.0.0.1:1"},"brokerName":"broker-a","cluster":"DefaultCluster"}},` +
		`"clusterAddrTable":{"DefaultCluster":["broker-a"]}}`
	nsAddr, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerClusterInfo: withBody(javaInfo),
	})
	if _, err := run(t, "deleteSubGroup", "-c", "DefaultCluster", "-n", nsAddr, "-g", "G"); err != nil {
		t.Fatalf("deleteSubGroup through a Java name server's cluster info: %v", err)
	}
	if got := brokerLog.last(remoting.DeleteSubscriptionGroup); got["groupName"] != "G" {
		t.Fatalf("the master got DELETE_SUBSCRIPTIONGROUP %v, want group G", got)
	}
}

// Without -n the name servers come from NAMESRV_ADDR, as mqadmin's; -n
// wins over it.
func TestNamesrvFromEnvironment(t *testing.T) {
	addr, log := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerClusterInfo: withBody(`{"brokerAddrTable":{},"clusterAddrTable":{}}`),
	})
	t.Setenv(namesrvAddrEnv, addr)
	if out, err := run(t, "clusterList"); err != nil {
		t.Fatalf("clusterList with %s=%s: %v\n%s", namesrvAddrEnv, addr, err, out)
	}
	if n := log.count(remoting.GetBrokerClusterInfo); n != 1 {
		t.Fatalf("the name server of %s got %d cluster info requests, want 1", namesrvAddrEnv, n)
	}
	// A port nothing listens on: -n is used, not the environment's.
	_, err := run(t, "clusterList", "-n", "127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("clusterList -n 127.0.0.1:1: %v, want a failure naming 127.0.0.1:1", err)
	}
	if n := log.count(remoting.GetBrokerClusterInfo); n != 1 {
		t.Fatalf("-n given, the name server of %s got %d requests in all, want 1", namesrvAddrEnv, n)
	}
}

// consumerProgress without -t finds the brokers by the group's retry
// topic, which a group whose consumers never connected lacks: the error
// says how to ask anyway.
func TestConsumerProgressWithoutRetryTopicSaysWhatToGive(t *testing.T) {
	addr, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetRouteInfoByTopic: func(req *remoting.Command) *remoting.Command {
			return remoting.NewResponse(req, remoting.TopicNotExist, "No topic route info in name server for the topic: "+req.ExtFields["topic"])
		},
	})
	_, err := run(t, "consumerProgress", "-n", addr, "-g", "G1")
	if err == nil || !strings.Contains(err.Error(), "%RETRY%G1") || !strings.Contains(err.Error(), "give -t TOPIC or -b BROKER") {
		t.Fatalf("consumerProgress -g G1 without a retry topic: %v, want the route's failure and what to give", err)
	}
}

// An offset message id names the broker that stored the message; when it
// cannot be asked (a store moved to another broker), the error says to
// give -b.
func TestQueryMsgByIDUnreachableStoreHostSaysGiveBroker(t *testing.T) {
	// 127.0.0.1:1, CommitLog offset 0: nothing listens there.
	_, err := run(t, "queryMsgById", "-i", "7F000001000000010000000000000000", "--timeout", "5s")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "with -b") {
		t.Fatalf("queryMsgById of an id naming 127.0.0.1:1: %v, want an error naming the address and -b", err)
	}
	addr, _ := fakeBroker(t, nil)
	_, err = run(t, "queryMsgById", "-b", addr, "-i", "7F000001000000010000000000000000")
	if err == nil || strings.Contains(err.Error(), "with -b") {
		t.Fatalf("queryMsgById -b %s: %v, want a failure (an empty answer) without the -b hint", addr, err)
	}
}

package main

import (
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// getBrokerEpoch prints, as mqadmin's, every broker of the -b group (or
// of the -c cluster) with its epochs, the last one ending at the
// broker's CommitLog end rather than at the Long.MAX_VALUE the broker
// sends; a broker that does not answer fails the command without hiding
// the others.
func TestGetBrokerEpoch(t *testing.T) {
	const noEnd = "9223372036854775807"
	master, masterLog := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerEpochCache: withBody(`{"brokerId":1,"brokerName":"bk","clusterName":"C1","epochList":[` +
			`{"endOffset":4096,"epoch":1,"startOffset":0},{"endOffset":` + noEnd + `,"epoch":3,"startOffset":4096}],"maxOffset":9000}`),
	})
	slave, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerEpochCache: withBody(`{"brokerId":2,"brokerName":"bk","clusterName":"C1","epochList":[` +
			`{"endOffset":` + noEnd + `,"epoch":1,"startOffset":0}],"maxOffset":4000}`),
	})
	other, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerEpochCache: func(req *remoting.Command) *remoting.Command {
			return remoting.NewResponse(req, remoting.SystemError, "this request only for controllerMode ")
		},
	})
	info := `{"brokerAddrTable":{"bk":{"brokerAddrs":{2:"` + slave + `",0:"` + master + `"},"brokerName":"bk","cluster":"C1"},` +
		`"bz":{"brokerAddrs":{0:"` + other + `"},"brokerName":"bz","cluster":"C1"}},"clusterAddrTable":{"C1":["bk","bz"]}}`
	ns, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{remoting.GetBrokerClusterInfo: withBody(info)})

	want := "\n#clusterName\tC1\n#brokerName\tbk\n#brokerAddr\t" + master + "\n#brokerId\t1" +
		"\n#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=4096}" +
		"\n#Epoch: EpochEntry{epoch=3, startOffset=4096, endOffset=9000}\n" +
		"\n#clusterName\tC1\n#brokerName\tbk\n#brokerAddr\t" + slave + "\n#brokerId\t2" +
		"\n#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=4000}\n"
	out, err := run(t, "getBrokerEpoch", "-n", ns, "-b", "bk")
	if err != nil {
		t.Fatal(err)
	}
	if out != want {
		t.Fatalf("getBrokerEpoch -b bk printed\n%q\nwant\n%q", out, want)
	}
	if masterLog.count(remoting.GetBrokerEpochCache) != 1 {
		t.Fatalf("the master was asked %d times", masterLog.count(remoting.GetBrokerEpochCache))
	}

	// -c: every broker of the cluster, group by group; the one outside
	// controller mode fails the command after the others are printed.
	out, err = run(t, "getBrokerEpoch", "-n", ns, "-c", "C1")
	if err == nil || !strings.Contains(err.Error(), "only for controllerMode") || !strings.Contains(err.Error(), other) {
		t.Fatalf("getBrokerEpoch -c C1 with a broker outside controller mode: err %v", err)
	}
	if out != want {
		t.Fatalf("getBrokerEpoch -c C1 printed\n%q\nwant the group bk's brokers\n%q", out, want)
	}

	for _, args := range [][]string{
		{"getBrokerEpoch", "-n", ns},                      // neither -b nor -c
		{"getBrokerEpoch", "-n", ns, "-b", "nosuchgroup"}, // a group the name server does not know
	} {
		if out, err := run(t, args...); err == nil {
			t.Errorf("%s: no error, printed %q", strings.Join(args, " "), out)
		}
	}
}

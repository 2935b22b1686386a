package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// An operator's mqadmin line with mqadmin's long option names runs
// unchanged, and a long name works only on the commands whose mqadmin
// counterpart has it.
func TestMQAdminLongNames(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	br := b.Addr()
	accepted := []struct {
		args []string
		want string
	}{
		{[]string{"updateTopic", "--brokerAddr", br, "--topic", "LongT", "--readQueueNums", "2", "--writeQueueNums", "2"}, "create topic to " + br + " success."},
		{[]string{"brokerStatus", "--brokerAddr", br}, "topicCount"},
		{[]string{"getBrokerConfig", "--brokerAddr", br}, "brokerName"},
		{[]string{"getColdDataFlowCtrInfo", "--brokerAddr", br}, "runtimeTable"},
		{[]string{"updateSubGroup", "--brokerAddr", br, "--groupName", "LongG"}, ""},
		{[]string{"sendMessage", "--namesrvAddr", ns, "--topic", "LongT", "--body", "long", "--broker", "broker-a", "--qid", "1"}, "SEND_OK"},
		{[]string{"consumeMessage", "--namesrvAddr", ns, "--topic", "LongT", "--brokerName", "broker-a", "--queueId", "1", "--MessageNumber", "1"}, "1 messages"},
		{[]string{"consumerProgress", "--namesrvAddr", ns, "--groupName", "LongG", "--topicName", "LongT"}, "LongT"},
		{[]string{"queryCq", "--broker", br, "--topic", "LongT", "--queue", "1", "--index", "0", "--consumer", "LongG"}, "LongT"},
		{[]string{"statsAll", "--namesrvAddr", ns, "--activeTopic", "--topic", "LongT"}, ""},
	}
	waitRoute(t, ns, "TBW102")
	for i, tc := range accepted {
		if i == 4 {
			waitRoute(t, ns, "LongT")
		}
		out, err := run(t, tc.args...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Fatalf("%v: %v\n%s", tc.args, err, out)
		}
	}

	// Long names the command's mqadmin class does not have are refused.
	for _, args := range [][]string{
		{"topicRoute", "--brokerAddr", br, "-t", "LongT"},             // mqadmin topicRoute has no -b
		{"consumerProgress", "--consumerGroup", "LongG"},              // consumerProgress's is --groupName
		{"consumerConnection", "--groupName", "LongG"},                // consumerConnection's is --consumerGroup
		{"sendMessage", "--brokerAddr", br, "-t", "LongT", "-p", "x"}, // sendMessage's -b is --broker, a name
		{"createTopics", "--brokerAddr", br},                          // not an mqadmin command
	} {
		if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "unknown flag") {
			t.Errorf("%v: %v, want an unknown flag", args, err)
		}
	}

	// --help keeps bin/admin's names.
	if out, err := run(t, "updateTopic", "--help"); err != nil || strings.Contains(out, "brokerAddr") || !strings.Contains(out, "--broker ") {
		t.Errorf("updateTopic --help: %v\n%s", err, out)
	}
}

// The table of long names is checked when the tool is built: an alias
// that would shadow a command's own flag, or name a flag it lacks, fails.
func TestMQAdminLongNamesChecked(t *testing.T) {
	build := func(flag string) *cobra.Command {
		root := &cobra.Command{Use: "admin"}
		root.PersistentFlags().String("namesrv", "", "")
		c := &cobra.Command{Use: "brokerStatus", Run: func(*cobra.Command, []string) {}}
		c.Flags().String(flag, "", "")
		root.AddCommand(c)
		root.SetOut(io.Discard)
		return root
	}
	if err := acceptMQAdminLongNames(build("brokerAddr")); err == nil || !strings.Contains(err.Error(), "shadow") {
		t.Errorf("an alias shadowing a flag: %v", err)
	}
	if err := acceptMQAdminLongNames(build("other")); err == nil || !strings.Contains(err.Error(), "lacks") {
		t.Errorf("an alias of a missing flag: %v", err)
	}
}

// mqadmin's two-letter short option -cf of checkRocksdbCqWriteProgress
// reaches --cf; nothing else is rewritten.
func TestMQAdminArgs(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"checkRocksdbCqWriteProgress", "-b", "x", "-cf", "0"}, []string{"checkRocksdbCqWriteProgress", "-b", "x", "--cf", "0"}},
		{[]string{"checkRocksdbCqWriteProgress", "-cf=5", "--", "-cf"}, []string{"checkRocksdbCqWriteProgress", "--cf=5", "--", "-cf"}},
		{[]string{"checkRocksdbCqWriteProgress", "-c", "DefaultCluster", "--cf", "1"}, []string{"checkRocksdbCqWriteProgress", "-c", "DefaultCluster", "--cf", "1"}},
		{[]string{"topicList", "-cf"}, []string{"topicList", "-cf"}},
		{nil, nil},
	} {
		if got := mqadminArgs(c.in); !slices.Equal(got, c.want) {
			t.Errorf("mqadminArgs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

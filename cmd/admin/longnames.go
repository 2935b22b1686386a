package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// mqadminGlobalLongNames are the long names mqadmin gives every command
// (ServerUtil.buildCommandlineOptions: -n, --namesrvAddr), mapped to
// bin/admin's flag.
func mqadminGlobalLongNames() map[string]string {
	return map[string]string{"namesrvAddr": "namesrv"}
}

// mqadminLongNames maps, per command, the long names of mqadmin's command
// class (its new Option(short, long, ...)) that bin/admin spells
// differently to the flag of bin/admin's command that takes the same
// option. Only the options mqadmin's command has are listed, so a long
// name of one command is not accepted by another.
func mqadminLongNames() map[string]map[string]string {
	brokerAddr := map[string]string{"brokerAddr": "broker"}
	m := map[string]map[string]string{
		"checkRocksdbCqWriteProgress": {"nameserverAddr": "namesrv", "checkFrom": "cf"},
		"updateStaticTopic":           {"totalQueueNum": "qn", "mapFile": "mf", "forceReplace": "fr"},
		"remappingStaticTopic":        {"mapFile": "mf", "forceReplace": "fr"},
		"consumeMessage":              {"brokerName": "broker-name", "MessageNumber": "messageCount"},
		"consumerConnection":          {"brokerAddr": "broker", "consumerGroup": "group"},
		"consumerProgress":            {"groupName": "group", "topicName": "topic"},
		"queryCq":                     {"consumer": "group"},
		"rocksDBConfigToJson":         {"brokerAddr": "broker", "nameserverAddr": "namesrv"},
		"sendMessage":                 {"broker": "broker-name"},
		"statsAll":                    {"activeTopic": "active"},
		"electMaster":                 {"brokerName": "bn"},
		"cleanBrokerMetadata":         {"brokerName": "bn"},
	}
	for _, name := range []string{"brokerConsumeStats", "brokerStatus", "cleanExpiredCQ", "cleanUnusedTopic",
		"consumerStatus", "createAcl", "createUser", "deleteAcl", "deleteExpiredCommitLog", "deleteSubGroup",
		"deleteUser", "exportMetadata", "exportPopRecord", "getAcl", "getBrokerConfig", "getColdDataFlowCtrInfo", "getUser",
		"haStatus", "listAcl", "listUser", "removeColdDataFlowCtrGroupConfig", "resetMasterFlushOffset", "setCommitLogReadAheadMode", "setConsumeMode",
		"updateAcl", "updateBrokerConfig", "updateColdDataFlowCtrGroupConfig", "updateSubGroup",
		"updateSubGroupList", "updateTopic", "updateTopicList", "updateTopicPerm", "updateUser"} {
		m[name] = brokerAddr
	}
	return m
}

// acceptMQAdminLongNames makes each command of root accept mqadmin's long
// option names beside its own (which stay the ones --help shows): the
// command's flag set normalizes an mqadmin name to bin/admin's flag, so
// --brokerAddr sets --broker and counts as it for required flags. It runs
// once every flag exists (addBrokerFlag's -b included). An alias that
// would shadow a flag the command has, or name one it lacks, is an error.
func acceptMQAdminLongNames(root *cobra.Command) error {
	perCommand := mqadminLongNames()
	for _, c := range root.Commands() {
		aliases := mqadminGlobalLongNames()
		maps.Copy(aliases, perCommand[c.Name()])
		for alias, to := range aliases {
			if c.Flag(alias) != nil {
				return fmt.Errorf("%s: mqadmin's --%s would shadow the command's own flag", c.Name(), alias)
			}
			if c.Flag(to) == nil {
				return fmt.Errorf("%s: mqadmin's --%s names --%s, which the command lacks", c.Name(), alias, to)
			}
		}
		// The function must not look flags up: Lookup normalizes through it.
		c.Flags().SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
			if to, ok := aliases[name]; ok {
				return pflag.NormalizedName(to)
			}
			return pflag.NormalizedName(name)
		})
		delete(perCommand, c.Name())
	}
	for name := range perCommand {
		return fmt.Errorf("mqadmin long names given for %s, which bin/admin lacks", name)
	}
	return nil
}

// mqadminMultiLetterShorts are the short options of two letters an
// mqadmin command has where bin/admin's has the long flag of that name
// (commons-cli takes "-cf 0"; pflag would read it as -c f).
func mqadminMultiLetterShorts() map[string][]string {
	return map[string][]string{"checkRocksdbCqWriteProgress": {"cf"}, "electMaster": {"bn"}, "cleanBrokerMetadata": {"bn"},
		"updateStaticTopic": {"qn", "mf", "fr"}, "remappingStaticTopic": {"mf", "fr"}}
}

// mqadminArgs rewrites a command line so that mqadmin's two-letter short
// options (checkRocksdbCqWriteProgress -cf) reach their flag: "-cf" and
// "-cf=v" of that command become "--cf" and "--cf=v". Other arguments,
// and those after "--", are left as they are.
func mqadminArgs(args []string) []string {
	if len(args) == 0 {
		return args
	}
	shorts := mqadminMultiLetterShorts()[args[0]]
	if len(shorts) == 0 {
		return args
	}
	out := slices.Clone(args)
	for i, a := range out[1:] {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && slices.Contains(shorts, name) {
			out[i+1] = "-" + a
		}
	}
	return out
}

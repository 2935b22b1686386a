package broker

// faqSuggestion is the tip RocketMQ appends to the remarks of an unknown
// topic or group (FAQUrl.suggestTodo; every FAQ address it names is the
// same page).
const faqSuggestion = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."

// sysPullGroups are the groups of RocketMQ's own tools and services, whose
// pulls rejectPullConsumerEnable never refuses (MixAll's
// isSysConsumerGroupPullMessage).
var sysPullGroups = map[string]bool{
	"DEFAULT_CONSUMER": true, "TOOLS_CONSUMER": true, "SCHEDULE_CONSUMER": true, "FILTERSRV_CONSUMER": true,
	"__MONITOR_CONSUMER": true, "SELF_TEST_C_GROUP": true, "CID_ONS-HTTP-PROXY": true, "CID_ONSAPI_PERMISSION": true,
	"CID_ONSAPI_OWNER": true, "CID_ONSAPI_PULL": true, "CID_RMQ_SYS_TRANS": true,
}

// sysPullGroup reports whether group is one of RocketMQ's own.
func sysPullGroup(group string) bool {
	return sysPullGroups[group] || isSysGroup(group)
}

// Package brokerstats keeps the broker statistics RocketMQ's admin tools
// and dashboard read: VIEW_BROKER_STATS_DATA (mqadmin statsAll, the
// dashboard's topic charts), the consume rate of GET_CONSUME_STATS, and the
// rates and day totals of GET_BROKER_RUNTIME_INFO (mqadmin clusterList and
// brokerStatus). The names, keys and arithmetic are RocketMQ's
// (BrokerStatsManager, StatsItem, StoreStatsService, BrokerStats).
//
// # Items and their windows
//
// A statistic (TOPIC_PUT_NUMS, GROUP_GET_NUMS, ...) has an item per key (a
// topic, "topic@group", the cluster); the _NUMS and _SIZE statistics of a
// key share one item. An item is cumulative counters (messages, bytes) and
// the number of calls that added to them. Stats.Tick samples every item:
//
//	every 10 s, keep 7   -> Windows.Minute: change over the last minute
//	every 10 min, keep 7 -> Windows.Hour:   change over the last hour
//	every 1 h, keep 25   -> Windows.Day:    change over the last day
//
//	window = newest sample - oldest sample
//	  Sum   = value difference
//	  TPS   = Sum per second of the time between them
//	  AvgPT = Sum / calls difference (0 without calls)
//
// The sampling times are kept once per window, not per item: an item holds
// only its counters at the newest samplings, about 1.3 KiB per topic for
// both put statistics with every window full. An item's first sample is
// preceded by a zero sample one period earlier, so what it did before its
// first sampling is counted. An item nothing was added to for 25 hours is
// dropped at the hourly sampling, so memory follows the keys in use
// (RocketMQ keeps them until their topic is deleted).
//
// # Store rates and day totals
//
// Stored messages, reads that found messages, reads that found none, and
// messages delivered are sampled every second, 601 samples kept; the
// runtime info reports each as "rate over 10 s, over 1 min, over 10 min".
// The timer's records taken in and put are sampled the same way and
// reported as their 10 s rates (timerEnqueueTps, timerDequeueTps).
// The day totals count apart the messages stored and delivered outside
// system topics, as RocketMQ's BROKER_PUT_NUMS_WITHOUT_SYSTEM_TOPIC and
// BROKER_GET_NUMS_WITHOUT_SYSTEM_TOPIC do (a committed transaction is one
// message there, not its half, op and commit records); they are also
// taken at each local midnight, so a tool can tell yesterday's and
// today's traffic apart.
//
// Stats.Run owns the sampling goroutine; it stops when its context ends.
package brokerstats

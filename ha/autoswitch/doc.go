// Package autoswitch is RocketMQ's AutoSwitch HA: the replication between
// the brokers of a group in controller mode (enableControllerMode), and
// the epoch file it keeps beside the CommitLog.
package autoswitch

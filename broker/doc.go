// Package broker is rocketkv's broker: it wires the CommitLog, the Pebble
// index, the dispatcher and the Remoting server together and answers
// RocketMQ's request codes the way Apache RocketMQ 5.3 does, so unchanged
// clients (Go client v2, Java, ali-ons) work against it.
//
// # Lifecycle
//
//	New ─► Start: open index ─► open CommitLog (recovery) ─► dispatcher
//	       recovery and catch-up ─► system topics ─► serve ─► register with
//	       every name server every registerNameServerPeriod
//	Shutdown: unregister ─► stop serving ─► stop dispatcher ─► close the
//	       CommitLog (checkpoint, abort file removed) ─► close the index
//
// # Request flow
//
// The Remoting server hands each request to a worker goroutine; processors
// (send.go, pull.go, offsets.go, clients.go, admin.go, query.go,
// sendback.go) validate it, use the store facade (store.go) and answer. A
// pull that finds nothing is held (longpoll.go; POP and NOTIFICATION in
// poplongpoll.go) without a goroutine: the dispatcher's notifier or a
// timer re-runs it on a small pool. The notifier wakes a request filtering
// by tag only for a dispatch that brought one of its tag codes.
//
// Errors of the storage layers become RocketMQ response codes in exactly
// one place, codes.go.
package broker

package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/repeatlog"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
	"github.com/rocketkv/rocketkv/txn"
)

// The escape bridge of an acting master (enableSlaveActingMaster with
// enableRemoteEscape), RocketMQ 5's EscapeBridge: a message one of its
// special services puts (a due timer message) cannot go to its own
// CommitLog, which only its master writes, so it is sent to the master of
// another broker group, as the broker's inner producer (SEND_MESSAGE_V2,
// the message's PGROUP, else InnerProducerGroup_<brokerName>_<brokerId>),
// without waiting for that broker's flush (WAIT=false). The queue is
// chosen on the topic's publish route as RocketMQ's does: put (RocketMQ's
// putMessage and putMessageToRemoteBroker) takes the next queue of the
// route not of its own group (TopicPublishInfo.selectOneMessageQueue with
// the broker's own name), putToSpecificQueue (RocketMQ's
// putMessageToSpecificQueue, which its POP revive uses, and so does
// pop.Service.RunActingRevive) the queue floorMod(hash(topic +
// storeHost), queues) with Java's String.hashCode.
// Only a SUCCESS answer is a put: any other answer, or none, fails it with
// errEscapeFailed (PUT_TO_REMOTE_BROKER_FAIL). Without enableRemoteEscape
// every put fails with errEscapeUnavailable (SERVICE_NOT_AVAILABLE).

// escapeLogInterval is the least time between two lines of failed
// escape puts: at most 5 a minute.
const escapeLogInterval = 12 * time.Second

// escapeSendTimeout bounds one send to another group's master, as
// RocketMQ's EscapeBridge.SEND_TIMEOUT (3 s).
const escapeSendTimeout = 3 * time.Second

// errEscapeUnavailable is a put through the bridge of a broker without
// enableRemoteEscape: RocketMQ's SERVICE_NOT_AVAILABLE.
var errEscapeUnavailable = errors.New("escape to another broker group is off (enableRemoteEscape=false): service not available")

// errEscapeFailed is a put through the bridge that no other group's
// master took: RocketMQ's PUT_TO_REMOTE_BROKER_FAIL.
var errEscapeFailed = errors.New("put to remote broker failed")

// escapeBridge sends an acting master's messages to other groups' masters.
// Its routes are fetched from the name servers and kept
// loadBalancePollNameServerInterval, as RocketMQ's TopicRouteInfoManager
// refreshes them.
type escapeBridge struct {
	b    *Broker
	link masterLink // the connections to the other groups' masters
	// fails reports failed puts, at most every escapeLogInterval with
	// the count held back: a put that cannot succeed (a topic no other
	// group has) is retried every round of the service that makes it.
	// The services' loops report their recoveries; the bridge, shared
	// by them, reports none (one caller's success would end another's
	// run of failures).
	fails *repeatlog.Limiter

	mu     sync.Mutex // guards routes
	routes map[string]*publishRoute
}

// publishRoute is a topic's publish route as a RocketMQ producer reads it
// (MQClientInstance.topicRouteData2TopicPublishInfo): the writable queues
// of the groups that have a master, by group name, and the masters'
// addresses.
type publishRoute struct {
	queues  []publishQueue
	masters map[string]string
	at      time.Time
	// next is the route's sendWhichQueue: a counter from a random start.
	next atomic.Uint32
}

// publishQueue is one queue of a publish route.
type publishQueue struct {
	brokerName string
	queueID    int32
}

// newPublishRoute reads route as a RocketMQ producer does: with an order
// topic configuration, its "brokerName:queues" entries; else the
// writable queue data, sorted by group name, of groups with a master.
func newPublishRoute(route namesrv.TopicRouteData) *publishRoute {
	p := &publishRoute{masters: map[string]string{}}
	for _, bd := range route.BrokerDatas {
		if addr, ok := bd.BrokerAddrs[namesrv.MasterID]; ok {
			p.masters[bd.BrokerName] = addr
		}
	}
	if route.OrderTopicConf != "" {
		for _, item := range strings.Split(route.OrderTopicConf, ";") {
			name, n, ok := strings.Cut(item, ":")
			nums, err := strconv.Atoi(n)
			if !ok || err != nil {
				continue
			}
			for i := range min(nums, 1<<16) {
				p.queues = append(p.queues, publishQueue{brokerName: name, queueID: int32(i)})
			}
		}
	} else {
		qds := slices.Clone(route.QueueDatas)
		slices.SortStableFunc(qds, func(a, b namesrv.QueueData) int { return cmp.Compare(a.BrokerName, b.BrokerName) })
		for _, qd := range qds {
			if !meta.Writable(int(qd.Perm)) {
				continue
			}
			if _, ok := p.masters[qd.BrokerName]; !ok {
				continue
			}
			for i := range qd.WriteQueueNums {
				p.queues = append(p.queues, publishQueue{brokerName: qd.BrokerName, queueID: i})
			}
		}
	}
	p.next.Store(rand.Uint32())
	return p
}

// selectQueue is TopicPublishInfo.selectOneMessageQueue(lastBrokerName):
// the next queues in turn until one not of group skip, else the next one.
func (p *publishRoute) selectQueue(skip string) publishQueue {
	n := uint32(len(p.queues))
	for range p.queues {
		q := p.queues[p.next.Add(1)%n]
		if q.brokerName != skip {
			return q
		}
	}
	return p.queues[p.next.Add(1)%n]
}

// javaStringHash is Java's String.hashCode over s's UTF-16 code units.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := 0xD800+((r-0x10000)>>10), 0xDC00+((r-0x10000)&0x3FF)
			h = 31*h + hi
			h = 31*h + lo
			continue
		}
		h = 31*h + r
	}
	return h
}

// floorMod is Java's Math.floorMod for a positive n.
func floorMod(x int32, n int) int {
	m := int(x) % n
	if m < 0 {
		m += n
	}
	return m
}

// route returns topic's publish route, fetched when the last one is older
// than loadBalancePollNameServerInterval or had no queue.
func (e *escapeBridge) route(ctx context.Context, topic string) (*publishRoute, error) {
	ttl := e.b.current().LoadBalancePollNameServerInterval
	e.mu.Lock()
	p := e.routes[topic]
	e.mu.Unlock()
	if p != nil && len(p.queues) > 0 && time.Since(p.at) < ttl {
		return p, nil
	}
	route, err := namesrv.FetchRoute(ctx, e.b.register.pool, e.b.register.ns.PreferAvailable(), topic, routeTimeout)
	if err != nil {
		return nil, err
	}
	p = newPublishRoute(route)
	p.at = time.Now()
	e.mu.Lock()
	if e.routes == nil {
		e.routes = map[string]*publishRoute{}
	}
	e.routes[topic] = p
	e.mu.Unlock()
	if len(p.queues) == 0 {
		return nil, fmt.Errorf("no writable queue of a group with a master in the route of %s", topic)
	}
	return p, nil
}

// enabled reports whether puts escape: enableSlaveActingMaster and
// enableRemoteEscape.
func (e *escapeBridge) enabled() bool {
	return e.b.cfg.EnableSlaveActingMaster && e.b.cfg.EnableRemoteEscape
}

// target returns the publish route a put of topic escapes through, or
// errEscapeUnavailable when escape is off and errEscapeFailed when the
// topic has no route, each logged through the bridge's limiter.
func (e *escapeBridge) target(ctx context.Context, topic string) (*publishRoute, error) {
	if !e.enabled() {
		e.fails.Failed().Str("topic", topic).Msg("escape put refused: enableRemoteEscape is off")
		return nil, errEscapeUnavailable
	}
	p, err := e.route(ctx, topic)
	if err != nil {
		e.fails.Failed().Err(err).Str("topic", topic).Msg("escape put: no route of the topic")
		return nil, fmt.Errorf("escape %s: %w: %w", topic, errEscapeFailed, err)
	}
	return p, nil
}

// put sends m to a queue of its topic on another group's master
// (RocketMQ's EscapeBridge.putMessage): nil once that master stored it.
func (e *escapeBridge) put(ctx context.Context, m *commitlog.Message) error {
	p, err := e.target(ctx, m.Topic)
	if err != nil {
		return err
	}
	q := p.selectQueue(e.b.cfg.BrokerName)
	if q.brokerName == e.b.cfg.BrokerName {
		e.fails.Failed().Str("topic", m.Topic).Msg("escape put: no queue of another broker group in the route")
		return fmt.Errorf("escape %s: no queue of another broker group: %w", m.Topic, errEscapeFailed)
	}
	return e.send(ctx, p, q, m)
}

// putToSpecificQueue sends m to the queue of its topic that its topic and
// this broker's store host choose (RocketMQ's
// EscapeBridge.putMessageToSpecificQueue, through which its POP revive
// escapes: pop.Service.RunActingRevive): nil once that queue's master
// stored it. The choice is among all the route's queues, this group's
// too, as RocketMQ's; a queue of this group (its acting master's queues
// are read-only in routes, so only one the name servers kept from its
// master's registration) fails the put without a send, which this
// broker, a slave, would refuse.
func (e *escapeBridge) putToSpecificQueue(ctx context.Context, m *commitlog.Message) error {
	p, err := e.target(ctx, m.Topic)
	if err != nil {
		return err
	}
	q := p.queues[floorMod(javaStringHash(m.Topic+javaSocketAddress(e.b.storeHost.String())), len(p.queues))]
	if q.brokerName == e.b.cfg.BrokerName {
		e.fails.Failed().Str("topic", m.Topic).Int32("queue", q.queueID).Msg("escape put to the specific queue: the queue is of this broker group")
		return fmt.Errorf("escape %s: queue %d chosen is of this broker group: %w", m.Topic, q.queueID, errEscapeFailed)
	}
	return e.send(ctx, p, q, m)
}

// javaSocketAddress is how Java writes an InetSocketAddress made of an
// address without a host name: "/" before the address and port.
func javaSocketAddress(hostPort string) string { return "/" + hostPort }

// innerProducerGroup is the group the bridge sends as when a message has
// no PGROUP: RocketMQ's InnerProducerGroup_<brokerName>_<brokerId>.
func (e *escapeBridge) innerProducerGroup() string {
	return "InnerProducerGroup_" + e.b.cfg.BrokerName + "_" + strconv.FormatInt(e.b.cfg.BrokerID, 10)
}

// send sends m to queue q with SEND_MESSAGE_V2, as RocketMQ's
// BrokerOuterAPI.sendMessageToSpecificBroker builds it.
func (e *escapeBridge) send(ctx context.Context, p *publishRoute, q publishQueue, m *commitlog.Message) error {
	addr := p.masters[q.brokerName]
	if addr == "" {
		return fmt.Errorf("escape %s: no master address of group %s: %w", m.Topic, q.brokerName, errEscapeFailed)
	}
	group, _ := commitlog.LookupProperty(m.Properties, txn.PropProducerGroup)
	if group == "" {
		group = e.innerProducerGroup()
	}
	h := remoting.Header{"a": group, "b": m.Topic, "c": "TBW102", "d": "8",
		"i": commitlog.RewriteProperties(m.Properties, nil, [2]string{"WAIT", "false"}), "k": "false", "m": "false"}
	h.SetInt32("e", q.queueID)
	h.SetInt32("f", m.SysFlag)
	h.SetInt64("g", m.BornTimestamp)
	h.SetInt32("h", m.Flag)
	h.SetInt32("j", m.ReconsumeTimes)
	pool, err := e.link.get(e.b.newEscapePool)
	if err != nil {
		return fmt.Errorf("escape %s: %w: %w", m.Topic, errEscapeFailed, err)
	}
	cctx, cancel := context.WithTimeout(ctx, escapeSendTimeout)
	defer cancel()
	resp, err := pool.Invoke(cctx, addr, remoting.NewRequest(remoting.SendMessageV2, h, m.Body))
	if err != nil {
		// The next send dials again, as RocketMQ's invokeSync closes the
		// channel of a failed call.
		pool.CloseAddr(addr)
		e.fails.Failed().Err(err).Str("topic", m.Topic).Str("broker", q.brokerName).Str("addr", addr).Msg("escape put failed")
		return fmt.Errorf("escape %s to %s (%s): %w: %w", m.Topic, q.brokerName, addr, errEscapeFailed, err)
	}
	if resp.Code != remoting.Success {
		e.fails.Failed().Int32("code", resp.Code).Str("remark", resp.Remark).Str("topic", m.Topic).Str("broker", q.brokerName).
			Msg("escape put refused by the other group's master")
		return fmt.Errorf("escape %s to %s (%s): answer %d %s: %w", m.Topic, q.brokerName, addr, resp.Code, resp.Remark, errEscapeFailed)
	}
	return nil
}

// newEscapePool makes the pool of the escape bridge's connections: the
// client a broker reaches its master with (see newMasterPool).
func (b *Broker) newEscapePool() *remoting.ClientPool {
	return remoting.NewClientPool(remoting.ClientOptions{
		Log:                b.component("escape-client"),
		TLS:                b.namesrvClientTLS(),
		BeforeRequest:      b.innerSigner(),
		ReconnectForGoAway: b.reconnectForGoAway,
	})
}

package namesrv

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultBrokerTimeout is how long a broker stays registered without a new
// registration or heartbeat (Java DEFAULT_BROKER_CHANNEL_EXPIRED_TIME).
const DefaultBrokerTimeout = 120 * time.Second

// ErrRegisterRefused is returned by Registry.Register when a broker id not
// yet known under its broker name registers with exactly one topic: Java
// treats that as a single-topic update arriving before the broker's first
// full registration and refuses it ("register broker failed").
var ErrRegisterRefused = errors.New("register broker failed")

// RegisterRequest is one REGISTER_BROKER call.
type RegisterRequest struct {
	// ClusterName is the broker's cluster.
	ClusterName string
	// BrokerName names the broker's group (master and slaves).
	BrokerName string
	// BrokerAddr is the "ip:port" clients connect to.
	BrokerAddr string
	// BrokerID is the broker's id in its group; 0 is the master.
	BrokerID int64
	// HAServerAddr is where slaves replicate from.
	HAServerAddr string
	// ZoneName is the broker's zone (ext field __ZONE_NAME), may be empty.
	ZoneName string
	// Timeout is how long the registration lives without renewal
	// (DefaultBrokerTimeout when zero).
	Timeout time.Duration
	// EnableActingMaster is nil for brokers that do not send the field
	// (before 5.0), which also disables the "prime slave" rules.
	EnableActingMaster *bool
	// Body is the broker's topic configuration.
	Body *RegisterBrokerBody
	// ConnID identifies the connection the registration came on, so that
	// closing it unregisters the broker; 0 means none.
	ConnID uint64
}

// RegisterResult is what the name server tells a registering broker.
type RegisterResult struct {
	// HAServerAddr is the master's HA address, for slaves whose master is
	// registered and alive.
	HAServerAddr string
	// MasterAddr is the master's address, likewise.
	MasterAddr string
}

// BrokerKey identifies one registered broker process.
type BrokerKey struct {
	// ClusterName is the broker's cluster.
	ClusterName string
	// BrokerAddr is the broker's "ip:port".
	BrokerAddr string
}

// liveBroker is the registration state of one broker process.
type liveBroker struct {
	brokerName    string
	brokerID      int64
	lastUpdate    time.Time
	timeout       time.Duration
	dataVersion   DataVersion
	haServerAddr  string
	filterServers []string
	connID        uint64
	// rules records that the broker's topic configs made its group's
	// queue data at dataVersion (a master, or a prime slave whose
	// configs took over; see Register).
	rules bool
}

// brokerGroup is a broker name's members (Java BrokerData).
type brokerGroup struct {
	cluster            string
	name               string
	zone               string
	enableActingMaster bool
	addrs              map[int64]string
}

// ExpiredBroker describes a broker removed for not renewing in time.
type ExpiredBroker struct {
	BrokerKey
	// BrokerName names its group.
	BrokerName string
	// BrokerID is its id in the group.
	BrokerID int64
	// ConnID is the connection it last registered on (0 if none), which the
	// name server closes as Java does.
	ConnID uint64
	// Idle is how long it had been silent.
	Idle time.Duration
}

// RegistryOptions tune the registry's Java-compatible behaviour.
type RegistryOptions struct {
	// DeleteTopicWithBrokerRegistration removes a broker's queue data for
	// topics missing from its registration (Java's
	// deleteTopicWithBrokerRegistration, default false: topics leave only
	// through DELETE_TOPIC_IN_NAMESRV or when the broker goes away). Leave
	// it off for brokers that split their registration into chunks. It is
	// the initial value: SetDeleteTopicWithBrokerRegistration changes it.
	DeleteTopicWithBrokerRegistration bool
	// Now is the clock; time.Now when nil. Tests inject their own.
	Now func() time.Time
	// OnMinBrokerIDChange, when set, is called with the registry's lock
	// held (it must not block nor call the registry) each time the
	// smallest broker id of a group changes as RocketMQ's
	// RouteInfoManager notices it: a registration of an id below the
	// group's smallest, or the unregistration or expiry of the smallest
	// member of a group registered with enableActingMaster that keeps
	// members.
	OnMinBrokerIDChange func(MinBrokerIDChange)
}

// MinBrokerIDChange is a change of a broker group's smallest broker id,
// to be told to the members with NOTIFY_MIN_BROKER_ID_CHANGE.
type MinBrokerIDChange struct {
	// BrokerName is the group.
	BrokerName string
	// MinBrokerID and MinBrokerAddr are the smallest member now.
	MinBrokerID   int64
	MinBrokerAddr string
	// OfflineBrokerAddr is the member that went, "" on a registration.
	OfflineBrokerAddr string
	// HABrokerAddr is the registering broker's HA address, "" on an
	// unregistration.
	HABrokerAddr string
	// Notify are the members to tell, as RocketMQ's
	// chooseBrokerAddrsToNotify picks them: every member when one went
	// or the group has one member, else every member but the smallest
	// (the one that registered).
	Notify []string
}

// minBrokerIDChange builds the change of g's smallest id now.
func minBrokerIDChange(g *brokerGroup, offline, haAddr string) MinBrokerIDChange {
	minID := slices.Min(slices.Collect(maps.Keys(g.addrs)))
	ch := MinBrokerIDChange{BrokerName: g.name, MinBrokerID: minID, MinBrokerAddr: g.addrs[minID],
		OfflineBrokerAddr: offline, HABrokerAddr: haAddr}
	for id, addr := range g.addrs {
		if offline != "" || len(g.addrs) == 1 || id != minID {
			ch.Notify = append(ch.Notify, addr)
		}
	}
	slices.Sort(ch.Notify)
	return ch
}

// Registry is the name server's route table. It is safe for concurrent
// use; reads (routes) take a shared lock and never copy whole tables.
//
// Indexes: topics maps a topic to its queue data, one entry per broker
// name, kept sorted; brokerTopics maps a broker name to the topics it has
// queue data in, so removing a broker costs O(its topics), and a route
// lookup costs O(brokers of the topic).
type Registry struct {
	now func() time.Time
	// onMinChange is RegistryOptions.OnMinBrokerIDChange.
	onMinChange func(MinBrokerIDChange)
	// deleteWithRegistration is RegistryOptions'
	// DeleteTopicWithBrokerRegistration as in force now: RocketMQ reads the
	// setting at every registration, so UPDATE_NAMESRV_CONFIG changes it
	// while the name server runs.
	deleteWithRegistration atomic.Bool

	mu           sync.RWMutex
	topics       map[string][]QueueData
	brokerTopics map[string]map[string]struct{}
	groups       map[string]*brokerGroup
	clusters     map[string]map[string]struct{}
	live         map[BrokerKey]*liveBroker
	// writePerm holds operators' changes of write permission still in
	// force, by broker name, then topic (see WipeWritePerm).
	writePerm map[string]map[string]writePermChange
	// pinned holds, by broker name, then topic, the queue data
	// REGISTER_TOPIC_IN_NAMESRV stored that no registration of the group
	// has rebuilt since: a registration at the data version the name
	// server holds for the registering address keeps it, as RocketMQ
	// rebuilds a topic's queue data only at a new data version (see
	// RegisterTopic).
	pinned map[string]map[string]struct{}
	// mappings holds static topics' mappings by topic, then by the broker
	// name each mapping is of (Java's topicQueueMappingInfoTable).
	mappings map[string]map[string]TopicQueueMappingInfo
}

// writePermChange is a WIPE_ or ADD_WRITE_PERM_OF_BROKER in force on one
// topic's queue data of a broker group. RocketMQ's name server changes the
// stored queue data and rebuilds a topic's queue data from the broker's
// topic config only when the registering broker (the group's master, or
// its prime slave) brings a data version it does not hold for the
// broker's address (a topic change, or a first registration from that
// address: a restart, maybe on another address) and the topic is in that
// registration, or when the group has no queue data of the topic. So a
// change lasts per topic: an incremental registration (one topic created,
// a new data version) ends it for that topic only, and a topic the group's
// queue data lacked (one deleted from the name server and registered
// again) comes with the broker's own permission. Several changes in a row
// compose as they do on RocketMQ's stored queue data: perm&keep | set.
type writePermChange struct {
	keep, set int32
}

// The two changes: a wipe takes write away, an add makes read-write.
var (
	wipeWrite = writePermChange{keep: ^PermWrite}
	addWrite  = writePermChange{set: PermRead | PermWrite}
)

// apply returns perm as the change makes it.
func (c writePermChange) apply(perm int32) int32 {
	return perm&c.keep | c.set
}

// then returns the change that applies c, then next.
func (c writePermChange) then(next writePermChange) writePermChange {
	return writePermChange{keep: c.keep & next.keep, set: c.set&next.keep | next.set}
}

// NewRegistry returns an empty registry.
func NewRegistry(opts RegistryOptions) *Registry {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	r := &Registry{
		now:          now,
		onMinChange:  opts.OnMinBrokerIDChange,
		topics:       make(map[string][]QueueData),
		brokerTopics: make(map[string]map[string]struct{}),
		groups:       make(map[string]*brokerGroup),
		clusters:     make(map[string]map[string]struct{}),
		live:         make(map[BrokerKey]*liveBroker),
		writePerm:    make(map[string]map[string]writePermChange),
		pinned:       make(map[string]map[string]struct{}),
		mappings:     make(map[string]map[string]TopicQueueMappingInfo),
	}
	r.deleteWithRegistration.Store(opts.DeleteTopicWithBrokerRegistration)
	return r
}

// SetDeleteTopicWithBrokerRegistration turns RegistryOptions'
// DeleteTopicWithBrokerRegistration on or off for the registrations that
// follow, as an update of RocketMQ's deleteTopicWithBrokerRegistration
// takes effect at the next registration.
func (r *Registry) SetDeleteTopicWithBrokerRegistration(on bool) {
	r.deleteWithRegistration.Store(on)
}

// Register records a broker registration, following Java's
// RouteInfoManager.registerBroker: the broker joins its cluster and group
// (an address registered under another id is dropped first), and a master
// (or, with no master, the "prime slave": the slave of a 5.x broker
// group with the smallest id) turns each topic config into queue data.
// Where Java rewrites a master's queue data only when the data version
// changed, Register rewrites it whenever it differs, so the chunks of a
// split registration (enableSplitRegistration: several REGISTER_BROKER
// calls with one data version) all take effect. A prime slave's configs
// replace the queue data its master left only from a data version the
// name server does not hold for the slave, as in Java.
func (r *Registry) Register(req RegisterRequest) (RegisterResult, error) {
	var res RegisterResult
	body := req.Body
	if body == nil {
		body = &RegisterBrokerBody{}
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultBrokerTimeout
	}
	key := BrokerKey{ClusterName: req.ClusterName, BrokerAddr: req.BrokerAddr}
	mappings := make(map[string]TopicQueueMappingInfo, len(body.TopicQueueMappingInfo))
	for topic, raw := range body.TopicQueueMappingInfo {
		info, err := decodeMappingInfo(raw)
		if err != nil {
			// Java fails to decode such a body and refuses it.
			return res, fmt.Errorf("register broker %s: topic %s: %w: %w", req.BrokerName, topic, ErrBadRegisterBody, err)
		}
		mappings[topic] = info
	}

	r.mu.Lock()
	defer r.mu.Unlock()

	// Checked before anything changes (Java checks later and leaves an
	// empty group behind when it refuses).
	if g := r.groups[req.BrokerName]; (g == nil || g.addrs[req.BrokerID] == "") && len(body.TopicConfigTable) == 1 {
		return res, ErrRegisterRefused
	}

	names := r.clusters[req.ClusterName]
	if names == nil {
		names = make(map[string]struct{})
		r.clusters[req.ClusterName] = names
	}
	names[req.BrokerName] = struct{}{}

	registerFirst := false
	g := r.groups[req.BrokerName]
	if g == nil {
		registerFirst = true
		g = &brokerGroup{cluster: req.ClusterName, name: req.BrokerName, addrs: make(map[int64]string)}
		r.groups[req.BrokerName] = g
	}
	oldBroker := req.EnableActingMaster == nil
	g.enableActingMaster = !oldBroker && *req.EnableActingMaster
	// RocketMQ takes 0 as the previous smallest id of a group without
	// members: a first registration changes nothing.
	minIDChanged := len(g.addrs) > 0 && req.BrokerID < slices.Min(slices.Collect(maps.Keys(g.addrs)))
	g.zone = req.ZoneName

	// One address has one id: a slave promoted to master re-registers
	// with id 0 and its old entry goes.
	for id, addr := range g.addrs {
		if addr == req.BrokerAddr && id != req.BrokerID {
			delete(g.addrs, id)
		}
	}
	if oldAddr, ok := g.addrs[req.BrokerID]; ok && oldAddr != req.BrokerAddr {
		if old := r.live[BrokerKey{req.ClusterName, oldAddr}]; old != nil &&
			old.dataVersion.StateVersion > body.DataVersion.StateVersion {
			// A newer incarnation holds this id: ignore the registration.
			delete(r.live, key)
			return res, nil
		}
	}
	oldAddr := g.addrs[req.BrokerID]
	g.addrs[req.BrokerID] = req.BrokerAddr
	registerFirst = registerFirst || oldAddr == ""

	isMaster := req.BrokerID == MasterID
	isPrimeSlave := !oldBroker && !isMaster && req.BrokerID == slices.Min(slices.Collect(maps.Keys(g.addrs)))
	prev := r.live[key]
	newVersion := registerFirst || prev == nil || prev.dataVersion != body.DataVersion
	// rules: the broker's topic configs make the group's queue data. A
	// master's always do (see above). A prime slave's do, as in RocketMQ,
	// when it registers a data version the name server does not hold for
	// it, or registers anew; otherwise the queue data its master left
	// stays (a slave's topic configs may lag its master's), and only a
	// topic the group has no queue data of is added from it. Once a prime
	// slave's configs ruled at a data version, they go on ruling at it, so
	// the later chunks of a split registration take effect too.
	rules := isMaster || (isPrimeSlave && (newVersion || prev.rules))
	if isMaster || isPrimeSlave {
		if r.deleteWithRegistration.Load() && len(body.TopicQueueMappingInfo) == 0 {
			for topic := range r.brokerTopics[req.BrokerName] {
				if _, keep := body.TopicConfigTable[topic]; !keep {
					r.removeQueueData(topic, req.BrokerName)
				}
			}
		}
		for name, tc := range body.TopicConfigTable {
			if tc.TopicName != "" {
				name = tc.TopicName
			}
			qd := QueueData{
				BrokerName:     req.BrokerName,
				Perm:           tc.Perm,
				ReadQueueNums:  tc.ReadQueueNums,
				WriteQueueNums: tc.WriteQueueNums,
				TopicSysFlag:   tc.TopicSysFlag,
			}
			if isPrimeSlave && g.enableActingMaster {
				qd.Perm &^= PermWrite
			}
			if _, pinned := r.pinned[req.BrokerName][name]; pinned {
				if !newVersion {
					continue // REGISTER_TOPIC_IN_NAMESRV's entry stays
				}
				r.unpin(req.BrokerName, name)
			}
			old, ok := r.queueData(name, req.BrokerName)
			if c, changed := r.writePerm[req.BrokerName][name]; changed {
				if newVersion || !ok {
					// RocketMQ rebuilds this topic's queue data from the
					// broker's config: the operator's change ends.
					r.dropWritePermChange(req.BrokerName, name)
				} else {
					qd.Perm = c.apply(qd.Perm)
				}
			}
			// Java rebuilds queue data only when the data version changed
			// or the topic is new to the broker; comparing the queue data
			// itself gives the same answer for whole registrations and also
			// applies changes carried by the later chunks of a split
			// registration, which all share one data version.
			if !ok || rules && old != qd {
				r.putQueueData(name, qd)
			}
		}
		// Static topics' mappings, by the broker name each is of, as
		// Java keeps them; like queue data they take effect when the
		// broker's configs rule or are new to the name server.
		for topic, info := range mappings {
			byBroker := r.mappings[topic]
			if byBroker == nil {
				byBroker = make(map[string]TopicQueueMappingInfo)
				r.mappings[topic] = byBroker
			}
			if _, known := byBroker[info.Bname]; rules || !known {
				byBroker[info.Bname] = info
			}
		}
	}

	r.live[key] = &liveBroker{
		brokerName:    req.BrokerName,
		brokerID:      req.BrokerID,
		lastUpdate:    r.now(),
		timeout:       timeout,
		dataVersion:   body.DataVersion,
		haServerAddr:  req.HAServerAddr,
		filterServers: slices.Clone(body.FilterServerList),
		connID:        req.ConnID,
		rules:         rules,
	}

	if req.BrokerID != MasterID {
		if masterAddr, ok := g.addrs[MasterID]; ok {
			if m := r.live[BrokerKey{req.ClusterName, masterAddr}]; m != nil {
				res.HAServerAddr = m.haServerAddr
				res.MasterAddr = masterAddr
			}
		}
	}
	if minIDChanged && r.onMinChange != nil {
		r.onMinChange(minBrokerIDChange(g, "", req.HAServerAddr))
	}
	return res, nil
}

// queueData returns brokerName's queue data of topic.
func (r *Registry) queueData(topic, brokerName string) (QueueData, bool) {
	list := r.topics[topic]
	i, found := slices.BinarySearchFunc(list, brokerName, func(q QueueData, name string) int {
		return strings.Compare(q.BrokerName, name)
	})
	if !found {
		return QueueData{}, false
	}
	return list[i], true
}

// putQueueData inserts or replaces brokerName's queue data of topic,
// keeping the topic's list sorted by broker name.
func (r *Registry) putQueueData(topic string, qd QueueData) {
	list := r.topics[topic]
	i, found := slices.BinarySearchFunc(list, qd.BrokerName, func(q QueueData, name string) int {
		return strings.Compare(q.BrokerName, name)
	})
	if found {
		list[i] = qd
	} else {
		list = slices.Insert(list, i, qd)
	}
	r.topics[topic] = list
	set := r.brokerTopics[qd.BrokerName]
	if set == nil {
		set = make(map[string]struct{})
		r.brokerTopics[qd.BrokerName] = set
	}
	set[topic] = struct{}{}
}

// removeQueueData drops brokerName's queue data of topic and the topic
// itself when no queue data is left.
func (r *Registry) removeQueueData(topic, brokerName string) {
	list := r.topics[topic]
	i, found := slices.BinarySearchFunc(list, brokerName, func(q QueueData, name string) int {
		return strings.Compare(q.BrokerName, name)
	})
	if found {
		r.dropWritePermChange(brokerName, topic)
		r.unpin(brokerName, topic)
		list = slices.Delete(list, i, i+1)
		if len(list) == 0 {
			delete(r.topics, topic)
			// Unlike Java, whose static topic mappings never go, a topic
			// that is gone takes them along: one created again without
			// them is not routed as static.
			delete(r.mappings, topic)
		} else {
			r.topics[topic] = list
		}
	}
	if set := r.brokerTopics[brokerName]; set != nil {
		delete(set, topic)
		if len(set) == 0 {
			delete(r.brokerTopics, brokerName)
		}
	}
}

// WipeWritePerm takes the write permission from every topic's queue data
// of brokerName (WIPE_WRITE_PERM_OF_BROKER, mqadmin wipeWritePerm): clients
// stop sending to the group at their next route refresh while consumers
// go on reading. It returns the number of topics changed. On each topic
// the change lasts until the group's master registers that topic with a
// new data version (a topic change on the broker) or registers anew (a
// restart, on its address or another one), or the topic's queue data of
// the group goes, as in RocketMQ (see writePermChange).
func (r *Registry) WipeWritePerm(brokerName string) int {
	return r.changeWritePerm(brokerName, wipeWrite)
}

// AddWritePerm makes every topic's queue data of brokerName read-write
// (ADD_WRITE_PERM_OF_BROKER, mqadmin addWritePerm), undoing WipeWritePerm.
// It returns the number of topics changed.
func (r *Registry) AddWritePerm(brokerName string) int {
	return r.changeWritePerm(brokerName, addWrite)
}

func (r *Registry) changeWritePerm(brokerName string, c writePermChange) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for topic := range r.brokerTopics[brokerName] {
		qd, ok := r.queueData(topic, brokerName)
		if !ok {
			continue
		}
		qd.Perm = c.apply(qd.Perm)
		r.putQueueData(topic, qd)
		r.addWritePermChange(brokerName, topic, c)
		n++
	}
	return n
}

// addWritePermChange records c on brokerName's queue data of topic, after
// the change already in force there.
func (r *Registry) addWritePermChange(brokerName, topic string, c writePermChange) {
	byTopic := r.writePerm[brokerName]
	if byTopic == nil {
		byTopic = make(map[string]writePermChange)
		r.writePerm[brokerName] = byTopic
	}
	if prev, ok := byTopic[topic]; ok {
		c = prev.then(c)
	}
	byTopic[topic] = c
}

// dropWritePermChange ends the change in force on brokerName's queue data
// of topic, if any.
func (r *Registry) dropWritePermChange(brokerName, topic string) {
	if byTopic := r.writePerm[brokerName]; byTopic != nil {
		delete(byTopic, topic)
		if len(byTopic) == 0 {
			delete(r.writePerm, brokerName)
		}
	}
}

// pin marks brokerName's queue data of topic as REGISTER_TOPIC_IN_NAMESRV
// stored it.
func (r *Registry) pin(brokerName, topic string) {
	byTopic := r.pinned[brokerName]
	if byTopic == nil {
		byTopic = make(map[string]struct{})
		r.pinned[brokerName] = byTopic
	}
	byTopic[topic] = struct{}{}
}

// unpin ends pin's mark, if any.
func (r *Registry) unpin(brokerName, topic string) {
	if byTopic := r.pinned[brokerName]; byTopic != nil {
		delete(byTopic, topic)
		if len(byTopic) == 0 {
			delete(r.pinned, brokerName)
		}
	}
}

// Unregister removes one broker process (UNREGISTER_BROKER): its
// registration, its address in the group, and, when that was the group's
// last address, the group, its cluster membership and all its queue data.
func (r *Registry) Unregister(clusterName, brokerAddr, brokerName string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unregisterLocked(clusterName, brokerAddr, brokerName)
}

func (r *Registry) unregisterLocked(clusterName, brokerAddr, brokerName string) {
	delete(r.live, BrokerKey{clusterName, brokerAddr})
	g := r.groups[brokerName]
	if g == nil {
		return
	}
	wasMin := false
	if len(g.addrs) > 0 {
		minID := slices.Min(slices.Collect(maps.Keys(g.addrs)))
		wasMin = g.addrs[minID] == brokerAddr
	}
	for id, addr := range g.addrs {
		if addr == brokerAddr {
			delete(g.addrs, id)
		}
	}
	if len(g.addrs) > 0 {
		if wasMin && g.enableActingMaster && r.onMinChange != nil {
			r.onMinChange(minBrokerIDChange(g, brokerAddr, ""))
		}
		if _, hasMaster := g.addrs[MasterID]; !hasMaster && g.enableActingMaster {
			// The master went and a slave acts for it: producers must
			// stop sending to the group now, not at the slave's next
			// registration, as RocketMQ wipes the write permission.
			for topic := range r.brokerTopics[brokerName] {
				if qd, ok := r.queueData(topic, brokerName); ok && qd.Perm&PermWrite != 0 {
					qd.Perm &^= PermWrite
					r.putQueueData(topic, qd)
				}
				if _, ok := r.writePerm[brokerName][topic]; ok {
					// On top of an operator's change in force, as
					// RocketMQ wipes the queue data that change left.
					r.addWritePermChange(brokerName, topic, wipeWrite)
				}
			}
		}
		return
	}
	delete(r.groups, brokerName)
	delete(r.writePerm, brokerName)
	if names := r.clusters[clusterName]; names != nil {
		delete(names, brokerName)
		if len(names) == 0 {
			delete(r.clusters, clusterName)
		}
	}
	for topic := range r.brokerTopics[brokerName] {
		r.removeQueueData(topic, brokerName)
	}
}

// Heartbeat renews a broker's registration (BROKER_HEARTBEAT, and
// QUERY_DATA_VERSION as a side effect) and reports whether it is known.
func (r *Registry) Heartbeat(clusterName, brokerAddr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	lb := r.live[BrokerKey{clusterName, brokerAddr}]
	if lb == nil {
		return false
	}
	lb.lastUpdate = r.now()
	return true
}

// DataVersionOf returns the data version a broker last registered with.
func (r *Registry) DataVersionOf(clusterName, brokerAddr string) (DataVersion, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	lb := r.live[BrokerKey{clusterName, brokerAddr}]
	if lb == nil {
		return DataVersion{}, false
	}
	return lb.dataVersion, true
}

// Expire removes every broker whose last renewal is older than its timeout
// and returns them. The name server calls it every ScanInterval and
// closes their connections, as RocketMQ closes an expired broker's
// channel. Brokers that still renew and last registered on such a
// connection (a master and its slave, or several broker names, sharing
// one) are detached from it first, so that its close unregisters none of
// them: RocketMQ's close of an expired broker's channel leaves the other
// brokers on it registered, and their next registration, on a new
// connection, attaches them to that one.
func (r *Registry) Expire() []ExpiredBroker {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ExpiredBroker
	closing := make(map[uint64]bool)
	for key, lb := range r.live {
		if idle := now.Sub(lb.lastUpdate); idle > lb.timeout {
			out = append(out, ExpiredBroker{BrokerKey: key, BrokerName: lb.brokerName, BrokerID: lb.brokerID,
				ConnID: lb.connID, Idle: idle})
			if lb.connID != 0 {
				closing[lb.connID] = true
			}
		}
	}
	for _, e := range out {
		r.unregisterLocked(e.ClusterName, e.BrokerAddr, e.BrokerName)
	}
	if len(closing) > 0 {
		for _, lb := range r.live {
			if closing[lb.connID] {
				lb.connID = 0
			}
		}
	}
	return out
}

// ConnClosed unregisters every broker whose last registration came on the
// connection connID and is still attached to it (see Expire), and returns
// their keys. RocketMQ's onChannelDestroy unregisters only the first
// broker it finds on the channel, in hash order, and leaves the others
// of a shared channel to expire; a connection that closes here takes
// them all, as they went with it.
func (r *Registry) ConnClosed(connID uint64) []BrokerKey {
	if connID == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var gone []BrokerKey
	for key, lb := range r.live {
		if lb.connID == connID {
			gone = append(gone, key)
			r.unregisterLocked(key.ClusterName, key.BrokerAddr, lb.brokerName)
		}
	}
	return gone
}

// Route returns the route of topic, or false when the topic is unknown or
// none of its broker groups is registered. The result is a copy.
func (r *Registry) Route(topic string) (*TopicRouteData, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	queues := r.topics[topic]
	if len(queues) == 0 {
		return nil, false
	}
	route := &TopicRouteData{
		QueueDatas:        slices.Clone(queues),
		BrokerDatas:       make([]BrokerData, 0, len(queues)),
		FilterServerTable: map[string][]string{},
	}
	for _, qd := range queues {
		g := r.groups[qd.BrokerName]
		if g == nil {
			continue
		}
		route.BrokerDatas = append(route.BrokerDatas, g.data())
		for _, addr := range g.addrs {
			if lb := r.live[BrokerKey{g.cluster, addr}]; lb != nil && len(lb.filterServers) > 0 {
				route.FilterServerTable[addr] = slices.Clone(lb.filterServers)
			}
		}
	}
	if len(route.BrokerDatas) == 0 {
		return nil, false
	}
	if byBroker := r.mappings[topic]; len(byBroker) > 0 {
		route.TopicQueueMappingByBroker = make(map[string]TopicQueueMappingInfo, len(byBroker))
		for name, info := range byBroker {
			info.CurrIDMap = maps.Clone(info.CurrIDMap)
			route.TopicQueueMappingByBroker[name] = info
		}
	}
	return route, true
}

func (g *brokerGroup) data() BrokerData {
	return BrokerData{
		BrokerAddrs:        maps.Clone(g.addrs),
		BrokerName:         g.name,
		Cluster:            g.cluster,
		EnableActingMaster: g.enableActingMaster,
		ZoneName:           g.zone,
	}
}

// ClusterInfo returns every broker group and cluster.
func (r *Registry) ClusterInfo() *ClusterInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ci := &ClusterInfo{
		BrokerAddrTable:  make(map[string]BrokerData, len(r.groups)),
		ClusterAddrTable: make(map[string][]string, len(r.clusters)),
	}
	for name, g := range r.groups {
		ci.BrokerAddrTable[name] = g.data()
	}
	for cluster, names := range r.clusters {
		ci.ClusterAddrTable[cluster] = slices.Sorted(maps.Keys(names))
	}
	return ci
}

// Topics returns every topic with queue data, sorted.
func (r *Registry) Topics() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.topics))
}

// TopicsByCluster returns the topics with queue data on any broker group
// of cluster, sorted.
func (r *Registry) TopicsByCluster(cluster string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	set := make(map[string]struct{})
	for name := range r.clusters[cluster] {
		for topic := range r.brokerTopics[name] {
			set[topic] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// SystemTopics returns what GET_SYSTEM_TOPIC_LIST_FROM_NS lists: every
// cluster name followed by its broker names (RocketMQ brokers create a
// topic of each), each name once (RocketMQ's TopicList holds a set: a
// broker named as a cluster, or listed under two clusters, is one
// topic), and the address of one registered broker, the master of the
// first group by name when it has one.
func (r *Registry) SystemTopics() (topics []string, brokerAddr string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	seen := make(map[string]bool)
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			topics = append(topics, name)
		}
	}
	for _, cluster := range slices.Sorted(maps.Keys(r.clusters)) {
		add(cluster)
		for _, name := range slices.Sorted(maps.Keys(r.clusters[cluster])) {
			add(name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.groups)) {
		g := r.groups[name]
		if len(g.addrs) == 0 {
			continue
		}
		if addr, ok := g.addrs[MasterID]; ok {
			return topics, addr
		}
		return topics, g.addrs[slices.Min(slices.Collect(maps.Keys(g.addrs)))]
	}
	return topics, ""
}

// TopicsWithSysFlag returns, sorted, the topics whose topicSysFlag (that
// of their first queue data, as RocketMQ reads it) satisfies keep: the
// unit topic lists.
func (r *Registry) TopicsWithSysFlag(keep func(sysFlag int32) bool) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := []string{}
	for topic, queues := range r.topics {
		if len(queues) > 0 && keep(queues[0].TopicSysFlag) {
			out = append(out, topic)
		}
	}
	slices.Sort(out)
	return out
}

// DeleteTopic removes topic's queue data: all of it when cluster is empty,
// else only that of the cluster's broker groups (DELETE_TOPIC_IN_NAMESRV).
func (r *Registry) DeleteTopic(topic, cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cluster == "" {
		for _, qd := range slices.Clone(r.topics[topic]) {
			r.removeQueueData(topic, qd.BrokerName)
		}
		return
	}
	for name := range r.clusters[cluster] {
		r.removeQueueData(topic, name)
	}
}

// BrokerCount returns the number of registered broker processes.
func (r *Registry) BrokerCount() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.live)
}

// ErrUnknownBroker is returned (wrapped) when a request names a broker
// group that has not registered.
var ErrUnknownBroker = errors.New("broker is not registered")

// RegisterTopic adds queue data of topic for broker groups that have
// registered (REGISTER_TOPIC_IN_NAMESRV, RocketMQ's registerTopic): each
// entry replaces the group's queue data of the topic, and the topic's
// queue data on other groups stays. An entry naming a group that has not
// registered is an error wrapping ErrUnknownBroker, and as in RocketMQ
// it ends the request where it is: a topic the name server did not know
// gets nothing, a known one keeps the entries stored before it.
//
// An entry is taken as it comes, so an operator's write-permission change
// (WipeWritePerm) on that topic ends, as RocketMQ stores the entry in
// place of the queue data the change left; a Java broker with
// enableSingleTopicRegister sends its new topic so, with the topic's own
// permission. It stays until the group registers the topic at a data
// version the name server does not hold for the registering address (or
// registers anew), as RocketMQ's registerBroker rebuilds queue data only
// then: a registration at the same data version leaves it.
func (r *Registry) RegisterTopic(topic string, queues []QueueData) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	known := len(r.topics[topic]) > 0
	for _, qd := range queues {
		if r.groups[qd.BrokerName] == nil {
			return fmt.Errorf("register topic %s: broker %q: %w", topic, qd.BrokerName, ErrUnknownBroker)
		}
		if known {
			r.registerTopicEntry(topic, qd)
		}
	}
	if !known {
		for _, qd := range queues {
			r.registerTopicEntry(topic, qd)
		}
	}
	return nil
}

// registerTopicEntry stores one entry of RegisterTopic.
func (r *Registry) registerTopicEntry(topic string, qd QueueData) {
	r.dropWritePermChange(qd.BrokerName, topic)
	r.putQueueData(topic, qd)
	r.pin(qd.BrokerName, topic)
}

// MemberGroup returns the addresses of brokerName's members by broker id
// (GET_BROKER_MEMBER_GROUP); empty when the group is unknown. As in
// RocketMQ the group is found by name alone.
func (r *Registry) MemberGroup(brokerName string) map[int64]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if g := r.groups[brokerName]; g != nil {
		return maps.Clone(g.addrs)
	}
	return map[int64]string{}
}

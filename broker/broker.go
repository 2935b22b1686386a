package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/rs/zerolog"
	"golang.org/x/sync/semaphore"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/brokerstats"
	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/atomicfile"
	"github.com/rocketkv/rocketkv/internal/certwatch"
	"github.com/rocketkv/rocketkv/internal/listenconf"
	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/internal/repeatlog"
	"github.com/rocketkv/rocketkv/internal/uniqid"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/migrate/filecq"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
	"github.com/rocketkv/rocketkv/timer"
	"github.com/rocketkv/rocketkv/txn"
)

// Broker is one running broker. Create it with New, then Start; stop it
// with Shutdown.
type Broker struct {
	cfg  configs.Broker
	root zerolog.Logger // the process logger, for components
	// importedStore is set by a first open of an Apache RocketMQ store:
	// the start warns of its unrouted queues once the topics it creates
	// itself exist (warnUnroutedQueues).
	importedStore bool
	// importedWithoutCQ is set with importedStore when that first open
	// found no consumequeue/ (moved aside): nothing told the topics
	// RocketMQ had deleted from the ones its topics.json lost, and the
	// queues of both were rebuilt from the CommitLog (warnUnroutedQueues).
	importedWithoutCQ bool
	// kvPop holds RocketMQ's KV POP records as the first open's config
	// import read them (importRocketMQConfig), until importKVPop imports
	// them: kvStore/ is read once.
	kvPop kvPopState
	log   zerolog.Logger
	// clientTLS is the TLS of the broker's own connections (name servers,
	// master, escape bridge; nil: plaintext), set at the start
	// (listenerTLS).
	clientTLS *tls.Config
	// busyLog reports refused sends at most once per second: under flow
	// control thousands may be refused a second.
	busyLog zerolog.Logger
	// refusedLog reports requests access control refused, consumer
	// subscriptions that do not parse, and batch acks of offsets past
	// their queue's end, at most refusedLogBurst lines a second: a client
	// must not be able to flood the log.
	refusedLog zerolog.Logger
	// bodies recycles pull and pop response bodies.
	bodies bodyPool
	// admitSlots bounds the sends waiting for dispatch (see admitted).
	admitSlots chan struct{}
	// durableWaits bounds the sends waiting for their group commit or
	// slaves off the workers (see answerDurable).
	durableWaits *semaphore.Weighted
	// clientWaits bounds the requests waiting on a client's answer off
	// the workers (see waitsOnClient).
	clientWaits chan struct{}
	storeHost   netip.AddrPort
	// hostIP is brokerIP1, fixed at New (resolved when brokerIP1 is a
	// host name); storeHost gets its port when listenPort 0 is bound,
	// after request handlers may run, so handlers use Addr instead.
	hostIP netip.Addr
	// hostName is brokerIP1 when it is a host name, "" when an address:
	// the broker registers and announces the name, as RocketMQ does, and
	// stores hostIP in every message it writes.
	hostName string
	started  time.Time
	// cutAt is where Start cuts a slave's CommitLog (CutCommitLogAt), 0
	// for nowhere.
	cutAt int64
	// recoveryStep, when set (crash tests only), is called after each
	// step of Start's recovery that changes the store: stepCommitLogCut
	// and the dispatcher's (kvindex.DispatcherOptions.RecoveryStep); and
	// after each step of a topic deletion (stepTopicDeletionBegun and
	// after), which a start completes when a crash interrupts it.
	recoveryStep func(step string)
	// earlyMetrics is metrics for the goroutines that run before the
	// exporter starts, the timer service's callbacks and a slave's sync
	// of its master's tables (nil until then: counts nothing).
	earlyMetrics atomic.Pointer[metrics.Broker]
	// reviving is the POP service while it runs, for the revive gauges
	// the exporter reads (it starts before the service).
	reviving atomic.Pointer[pop.Service]
	// timerCensusTTL is how long the timer gauges' count is reused.
	timerCensusTTL time.Duration
	// syncEncoder compresses the metadata answers slaves accept
	// compressed (synccompress.go).
	syncEncoder *zstd.Encoder
	// popCopies are the paged POP state copies slaves are reading, of
	// popCopyPage bytes a page; popCopyMax bounds a copy in one answer.
	popCopies   popCopies
	popCopyPage int
	popCopyMax  int

	clog *commitlog.Log
	// clogMu guards clog against its close for the one reader outside
	// the Broker's own lifecycle, the controller-mode Supervisor's
	// heartbeat (replicaOffsets), which a role switch's stop races:
	// closeStores holds it while it closes and drops the CommitLog.
	clogMu   sync.RWMutex
	db       *kvindex.DB
	cqs      cq.Store      // the ConsumeQueue that serves reads
	cqMirror cq.Store      // the other layout under rocksdbCQDoubleWriteEnable, or nil
	fileCQ   *filecq.Store // set when the file layout is written
	kvCQ     *kvindex.CQ   // set when the Pebble layout is written
	cqCheck  cqChecks      // CHECK_ROCKSDB_CQ_WRITE_PROGRESS runs one at a time
	// exportMu makes EXPORT_ROCKSDB_CONFIG_TO_JSON requests write the
	// config files one at a time.
	exportMu sync.Mutex
	qoffsets *kvindex.QueueOffsets
	notifier *kvindex.Notifier
	disp     *kvindex.Dispatcher
	topics   *topicManager
	// takingUncopied is set while a promoted slave's start takes, in the
	// background, the topics it never copied (uncopiedtopics.go).
	takingUncopied atomic.Bool
	groups         *kvindex.Groups
	// forbidden is what groups may not do on topics.
	forbidden *forbiddenGroups
	// mappings holds the static topics' queue mappings (statictopic.go);
	// mappingMu serialises their updates.
	mappings  *kvindex.TopicQueueMappings
	mappingMu sync.Mutex
	// staticNames is the set of topics with a mapping, read by every send
	// and pull (a topic outside it is not looked up in mappings, whose
	// cache a million plain topics would churn); refreshStaticNames
	// rebuilds it after each change of mappings.
	staticNames atomic.Pointer[map[string]struct{}]
	// staticNamesMu makes the rebuilds one at a time, so the last one
	// stored read the table after every change before it.
	staticNamesMu sync.Mutex
	offsets       *kvindex.ConsumerOffsets
	clients       *clientManager
	locks         *lockManager
	holds         *pullHolds
	// coldReads counts the groups' cold reads (cold-data flow control);
	// coldHolds holds back the pulls it limits.
	coldReads *coldReads
	coldHolds *coldPullHolds
	// coldScan is the page-cache table of coldDataScanEnable.
	coldScan *coldScan
	// coldPassPeriod, coldScanPeriod and coldCheckPeriod, when positive
	// (tests), replace the periods of the cold-read accounting pass, of
	// the scan of held cold pulls and of the page-cache scan. They are set
	// between New and Start.
	coldPassPeriod  time.Duration
	coldScanPeriod  time.Duration
	coldCheckPeriod time.Duration
	// catchUpEvery and catchUpFrom, when positive (tests), replace
	// catchUpLogEvery and catchUpReportFrom. Set between New and Start.
	catchUpEvery time.Duration
	catchUpFrom  int64
	popSvc       *pop.Service
	txns         *txn.Service
	timers       *timer.Service
	// compaction keeps the copies of compacted topics' messages; nil
	// with enableCompaction false.
	compaction *kvindex.Compaction
	popHolds   *popHolds
	// resets are offset resets the pull consumers have not seen yet.
	resets offsetResets
	stats  *brokerstats.Stats
	// statsClock is the statistics' clock (time.Now when nil); tests set
	// it between New and Start.
	statsClock func() time.Time
	register   *registrar
	// namesrvDial, when set (tests), opens the registrar's connections to
	// name servers (remoting.ClientOptions.DialContext); namesrvScanEvery,
	// when positive, replaces nameServerScanPeriod. Both are set between
	// New and Start.
	namesrvDial      func(ctx context.Context, network, addr string) (net.Conn, error)
	namesrvScanEvery time.Duration
	// nsResolve, when set (tests), resolves namesrvAddr's hosts under
	// fetchNameSrvAddrByDnsLookup instead of the system's resolver;
	// nsLookupDelay, when positive, replaces nsLookupDelay (the first
	// lookup after the start's). Both are set between New and Start.
	nsResolve     namesrv.Resolver
	nsLookupDelay time.Duration
	// hotBytes is how far from the end of the CommitLog records are taken
	// to be in the page cache (accessMessageInMemoryMaxRatio of memBytes,
	// set at Start).
	hotBytes int64
	// memBytes is the machine's memory (physicalMemory, read at New): the
	// base of hotBytes and of the hot share of cold-data flow control
	// (accessMessageInMemoryHotRatio, coldAreaBytes). Tests set it
	// between New and Start.
	memBytes int64
	// assignRoutes holds the topic routes QUERY_ASSIGNMENT divides.
	assignRoutes *assignRoutes
	uniq         *uniqid.Gen
	// timerCfg is the timer part of cfg, read by every send.
	timerCfg timer.Config
	// delayLevels are the delays of RocketMQ's messageDelayLevel.
	delayLevels []time.Duration
	// delayMarks are the delay levels' recent progress with the CommitLog
	// end of the deliveries each passed, for the slaves' copies
	// (slaveDelayOffsets).
	delayMarks delayMarks
	// schedShare is how many messages a delay level delivers in a turn
	// (defaultScheduleShare; tests lower it).
	schedShare int
	// delayTurn, when set (tests), is called as each delay level's turn
	// starts, on the schedule loop's goroutine.
	delayTurn func(level int)
	// dispatchHooks are handed to the dispatcher at Start: records of
	// these topics are shown to the hook as they are indexed.
	dispatchHooks map[string]kvindex.Hook
	// beforeFlush is handed to the CommitLog as Config.BeforeFlush: a
	// seam for tests of a disk whose flushes stall.
	beforeFlush func()
	// statusAskTimeout bounds the wait for each client's answer to
	// GET_CONSUMER_STATUS_FROM_CLIENT (consumerStatusTimeout; tests
	// shorten it).
	statusAskTimeout time.Duration
	// lagTTL is how long computed consumer gauges serve scrapes (the
	// lagTTL constant; tests set 0 to see each change).
	lagTTL time.Duration
	// beforeLagQueue, when set, runs before the consumer gauges read
	// each committed queue (consumerLags), with the computation's
	// context: a seam for tests of a slow computation.
	beforeLagQueue func(ctx context.Context)
	// beforePut, when set, may refuse a put before it reaches the
	// CommitLog: a seam for tests of failed appends.
	beforePut func(msgs []*commitlog.Message) error
	// reviveGiveBackWait is pop.Config.GiveBackWait (0: its default);
	// tests shorten it.
	reviveGiveBackWait time.Duration
	// wakeEveryHeld makes every dispatch re-run the requests held on its
	// queue whatever their filters, as before held requests were checked
	// against the dispatched tag codes: the baseline the long-polling
	// benchmarks measure against (set between New and Start).
	wakeEveryHeld bool

	// ctl links a controller-mode broker to its Supervisor (nil outside
	// controller mode).
	ctl *ctlLink
	// initMaxOffset is the CommitLog's end once Start recovered it
	// (EXCHANGE_BROKER_HA_INFO's masterFlushOffset).
	initMaxOffset int64

	// repl is master-slave replication: the HA server of a master, the
	// HA client of a slave.
	repl replication
	// group is the broker group's smallest member under
	// enableSlaveActingMaster (actingmaster.go).
	group groupState
	// escape is the acting master's escape bridge (escape.go), special
	// the special services it runs (actingmaster.go).
	escape escapeBridge
	// staticLink holds the connections of static topics' requests
	// forwarded to other broker groups (statictopic.go).
	staticLink masterLink
	// staticRoutes caches the master addresses those requests go to
	// (staticroute.go).
	staticRoutes masterCache
	special      specialServices

	mux    *remoting.Mux
	acl    *acl.Guard // nil when aclEnable is off
	auth   *authState // ACL 2.0: users and access lists; checks when either switch is on
	server *remoting.Server
	// fastServer is the fast channel (listenPort-2); nil when off.
	fastServer *remoting.Server
	// shared, set by a Supervisor before Start, are the process's
	// servers, which the Broker serves behind (served) instead of
	// running its own; predecessor is the Broker it replaces at a role
	// switch, whose client tables and queue locks it takes over. Both
	// nil outside controller mode.
	shared      *processServers
	served      *gatedHandler
	predecessor *Broker
	// keptIndex, set by a Supervisor before Start, is the index it
	// keeps open across role switches: openStores takes it and
	// closeStores leaves it open (nil outside controller mode).
	keptIndex *keptIndex
	// tlsWatch reloads the TLS of the Broker's own servers when its files
	// change (nil without TLS files, or behind shared servers).
	tlsWatch *certwatch.Watcher
	// metrics is nil unless metricsExporterType is PROM; exporter serves
	// it.
	metrics  *metrics.Broker
	exporter *metrics.Exporter
	// pulled is the pull offset table: GET_CONSUME_STATS's pullOffset
	// and the consumer gauges' messages in flight.
	pulled *pullPositions
	// live is the configuration in force: cfg with the keys
	// UPDATE_BROKER_CONFIG may change as last updated.
	live liveConfig

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	shutdown atomic.Bool
	// noGoAway skips Shutdown's graceful waits (stopForSwitch).
	noGoAway atomic.Bool
	// closed is closed when Shutdown has closed the stores (markClosed).
	closed    chan struct{}
	closeOnce sync.Once
}

// CheckConfig returns the error New or Start would refuse cfg with for
// what cfg says alone, before anything is opened or resolved: a SLAVE
// without a brokerId above 0, a SYNC_MASTER that waits for slaves without
// an HA port, ACL 1.0 and ACL 2.0 both on. bin/broker -p runs it, so that
// a configuration it prints as the one that would run does start.
func CheckConfig(cfg configs.Broker) error {
	if cfg.EnableControllerMode {
		if err := checkControllerMode(cfg); err != nil {
			return err
		}
		// brokerId and brokerRole are the controller's to give.
		cfg.BrokerRole, cfg.BrokerID = roleSyncMaster, 0
	}
	if _, err := checkRole(cfg.BrokerRole, cfg.BrokerID); err != nil {
		return err
	}
	if err := checkSyncMasterPort(cfg.BrokerRole, cfg.HAListenPort, cfg.InSyncReplicas); err != nil {
		return err
	}
	if err := checkNameServerSource(&cfg); err != nil {
		return err
	}
	return checkAuthConfig(cfg)
}

// New validates cfg and returns a broker that is not started.
func New(cfg configs.Broker, log zerolog.Logger) (*Broker, error) {
	if cfg.EnableControllerMode {
		return nil, errors.New("enableControllerMode=true: the broker's id and role come from a controller; run it with NewSupervisor")
	}
	return newBroker(cfg, log)
}

// newBroker is New without the check that keeps controller-mode brokers
// to their Supervisor, which gives each the role the controller elected.
func newBroker(cfg configs.Broker, log zerolog.Logger) (*Broker, error) {
	if cfg.StorePathRootDir == "" {
		return nil, errors.New("storePathRootDir is empty")
	}
	ip, hostName, err := brokerIP(cfg.BrokerIP1)
	if err != nil {
		return nil, err
	}
	if cfg.BrokerID, err = checkRole(cfg.BrokerRole, cfg.BrokerID); err != nil {
		return nil, err
	}
	if err := checkSyncMasterPort(cfg.BrokerRole, cfg.HAListenPort, cfg.InSyncReplicas); err != nil {
		return nil, err
	}
	if err := checkNameServerSource(&cfg); err != nil {
		return nil, err
	}
	levels, err := meta.ParseDelayLevels(cfg.MessageDelayLevel)
	if err != nil {
		return nil, fmt.Errorf("messageDelayLevel: %w", err)
	}
	b := &Broker{
		cfg:              cfg,
		closed:           make(chan struct{}),
		root:             log,
		log:              log.With().Str("component", "broker").Logger(),
		storeHost:        netip.AddrPortFrom(ip, uint16(cfg.ListenPort)),
		hostIP:           ip,
		hostName:         hostName,
		delayLevels:      levels,
		schedShare:       defaultScheduleShare,
		timerCfg:         timerConfig(cfg),
		statusAskTimeout: consumerStatusTimeout,
		lagTTL:           lagTTL,
		memBytes:         physicalMemory(),
		pulled:           newPullPositions(),
		popCopyPage:      popCopyPageBytes,
		popCopyMax:       maxPopStateCopy,
		timerCensusTTL:   timerCensusTTL,
	}
	b.live.cur.Store(&liveSnapshot{cfg: cfg, version: meta.DataVersion{Timestamp: time.Now().UnixMilli()}})
	enc, err := newSyncEncoder()
	if err != nil {
		return nil, err
	}
	b.syncEncoder = enc
	b.busyLog = b.log.Sample(&zerolog.BurstSampler{Burst: 1, Period: time.Second})
	b.refusedLog = b.log.Sample(&zerolog.BurstSampler{Burst: refusedLogBurst, Period: time.Second})
	b.admitSlots = make(chan struct{}, maxAdmitWaiters)
	b.durableWaits = semaphore.NewWeighted(maxDurableWaitBytes)
	b.clientWaits = make(chan struct{}, maxClientWaits)
	var ip4 [4]byte
	if ip.Is4() {
		ip4 = ip.As4()
	}
	b.uniq = uniqid.New(ip4)
	b.escape.b = b
	b.escape.fails = repeatlog.New(b.log, escapeLogInterval, nil)
	return b, nil
}

// memoryRatio is the share of memory (%) a read must stay within to count
// as in memory: accessMessageInMemoryMaxRatio, 10 less on a slave, as
// RocketMQ's BrokerStartup sets it, so that a consumer the master sends
// to its slave for being behind is not sent straight back.
func memoryRatio(cfg configs.Broker) int {
	if cfg.BrokerRole == roleSlave {
		return max(cfg.AccessMessageInMemoryMaxRatio-10, 0)
	}
	return cfg.AccessMessageInMemoryMaxRatio
}

// hostLookupTimeout bounds the resolution of a brokerIP1 host name at New.
const hostLookupTimeout = 10 * time.Second

// brokerIP returns the address of brokerIP1, and brokerIP1 itself when it
// is a host name: RocketMQ takes either, registers the name as given and
// writes the address it resolves to into stored messages (the first IPv4
// address, as Java's resolver orders them, else the first). An empty
// brokerIP1 is the first non-loopback IPv4 address of the host, or
// 127.0.0.1.
func brokerIP(configured string) (netip.Addr, string, error) {
	if configured != "" {
		if ip, err := netip.ParseAddr(configured); err == nil {
			return ip.Unmap(), "", nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), hostLookupTimeout)
		defer cancel()
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", configured)
		if err != nil {
			return netip.Addr{}, "", fmt.Errorf("brokerIP1 %q is neither an IP address nor a host name that resolves: %w", configured, err)
		}
		if len(ips) == 0 {
			return netip.Addr{}, "", fmt.Errorf("brokerIP1 %q: the host name has no address", configured)
		}
		pick := ips[0].Unmap()
		for _, ip := range ips {
			if ip.Unmap().Is4() {
				pick = ip.Unmap()
				break
			}
		}
		return pick, configured, nil
	}
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					ip = ip.Unmap()
					if ip.Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
						return ip, "", nil
					}
				}
			}
		}
	}
	return netip.MustParseAddr("127.0.0.1"), "", nil
}

// Addr returns the address clients use: brokerIP1:listenPort (the bound
// port when listenPort was 0), with brokerIP1's host name when it is one.
func (b *Broker) Addr() string {
	return net.JoinHostPort(b.announcedHost(), strconv.Itoa(int(b.hostAddr().Port())))
}

// announcedHost is brokerIP1 as the broker names itself to name servers
// and clients: its host name when it is one, else its address.
func (b *Broker) announcedHost() string {
	if b.hostName != "" {
		return b.hostName
	}
	return b.hostIP.String()
}

// hostAddr is Addr as an address: brokerIP1 and the port listened on.
// Request handlers use it rather than storeHost, which listenPort 0 sets
// only once they may run.
func (b *Broker) hostAddr() netip.AddrPort {
	if b.server != nil {
		if a, ok := b.server.Addr().(*net.TCPAddr); ok {
			return netip.AddrPortFrom(b.hostIP, uint16(a.Port))
		}
	}
	return netip.AddrPortFrom(b.hostIP, uint16(b.cfg.ListenPort))
}

// Start opens and recovers the store, catches the index up with the
// CommitLog, starts serving and registers with the name servers. It
// returns once the broker accepts requests and its first registration
// ended (or ctx ended first).
func (b *Broker) Start(ctx context.Context) (err error) {
	b.started = time.Now()
	b.ctx, b.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			if b.fastServer != nil && b.shared == nil {
				_ = b.fastServer.Shutdown(context.Background())
			}
			if b.served != nil {
				// Shared servers stop handing requests to a Broker
				// whose start failed.
				_ = b.shared.gate.detach(context.Background(), b.served)
			}
			// The background work once no request can start more of
			// it, and before the stores close, as finishShutdown stops
			// it: none of it may outlive the stores (a Supervisor's
			// next Broker opens the same kept index).
			b.cancel()
			b.wg.Wait()
			_ = b.stopReplication()
			_ = b.stopMetrics(context.Background())
			b.register.halt(context.Background())
			b.closeStores()
			b.shutdown.Store(true) // a Shutdown after a failed Start has nothing to stop
			b.markClosed()
		}
	}()
	root := b.cfg.StorePathRootDir
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("create store root %s: %w", root, err)
	}
	// The ACL file and the TLS certificate first: a broker that cannot
	// check access or serve TLS stops before it recovers its store.
	if err := checkAuthConfig(b.cfg); err != nil {
		return err
	}
	if b.acl, err = b.openACL(); err != nil {
		return err
	}
	tlsMode, tlsConfig, err := b.listenerTLS()
	if err != nil {
		return err
	}
	// Before the stores: the dispatcher they start counts the timer's
	// records taken in (timer.Options.TakenIn).
	b.stats = brokerstats.New(b.cfg.BrokerClusterName, b.statsClock)
	b.stats.Tick() // the windows' first samples, before anything is counted
	if b.shared != nil {
		// Behind a Supervisor the timer's callbacks, which run before
		// this Broker's metrics start, count in the process's.
		if m := b.shared.metrics.current(); m != nil {
			b.earlyMetrics.Store(m)
		}
	}
	if err := b.openStores(ctx); err != nil {
		return err
	}
	b.initMaxOffset = b.clog.MaxOffset()
	if b.ctl != nil && b.ctl.storesOpen != nil {
		if err := b.ctl.storesOpen(b); err != nil {
			return err
		}
	}
	if b.auth, err = b.openAuth(); err != nil {
		return err
	}
	if p := b.predecessor; p != nil && p.clients != nil {
		// A role switch keeps the clients' connections: their
		// registrations and locks stay as RocketMQ's one
		// BrokerController keeps them.
		b.clients, b.locks = p.clients, p.locks
		b.clients.setOwner(b)
		b.predecessor = nil
	} else {
		b.clients = newClientManager(b)
		b.locks = newLockManager(time.Minute)
	}
	b.holds = newPullHolds(b)
	b.coldReads = newColdReads(b.current, b.log)
	b.coldReads.period = b.coldPassPeriod
	b.coldHolds = newColdPullHolds(func() bool { return b.current().ColdDataFlowControlEnable })
	b.coldHolds.period = b.coldScanPeriod
	b.coldScan = newColdScan(b.clog, b.current, b.log)
	b.coldScan.period = b.coldCheckPeriod
	b.hotBytes = b.memBytes * int64(memoryRatio(b.cfg)) / 100
	b.register = newRegistrar(b)
	b.assignRoutes = newAssignRoutes(b)
	if err := b.topics.ensureSystemTopics(); err != nil {
		return err
	}
	if b.importedStore {
		// After ensureSystemTopics: the topics the broker creates at
		// every start (its name's, its cluster's, the reply and trace
		// topics) are routed, with the queues it gives them.
		if err := b.warnUnroutedQueues(); err != nil {
			return err
		}
	}
	if err := b.ensureSystemGroups(); err != nil {
		return err
	}
	if err := b.completeTopicDeletions(); err != nil {
		return err
	}
	if err := b.slaveTopicsAtStart(); err != nil {
		return err
	}
	if err := b.importRocketMQPop(); err != nil {
		return err
	}
	// Before anything that puts messages (revive): a SYNC_MASTER's puts
	// wait for slaves.
	if err := b.startReplication(); err != nil {
		return err
	}
	if b.cfg.TimerWheelEnable {
		b.countWaitingTimers()
	}
	// The metrics first: the pop service's revive loop counts DLQ moves
	// as soon as it starts.
	if err := b.startMetrics(); err != nil {
		return err
	}
	if err := b.startPop(); err != nil {
		return err
	}

	if !b.isSlave() {
		if err := b.correctDelayProgress(); err != nil {
			return err
		}
		if err := b.startDelayMarks(ctx); err != nil {
			return err
		}
	}
	b.mux = remoting.NewMux()
	b.routes()
	var handler remoting.Handler = b.mux
	if b.acl != nil {
		handler = aclHandler{b: b, guard: b.acl, next: b.mux}
	}
	if b.cfg.Auth.Enabled() {
		handler = authHandler{b: b, s: b.auth, next: b.mux}
	}
	// The server is created last: when it is listening the broker must be
	// able to answer everything.
	scfg := remoting.ServerConfig{Addr: b.cfg.ListenAddr(b.cfg.ListenPort), TLSMode: tlsMode, TLS: tlsConfig}
	listenconf.Apply(&scfg, b.cfg.Listener, b.cfg.ProxyProtocol)
	if b.metrics != nil {
		// rocketmq_rpc_latency, on both ports as RocketMQ records it.
		scfg.OnAnswer = b.metrics.Answered
	}
	if b.shared != nil {
		b.server, b.fastServer = b.shared.main, b.shared.fast
		if b.metrics != nil {
			answered := b.metrics.Answered
			b.shared.answered.Store(&answered)
		}
		b.served = b.shared.gate.attach(handler)
	} else {
		if err := b.startFastChannel(ctx, handler, scfg); err != nil {
			return err
		}
		b.server = remoting.NewServer(scfg, handler, b.component("remoting"))
		if err := b.server.Start(ctx); err != nil {
			return fmt.Errorf("listen on port %d: %w", b.cfg.ListenPort, err)
		}
	}
	if b.cfg.ListenPort == 0 {
		if a, ok := b.server.Addr().(*net.TCPAddr); ok {
			b.storeHost = netip.AddrPortFrom(b.storeHost.Addr(), uint16(a.Port))
		}
	}
	if b.tlsWatch != nil {
		b.goBackground("tls-watch", func(ctx context.Context) { b.tlsWatch.Run(ctx, certwatch.DefaultInterval) })
	}
	b.goBackground("client-expiry", b.clients.expireLoop)
	b.goBackground("lock-expiry", b.locks.expireLoop)
	b.goBackground("index-sync", b.syncLoop)
	b.register.start()
	b.register.awaitFirst(ctx)
	b.startActingMaster()
	if !b.isSlave() {
		// They put messages; a slave's come from its master.
		b.goBackground("schedule", b.scheduleLoop)
		b.goBackground("transaction-check", b.txns.Run)
		b.goBackground("timer", b.timers.Run)
	}
	b.goBackground("stats", b.stats.Run)
	b.goBackground("static-topic-clean", b.staticCleanLoop)
	b.goBackground("cold-read-accounting", b.coldReads.run)
	b.goBackground("cold-pull-holds", b.coldHolds.run)
	b.goBackground("cold-page-cache-scan", b.coldScan.run)
	b.holds.start()
	b.log.Info().Str("addr", b.Addr()).Str("store", root).Str("storeType", b.cfg.StoreType).
		Str("indexWalSync", b.cfg.IndexWALSyncMode()).
		Dur("startup", time.Since(b.started)).Msg("broker started")
	return nil
}

// openStores opens the index, the CommitLog and the ConsumeQueue, recovers
// and catches the dispatcher up.
func (b *Broker) openStores(ctx context.Context) error {
	root := b.cfg.StorePathRootDir
	walSync := kvindex.WALSyncAlways
	if b.cfg.IndexWALSyncMode() == configs.IndexWALSyncInterval {
		walSync = kvindex.WALSyncInterval
	}
	opts := kvindex.Options{Dir: filepath.Join(root, kvindex.DirName), Logger: b.root,
		WALSync: walSync, CacheSize: int64(b.cfg.IndexBlockCacheMiB) << 20}
	var db *kvindex.DB
	var err error
	if b.keptIndex != nil {
		db, err = b.keptIndex.open(opts)
	} else {
		db, err = kvindex.Open(opts)
	}
	if err != nil {
		return fmt.Errorf("open index: %w", err)
	}
	b.db = db
	firstOpen, kvPop, err := importRocketMQConfig(db, root, b.cfg.EnableLMQ, b.component("import"))
	if err != nil {
		return err
	}
	b.kvPop = kvPop
	from, err := db.Dispatched()
	if err != nil {
		return err
	}
	lcfg := commitlog.DefaultConfig(root)
	lcfg.SegmentDir = b.cfg.CommitLogDir()
	lcfg.SegmentSize = b.cfg.MappedFileSizeCommitLog
	if b.cfg.FlushDiskType == configs.SyncFlush {
		lcfg.FlushType = commitlog.SyncFlush
	}
	lcfg.FlushInterval = b.cfg.FlushIntervalCommitLog
	lcfg.FlushLeastPages = b.cfg.FlushCommitLogLeastPages
	lcfg.WakeFlushOnAppend = b.cfg.WakeFlushWhenPutMessage
	lcfg.FlushThoroughInterval = b.cfg.FlushCommitLogThorough
	lcfg.SyncFlushTimeout = b.cfg.SyncFlushTimeout
	lcfg.ReadUncommitted = b.cfg.ReadUnCommitted
	lcfg.MaxMessageSize = b.cfg.MaxMessageSize
	lcfg.CheckCRCOnRecover = b.cfg.CheckCRCOnRecover
	lcfg.AppendPropCRC = b.cfg.EnabledAppendPropCRC
	lcfg.ForceVerifyPropCRC = b.cfg.ForceVerifyPropCRC
	lcfg.RandomReads = !b.cfg.DataReadAheadEnable
	// The retention rules come from retentionOf, as UPDATE_BROKER_CONFIG's do.
	rules := retentionOf(&b.cfg)
	lcfg.FileReservedTime = rules.FileReservedTime
	lcfg.DeleteWhen = rules.DeleteWhen
	lcfg.DiskMaxUsedSpaceRatio = rules.DiskMaxUsedSpaceRatio
	lcfg.KeepUnexpiredWhenFull = rules.KeepUnexpiredWhenFull
	lcfg.DiskForceCleanRatio = rules.DiskForceCleanRatio
	lcfg.DiskWarningLevelRatio = rules.DiskWarningLevelRatio
	lcfg.CleanInterval = b.cfg.CleanResourceInterval
	lcfg.RecoverFrom = from
	lcfg.StoreHost = b.storeHost
	lcfg.Logger = b.root
	lcfg.BeforeFlush = b.beforeFlush
	lcfg.Replica = b.isSlave()
	cut := b.cutAt
	if cut > 0 {
		if !b.isSlave() {
			return fmt.Errorf("cut the CommitLog at %d: only a slave's (brokerRole=SLAVE) is cut: a master's records are the messages it acknowledged", cut)
		}
		if done, err := cutDone(root); err != nil {
			return err
		} else if done == cut {
			// The flag left in a service's command line: cutting again
			// would drop what the master sent since.
			b.log.Warn().Int64("cutAt", cut).Str("file", filepath.Join(root, cutDoneFile)).
				Msg("the CommitLog was cut at this offset already; not cutting again (remove --cut-commitlog-at)")
			cut = 0
		}
		lcfg.CutAt = cut
	}
	clog, err := commitlog.Open(lcfg)
	if err != nil {
		return fmt.Errorf("open commitlog: %w", err)
	}
	b.clog = clog
	if rules.FileReservedTime == 0 {
		// fileReservedTime=0 keeps no sealed segment, as RocketMQ reads
		// it and as an update to 0 applies it at once; commitlog.Config
		// takes 0 for its default (72 h).
		clog.SetRetention(rules)
	}
	if cut > 0 {
		if b.recoveryStep != nil {
			b.recoveryStep(stepCommitLogCut)
		}
		if err := atomicfile.WriteFile(filepath.Join(root, cutDoneFile), formatCutDone(cut), 0o644); err != nil {
			return fmt.Errorf("note the CommitLog's cut at %d: %w", cut, err)
		}
		info := clog.RecoveryInfo()
		b.log.Warn().Int64("cutAt", cut).Int64("cutBytes", info.CutBytes).
			Msg("slave's CommitLog cut where it parted from its master's; the index drops what it held past the cut and the master sends the rest")
	}

	if err := b.openConsumeQueues(db, clog, firstOpen); err != nil {
		return err
	}
	if firstOpen {
		if err := db.MarkRocketMQConfigImported(time.Now().UnixMilli()); err != nil {
			return err
		}
	}
	b.qoffsets = kvindex.NewQueueOffsets(b.cqs, b.cfg.QueueOffsetCacheSize, b.component("queue-offsets"))
	b.notifier = kvindex.NewNotifier()
	tcfg := txnConfig(b.cfg)
	tcfg.Dispatched = func() int64 { return b.disp.Dispatched() }
	tcfg.HalfQueueMin = func() (int64, error) { return b.cqs.MinOffset(meta.TransHalfTopic, 0) }
	tcfg.NewUniqID = b.uniq.Next
	tcfg.WaitDispatched = func(ctx context.Context, end int64) error { return b.disp.WaitFor(ctx, end) }
	tcfg.FileReservedTime = func() time.Duration { return b.current().FileReservedTime }
	tcfg.Limits = func() txn.Limits {
		c := b.current()
		return txn.Limits{Timeout: c.TransactionTimeOut, CheckInterval: c.TransactionCheckInterval, CheckMax: c.TransactionCheckMax}
	}
	tcfg.OnEnd = func(topic string, state kvindex.TxnState, bornMs int64) {
		b.metrics.TransactionEnded(topic, state == kvindex.TxnCommit, time.Since(time.UnixMilli(bornMs)))
	}
	b.txns = txn.New(tcfg, db.Transactions(), recordStore{b: b}, b.askTransaction, b.root)
	b.timers = timer.New(db.Timers(), recordStore{b: b}, timer.Options{Progress: db.RocketMQTimerProgress, QueueProgress: db.RocketMQTimerQueueOffset,
		Dispatched: func() int64 { return b.disp.Dispatched() }, Paused: func() bool { return b.current().TimerStopDequeue },
		StopEnqueue: func() bool { return b.current().TimerStopEnqueue },
		// Run on a master only: a slave saves its master's (slavesync.go).
		SavedReadTime: func() (int64, bool, error) {
			ms, ok, err := db.TimerReadTime()
			if ok || err != nil {
				return ms, ok, err
			}
			// The first start on a moved RocketMQ store: its timer's.
			return db.RocketMQTimerProgress()
		},
		SaveReadTime: db.SetTimerReadTime,
		// The dispatcher indexes parked messages before the exporter starts.
		Enqueued:   func(topic string, d time.Duration) { b.earlyMetrics.Load().TimerEnqueued(topic, d) },
		Dequeued:   func(topic string) { b.earlyMetrics.Load().TimerDequeued(topic) },
		TakenIn:    func() { b.stats.TimerTook(1) },
		Put:        b.stats.TimerPut,
		Properties: b.recordProperties, Precision: b.timerCfg.Precision, RollWindow: b.timerCfg.RollWindow,
		OneByOne: b.isSlave}, b.root)
	if b.cfg.EnableCompaction {
		if b.compaction, err = openCompaction(db); err != nil {
			return err
		}
	}
	hooks := map[string]kvindex.Hook{meta.TransHalfTopic: b.txns.HalfHook(), meta.TransOpHalfTopic: b.txns.OpHook(),
		meta.TimerTopic: b.timers.Hook()}
	for topic, h := range b.dispatchHooks {
		hooks[topic] = h
	}
	b.disp, err = kvindex.NewDispatcher(kvindex.DispatcherOptions{
		Log: clog, DB: db, Store: b.cqs, Mirror: b.cqMirror, FileFlushInterval: b.cfg.FlushIntervalConsumeQueue,
		OpenFileLayout: b.openFileLayoutReadOnly, Offsets: b.qoffsets, Notifier: b.notifier,
		SkipKeyIndex: !b.cfg.MessageIndexEnable, MultiDispatch: b.cfg.EnableLMQ && b.cfg.EnableMultiDispatch, MaxLagBytes: b.cfg.MaxDispatchLagBytes, BatchInterval: b.cfg.DispatchBatchInterval,
		Hooks: hooks, CommitHook: b.txns.CommitHook(), Compaction: b.compaction, Logger: b.root, DelayLevels: b.delayLevels,
		RecoveryStep: b.recoveryStep, NewTopic: b.newTopicHook(), Replica: b.isSlave(),
		QueueRestarted: b.queueRestartedHook(),
	})
	if err != nil {
		return err
	}
	if _, err := b.disp.Recover(); err != nil {
		return err
	}
	minSubs := []func(int64){b.disp.LogMinOffsetChanged, b.txns.LogMinOffsetChanged}
	if b.compaction != nil {
		minSubs = append(minSubs, b.compactionRetention(b.disp))
	}
	if b.ctl != nil {
		// Controller mode: the epochs of deleted segments leave the
		// epoch file, as RocketMQ's store truncates its prefix.
		minSubs = append(minSubs, b.ctl.epochs.FollowRetention(b.log))
	}
	for _, fn := range minSubs {
		clog.OnMinOffsetChange(fn)
	}
	// The log's cleaner runs from Open: segments a pass deleted since (a
	// start in the deleteWhen hour, or on a full disk) told no one. Each
	// subscriber takes a minimum it applied already as nothing to do.
	minOff := clog.MinOffset()
	for _, fn := range minSubs {
		fn(minOff)
	}
	if b.ctl != nil {
		b.holdUnconfirmed(clog)
	}
	b.disp.Start()
	if err := b.catchUpDispatch(ctx); err != nil {
		return fmt.Errorf("dispatch the CommitLog tail: %w", err)
	}
	if b.topics, err = newTopicManager(b); err != nil {
		return err
	}
	if err := b.dropRocketMQDeletedTopics(); err != nil {
		return err
	}
	b.importedStore = firstOpen
	if b.groups, err = db.Groups(0); err != nil {
		return err
	}
	forbidden, err := db.GroupForbiddens(0)
	if err != nil {
		return err
	}
	if b.mappings, err = db.TopicQueueMappings(0); err != nil {
		return err
	}
	if err := b.refreshStaticNames(); err != nil {
		return err
	}
	if b.forbidden, err = newForbiddenGroups(forbidden); err != nil {
		return err
	}
	b.offsets = db.ConsumerOffsets()
	return nil
}

// openConsumeQueues opens the ConsumeQueue layouts the config asks for:
// storeType's, which serves reads, and under rocksdbCQDoubleWriteEnable
// the other one beside it.
func (b *Broker) openConsumeQueues(db *kvindex.DB, clog *commitlog.Log, firstOpen bool) error {
	root := b.cfg.StorePathRootDir
	// Read from the files only when a layout needs them: a kv-only
	// restart lists no consumequeue/ directory.
	units := 0
	unitsPerFile := func() int {
		if units == 0 {
			units = cqUnitsPerFile(root, int(b.cfg.MappedFileSizeConsumeQueue/filecq.UnitSize), b.component("filecq"))
		}
		return units
	}
	readFile := b.cfg.StoreType == configs.StoreTypeFile
	var fileStarts []kvindex.QueueStart // for the file layout, from RocketMQ's RocksDB ConsumeQueue
	if !readFile || b.cfg.CQDoubleWrite {
		b.kvCQ = db.ConsumeQueue(b.cfg.ConsumeQueueCacheSize)
	}
	if firstOpen {
		// Before the file layout is opened for writing: this reads
		// RocketMQ's consumequeue/ as it was left.
		// After a crash, RocketMQ's ConsumeQueue is complete only below
		// where its recovery scan dispatches again.
		complete := clog.MaxOffset()
		if info := clog.RecoveryInfo(); info.Abnormal {
			complete = info.FirstScanned
		}
		if _, err := os.Stat(filepath.Join(root, "consumequeue")); errors.Is(err, os.ErrNotExist) {
			b.importedWithoutCQ = true
		}
		var err error
		fileLayout := "" // the setting that writes the file layout
		switch {
		case readFile:
			fileLayout = "storeType=" + configs.StoreTypeFile
		case b.cfg.CQDoubleWrite:
			fileLayout = "rocksdbCQDoubleWriteEnable=true"
		}
		if fileStarts, err = takeOverRocketMQQueues(db, b.kvCQ, root, unitsPerFile(), clog.MinOffset(), clog.MaxOffset(), complete, fileLayout, b.component("import")); err != nil {
			return err
		}
	}
	if readFile || b.cfg.CQDoubleWrite {
		fs, err := filecq.Open(filecq.Options{
			Dir:          root,
			UnitsPerFile: unitsPerFile(),
			StoreTime:    b.storeTimeOf,
			Logger:       b.root,
			RefillGap:    func(g filecq.Gap) ([]cq.Entry, error) { return refillConsumeQueueGap(clog, g, b.delayLevels) },
		})
		if err != nil {
			return fmt.Errorf("open file consumequeue: %w", err)
		}
		if err := seedFileStarts(fs, fileStarts, b.component("import")); err != nil {
			return errors.Join(err, fs.Close())
		}
		b.fileCQ = fs
	}
	switch {
	case readFile && b.kvCQ != nil:
		b.cqs, b.cqMirror = b.fileCQ, b.kvCQ
	case readFile:
		b.cqs = b.fileCQ
	case b.fileCQ != nil:
		b.cqs, b.cqMirror = b.kvCQ, b.fileCQ
	default:
		b.cqs = b.kvCQ
	}
	if b.cqMirror != nil {
		b.log.Info().Str("reads", b.cfg.StoreType).Msg("ConsumeQueue double-write: both layouts are written")
	}
	return nil
}

// openFileLayoutReadOnly opens the store's file ConsumeQueue for reading
// alone (the dispatcher asks for it when it rebuilds the Pebble one while
// the files are not written).
func (b *Broker) openFileLayoutReadOnly() (cq.Store, error) {
	root := b.cfg.StorePathRootDir
	return filecq.OpenReadOnly(filecq.Options{
		Dir:          root,
		UnitsPerFile: cqUnitsPerFile(root, int(b.cfg.MappedFileSizeConsumeQueue/filecq.UnitSize), b.component("filecq")),
		StoreTime:    b.storeTimeOf,
		Logger:       b.root,
	})
}

// component returns the process logger tagged with a component name.
func (b *Broker) component(name string) zerolog.Logger {
	return b.root.With().Str("component", name).Logger()
}

// storeTimeOf reads a record's store timestamp from the CommitLog (the
// file ConsumeQueue keeps none).
func (b *Broker) storeTimeOf(phy int64, size int32) (int64, error) {
	v, err := b.clog.Read(phy, size)
	if err != nil {
		return 0, err
	}
	defer v.Release()
	m, err := commitlog.Decode(v.Data)
	if err != nil {
		return 0, err
	}
	return m.StoreTimestamp, nil
}

// goBackground runs fn on a goroutine owned by the broker; Shutdown cancels
// its context and waits for it.
func (b *Broker) goBackground(name string, fn func(ctx context.Context)) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn(b.ctx)
		b.log.Debug().Str("task", name).Msg("background task stopped")
	}()
}

// syncLoop syncs the index's WAL every second, or every
// indexWalSyncIntervalMillis under indexWalSync=interval. Writes made
// without sync (lazy offset commits, dispatch batches, transaction check
// counts) wait in Pebble's WAL buffer, in the process's memory, until the
// next synced write or this loop: a process crash loses at most this long
// of them. Durable writes in interval mode reach the WAL file when they
// are made (they survive a process crash) and the disk with this loop (a
// power failure loses at most this long of them).
func (b *Broker) syncLoop(ctx context.Context) {
	every := time.Second
	if b.cfg.IndexWALSyncMode() == configs.IndexWALSyncInterval {
		every = b.cfg.IndexWALSyncInterval
	}
	periodic.Run(ctx, every, func(context.Context) {
		if err := b.db.SyncWAL(); err != nil {
			b.log.Error().Err(err).Msg("sync index WAL")
		}
	})
}

// Shutdown unregisters from the name servers, with enableShutdownGracefully
// tells clients newer than RocketMQ 5.3.1 to go away for
// shutdownWaitTimeSeconds while serving the others, on the main port and
// then, once that is closed, on the fast port (as RocketMQ's broker; see
// GoAwayWait), stops serving, and closes the stores cleanly (the
// next start is a normal recovery). The stores close
// only once every request handler has returned: when ctx ends before the
// servers stopped, Shutdown returns that error at once and the rest of the
// stop, the close of the stores included, runs when the last handler
// returns (Closed tells when). Until then the store is as after a crash.
func (b *Broker) Shutdown(ctx context.Context) error {
	if b.cancel == nil {
		b.markClosed() // never started: nothing to stop
		return nil
	}
	if b.shutdown.Swap(true) {
		// Stopped by an earlier Shutdown or a failed Start: wait for
		// that stop, as long as ctx allows.
		select {
		case <-b.closed:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("shutdown: the stop under way has not finished: %w", ctx.Err())
		}
	}
	b.register.unregisterAll(ctx)
	// enableShutdownGracefully: RocketMQ's broker stops its two servers
	// one after the other, each after its own wait: the main port tells
	// newer clients to go away while the fast port serves, then closes;
	// then the fast port does the same. Held requests stay held during
	// the main port's wait.
	b.goAway(ctx, b.server)
	b.holds.releaseAll()
	b.coldHolds.release()
	b.popHolds.releaseAll()
	if b.shared != nil {
		return b.leaveSharedServers(ctx)
	}
	var errs []error
	var running []*remoting.Server
	for _, s := range []*remoting.Server{b.server, b.fastServer} {
		if s == nil {
			continue
		}
		if s == b.fastServer {
			b.goAway(ctx, s)
		}
		if err := s.Shutdown(ctx); err != nil {
			errs = append(errs, err)
			running = append(running, s)
		}
	}
	if len(running) > 0 {
		b.log.Error().Errs("errors", errs).
			Msg("request handlers still run at the shutdown deadline; the stores close when they return")
		go func() {
			for _, s := range running {
				<-s.Stopped()
			}
			stopCtx, cancel := context.WithTimeout(context.Background(), lateStopTimeout)
			defer cancel()
			if err := b.finishShutdown(stopCtx); err != nil {
				b.log.Error().Err(err).Msg("late stop after the last handler returned")
			}
		}()
		return errors.Join(errs...)
	}
	return errors.Join(append(errs, b.finishShutdown(ctx))...)
}

// leaveSharedServers is Shutdown's stop of the serving for a Broker
// behind a Supervisor's servers, which outlive it: the fast port's
// graceful wait, then the gate stops handing it requests and waits for
// the ones it took, then the stop goes on (finishShutdown) as when the
// Broker's own servers stopped; the connections stay open.
func (b *Broker) leaveSharedServers(ctx context.Context) error {
	if b.fastServer != nil {
		b.goAway(ctx, b.fastServer)
	}
	if b.metrics != nil {
		b.shared.answered.Store(nil)
	}
	if b.served == nil {
		return b.finishShutdown(ctx)
	}
	if err := b.shared.gate.detach(ctx, b.served); err != nil {
		b.log.Error().Err(err).Msg("request handlers still run at the shutdown deadline; the stores close when they return")
		go func() {
			<-b.served.drained
			stopCtx, cancel := context.WithTimeout(context.Background(), lateStopTimeout)
			defer cancel()
			if err := b.finishShutdown(stopCtx); err != nil {
				b.log.Error().Err(err).Msg("late stop after the last handler returned")
			}
		}()
		return err
	}
	return b.finishShutdown(ctx)
}

// goAway runs s's graceful wait (remoting.Server.GoAway), when s is
// there and the stop is not a role switch's.
func (b *Broker) goAway(ctx context.Context, s *remoting.Server) {
	if s == nil || b.noGoAway.Load() {
		return
	}
	if err := s.GoAway(ctx); err != nil {
		b.log.Warn().Err(err).Msg("graceful shutdown wait cut short")
	}
}

// stopForSwitch is Shutdown without the graceful waits of
// enableShutdownGracefully, for a controller-mode role switch
// (Supervisor.switchTo): the waits are there for a broker that goes
// away, so that clients move to others first; at a switch the broker
// comes back on the same ports at once, and every second of a wait is
// one the group has no master (a slave being elected) or a demoted
// master goes on taking sends for the old epoch. With the default
// shutdownWaitTimeSeconds (30 s) the wait also outlasted the switch's
// own stop deadline, so the switch failed until the next answer of the
// controller.
func (b *Broker) stopForSwitch(ctx context.Context) error {
	b.noGoAway.Store(true)
	return b.Shutdown(ctx)
}

// GoAwayWait is how long Shutdown's graceful waits take in all
// (enableShutdownGracefully): shutdownWaitTimeSeconds for each of the
// broker's servers, the main port's and the fast port's, which RocketMQ
// stops one after the other.
func (b *Broker) GoAwayWait() time.Duration {
	n := time.Duration(0)
	for _, s := range []*remoting.Server{b.server, b.fastServer} {
		if s != nil {
			n++
		}
	}
	return n * b.cfg.Listener.GoAwayWait()
}

// lateStopTimeout bounds what a stop that outlived Shutdown's context
// waits for (the metrics exporter's open scrapes).
const lateStopTimeout = 5 * time.Second

// finishShutdown is the part of Shutdown that runs once no request handler
// runs: it stops the background work and closes the stores, then closes
// the channel Closed returns.
func (b *Broker) finishShutdown(ctx context.Context) error {
	defer b.markClosed()
	var errs []error
	b.holds.stop()
	if err := b.stopMetrics(ctx); err != nil {
		errs = append(errs, err)
	}
	b.cancel()
	b.wg.Wait()
	// Replication ends after the background work: a delay round that
	// delivered before the stop still waits for its slaves (a bounded
	// time) to record its progress, or the next start would deliver the
	// same messages again.
	if err := b.stopReplication(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, b.closeStores()...)
	b.log.Info().Msg("broker stopped")
	return errors.Join(errs...)
}

// Closed is closed once Shutdown has closed the stores, which a Shutdown
// whose context ended before the last request handler returned leaves to
// the moment it does (at once for a broker never started, and once a
// failed Start has closed what it opened).
func (b *Broker) Closed() <-chan struct{} { return b.closed }

// markClosed closes the channel Closed returns, once.
func (b *Broker) markClosed() { b.closeOnce.Do(func() { close(b.closed) }) }

// closeStores closes whatever openStores opened, in reverse order.
func (b *Broker) closeStores() []error {
	var errs []error
	if err := b.stopPop(); err != nil {
		errs = append(errs, err)
	}
	if b.disp != nil {
		if err := b.disp.Close(); err != nil {
			errs = append(errs, err)
		}
		b.disp = nil
	}
	if b.fileCQ != nil {
		if err := b.fileCQ.Close(); err != nil {
			errs = append(errs, err)
		}
		b.fileCQ = nil
	}
	if b.clog != nil {
		b.clogMu.Lock()
		if err := b.clog.Close(); err != nil {
			errs = append(errs, err)
		}
		b.clog = nil
		b.clogMu.Unlock()
	}
	if b.db != nil {
		b.popCopies.closeAll()
		// A Supervisor's index stays open for the next Broker
		// (keptIndex); the Supervisor closes it.
		if b.keptIndex == nil {
			if err := b.db.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		b.db = nil
	}
	return errs
}

// topicConfig is a shorthand for the topic manager's lookup.
func (b *Broker) topicConfig(topic string) (meta.TopicConfig, bool, error) {
	return b.topics.get(topic)
}

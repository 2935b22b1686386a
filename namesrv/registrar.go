package namesrv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/remoting"
)

// ErrNoNameServer is returned by Registrar calls when no name server
// address is configured.
var ErrNoNameServer = errors.New("no name server address")

// ErrUnavailable is wrapped by the Registration of a name server that
// Register left out: its last connection attempt failed and no Scan has
// connected to it since.
var ErrUnavailable = errors.New("name server not connectable since its last connection attempt failed")

// BrokerInfo identifies the broker a Registrar speaks for.
type BrokerInfo struct {
	// ClusterName is brokerClusterName.
	ClusterName string
	// BrokerName is brokerName (the group).
	BrokerName string
	// BrokerAddr is "ip:port" clients connect to.
	BrokerAddr string
	// BrokerID is 0 for a master.
	BrokerID int64
	// HAServerAddr is "ip:haPort" slaves replicate from.
	HAServerAddr string
	// ZoneName is sent as ext field __ZONE_NAME when not empty.
	ZoneName string
	// EnableActingMaster is sent as enableActingMaster (a 5.x broker
	// always sends it).
	EnableActingMaster bool
	// HeartbeatTimeout is sent as heartbeatTimeoutMillis when positive;
	// the name server's default is 120 s.
	HeartbeatTimeout time.Duration
	// Compressed sends the compressed body form (Java's compressedRegister;
	// unlike Java, the header's "compressed" field then says true, which
	// both Java's and this name server need to decode it).
	Compressed bool
}

// Registration is one name server's answer to a registration.
type Registration struct {
	// NameServer is the address asked.
	NameServer string
	// Result carries the master's addresses for a slave.
	Result RegisterResult
	// OrderTopicConfig is the ORDER_TOPIC_CONFIG table the name server
	// returned, if any.
	OrderTopicConfig map[string]string
	// Err is why this name server did not accept the registration.
	Err error
}

// Registrar registers one broker with every name server. Brokers call
// Register every 30 s (registerNameServerPeriod) with a 24 s timeout
// (with forceRegister off, only when NeedRegister says so) and Unregister
// at shutdown. Safe for concurrent use.
//
// Like RocketMQ's broker (BrokerOuterAPI.registerBrokerAll takes
// NettyRemotingClient.getAvailableNameSrvList), Register reaches only the
// name servers it can connect to: one whose connection attempt failed is
// left out until Scan, which the broker runs every 3 s, connects to it
// again, so that a name server down costs each registration nothing
// rather than a connect timeout. An address never tried is tried.
//
// The registrar closes the pool's connections to the name servers
// SetNameServers removes (see there): its pool must not be shared with
// anything that still needs a connection to such an address. The
// broker's pool serves the registrar and route fetches from the same
// list (PreferAvailable), nothing else.
type Registrar struct {
	pool *remoting.ClientPool
	log  zerolog.Logger

	mu    sync.RWMutex // guards addrs, down and retired
	addrs []string
	// down are the addresses whose last connection attempt failed.
	down map[string]bool
	// retired are the addresses SetNameServers removed that are not
	// configured again; Scan closes the pool's connections to them.
	// Bounded by the distinct addresses ever removed.
	retired map[string]bool
}

// ParseNameServers splits a namesrvAddr value ("host:port;host:port") into
// addresses, dropping blanks.
func ParseNameServers(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// NewRegistrar returns a registrar that reaches the name servers in
// namesrvAddrs ("host:port;host:port") through pool.
func NewRegistrar(pool *remoting.ClientPool, namesrvAddrs string, log zerolog.Logger) *Registrar {
	return &Registrar{pool: pool, log: log, addrs: ParseNameServers(namesrvAddrs),
		down: make(map[string]bool), retired: make(map[string]bool)}
}

// SetNameServers replaces the name server addresses and closes the
// pool's connections to those it removed, as RocketMQ's
// NettyRemotingClient.updateNameServerAddressList closes the channel of
// its chosen name server once that is no longer listed (rocketkv closes
// every removed one's: no request goes to them any more). Calls in
// flight to a removed name server fail with remoting.ErrAddrClosed. One
// that a registration or route fetch under way dials again afterwards
// is closed by the next Scan.
func (r *Registrar) SetNameServers(namesrvAddrs string) {
	addrs := ParseNameServers(namesrvAddrs)
	r.mu.Lock()
	var removed []string
	for _, a := range r.addrs {
		if !slices.Contains(addrs, a) {
			removed = append(removed, a)
			r.retired[a] = true
		}
	}
	for _, a := range addrs {
		delete(r.retired, a)
	}
	r.addrs = addrs
	for a := range r.down {
		if !slices.Contains(addrs, a) {
			delete(r.down, a)
		}
	}
	r.mu.Unlock()
	for _, a := range removed {
		r.pool.CloseAddr(a)
	}
	if len(removed) > 0 {
		r.log.Info().Strs("namesrv", removed).Msg("name servers removed: their connections closed")
	}
}

// closeRetired closes the pool's connections to the addresses
// SetNameServers removed, in case a request under way at the change
// dialed one of them again (CloseAddr does nothing for an address
// without one).
func (r *Registrar) closeRetired() {
	r.mu.RLock()
	retired := make([]string, 0, len(r.retired))
	for a := range r.retired {
		retired = append(retired, a)
	}
	r.mu.RUnlock()
	for _, a := range retired {
		r.pool.CloseAddr(a)
	}
}

// NameServers returns the current name server addresses.
func (r *Registrar) NameServers() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]string(nil), r.addrs...)
}

// Available returns the name server addresses Register reaches: all but
// those whose last connection attempt failed.
func (r *Registrar) Available() []string {
	_, avail := r.snapshot()
	return avail
}

// PreferAvailable returns every name server address, those Register
// reaches (Available) first and then those whose last connection attempt
// failed, each part in namesrvAddr order: the order to ask them for a
// route (FetchRoute), so that a name server known down costs a route
// request a dial only when no available one gave the route.
func (r *Registrar) PreferAvailable() []string {
	all, avail := r.snapshot()
	for _, a := range all {
		if !slices.Contains(avail, a) {
			avail = append(avail, a)
		}
	}
	return avail
}

// snapshot returns the name server addresses and the available ones,
// read together.
func (r *Registrar) snapshot() (all, avail []string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	avail = make([]string, 0, len(r.addrs))
	for _, a := range r.addrs {
		if !r.down[a] {
			avail = append(avail, a)
		}
	}
	return append([]string(nil), r.addrs...), avail
}

// Scan connects to every name server (an open connection is reused, a
// closed one dialed again), each within timeout, and records which ones
// Register may reach, as RocketMQ's scanAvailableNameSrv does every
// connectTimeoutMillis. It returns the addresses that were left out and
// are connectable again. Nothing is recorded once ctx has ended. It first
// closes any connection to a name server SetNameServers removed.
func (r *Registrar) Scan(ctx context.Context, timeout time.Duration) (back []string) {
	r.closeRetired()
	addrs := r.NameServers()
	ok := make([]bool, len(addrs))
	skip := make([]bool, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			_, err := r.pool.Get(dctx, addr)
			ok[i] = err == nil
			// Removed meanwhile (its dial discarded): nothing learnt.
			skip[i] = errors.Is(err, remoting.ErrAddrClosed)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	for i, addr := range addrs {
		if !skip[i] && r.setDown(addr, !ok[i]) && ok[i] {
			back = append(back, addr)
		}
	}
	return back
}

// setDown records whether addr is connectable and reports whether that
// changed; an address no longer configured is left alone.
func (r *Registrar) setDown(addr string, down bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down[addr] == down || !slices.Contains(r.addrs, addr) {
		return false
	}
	if down {
		r.down[addr] = true
		r.log.Warn().Str("namesrv", addr).Msg("name server not connectable: registrations leave it out until it is again")
	} else {
		delete(r.down, addr)
		r.log.Info().Str("namesrv", addr).Msg("name server connectable again")
	}
	return true
}

// connect returns the pool's client of addr, dialing it if need be; a
// failed dial (not one cut short by ctx, nor discarded because
// SetNameServers removed addr) marks addr not connectable.
func (r *Registrar) connect(ctx context.Context, addr string) error {
	_, err := r.pool.Get(ctx, addr)
	if err != nil && ctx.Err() == nil && !errors.Is(err, remoting.ErrAddrClosed) {
		r.setDown(addr, true)
	}
	return err
}

// header builds the ext fields shared by the broker's requests.
func (info *BrokerInfo) header() remoting.Header {
	h := remoting.Header{
		"brokerName":  info.BrokerName,
		"brokerAddr":  info.BrokerAddr,
		"clusterName": info.ClusterName,
	}
	h.SetInt64("brokerId", info.BrokerID)
	return h
}

// Register sends REGISTER_BROKER with body to every available name server
// at once and waits for all answers (or ctx). It returns one Registration
// per name server, in address order (one left out has an error wrapping
// ErrUnavailable), and an error only when none accepted the registration.
func (r *Registrar) Register(ctx context.Context, info BrokerInfo, body *RegisterBrokerBody) ([]Registration, error) {
	addrs, avail := r.snapshot()
	if len(addrs) == 0 {
		return nil, ErrNoNameServer
	}
	data, err := body.Encode(info.Compressed)
	if err != nil {
		return nil, fmt.Errorf("register broker %s: %w", info.BrokerName, err)
	}
	h := info.header()
	h.Set("haServerAddr", info.HAServerAddr)
	h.SetBool("enableActingMaster", info.EnableActingMaster)
	h.SetBool("compressed", info.Compressed)
	h.SetInt32("bodyCrc32", int32(crc32.ChecksumIEEE(data)&0x7FFFFFFF))
	if info.HeartbeatTimeout > 0 {
		h.SetInt64("heartbeatTimeoutMillis", info.HeartbeatTimeout.Milliseconds())
	}
	if info.ZoneName != "" {
		h.Set(extZoneName, info.ZoneName)
	}
	answered := r.each(ctx, avail, func(ctx context.Context, addr string) Registration {
		reg := Registration{NameServer: addr}
		if err := r.connect(ctx, addr); err != nil {
			reg.Err = fmt.Errorf("register broker %s with %s: %w", info.BrokerName, addr, err)
			return reg
		}
		resp, err := r.pool.Invoke(ctx, addr, remoting.NewRequest(remoting.RegisterBroker, h, data))
		if err == nil && resp.Code != remoting.Success {
			err = fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
		}
		if err != nil {
			reg.Err = fmt.Errorf("register broker %s with %s: %w", info.BrokerName, addr, err)
			return reg
		}
		reg.Result = RegisterResult{HAServerAddr: resp.ExtFields["haServerAddr"], MasterAddr: resp.ExtFields["masterAddr"]}
		if len(resp.Body) > 0 {
			table, err := decodeOrderTopicConfig(resp.Body)
			if err != nil {
				r.log.Warn().Err(err).Str("namesrv", addr).Msg("register broker: the answer's ORDER_TOPIC_CONFIG table is not JSON; ignored")
			} else {
				reg.OrderTopicConfig = table
			}
		}
		return reg
	})
	results := make([]Registration, 0, len(addrs))
	for _, addr := range addrs {
		if i := slices.Index(avail, addr); i >= 0 {
			results = append(results, answered[i])
			continue
		}
		results = append(results, Registration{NameServer: addr,
			Err: fmt.Errorf("register broker %s with %s: %w", info.BrokerName, addr, ErrUnavailable)})
	}
	return results, allFailed(results)
}

// Unregister sends UNREGISTER_BROKER to every name server; the error joins
// the failures.
func (r *Registrar) Unregister(ctx context.Context, info BrokerInfo) error {
	return r.simple(ctx, remoting.UnregisterBroker, info.header(), nil, "unregister broker "+info.BrokerName)
}

// NeedRegister asks the available name servers (those Register reaches)
// with QUERY_DATA_VERSION whether any lacks data version dv of the
// broker's topics, as RocketMQ's BrokerController.needRegister does
// before a periodic registration when forceRegister is off. A name
// server that says changed, answers with another version, fails or
// cannot be connected needs the registration. Each name server asked
// renews the broker, as a registration does.
//
// RocketMQ's BrokerOuterAPI.needRegister asks every configured name
// server, so one that is down makes every periodic registration a full
// one (to the available name servers, the only ones it reaches) after a
// connect timeout. One that cannot be connected is left out here
// instead: a registration would not reach it either, and Scan triggers
// one when it can be connected again. With no available name server it
// reports true, so that the registration reports the failure.
func (r *Registrar) NeedRegister(ctx context.Context, info BrokerInfo, dv DataVersion) (bool, error) {
	addrs, avail := r.snapshot()
	if len(addrs) == 0 {
		return false, ErrNoNameServer
	}
	if len(avail) == 0 {
		return true, nil
	}
	h := info.header()
	body := dv.appendJSON(nil)
	changed := make([]bool, len(avail))
	results := r.each(ctx, avail, func(ctx context.Context, addr string) Registration {
		res := Registration{NameServer: addr}
		ch, err := r.queryDataVersion(ctx, addr, h, body, dv)
		if err != nil {
			res.Err = fmt.Errorf("query data version at %s: %w", addr, err)
		}
		changed[slices.Index(avail, addr)] = ch
		return res
	})
	need := false
	var errs []error
	for i, res := range results {
		if res.Err != nil || changed[i] {
			need = true
		}
		if res.Err != nil {
			errs = append(errs, res.Err)
		}
	}
	return need, errors.Join(errs...)
}

// queryDataVersion asks the name server at addr whether it lacks data
// version dv (body) of the broker in h: true when it says changed (or
// says nothing) or answers with a version other than dv, as RocketMQ's
// BrokerOuterAPI.needRegister reads the answer.
func (r *Registrar) queryDataVersion(ctx context.Context, addr string, h remoting.Header, body []byte, dv DataVersion) (bool, error) {
	if err := r.connect(ctx, addr); err != nil {
		return true, err
	}
	resp, err := r.pool.Invoke(ctx, addr, remoting.NewRequest(remoting.QueryDataVersion, h, body))
	if err != nil {
		return true, err
	}
	if resp.Code != remoting.Success {
		return true, fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
	}
	if remoting.Header(resp.ExtFields).OptBool("changed", true) {
		return true, nil
	}
	if len(resp.Body) > 0 {
		known, err := decodeDataVersion(resp.Body)
		if err != nil {
			return true, err
		}
		return known != dv, nil
	}
	return false, nil
}

// decodeOrderTopicConfig reads the body of a name server's answer to
// REGISTER_BROKER: the KVTable {"table":{topic:conf}} of the
// ORDER_TOPIC_CONFIG namespace (nil when the table is absent or null).
func decodeOrderTopicConfig(body []byte) (map[string]string, error) {
	table, err := adminbody.DecodeKVTable(body)
	if err != nil {
		return nil, fmt.Errorf("decode the name server's ORDER_TOPIC_CONFIG table: %w", err)
	}
	return table, nil
}

// decodeDataVersion reads the body of a name server's answer to
// QUERY_DATA_VERSION: the DataVersion it holds for the broker.
func decodeDataVersion(body []byte) (DataVersion, error) {
	var known DataVersion
	if err := json.Unmarshal(body, &known); err != nil {
		return DataVersion{}, fmt.Errorf("decode the name server's data version: %w", err)
	}
	return known, nil
}

// simple sends one request to every name server and joins the failures.
func (r *Registrar) simple(ctx context.Context, code int32, h remoting.Header, body []byte, what string) error {
	addrs := r.NameServers()
	if len(addrs) == 0 {
		return ErrNoNameServer
	}
	return r.invokeEach(ctx, addrs, code, h, body, 0, false, what)
}

// invokeEach sends the request to each of addrs at once, each within
// timeout when it is positive, and joins the failures, each named with
// what and the address. A oneway request waits for no answer (its
// failures are those of the send).
func (r *Registrar) invokeEach(ctx context.Context, addrs []string, code int32, h remoting.Header, body []byte, timeout time.Duration, oneway bool, what string) error {
	results := r.each(ctx, addrs, func(ctx context.Context, addr string) Registration {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		var err error
		if oneway {
			err = r.pool.InvokeOneway(ctx, addr, remoting.NewRequest(code, h, body))
		} else {
			var resp *remoting.Command
			resp, err = r.pool.Invoke(ctx, addr, remoting.NewRequest(code, h, body))
			if err == nil && resp.Code != remoting.Success {
				err = fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
			}
		}
		if err != nil {
			err = fmt.Errorf("%s at %s: %w", what, addr, err)
		}
		return Registration{NameServer: addr, Err: err}
	})
	var errs []error
	for _, res := range results {
		if res.Err != nil {
			errs = append(errs, res.Err)
		}
	}
	return errors.Join(errs...)
}

// each runs fn for every address on its own goroutine and waits for all;
// results are in address order. The ext map is shared read-only.
func (r *Registrar) each(ctx context.Context, addrs []string, fn func(context.Context, string) Registration) []Registration {
	results := make([]Registration, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() {
			results[i] = fn(ctx, addr)
			if results[i].Err != nil {
				r.log.Warn().Err(results[i].Err).Msg("name server request failed")
			}
		})
	}
	wg.Wait()
	return results
}

// allFailed returns the joined errors when every registration failed.
func allFailed(results []Registration) error {
	errs := make([]error, 0, len(results))
	for _, res := range results {
		if res.Err == nil {
			return nil
		}
		errs = append(errs, res.Err)
	}
	return fmt.Errorf("no name server accepted the registration (%s): %w",
		strconv.Itoa(len(results))+" tried", errors.Join(errs...))
}

// Heartbeat sends BROKER_HEARTBEAT for the broker to every available
// name server at once, each within timeout (sendHeartbeatTimeoutMillis),
// as RocketMQ's broker does every brokerHeartbeatInterval under
// enableSlaveActingMaster: it renews the broker's registration, which
// then lapses after the heartbeatTimeoutMillis it registered with. The
// error joins the failures.
func (r *Registrar) Heartbeat(ctx context.Context, info BrokerInfo, timeout time.Duration) error {
	avail := r.Available()
	if len(r.NameServers()) == 0 {
		return ErrNoNameServer
	}
	h := remoting.Header{"clusterName": info.ClusterName, "brokerAddr": info.BrokerAddr, "brokerName": info.BrokerName}
	return r.invokeEach(ctx, avail, remoting.BrokerHeartbeat, h, nil, timeout, false, "broker heartbeat")
}

// MemberGroup asks the available name servers in turn, each within
// timeout, for the members of broker group brokerName of cluster
// (GET_BROKER_MEMBER_GROUP), and returns the first answer: the members'
// addresses by broker id, empty when the name server knows none. It
// fails when no name server answered.
func (r *Registrar) MemberGroup(ctx context.Context, cluster, brokerName string, timeout time.Duration) (map[int64]string, error) {
	addrs := r.PreferAvailable()
	if len(addrs) == 0 {
		return nil, ErrNoNameServer
	}
	h := remoting.Header{"clusterName": cluster, "brokerName": brokerName}
	var errs []error
	for _, addr := range addrs {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := r.pool.Invoke(cctx, addr, remoting.NewRequest(remoting.GetBrokerMemberGroup, h, nil))
		cancel()
		if err == nil && resp.Code != remoting.Success {
			err = fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
		}
		var members map[int64]string
		if err == nil {
			members, err = DecodeMemberGroup(resp.Body)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("members of broker group %s from name server %s: %w", brokerName, addr, err))
			continue
		}
		return members, nil
	}
	return nil, errors.Join(errs...)
}

// DecodeMemberGroup reads GET_BROKER_MEMBER_GROUP's answer body,
// RocketMQ's GetBrokerMemberGroupResponseBody, as this name server writes
// it (quoted ids) or a Java one (fastjson's bare ids): the members'
// addresses by broker id. An empty body is no member.
func DecodeMemberGroup(body []byte) (map[int64]string, error) {
	if len(body) == 0 {
		return map[int64]string{}, nil
	}
	var wire struct {
		BrokerMemberGroup struct {
			BrokerAddrs map[int64]string `json:"brokerAddrs"`
		} `json:"brokerMemberGroup"`
	}
	if err := adminbody.UnmarshalFastjson(body, &wire); err != nil {
		return nil, fmt.Errorf("decode broker member group: %w", err)
	}
	if wire.BrokerMemberGroup.BrokerAddrs == nil {
		return map[int64]string{}, nil
	}
	return wire.BrokerMemberGroup.BrokerAddrs, nil
}

// HeartbeatViaDataVersion renews the broker's registration with every
// available name server by a oneway QUERY_DATA_VERSION whose body is dv,
// the data version of the broker's topics, each sent within timeout
// (sendHeartbeatTimeoutMillis): RocketMQ's broker heartbeats so under
// enableSlaveActingMaster with compatibleWithOldNameSrv
// (BrokerOuterAPI.sendHeartbeatViaDataVersion). Every name server serves
// that request, a 4.x one too, which has no BROKER_HEARTBEAT: a 5.x one
// (and rocketkv's) renews the broker whatever the version says, a 4.x
// one only while it equals the version of the broker's last
// registration, which dv is (the topics' version the registrations
// carry). The answer is not waited for.
// The error joins the failures to send.
func (r *Registrar) HeartbeatViaDataVersion(ctx context.Context, info BrokerInfo, dv DataVersion, timeout time.Duration) error {
	avail := r.Available()
	if len(r.NameServers()) == 0 {
		return ErrNoNameServer
	}
	return r.invokeEach(ctx, avail, remoting.QueryDataVersion, info.header(), dv.appendJSON(nil), timeout, true, "heartbeat by data version")
}

// MemberGroupFromRoute is MemberGroup for name servers without
// GET_BROKER_MEMBER_GROUP (RocketMQ 4.x), as RocketMQ's broker asks under
// compatibleWithOldNameSrv (BrokerOuterAPI.getBrokerMemberGroupCompatible):
// the members are the addresses of the BrokerData of cluster and
// brokerName in the route of SyncBrokerMemberGroupPrefix+brokerName
// (GET_ROUTEINFO_BY_TOPIC), a topic every broker of the group creates at
// start and registers. The available name servers are asked in turn,
// each within timeout; the first route answered gives the members, none
// when it has no BrokerData of the group. A name server without the
// route (TOPIC_NOT_EXIST: it knows no member yet) is passed over, and
// when none has it no member is known. It fails when no name server
// answered.
func (r *Registrar) MemberGroupFromRoute(ctx context.Context, cluster, brokerName string, timeout time.Duration) (map[int64]string, error) {
	addrs := r.PreferAvailable()
	if len(addrs) == 0 {
		return nil, ErrNoNameServer
	}
	topic := SyncBrokerMemberGroupPrefix + brokerName
	h := remoting.Header{"topic": topic}
	var errs []error
	notFound := false
	for _, addr := range addrs {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := r.pool.Invoke(cctx, addr, remoting.NewRequest(remoting.GetRouteInfoByTopic, h, nil))
		cancel()
		if err == nil && resp.Code == remoting.TopicNotExist {
			notFound = true
			continue
		}
		if err == nil && resp.Code != remoting.Success {
			err = fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
		}
		var members map[int64]string
		if err == nil {
			members, err = membersFromRoute(resp.Body, cluster, brokerName)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("members of broker group %s from the route of %s at name server %s: %w", brokerName, topic, addr, err))
			continue
		}
		return members, nil
	}
	if notFound {
		return map[int64]string{}, nil
	}
	return nil, errors.Join(errs...)
}

// membersFromRoute reads the members of broker group brokerName of
// cluster from a GET_ROUTEINFO_BY_TOPIC answer body: the brokerAddrs of
// its BrokerData, by broker id (none when the route has no such
// BrokerData or the body is empty). The body is standard JSON or, from a
// name server older than 4.9.4, fastjson's with bare integer keys.
func membersFromRoute(body []byte, cluster, brokerName string) (map[int64]string, error) {
	members := map[int64]string{}
	if len(body) == 0 {
		return members, nil
	}
	var route TopicRouteData
	if err := adminbody.UnmarshalFastjson(body, &route); err != nil {
		return nil, fmt.Errorf("decode route: %w", err)
	}
	for _, bd := range route.BrokerDatas {
		if bd.BrokerName == brokerName && bd.Cluster == cluster {
			maps.Copy(members, bd.BrokerAddrs)
			break
		}
	}
	return members, nil
}

package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// crashChildEnv carries a crashSpec (JSON) to a crash-test child: the test
// binary started again, running one controller peer until SIGKILL.
const crashChildEnv = "ROCKETKV_CONTROLLER_CRASH_CHILD"

// crashSpec is what a crash-test child runs: one peer of Peers, its store
// and the file its log lines go to.
type crashSpec struct {
	Peers string `json:"peers"`
	Self  string `json:"self"`
	Store string `json:"store"`
	Log   string `json:"log"`
}

// TestMain runs a crash-test child when crashChildEnv is set, the tests
// otherwise.
func TestMain(m *testing.M) {
	if spec := os.Getenv(crashChildEnv); spec != "" {
		os.Exit(runCrashChild(spec))
	}
	os.Exit(m.Run())
}

// crashConfig is a crash-test peer's configuration: quick raft timers (a
// loaded machine still elects), and a snapshot every 16 entries keeping 4
// behind it, so every run compacts the log and a restart starts from a
// snapshot.
func crashConfig(s crashSpec) Config {
	cfg := DefaultConfig()
	cfg.Group = "group1"
	cfg.Peers, cfg.SelfID, cfg.StorePath = s.Peers, s.Self, s.Store
	cfg.RaftTimeout = 300 * time.Millisecond
	cfg.ScanNotActiveBrokerInterval = 100 * time.Millisecond
	cfg.ScanInactiveMasterInterval = 100 * time.Millisecond
	cfg.SnapshotThreshold = 16
	cfg.SnapshotInterval = 50 * time.Millisecond
	cfg.TrailingLogs = 4
	return cfg
}

// runCrashChild serves one controller peer on its peer address, says
// "ready ADDR" and runs until killed.
func runCrashChild(text string) int {
	var s crashSpec
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		fmt.Fprintf(os.Stderr, "crash child spec %q: %v\n", text, err)
		return 2
	}
	f, err := os.OpenFile(s.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "crash child log: %v\n", err)
		return 2
	}
	log := zerolog.New(f).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	log.Info().Int("pid", os.Getpid()).Msg("crash child starting")
	cfg := crashConfig(s)
	_, self, err := cfg.validate()
	if err != nil {
		fmt.Fprintf(os.Stderr, "crash child config: %v\n", err)
		return 2
	}
	h, err := StartHost(context.Background(), Options{Config: cfg, Log: log}, remoting.ServerConfig{Addr: self.Addr})
	if err != nil {
		fmt.Fprintf(os.Stderr, "crash child %s: %v\n", s.Self, err)
		return 2
	}
	fmt.Printf("ready %s\n", h.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig // SIGKILL ends it first
	return 0
}

// crashPeer is one controller child of a crash test.
type crashPeer struct {
	id, addr, spec, log string
	cmd                 *exec.Cmd
}

// crashCluster runs controller peers as child processes on stores that
// outlive them.
type crashCluster struct {
	t     *testing.T
	peers []*crashPeer
}

// newCrashCluster lays out n peers (raft on the port after each peer's);
// none runs yet.
func newCrashCluster(t *testing.T, n int) *crashCluster {
	t.Helper()
	dir := t.TempDir()
	var ports []int
	for len(ports) < n {
		p := crashPortPair(t)
		if slices.ContainsFunc(ports, func(q int) bool { return p >= q-1 && p <= q+1 }) {
			continue
		}
		ports = append(ports, p)
	}
	var list []string
	for i, p := range ports {
		list = append(list, fmt.Sprintf("n%d-127.0.0.1:%d", i, p))
	}
	c := &crashCluster{t: t}
	for i, p := range ports {
		id := fmt.Sprintf("n%d", i)
		s := crashSpec{Peers: strings.Join(list, ";"), Self: id, Store: filepath.Join(dir, id), Log: filepath.Join(dir, id+".log")}
		spec, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		c.peers = append(c.peers, &crashPeer{id: id, addr: fmt.Sprintf("127.0.0.1:%d", p), spec: string(spec), log: s.Log})
	}
	t.Cleanup(func() {
		for i := range c.peers {
			c.kill(i)
		}
	})
	return c
}

// crashPortPair returns a port free with the next one, both below the
// kernel's ephemeral range: a peer restarted after a kill binds them
// again, and in that range the local port of some outgoing connection
// (the test dials a lot) may have taken one meanwhile.
func crashPortPair(t *testing.T) int {
	t.Helper()
	lo := 32768 // Linux's default start of ip_local_port_range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 11000 {
				lo = v
			}
		}
	}
	for range 1000 {
		port := 10000 + rand.Intn(lo-10001)
		l1, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l2, err := net.Listen("tcp", fmt.Sprintf(":%d", port+1))
		_ = l1.Close()
		if err != nil {
			continue
		}
		_ = l2.Close()
		return port
	}
	t.Fatal("no free pair of ports below the ephemeral range")
	return 0
}

func (c *crashCluster) start(i int) {
	c.t.Helper()
	p := c.peers[i]
	p.cmd, _ = testutil.StartChild(c.t, crashChildEnv+"="+p.spec)
}

// killEarly starts peer i and SIGKILLs it after d, whether or not it is
// ready by then: a kill while it opens its store, restores a snapshot,
// replays its log or (on a new store) bootstraps raft.
func (c *crashCluster) killEarly(i int, d time.Duration) {
	c.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+c.peers[i].spec)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	time.Sleep(d)
	testutil.KillChild(cmd)
}

// kill SIGKILLs peer i (when it runs) and waits for it to be gone.
func (c *crashCluster) kill(i int) {
	if p := c.peers[i]; p.cmd != nil {
		testutil.KillChild(p.cmd)
		p.cmd = nil
	}
}

// logs returns the tail of every peer's log, for a failure message.
func (c *crashCluster) logs() string {
	var sb strings.Builder
	for _, p := range c.peers {
		data, _ := os.ReadFile(p.log)
		if len(data) > 6000 {
			data = data[len(data)-6000:]
		}
		fmt.Fprintf(&sb, "--- %s log (tail)\n%s\n", p.id, data)
	}
	return sb.String()
}

// leader waits until a running peer leads and answers requests, and
// returns its index.
func (c *crashCluster) leader() int {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for i, p := range c.peers {
			if p.cmd == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			cl, err := remoting.Dial(ctx, p.addr, remoting.ClientOptions{})
			if err == nil {
				resp, err := cl.Invoke(ctx, remoting.NewRequest(remoting.ControllerGetMetadataInfo, nil, nil))
				_ = cl.Close()
				if err == nil && resp.ExtFields["isLeader"] == "true" {
					cancel()
					return i
				}
			}
			cancel()
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no controller leads within 30 s\n%s", c.logs())
	return -1
}

func (c *crashCluster) dial(i int) *remoting.Client {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := remoting.Dial(ctx, c.peers[i].addr, remoting.ClientOptions{})
	if err != nil {
		c.t.Fatalf("dial %s: %v", c.peers[i].id, err)
	}
	return cl
}

// groupState is a broker group as the controller must hold it: what the
// acknowledged requests made of it.
type groupState struct {
	next        int64
	addrs       map[int64]string
	masterEpoch int32
	master      int64 // 0: none
	setEpoch    int32
	set         []int64
}

func (s groupState) clone() groupState {
	s.addrs = maps.Clone(s.addrs)
	s.set = slices.Clone(s.set)
	return s
}

func (s groupState) String() string {
	return fmt.Sprintf("{next %d addrs %v masterEpoch %d master %d syncStateSetEpoch %d syncStateSet %v}",
		s.next, s.addrs, s.masterEpoch, s.master, s.setEpoch, s.set)
}

func (s groupState) equal(o groupState) bool {
	return s.next == o.next && maps.Equal(s.addrs, o.addrs) && s.masterEpoch == o.masterEpoch &&
		s.master == o.master && s.setEpoch == o.setEpoch && slices.Equal(s.set, o.set)
}

// crashGroup drives one broker group as its brokers would, one request
// at a time, and keeps what the controller acknowledged.
type crashGroup struct {
	index int
	name  string
	rng   *rand.Rand
	seq   int
	acked groupState
	// pending is the group after the request in flight when the
	// controller died, which may or may not have been applied.
	pending *groupState
	// codes are the check codes ids were applied with.
	codes map[int64]string
	// counts counts acknowledged changes by kind.
	counts map[string]int
}

func newCrashGroups(n int, seed int64) []*crashGroup {
	var out []*crashGroup
	for i := range n {
		out = append(out, &crashGroup{
			index: i, name: fmt.Sprintf("broker-%d", i), rng: rand.New(rand.NewSource(seed + int64(i))),
			acked: groupState{next: FirstBrokerID, addrs: map[int64]string{}, set: []int64{}},
			codes: map[int64]string{}, counts: map[string]int{},
		})
	}
	return out
}

// errStopped ends a group's run without a verdict: the controller died or
// stepped down under a request, which is left pending.
var errStopped = errors.New("stopped")

func crashCall(cl *remoting.Client, code int32, ext map[string]string, body []byte) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Invoke(ctx, remoting.NewRequest(code, ext, body))
}

// change sends a request that changes the group to want when answered
// SUCCESS. A request the controller died under, or answered "not the
// leader" or "system error" (raft could not commit: the entry may still
// be applied), leaves want pending and stops the run.
func (g *crashGroup) change(cl *remoting.Client, kind string, want groupState, code int32, ext map[string]string, body []byte) (*remoting.Command, error) {
	w := want.clone()
	g.pending = &w
	resp, err := crashCall(cl, code, ext, body)
	if err != nil {
		return nil, errStopped
	}
	switch resp.Code {
	case remoting.Success:
		g.acked, g.pending = want, nil
		g.counts[kind]++
		return resp, nil
	case remoting.ControllerNotLeader, remoting.SystemError:
		return nil, errStopped
	}
	return nil, fmt.Errorf("%s %s: code %d (%s); acknowledged state %v", g.name, kind, resp.Code, resp.Remark, g.acked)
}

func (g *crashGroup) heartbeat(cl *remoting.Client, id int64) error {
	resp, err := crashCall(cl, remoting.BrokerHeartbeat, map[string]string{
		"clusterName": "c1", "brokerName": g.name, "brokerAddr": g.acked.addrs[id], "brokerId": itoa(id),
		"epoch": strconv.Itoa(int(g.acked.masterEpoch)), "maxOffset": "0", "confirmOffset": "0",
		"heartbeatTimeoutMills": "120000", "electionPriority": "1",
	}, nil)
	if err != nil || resp.Code != remoting.Success {
		return errStopped
	}
	return nil
}

func (g *crashGroup) members() []int64 { return slices.Sorted(maps.Keys(g.acked.addrs)) }

// run sends requests until stop closes or the controller goes; it returns
// a non-nil error other than errStopped for an answer the acknowledged
// state does not allow.
func (g *crashGroup) run(cl *remoting.Client, stop <-chan struct{}) error {
	// Liveness is not replicated: every member says it is up, the master
	// first (so the controller never sees the master down while another
	// member is up, and re-elects on its own).
	if g.acked.master != 0 {
		if err := g.heartbeat(cl, g.acked.master); err != nil {
			return err
		}
	}
	for _, id := range g.members() {
		if id != g.acked.master {
			if err := g.heartbeat(cl, id); err != nil {
				return err
			}
		}
	}
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := g.step(cl); err != nil {
			return err
		}
	}
}

func (g *crashGroup) step(cl *remoting.Client) error {
	s := g.acked
	members := g.members()
	r := g.rng.Float64()
	switch {
	case len(members) == 0 || (len(members) < 5 && r < 0.2):
		return g.applyID(cl)
	case s.master == 0:
		return g.elect(cl, members[g.rng.Intn(len(members))], false)
	case r < 0.4:
		return g.register(cl, members[g.rng.Intn(len(members))])
	case r < 0.65 || len(s.set) < 2:
		return g.alter(cl)
	case r < 0.8:
		others := slices.DeleteFunc(slices.Clone(s.set), func(id int64) bool { return id == s.master })
		return g.elect(cl, others[g.rng.Intn(len(others))], true)
	case r < 0.9:
		return g.applyTaken(cl, members[g.rng.Intn(len(members))])
	default:
		return g.readReplicaInfo(cl)
	}
}

func (g *crashGroup) applyID(cl *remoting.Client) error {
	resp, err := crashCall(cl, remoting.ControllerGetNextBrokerID, map[string]string{"clusterName": "c1", "brokerName": g.name}, nil)
	if err != nil || resp.Code == remoting.ControllerNotLeader || resp.Code == remoting.SystemError {
		return errStopped
	}
	if resp.Code != remoting.Success || resp.ExtFields["nextBrokerId"] != itoa(g.acked.next) {
		return fmt.Errorf("%s next broker id: code %d %v, acknowledged state %v", g.name, resp.Code, resp.ExtFields, g.acked)
	}
	id := g.acked.next
	g.seq++
	addr := fmt.Sprintf("10.%d.%d.%d:30911", g.index, g.seq/250, g.seq%250)
	code := fmt.Sprintf("%s;%d", addr, 1700000000000+g.seq)
	want := g.acked.clone()
	want.addrs[id] = addr
	want.next++
	if _, err := g.change(cl, "apply", want, remoting.ControllerApplyBrokerID, map[string]string{
		"clusterName": "c1", "brokerName": g.name, "appliedBrokerId": itoa(id), "registerCheckCode": code,
	}, nil); err != nil {
		return err
	}
	g.codes[id] = code
	return g.heartbeat(cl, id)
}

// applyTaken applies for an acknowledged id with another broker's check
// code: an id is never handed out twice.
func (g *crashGroup) applyTaken(cl *remoting.Client, id int64) error {
	g.seq++
	resp, err := crashCall(cl, remoting.ControllerApplyBrokerID, map[string]string{
		"clusterName": "c1", "brokerName": g.name, "appliedBrokerId": itoa(id),
		"registerCheckCode": fmt.Sprintf("10.99.%d.%d:1;%d", g.index, g.seq%250, g.seq),
	}, nil)
	if err != nil || resp.Code == remoting.ControllerNotLeader || resp.Code == remoting.SystemError {
		return errStopped
	}
	if resp.Code != remoting.ControllerBrokerIDInvalid {
		return fmt.Errorf("%s: id %d (applied with %q) handed out again: code %d %s", g.name, id, g.codes[id], resp.Code, resp.Remark)
	}
	return nil
}

func (g *crashGroup) register(cl *remoting.Client, id int64) error {
	g.seq++
	addr := fmt.Sprintf("10.%d.%d.%d:40911", g.index, g.seq/250, g.seq%250)
	want := g.acked.clone()
	want.addrs[id] = addr
	resp, err := g.change(cl, "register", want, remoting.ControllerRegisterBroker, map[string]string{
		"clusterName": "c1", "brokerName": g.name, "brokerId": itoa(id), "brokerAddress": addr,
	}, nil)
	if err != nil {
		return err
	}
	// The master is alive (it heartbeats), so the answer names it.
	if s := g.acked; resp.ExtFields["masterBrokerId"] != itoa(s.master) || resp.ExtFields["masterEpoch"] != strconv.Itoa(int(s.masterEpoch)) {
		return fmt.Errorf("%s register %d answered master %v, acknowledged state %v", g.name, id, resp.ExtFields, s)
	}
	if id != g.acked.master {
		return nil
	}
	// The master's heartbeat follows its new address.
	return g.heartbeat(cl, id)
}

// elect asks for id as the group's master: the first election
// (designated false) or a designated one, as mqadmin electMaster asks.
func (g *crashGroup) elect(cl *remoting.Client, id int64, designated bool) error {
	want := g.acked.clone()
	want.masterEpoch++
	want.master = id
	want.setEpoch++
	want.set = []int64{id}
	resp, err := g.change(cl, "elect", want, remoting.ControllerElectMaster, map[string]string{
		"clusterName": "c1", "brokerName": g.name, "brokerId": itoa(id), "designateElect": strconv.FormatBool(designated),
	}, nil)
	if err != nil {
		return err
	}
	return g.checkElected(resp)
}

func (g *crashGroup) checkElected(resp *remoting.Command) error {
	s := g.acked
	if resp.ExtFields["masterBrokerId"] != itoa(s.master) || resp.ExtFields["masterEpoch"] != strconv.Itoa(int(s.masterEpoch)) ||
		resp.ExtFields["syncStateSetEpoch"] != strconv.Itoa(int(s.setEpoch)) {
		return fmt.Errorf("%s elect answered %v, want %v", g.name, resp.ExtFields, s)
	}
	return nil
}

// alter has the master report a new sync state set: itself and a random
// choice of the other members.
func (g *crashGroup) alter(cl *remoting.Client) error {
	s := g.acked
	set := []int64{s.master}
	for _, id := range g.members() {
		if id != s.master && g.rng.Intn(2) == 0 {
			set = append(set, id)
		}
	}
	slices.Sort(set)
	if slices.Equal(set, s.set) {
		if len(set) > 1 {
			set = []int64{s.master}
		} else {
			for _, id := range g.members() {
				if id != s.master {
					set = sortedIDs(append(set, id))
					break
				}
			}
		}
	}
	if slices.Equal(set, s.set) {
		// A group of one: nothing to alter.
		return g.register(cl, s.master)
	}
	want := s.clone()
	want.set = set
	want.setEpoch++
	resp, err := g.change(cl, "alter", want, remoting.ControllerAlterSyncStateSet, map[string]string{
		"brokerName": g.name, "masterBrokerId": itoa(s.master), "masterEpoch": strconv.Itoa(int(s.masterEpoch)), "invokeTime": "1",
	}, SyncStateSetBody{SyncStateSet: set, SyncStateSetEpoch: s.setEpoch}.Encode())
	if err != nil {
		return err
	}
	if resp.ExtFields["newSyncStateSetEpoch"] != strconv.Itoa(int(want.setEpoch)) {
		return fmt.Errorf("%s alter answered %v, want epoch %d", g.name, resp.ExtFields, want.setEpoch)
	}
	return nil
}

func (g *crashGroup) readReplicaInfo(cl *remoting.Client) error {
	resp, err := crashCall(cl, remoting.ControllerGetReplicaInfo, map[string]string{"brokerName": g.name}, nil)
	if err != nil || resp.Code == remoting.ControllerNotLeader || resp.Code == remoting.SystemError {
		return errStopped
	}
	s := g.acked
	set, derr := DecodeSyncStateSet(resp.Body)
	if resp.Code != remoting.Success || derr != nil || resp.ExtFields["masterEpoch"] != strconv.Itoa(int(s.masterEpoch)) ||
		resp.ExtFields["masterBrokerId"] != itoa(s.master) || resp.ExtFields["masterAddress"] != s.addrs[s.master] ||
		set.SyncStateSetEpoch != s.setEpoch || !slices.Equal(set.SyncStateSet, s.set) {
		return fmt.Errorf("%s replica info: code %d %v %s (%v), acknowledged state %v", g.name, resp.Code, resp.ExtFields, resp.Body, derr, s)
	}
	return nil
}

// observe reads every group from the controller cl reaches, over
// Remoting as mqadmin and brokers do: GET_SYNC_STATE_DATA for members,
// master and sync state set, GET_NEXT_BROKER_ID for the next id.
func observe(cl *remoting.Client, groups []*crashGroup) (map[string]groupState, error) {
	var names []string
	for _, g := range groups {
		names = append(names, g.name)
	}
	body, err := json.Marshal(names)
	if err != nil {
		return nil, err
	}
	resp, err := crashCall(cl, remoting.ControllerGetSyncStateData, nil, body)
	if err != nil {
		return nil, fmt.Errorf("get sync state data: %w", err)
	}
	if resp.Code == remoting.ControllerNotLeader {
		return nil, errStopped
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("get sync state data: code %d %s", resp.Code, resp.Remark)
	}
	info, err := DecodeBrokerReplicasInfo(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]groupState{}
	for _, g := range groups {
		s := groupState{addrs: map[int64]string{}, set: []int64{}}
		if ri, ok := info.ReplicasInfoTable[g.name]; ok {
			s.masterEpoch, s.setEpoch = ri.MasterEpoch, ri.SyncStateSetEpoch
			if ri.MasterBrokerID != nil {
				s.master = *ri.MasterBrokerID
			}
			for _, r := range ri.InSyncReplicas {
				s.set = append(s.set, r.BrokerID)
				s.addrs[r.BrokerID] = r.BrokerAddress
			}
			for _, r := range ri.NotInSyncReplicas {
				s.addrs[r.BrokerID] = r.BrokerAddress
			}
			slices.Sort(s.set)
		}
		resp, err := crashCall(cl, remoting.ControllerGetNextBrokerID, map[string]string{"clusterName": "c1", "brokerName": g.name}, nil)
		if err != nil {
			return nil, fmt.Errorf("get next broker id of %s: %w", g.name, err)
		}
		if resp.Code == remoting.ControllerNotLeader {
			return nil, errStopped
		}
		if resp.Code != remoting.Success {
			return nil, fmt.Errorf("get next broker id of %s: code %d %s", g.name, resp.Code, resp.Remark)
		}
		if s.next, err = strconv.ParseInt(resp.ExtFields["nextBrokerId"], 10, 64); err != nil {
			return nil, fmt.Errorf("next broker id of %s: %w", g.name, err)
		}
		out[g.name] = s
	}
	return out, nil
}

// crashTotals counts what a crash test went through.
type crashTotals struct {
	kills, inFlight, appliedInFlight int
	changes                          map[string]int
}

// verify finds the leader and checks that it holds every acknowledged
// change of every group, and at most the one request that was in flight
// besides: the group is exactly its acknowledged state, or that state
// with the request in flight applied. It returns the leader's index (a
// leader that steps down under the reads is looked for again).
func (c *crashCluster) verify(groups []*crashGroup, tot *crashTotals) int {
	c.t.Helper()
	for try := 0; ; try++ {
		i := c.leader()
		cl := c.dial(i)
		got, err := observe(cl, groups)
		_ = cl.Close()
		if errors.Is(err, errStopped) && try < 10 {
			continue
		}
		if err != nil {
			c.t.Fatalf("read the state back from %s: %v\n%s", c.peers[i].id, err, c.logs())
		}
		for _, g := range groups {
			s := got[g.name]
			switch {
			case s.equal(g.acked):
			case g.pending != nil && s.equal(*g.pending):
				g.acked = *g.pending
				tot.appliedInFlight++
			default:
				pending := "none"
				if g.pending != nil {
					pending = g.pending.String()
				}
				c.t.Fatalf("%s after the kill: controller %s has %v; acknowledged %v, in flight %s\n%s", g.name, c.peers[i].id, s, g.acked, pending, c.logs())
			}
			g.pending = nil
		}
		return i
	}
}

// drive runs every group against the leader at peer i until the returned
// stop function is called (after a kill): it then waits for the groups and
// fails the test on any answer their acknowledged state does not allow.
func (c *crashCluster) drive(i int, groups []*crashGroup, tot *crashTotals) func() {
	c.t.Helper()
	stop := make(chan struct{})
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	var clients []*remoting.Client
	for j, g := range groups {
		cl := c.dial(i)
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[j] = g.run(cl, stop)
		}()
	}
	return func() {
		c.t.Helper()
		close(stop)
		wg.Wait()
		for _, cl := range clients {
			_ = cl.Close()
		}
		for _, g := range groups {
			if g.pending != nil {
				tot.inFlight++
			}
		}
		for _, err := range errs {
			if err != nil && !errors.Is(err, errStopped) {
				c.t.Fatalf("%v\n%s", err, c.logs())
			}
		}
	}
}

// snapshotted reports whether peer i's store (the peer not running) has a
// snapshot and a log compacted behind it, so that its next start has to
// restore the snapshot.
func (c *crashCluster) snapshotted(i int) bool {
	c.t.Helper()
	store := filepath.Join(filepath.Dir(c.peers[i].log), c.peers[i].id)
	snaps, _ := os.ReadDir(filepath.Join(store, "snapshots"))
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(store, "raft.db")})
	if err != nil {
		c.t.Fatalf("open %s's raft log: %v", c.peers[i].id, err)
	}
	defer bolt.Close()
	first, err := bolt.FirstIndex()
	if err != nil {
		c.t.Fatalf("read %s's raft log: %v", c.peers[i].id, err)
	}
	return len(snaps) > 0 && first > 1
}

// checkCutSnapshots fails the test when the store of peer i (not
// running) holds more than one half-written snapshot: the one its last
// kill may have cut is fine, older ones must have been removed by the
// start after the kill that cut them.
func (c *crashCluster) checkCutSnapshots(i int) {
	c.t.Helper()
	entries, _ := os.ReadDir(filepath.Join(filepath.Dir(c.peers[i].log), c.peers[i].id, "snapshots"))
	var cut []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			cut = append(cut, e.Name())
		}
	}
	if len(cut) > 1 {
		c.t.Fatalf("%s's store keeps the snapshots earlier kills cut: %v", c.peers[i].id, cut)
	}
}

func (tot *crashTotals) check(t *testing.T, groups []*crashGroup) {
	t.Helper()
	tot.changes = map[string]int{}
	for _, g := range groups {
		for k, n := range g.counts {
			tot.changes[k] += n
		}
	}
	t.Logf("%d kills, %d requests in flight at a kill (%d of them applied), acknowledged changes %v", tot.kills, tot.inFlight, tot.appliedInFlight, tot.changes)
	for _, kind := range []string{"apply", "register", "elect", "alter"} {
		if tot.changes[kind] == 0 {
			t.Errorf("no %s was acknowledged: the run proves nothing about it", kind)
		}
	}
	if tot.inFlight == 0 {
		t.Errorf("no kill found a request in flight")
	}
}

func crashSeed(t *testing.T) int64 {
	seed := time.Now().UnixNano()
	if s := os.Getenv("ROCKETKV_CRASH_SEED"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			seed = n
		}
	}
	t.Logf("seed %d (ROCKETKV_CRASH_SEED repeats it)", seed)
	return seed
}

// TestCrashOnePeer SIGKILLs a one-peer controller (a child process) at
// random moments while four broker groups send it requests over Remoting
// (ids, registrations, elections, sync state set changes), restarts it on
// the same store each time, and checks that every acknowledged change is
// there, at most the one request in flight per group besides, so no epoch
// goes back and no id is handed out twice. The store snapshots every 16
// entries, so restarts load snapshots; the last one is checked to.
func TestCrashOnePeer(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	seed := crashSeed(t)
	rng := rand.New(rand.NewSource(seed))
	c := newCrashCluster(t, 1)
	groups := newCrashGroups(4, seed)
	tot := &crashTotals{}
	const kills = 15
	for run := 0; ; run++ {
		if rng.Intn(3) == 0 {
			c.killEarly(0, time.Duration(rng.Intn(400))*time.Millisecond)
			tot.kills++
			c.checkCutSnapshots(0)
		}
		c.start(0)
		c.verify(groups, tot)
		if run == kills {
			break
		}
		stop := c.drive(0, groups, tot)
		time.Sleep(time.Duration(100+rng.Intn(500)) * time.Millisecond)
		c.kill(0)
		tot.kills++
		stop()
		c.checkCutSnapshots(0)
		if run == kills-1 && !c.snapshotted(0) {
			t.Fatalf("the store has no snapshot behind a compacted log before the last restart\n%s", c.logs())
		}
	}
	tot.check(t, groups)
}

// TestCrashFirstStart SIGKILLs controllers at random moments of their
// first start (creating the store, bootstrapping raft), of one peer and
// of three, and checks that each, started again on what the kill left,
// leads and keeps the id it then hands out.
func TestCrashFirstStart(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	seed := crashSeed(t)
	rng := rand.New(rand.NewSource(seed))
	for try := 0; try < 6; try++ {
		n := 1
		if try%2 == 1 {
			n = 3
		}
		c := newCrashCluster(t, n)
		for i := range c.peers {
			c.killEarly(i, time.Duration(rng.Intn(300))*time.Millisecond)
		}
		groups := newCrashGroups(1, seed+int64(try))
		for i := range c.peers {
			c.start(i)
		}
		for attempt := 0; ; attempt++ {
			leader := c.verify(groups, &crashTotals{})
			cl := c.dial(leader)
			err := groups[0].applyID(cl)
			_ = cl.Close()
			if err == nil {
				break
			}
			// A leader that stepped down under the request: again.
			if !errors.Is(err, errStopped) || attempt == 5 {
				t.Fatalf("try %d: apply an id: %v\n%s", try, err, c.logs())
			}
		}
		for i := range c.peers {
			c.kill(i)
		}
		for i := range c.peers {
			c.start(i)
		}
		c.verify(groups, &crashTotals{})
		for i := range c.peers {
			c.kill(i)
		}
	}
}

// TestCrashThreePeers runs three controller peers as child processes
// under the same traffic, and SIGKILLs the leader at random moments,
// checking the state at the new leader; the killed peer stays down for a
// round of traffic and restarts in the middle of the next (so it catches
// up from a snapshot the leader sends, its log being compacted away).
// Every third round all three are killed at once and restarted.
func TestCrashThreePeers(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	seed := crashSeed(t)
	rng := rand.New(rand.NewSource(seed))
	c := newCrashCluster(t, 3)
	groups := newCrashGroups(4, seed)
	tot := &crashTotals{}
	for i := range c.peers {
		c.start(i)
	}
	const rounds = 9
	snapshotRestart := false
	down := -1
	for round := 0; round < rounds; round++ {
		leader := c.verify(groups, tot)
		stop := c.drive(leader, groups, tot)
		time.Sleep(time.Duration(150+rng.Intn(400)) * time.Millisecond)
		if down >= 0 {
			c.start(down)
			down = -1
			time.Sleep(time.Duration(100+rng.Intn(300)) * time.Millisecond)
		}
		if round%3 == 2 {
			for _, i := range rng.Perm(3) {
				c.kill(i)
			}
			tot.kills += 3
			stop()
			for i := range c.peers {
				c.checkCutSnapshots(i)
				snapshotRestart = snapshotRestart || c.snapshotted(i)
			}
			for i := range c.peers {
				c.start(i)
			}
			continue
		}
		c.kill(leader)
		tot.kills++
		stop()
		c.checkCutSnapshots(leader)
		c.verify(groups, tot)
		down = leader
	}
	if down >= 0 {
		c.start(down)
	}
	c.verify(groups, tot)
	if !snapshotRestart {
		t.Errorf("no peer restarted from a snapshot behind a compacted log")
	}
	installed := 0
	for _, p := range c.peers {
		data, _ := os.ReadFile(p.log)
		installed += strings.Count(string(data), "Installed remote snapshot")
	}
	if installed == 0 {
		t.Errorf("no peer caught up from a snapshot the leader sent")
	}
	t.Logf("%d snapshots installed from the leader", installed)
	tot.check(t, groups)
}

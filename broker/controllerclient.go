package broker

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// controllerTimeout bounds each request to a controller (RocketMQ's
// BrokerOuterAPI waits 3 s).
const controllerTimeout = 3 * time.Second

// controllerError is a controller's answer other than SUCCESS.
type controllerError struct {
	Code   int32
	Remark string
	Addr   string
}

func (e *controllerError) Error() string {
	return fmt.Sprintf("controller %s answered code %d: %s", e.Addr, e.Code, e.Remark)
}

// controllerCode is the code of a controller's refusal in err, 0 for
// another error.
func controllerCode(err error) int32 {
	var ce *controllerError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}

// replicaState is what a controller says of a broker group: its master
// (id, Remoting address, epoch) and sync state set. MasterID < 0 means no
// master.
type replicaState struct {
	MasterID      int64
	MasterAddr    string
	MasterEpoch   int32
	SyncEpoch     int32
	SyncStateSet  []int64
	masterPresent bool
}

// syncStateSetBody is RocketMQ's SyncStateSet body.
type syncStateSetBody struct {
	SyncStateSet      []int64 `json:"syncStateSet"`
	SyncStateSetEpoch int32   `json:"syncStateSetEpoch"`
}

// electMasterBody is RocketMQ's ElectMasterResponseBody (the member
// group is not read).
type electMasterBody struct {
	SyncStateSet []int64 `json:"syncStateSet"`
}

// replicaIdentity and replicasInfo are RocketMQ's BrokerReplicasInfo
// parts (CONTROLLER_GET_SYNC_STATE_DATA's answer).
type replicaIdentity struct {
	BrokerName    string `json:"brokerName"`
	BrokerID      int64  `json:"brokerId"`
	BrokerAddress string `json:"brokerAddress"`
	Alive         bool   `json:"alive"`
}

type replicasInfo struct {
	MasterBrokerID    *int64            `json:"masterBrokerId"`
	MasterAddress     string            `json:"masterAddress"`
	MasterEpoch       int32             `json:"masterEpoch"`
	SyncStateSetEpoch int32             `json:"syncStateSetEpoch"`
	InSyncReplicas    []replicaIdentity `json:"inSyncReplicas"`
	NotInSyncReplicas []replicaIdentity `json:"notInSyncReplicas"`
}

type brokerReplicasInfo struct {
	ReplicasInfoTable map[string]replicasInfo `json:"replicasInfoTable"`
}

// controllerClient sends a broker's requests to its controllers: the
// addresses of controllerAddr (looked up by DNS with
// fetchControllerAddrByDnsLookup), the leader among them found with
// CONTROLLER_GET_METADATA_INFO and found again when a request fails or a
// controller answers CONTROLLER_NOT_LEADER. Safe for concurrent use.
type controllerClient struct {
	pool *remoting.ClientPool
	// plaintext says the pool dials without TLS (tls.enable off): a
	// connection a controller closes unanswered is then told as the
	// refusal of a controller enforcing TLS it likely is.
	plaintext bool
	log       zerolog.Logger
	list      string // controllerAddr
	dns       bool
	resolve   namesrv.Resolver

	mu     sync.Mutex
	addrs  []string
	leader string
}

// newControllerClient returns a client of the controllers in list
// (controllerAddr: addresses separated by ';'), dialled with tc (nil:
// plaintext). RocketMQ's BrokerOuterAPI reaches the controllers with the
// client it reaches the name servers with, so tc is the name servers'
// (tls.enable).
func newControllerClient(list string, dns bool, resolve namesrv.Resolver, tc *tls.Config, log zerolog.Logger) *controllerClient {
	if resolve == nil {
		resolve = namesrv.SystemResolver
	}
	c := &controllerClient{pool: remoting.NewClientPool(remoting.ClientOptions{Log: log, TLS: tc}), plaintext: tc == nil,
		log: log, list: list, dns: dns, resolve: resolve}
	c.addrs = splitControllers(list)
	return c
}

// splitControllers splits controllerAddr at ';', dropping blanks.
func splitControllers(list string) []string {
	var out []string
	for _, a := range strings.Split(list, ";") {
		if a = strings.TrimSpace(a); a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// close closes the connections to the controllers.
func (c *controllerClient) close() error { return c.pool.Close() }

// addresses returns the controllers' addresses as last read.
func (c *controllerClient) addresses() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.addrs)
}

// refreshAddresses reads controllerAddr again: with DNS lookup on, the
// addresses its host names resolve to (a failed lookup keeps the list,
// as RocketMQ's).
func (c *controllerClient) refreshAddresses(ctx context.Context) {
	if !c.dns {
		return
	}
	addrs, err := namesrv.LookupNameServers(ctx, c.resolve, c.list)
	if err != nil {
		c.log.Warn().Err(err).Str("controllerAddr", c.list).Msg("dns lookup of the controllers failed; the last list is kept")
		return
	}
	c.mu.Lock()
	c.addrs = addrs
	c.mu.Unlock()
}

// leaderAddr is the leading controller's address as last found, "" for
// none.
func (c *controllerClient) leaderAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// findLeader asks the controllers in turn which of them leads
// (CONTROLLER_GET_METADATA_INFO) and keeps the first answer that names
// one.
func (c *controllerClient) findLeader(ctx context.Context) (string, error) {
	var errs []error
	for _, a := range c.addresses() {
		resp, err := c.invokeAt(ctx, a, remoting.NewRequest(remoting.ControllerGetMetadataInfo, nil, nil))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		h := remoting.Header(resp.ExtFields)
		if leader := h.OptString("controllerLeaderAddress", ""); leader != "" {
			c.mu.Lock()
			changed := c.leader != leader
			c.leader = leader
			c.mu.Unlock()
			if changed {
				c.log.Info().Str("controllerLeader", leader).Str("from", a).Msg("leading controller found")
			}
			return leader, nil
		}
		errs = append(errs, fmt.Errorf("controller %s knows no leader", a))
	}
	if len(errs) == 0 {
		return "", errors.New("find the leading controller: controllerAddr names none")
	}
	return "", fmt.Errorf("find the leading controller: %w", errors.Join(errs...))
}

// invokeAt sends req to the controller at addr and returns its SUCCESS
// answer, or a controllerError with the code it answered.
func (c *controllerClient) invokeAt(ctx context.Context, addr string, req *remoting.Command) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, controllerTimeout)
	defer cancel()
	resp, err := c.pool.Invoke(ctx, addr, req)
	if err != nil {
		if c.plaintext && closedUnanswered(err) {
			return nil, fmt.Errorf("controller %s closed the connection (a controller with tls.server.mode=enforcing closes plaintext ones; this broker dials without TLS, tls.enable=false): %w", addr, err)
		}
		return nil, fmt.Errorf("controller %s: %w", addr, err)
	}
	if resp.Code != remoting.Success {
		return nil, &controllerError{Code: resp.Code, Remark: resp.Remark, Addr: addr}
	}
	return resp, nil
}

// closedUnanswered reports whether err is a connection the server closed
// (end of stream or reset) before it answered.
func closedUnanswered(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// invoke sends a request to the leading controller (found first when
// unknown) and, when that fails or the controller is no longer the
// leader (CONTROLLER_NOT_LEADER), finds the leader again and sends it
// once more. build makes a fresh request for each try.
func (c *controllerClient) invoke(ctx context.Context, build func() *remoting.Command) (*remoting.Command, error) {
	leader := c.leaderAddr()
	if leader == "" {
		var err error
		if leader, err = c.findLeader(ctx); err != nil {
			return nil, err
		}
	}
	resp, err := c.invokeAt(ctx, leader, build())
	if err == nil {
		return resp, nil
	}
	var ce *controllerError
	if errors.As(err, &ce) && ce.Code != remoting.ControllerNotLeader {
		return nil, err
	}
	c.log.Info().Err(err).Str("controller", leader).Msg("the controller does not lead or does not answer: finding the leader again")
	next, ferr := c.findLeader(ctx)
	if ferr != nil {
		return nil, errors.Join(err, ferr)
	}
	return c.invokeAt(ctx, next, build())
}

// nextBrokerID asks for the next broker id of the group
// (CONTROLLER_GET_NEXT_BROKER_ID).
func (c *controllerClient) nextBrokerID(ctx context.Context, cluster, name string) (int64, error) {
	resp, err := c.invoke(ctx, func() *remoting.Command {
		return remoting.NewRequest(remoting.ControllerGetNextBrokerID, map[string]string{"clusterName": cluster, "brokerName": name}, nil)
	})
	if err != nil {
		return 0, fmt.Errorf("get next broker id: %w", err)
	}
	id, err := remoting.Header(resp.ExtFields).Int64("nextBrokerId")
	if err != nil {
		return 0, fmt.Errorf("get next broker id: %w", err)
	}
	return id, nil
}

// applyBrokerID asks the controller to grant id to this broker, known by
// checkCode (CONTROLLER_APPLY_BROKER_ID).
func (c *controllerClient) applyBrokerID(ctx context.Context, cluster, name string, id int64, checkCode string) error {
	_, err := c.invoke(ctx, func() *remoting.Command {
		return remoting.NewRequest(remoting.ControllerApplyBrokerID, map[string]string{"clusterName": cluster, "brokerName": name,
			"appliedBrokerId": strconv.FormatInt(id, 10), "registerCheckCode": checkCode}, nil)
	})
	if err != nil {
		return fmt.Errorf("apply broker id %d: %w", id, err)
	}
	return nil
}

// register registers the broker's id and address with the controller
// (CONTROLLER_REGISTER_BROKER) and returns what it says of the group.
func (c *controllerClient) register(ctx context.Context, cluster, name string, id int64, addr string) (replicaState, error) {
	resp, err := c.invoke(ctx, func() *remoting.Command {
		return remoting.NewRequest(remoting.ControllerRegisterBroker, map[string]string{"clusterName": cluster, "brokerName": name,
			"brokerId": strconv.FormatInt(id, 10), "brokerAddress": addr,
			"invokeTime": strconv.FormatInt(time.Now().UnixMilli(), 10)}, nil)
	})
	if err != nil {
		return replicaState{}, fmt.Errorf("register broker %d with the controller: %w", id, err)
	}
	st := replicaFromHeader(remoting.Header(resp.ExtFields))
	var body syncStateSetBody
	if len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, &body); err != nil {
			return replicaState{}, fmt.Errorf("register broker %d with the controller: sync state set: %w", id, err)
		}
	}
	st.SyncStateSet = body.SyncStateSet
	return st, nil
}

// replicaFromHeader reads masterBrokerId, masterAddress, masterEpoch and
// syncStateSetEpoch, each optional.
func replicaFromHeader(h remoting.Header) replicaState {
	st := replicaState{MasterID: -1, MasterAddr: h.OptString("masterAddress", "")}
	if v, err := h.Int64("masterBrokerId"); err == nil {
		st.MasterID = v
		st.masterPresent = true
	}
	if v, err := h.Int32("masterEpoch"); err == nil {
		st.MasterEpoch = v
	}
	if v, err := h.Int32("syncStateSetEpoch"); err == nil {
		st.SyncEpoch = v
	}
	return st
}

// hasMaster reports whether the state names a master.
func (s replicaState) hasMaster() bool { return s.masterPresent && s.MasterAddr != "" }

// replicaInfo asks for the group's master and sync state set
// (CONTROLLER_GET_REPLICA_INFO).
func (c *controllerClient) replicaInfo(ctx context.Context, name string) (replicaState, error) {
	resp, err := c.invoke(ctx, func() *remoting.Command {
		return remoting.NewRequest(remoting.ControllerGetReplicaInfo, map[string]string{"brokerName": name}, nil)
	})
	if err != nil {
		return replicaState{}, fmt.Errorf("get replica info of %s: %w", name, err)
	}
	st := replicaFromHeader(remoting.Header(resp.ExtFields))
	var body syncStateSetBody
	if len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, &body); err != nil {
			return replicaState{}, fmt.Errorf("get replica info of %s: sync state set: %w", name, err)
		}
	}
	st.SyncStateSet, st.SyncEpoch = body.SyncStateSet, body.SyncStateSetEpoch
	return st, nil
}

// elect asks the controller to elect a master of the group, this broker
// if it can (CONTROLLER_ELECT_MASTER, as a broker asks it:
// designateElect false). CONTROLLER_MASTER_STILL_EXIST is an answer too:
// the master there is.
func (c *controllerClient) elect(ctx context.Context, cluster, name string, id int64) (replicaState, error) {
	build := func() *remoting.Command {
		return remoting.NewRequest(remoting.ControllerElectMaster, map[string]string{"clusterName": cluster, "brokerName": name,
			"brokerId": strconv.FormatInt(id, 10), "designateElect": "false",
			"invokeTime": strconv.FormatInt(time.Now().UnixMilli(), 10)}, nil)
	}
	leader := c.leaderAddr()
	if leader == "" {
		var err error
		if leader, err = c.findLeader(ctx); err != nil {
			return replicaState{}, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, controllerTimeout)
	defer cancel()
	resp, err := c.pool.Invoke(ctx, leader, build())
	if err != nil {
		return replicaState{}, fmt.Errorf("elect a master of %s: controller %s: %w", name, leader, err)
	}
	if resp.Code != remoting.Success && resp.Code != remoting.ControllerMasterStillExist {
		if resp.Code == remoting.ControllerNotLeader {
			c.mu.Lock()
			c.leader = ""
			c.mu.Unlock()
		}
		return replicaState{}, fmt.Errorf("elect a master of %s: %w", name, &controllerError{Code: resp.Code, Remark: resp.Remark, Addr: leader})
	}
	st := replicaFromHeader(remoting.Header(resp.ExtFields))
	var body electMasterBody
	if len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, &body); err != nil {
			return replicaState{}, fmt.Errorf("elect a master of %s: body: %w", name, err)
		}
	}
	st.SyncStateSet = body.SyncStateSet
	return st, nil
}

// alterSyncStateSet reports the master's new sync state set
// (CONTROLLER_ALTER_SYNC_STATE_SET) and returns the one the controller
// holds after it.
func (c *controllerClient) alterSyncStateSet(ctx context.Context, name string, masterID int64, masterEpoch int32, set []int64, setEpoch int32) (syncStateSetBody, error) {
	body, err := json.Marshal(syncStateSetBody{SyncStateSet: set, SyncStateSetEpoch: setEpoch})
	if err != nil {
		return syncStateSetBody{}, fmt.Errorf("alter sync state set: %w", err)
	}
	resp, err := c.invoke(ctx, func() *remoting.Command {
		return remoting.NewRequest(remoting.ControllerAlterSyncStateSet, map[string]string{"brokerName": name,
			"masterBrokerId": strconv.FormatInt(masterID, 10), "masterEpoch": strconv.FormatInt(int64(masterEpoch), 10),
			"invokeTime": strconv.FormatInt(time.Now().UnixMilli(), 10)}, body)
	})
	if err != nil {
		return syncStateSetBody{}, fmt.Errorf("alter sync state set of %s to %v: %w", name, set, err)
	}
	var out syncStateSetBody
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return syncStateSetBody{}, fmt.Errorf("alter sync state set of %s: answer: %w", name, err)
	}
	return out, nil
}

// ctlHeartbeat is what a broker tells the controllers every
// brokerHeartbeatInterval (BROKER_HEARTBEAT).
type ctlHeartbeat struct {
	Cluster, Name, Addr string
	ID                  int64
	Epoch               int32
	MaxOffset           int64
	ConfirmOffset       int64
	Timeout             time.Duration
	Priority            int
}

// sendHeartbeat sends hb to every controller, one way, as RocketMQ's
// broker does (each controller keeps the brokers it hears from alive).
func (c *controllerClient) sendHeartbeat(ctx context.Context, hb ctlHeartbeat, wait time.Duration) {
	for _, a := range c.addresses() {
		req := remoting.NewRequest(remoting.BrokerHeartbeat, map[string]string{
			"clusterName": hb.Cluster, "brokerAddr": hb.Addr, "brokerName": hb.Name,
			"brokerId": strconv.FormatInt(hb.ID, 10), "epoch": strconv.FormatInt(int64(hb.Epoch), 10),
			"maxOffset": strconv.FormatInt(hb.MaxOffset, 10), "confirmOffset": strconv.FormatInt(hb.ConfirmOffset, 10),
			"heartbeatTimeoutMills": strconv.FormatInt(hb.Timeout.Milliseconds(), 10),
			"electionPriority":      strconv.Itoa(hb.Priority),
		}, nil)
		hctx, cancel := context.WithTimeout(ctx, wait)
		err := c.pool.InvokeOneway(hctx, a, req)
		cancel()
		if err != nil {
			c.log.Debug().Err(err).Str("controller", a).Msg("heartbeat to the controller not sent")
		}
	}
}

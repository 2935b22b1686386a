package controller

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/remoting"
)

// result is the outcome of checking a request against the state (RocketMQ's
// ControllerResult): the answer, and the event to replicate before giving
// it (nil: nothing changes).
type result struct {
	code   int32
	remark string
	ext    map[string]string
	body   []byte
	event  *Event
	// role is set by an election that chose a new master: whom to notify.
	role *roleChange
	// status is the request's request_handle_status: OpSuccess (the zero
	// value) unless RocketMQ's handler would have thrown instead of
	// answering (badRequest, raftFailure).
	status metrics.OpStatus
}

func fail(code int32, format string, args ...any) result {
	return result{code: code, remark: fmt.Sprintf(format, args...)}
}

// roleChange is RocketMQ's RoleChangeNotifyEntry: what the members of a
// group learn after an election.
type roleChange struct {
	members           BrokerMemberGroup
	masterID          int64
	masterAddr        string
	masterEpoch       int32
	syncStateSetEpoch int32
	syncStateSet      []int64
}

// checks holds what the checks consult besides the state.
type checks struct {
	alive  func(cluster, brokerName string, id int64) bool
	policy electPolicy
	// unclean is enableElectUncleanMaster.
	unclean bool
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// identityExt is the clusterName and brokerName a response repeats from
// its request; an absent clusterName stays absent, as Java omits a null.
func identityExt(cluster, brokerName string) map[string]string {
	ext := map[string]string{"brokerName": brokerName}
	if cluster != "" {
		ext["clusterName"] = cluster
	}
	return ext
}

// alterSyncStateSet is RocketMQ's ReplicasInfoManager.alterSyncStateSet.
func (c checks) alterSyncStateSet(st *State, h AlterSyncStateSetHeader, set SyncStateSetBody) result {
	if r := alterRefusal(st, h.BrokerName, h.MasterBrokerID, h.MasterEpoch, set, c.alive); r != nil {
		return fail(r.Code, "%s", r.Remark)
	}
	epoch := st.SyncStates[h.BrokerName].SyncStateSetEpoch + 1
	return result{
		ext:  map[string]string{"newSyncStateSetEpoch": strconv.Itoa(int(epoch))},
		body: SyncStateSetBody{SyncStateSet: set.SyncStateSet, SyncStateSetEpoch: epoch}.Encode(),
		event: &Event{Type: EventAlterSyncStateSet, BrokerName: h.BrokerName, SyncStateSet: set.SyncStateSet,
			Expect: &Expect{MasterID: h.MasterBrokerID, MasterEpoch: h.MasterEpoch, SyncStateSetEpoch: set.SyncStateSetEpoch}},
	}
}

// alterRefusal runs the checks of RocketMQ's alterSyncStateSet, in its
// order: nil when the alter may go ahead. alive nil skips the liveness
// check (State.Apply, which has no heartbeats).
func alterRefusal(st *State, brokerName string, masterID int64, masterEpoch int32, set SyncStateSetBody, alive func(cluster, brokerName string, id int64) bool) *Rejection {
	if !st.known(brokerName) {
		return reject(remoting.ControllerAlterSyncStateSetFailed, "Broker metadata is not existed")
	}
	ss, reps := st.SyncStates[brokerName], st.Replicas[brokerName]
	if slices.Equal(sortedIDs(ss.SyncStateSet), sortedIDs(set.SyncStateSet)) {
		return reject(remoting.ControllerAlterSyncStateSetFailed, "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet")
	}
	if !ss.HasMaster || ss.MasterID != masterID {
		cur := "null"
		if ss.HasMaster {
			cur = itoa(ss.MasterID)
		}
		return reject(remoting.ControllerInvalidMaster, "Rejecting alter syncStateSet request because the current leader is:{%s}, not {%d}", cur, masterID)
	}
	if masterEpoch != ss.MasterEpoch {
		return reject(remoting.ControllerFencedMasterEpoch, "Rejecting alter syncStateSet request because the current master epoch is:{%d}, not {%d}", ss.MasterEpoch, masterEpoch)
	}
	if set.SyncStateSetEpoch != ss.SyncStateSetEpoch {
		return reject(remoting.ControllerFencedSyncStateSetEpoch, "Rejecting alter syncStateSet request because the current syncStateSet epoch is:{%d}, not {%d}", ss.SyncStateSetEpoch, set.SyncStateSetEpoch)
	}
	for _, id := range set.SyncStateSet {
		if _, ok := reps.Brokers[id]; !ok {
			return reject(remoting.ControllerInvalidReplicas, "Rejecting alter syncStateSet request because the replicas {%d} don't exist", id)
		}
		if alive != nil && !alive(reps.Cluster, reps.BrokerName, id) {
			return reject(remoting.ControllerBrokerNotAlive, "Rejecting alter syncStateSet request because the replicas {%d} don't alive", id)
		}
	}
	if !slices.Contains(set.SyncStateSet, ss.MasterID) {
		return reject(remoting.ControllerAlterSyncStateSetFailed, "Rejecting alter syncStateSet request because the newSyncStateSet don't contains origin leader {%d}", ss.MasterID)
	}
	return nil
}

// electMaster is RocketMQ's ReplicasInfoManager.electMaster. byController
// marks an election the controller started itself (no broker id).
func (c checks) electMaster(st *State, h ElectMasterHeader, byController bool) result {
	if !st.known(h.BrokerName) {
		return fail(remoting.ControllerBrokerNeedToBeRegistered, "Broker hasn't been registered")
	}
	ss, reps := st.SyncStates[h.BrokerName], st.Replicas[h.BrokerName]
	var all []int64
	if c.unclean {
		all = slices.Sorted(mapsKeys(reps.Brokers))
	}
	newMaster, elected := int64(0), false
	if ss.MasterEpoch == 0 && !byController && h.BrokerID != -1 {
		// Never had a master: the asking broker becomes the first.
		newMaster, elected = h.BrokerID, true
	}
	if !elected {
		prefer, hasPrefer := h.BrokerID, h.DesignateElect && !byController
		newMaster, elected = c.policy.elect(reps.Cluster, reps.BrokerName, slices.Clone(ss.SyncStateSet), all, ss.MasterID, ss.HasMaster, prefer, hasPrefer)
	}
	ext := map[string]string{}
	if elected && ss.HasMaster && newMaster == ss.MasterID {
		ext["masterEpoch"] = strconv.Itoa(int(ss.MasterEpoch))
		ext["syncStateSetEpoch"] = strconv.Itoa(int(ss.SyncStateSetEpoch))
		ext["masterBrokerId"] = itoa(ss.MasterID)
		if addr, ok := reps.Brokers[ss.MasterID]; ok {
			ext["masterAddress"] = addr.Addr
		}
		return result{
			code:   remoting.ControllerMasterStillExist,
			remark: fmt.Sprintf("The old master %d is still alive, not need to elect new master for broker %s", ss.MasterID, reps.BrokerName),
			ext:    ext,
			body:   ElectMasterResponseBody{SyncStateSet: slices.Clone(ss.SyncStateSet)}.Encode(),
		}
	}
	if elected {
		addr := reps.addr(newMaster)
		ext["masterBrokerId"] = itoa(newMaster)
		if _, ok := reps.Brokers[newMaster]; ok {
			ext["masterAddress"] = addr
		}
		ext["masterEpoch"] = strconv.Itoa(int(ss.MasterEpoch + 1))
		ext["syncStateSetEpoch"] = strconv.Itoa(int(ss.SyncStateSetEpoch + 1))
		members := BrokerMemberGroup{BrokerAddrs: reps.memberAddrs(), BrokerName: reps.BrokerName, Cluster: reps.Cluster}
		return result{
			ext:  ext,
			body: ElectMasterResponseBody{BrokerMemberGroup: &members, SyncStateSet: []int64{newMaster}}.Encode(),
			event: &Event{Type: EventElectMaster, BrokerName: h.BrokerName, BrokerID: newMaster, NewMasterElected: true,
				Expect: &Expect{MasterEpoch: ss.MasterEpoch, SyncStateSetEpoch: ss.SyncStateSetEpoch}},
			role: &roleChange{
				members: members, masterID: newMaster, masterAddr: addr, masterEpoch: ss.MasterEpoch + 1,
				syncStateSetEpoch: ss.SyncStateSetEpoch + 1, syncStateSet: []int64{newMaster},
			},
		}
	}
	if byController || h.BrokerID == -1 {
		return result{
			code:   remoting.ControllerMasterNotAvailable,
			remark: "Old master has down and failed to elect a new broker master",
			ext:    ext,
			event: &Event{Type: EventElectMaster, BrokerName: h.BrokerName,
				Expect: &Expect{MasterEpoch: ss.MasterEpoch, SyncStateSetEpoch: ss.SyncStateSetEpoch}},
		}
	}
	return result{code: remoting.ControllerElectMasterFailed, remark: "Failed to elect a new master", ext: ext}
}

// getNextBrokerID is RocketMQ's ReplicasInfoManager.getNextBrokerId.
func (c checks) getNextBrokerID(st *State, h BrokerIdentityHeader) result {
	next := FirstBrokerID
	if r, ok := st.Replicas[h.BrokerName]; ok {
		next = r.NextBrokerID
	}
	ext := identityExt(h.ClusterName, h.BrokerName)
	ext["nextBrokerId"] = itoa(next)
	return result{ext: ext}
}

// applyBrokerID is RocketMQ's ReplicasInfoManager.applyBrokerId.
func (c checks) applyBrokerID(st *State, h ApplyBrokerIDHeader) result {
	addr, _, _ := strings.Cut(h.RegisterCheckCode, ";")
	ext := identityExt(h.ClusterName, h.BrokerName)
	if r := applyIDRefusal(st, h.BrokerName, h.AppliedBrokerID, h.RegisterCheckCode); r != nil {
		res := fail(r.Code, "%s", r.Remark)
		res.ext = ext
		return res
	}
	return result{ext: ext, event: &Event{Type: EventApplyBrokerID, Cluster: h.ClusterName, BrokerName: h.BrokerName,
		BrokerID: h.AppliedBrokerID, Addr: addr, CheckCode: h.RegisterCheckCode}}
}

// applyIDRefusal runs the checks of RocketMQ's applyBrokerId: a group
// that has no ids yet takes only FirstBrokerID; a group's id is taken
// only when it is free or held with the same registerCheckCode. Nil when
// the id may be granted.
func applyIDRefusal(st *State, brokerName string, id int64, checkCode string) *Rejection {
	r, ok := st.Replicas[brokerName]
	if !ok {
		if id == FirstBrokerID {
			return nil
		}
		return reject(remoting.ControllerBrokerIDInvalid, "Broker-set: %s hasn't been registered in controller, but broker try to apply brokerId: %d", brokerName, id)
	}
	if b, exists := r.Brokers[id]; exists && b.CheckCode != checkCode {
		return reject(remoting.ControllerBrokerIDInvalid, "Fail to apply brokerId: %d in broker-set: %s", id, brokerName)
	}
	return nil
}

// registerBroker is RocketMQ's ReplicasInfoManager.registerBroker.
func (c checks) registerBroker(st *State, h RegisterBrokerHeader) result {
	ext := identityExt(h.ClusterName, h.BrokerName)
	if r := registerRefusal(st, h.BrokerName, h.BrokerID); r != nil {
		res := fail(r.Code, "%s", r.Remark)
		res.ext = ext
		return res
	}
	ss, reps := st.SyncStates[h.BrokerName], st.Replicas[h.BrokerName]
	b := reps.Brokers[h.BrokerID]
	if ss.HasMaster && c.alive(h.ClusterName, h.BrokerName, ss.MasterID) {
		ext["masterBrokerId"] = itoa(ss.MasterID)
		if m, ok := reps.Brokers[ss.MasterID]; ok {
			ext["masterAddress"] = m.Addr
		}
		ext["masterEpoch"] = strconv.Itoa(int(ss.MasterEpoch))
		ext["syncStateSetEpoch"] = strconv.Itoa(int(ss.SyncStateSetEpoch))
	}
	res := result{ext: ext, body: SyncStateSetBody{SyncStateSet: slices.Clone(ss.SyncStateSet), SyncStateSetEpoch: ss.SyncStateSetEpoch}.Encode()}
	if h.BrokerAddress != b.Addr {
		res.event = &Event{Type: EventUpdateBrokerAddress, Cluster: h.ClusterName, BrokerName: h.BrokerName, BrokerID: h.BrokerID, Addr: h.BrokerAddress}
	}
	return res
}

// registerRefusal runs the checks of RocketMQ's registerBroker: the group
// and the id must be known. Nil when the broker may register.
func registerRefusal(st *State, brokerName string, id int64) *Rejection {
	if !st.known(brokerName) {
		return reject(remoting.ControllerBrokerNeedToBeRegistered, "Broker-set: %s hasn't been registered in controller", brokerName)
	}
	if _, ok := st.Replicas[brokerName].Brokers[id]; !ok {
		return reject(remoting.ControllerBrokerNeedToBeRegistered, "BrokerId: %d hasn't been registered in broker-set: %s", id, brokerName)
	}
	return nil
}

// getReplicaInfo is RocketMQ's ReplicasInfoManager.getReplicaInfo.
func (c checks) getReplicaInfo(st *State, h BrokerNameHeader) result {
	if !st.known(h.BrokerName) {
		return fail(remoting.ControllerBrokerMetadataNotExist, "Broker metadata is not existed")
	}
	ss, reps := st.SyncStates[h.BrokerName], st.Replicas[h.BrokerName]
	ext := map[string]string{"masterEpoch": strconv.Itoa(int(ss.MasterEpoch))}
	if ss.HasMaster {
		ext["masterBrokerId"] = itoa(ss.MasterID)
		if m, ok := reps.Brokers[ss.MasterID]; ok {
			ext["masterAddress"] = m.Addr
		}
	}
	return result{ext: ext, body: SyncStateSetBody{SyncStateSet: slices.Clone(ss.SyncStateSet), SyncStateSetEpoch: ss.SyncStateSetEpoch}.Encode()}
}

// syncStateData is RocketMQ's ReplicasInfoManager.getSyncStateData: the
// known groups among names, each member with its liveness.
func (c checks) syncStateData(st *State, names []string) BrokerReplicasInfo {
	out := BrokerReplicasInfo{ReplicasInfoTable: map[string]ReplicasInfo{}}
	for _, name := range names {
		if !st.known(name) {
			continue
		}
		ss, reps := st.SyncStates[name], st.Replicas[name]
		info := ReplicasInfo{
			InSyncReplicas: []ReplicaIdentity{}, NotInSyncReplicas: []ReplicaIdentity{},
			MasterEpoch: ss.MasterEpoch, SyncStateSetEpoch: ss.SyncStateSetEpoch,
		}
		if ss.HasMaster {
			id := ss.MasterID
			info.MasterBrokerID = &id
			if m, ok := reps.Brokers[id]; ok {
				addr := m.Addr
				info.MasterAddress = &addr
			}
		}
		for _, id := range slices.Sorted(mapsKeys(reps.Brokers)) {
			r := ReplicaIdentity{Alive: c.alive(reps.Cluster, name, id), BrokerAddress: reps.Brokers[id].Addr, BrokerID: id, BrokerName: name}
			if ss.inSync(id) {
				info.InSyncReplicas = append(info.InSyncReplicas, r)
			} else {
				info.NotInSyncReplicas = append(info.NotInSyncReplicas, r)
			}
		}
		out.ReplicasInfoTable[name] = info
	}
	return out
}

// cleanBrokerData is RocketMQ's ReplicasInfoManager.cleanBrokerData.
func (c checks) cleanBrokerData(st *State, h CleanBrokerDataHeader) result {
	var ids []int64
	idsText := strings.TrimSpace(h.BrokerControllerIDsToClean)
	// With isCleanLivingBroker RocketMQ neither checks liveness nor reads
	// the ids: the whole group goes.
	if !h.CleanLivingBroker {
		if ss, ok := st.SyncStates[h.BrokerName]; ok && idsText == "" && ss.HasMaster {
			return fail(remoting.ControllerInvalidCleanBrokerMetadata, "Broker %s is still alive, clean up failure", h.BrokerName)
		}
		if idsText != "" {
			for _, part := range strings.Split(idsText, ";") {
				id, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
				if err != nil {
					return fail(remoting.ControllerInvalidCleanBrokerMetadata, "Please set the option <brokerControllerIdsToClean> according to the format, exception: %v", err)
				}
				ids = append(ids, id)
			}
			for _, id := range ids {
				if c.alive(h.ClusterName, h.BrokerName, id) {
					return fail(remoting.ControllerInvalidCleanBrokerMetadata, "Broker [%s,  %d] is still alive, clean up failure", h.BrokerName, id)
				}
			}
		}
	}
	if !st.known(h.BrokerName) {
		return fail(remoting.ControllerInvalidCleanBrokerMetadata, "Broker %s is not existed,clean broker data failure.", h.BrokerName)
	}
	return result{event: &Event{Type: EventCleanBrokerData, BrokerName: h.BrokerName, BrokerIDs: sortedIDs(ids)}}
}

// needReelect is RocketMQ's scanNeedReelectBrokerSets: the groups whose
// master is not alive while another member is.
func (c checks) needReelect(st *State) []string {
	var out []string
	for name, ss := range st.SyncStates {
		if !ss.HasMaster || c.alive(ss.Cluster, name, ss.MasterID) {
			continue
		}
		reps, ok := st.Replicas[name]
		if !ok {
			continue
		}
		for id := range reps.Brokers {
			if c.alive(ss.Cluster, name, id) {
				out = append(out, name)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

func mapsKeys[V any](m map[int64]V) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

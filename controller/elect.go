package controller

import "slices"

// electPolicy is RocketMQ's DefaultElectPolicy.
type electPolicy struct {
	// alive reports whether a broker's heartbeats are current.
	alive func(cluster, brokerName string, id int64) bool
	// live returns a broker's heartbeat facts.
	live func(cluster, brokerName string, id int64) (LiveInfo, bool)
}

// elect picks a master for the group among syncState first, then (when
// allReplicas is not nil: enableElectUncleanMaster) among every replica.
// oldMaster is the current master (ok false: none), prefer a broker the
// caller designated (ok false: none). ok false: nobody can be master.
func (p electPolicy) elect(cluster, brokerName string, syncState, allReplicas []int64, oldMaster int64, hasOld bool, prefer int64, hasPrefer bool) (int64, bool) {
	if syncState != nil {
		if id, ok := p.tryElect(cluster, brokerName, syncState, oldMaster, hasOld, prefer, hasPrefer); ok {
			return id, true
		}
	}
	if allReplicas != nil {
		return p.tryElect(cluster, brokerName, allReplicas, oldMaster, hasOld, prefer, hasPrefer)
	}
	return 0, false
}

// tryElect applies the rules to one candidate set: only alive brokers; the
// old master stays if alive and nobody else is preferred; a preferred
// broker wins if alive (else nobody); otherwise the highest epoch, then the
// largest maxOffset, then the lowest electionPriority (then, for a
// deterministic answer, the lowest id).
func (p electPolicy) tryElect(cluster, brokerName string, brokers []int64, oldMaster int64, hasOld bool, prefer int64, hasPrefer bool) (int64, bool) {
	var cands []int64
	for _, id := range sortedIDs(brokers) {
		if p.alive(cluster, brokerName, id) {
			cands = append(cands, id)
		}
	}
	if len(cands) == 0 {
		return 0, false
	}
	if hasOld && slices.Contains(cands, oldMaster) && (!hasPrefer || prefer == oldMaster) {
		return oldMaster, true
	}
	if hasPrefer {
		return prefer, slices.Contains(cands, prefer)
	}
	best, bestInfo, found := int64(0), LiveInfo{}, false
	for _, id := range cands {
		info, ok := p.live(cluster, brokerName, id)
		if !ok {
			continue
		}
		if !found || better(info, bestInfo) {
			best, bestInfo, found = id, info, true
		}
	}
	if found {
		return best, true
	}
	return cands[0], true
}

// better orders candidates as RocketMQ's comparator: epoch descending,
// then maxOffset descending, then electionPriority ascending.
func better(a, b LiveInfo) bool {
	if a.Epoch != b.Epoch {
		return a.Epoch > b.Epoch
	}
	if a.MaxOffset != b.MaxOffset {
		return a.MaxOffset > b.MaxOffset
	}
	return a.ElectionPriority < b.ElectionPriority
}

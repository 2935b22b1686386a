package controller

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Request headers, decoded from a command's ext fields by RocketMQ's field
// names. A field RocketMQ's controller cannot do without (annotated
// @CFNotNull, or one its code dereferences) is required here: its absence
// is an error naming it, which the handler answers SYSTEM_ERROR as Java's
// decoding or its NullPointerException does. Numbers parse as Java's
// Long/Integer.parseLong do; booleans as Boolean.parseBoolean ("true" in
// any case, anything else false).

// fields reads ext fields, keeping the first error.
type fields struct {
	ext map[string]string
	err error
}

func (f *fields) str(key string) string {
	v, ok := f.ext[key]
	if !ok && f.err == nil {
		f.err = fmt.Errorf("the custom field <%s> is null", key)
	}
	return v
}

func (f *fields) optStr(key string) (string, bool) {
	v, ok := f.ext[key]
	return v, ok
}

func (f *fields) int64(key string) int64 {
	v, ok := f.optInt64(key)
	if !ok && f.err == nil {
		f.err = fmt.Errorf("the custom field <%s> is null", key)
	}
	return v
}

func (f *fields) optInt64(key string) (int64, bool) {
	v, ok := f.ext[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		if f.err == nil {
			f.err = fmt.Errorf("the custom field <%s> is not a 64-bit integer: %q", key, v)
		}
		return 0, false
	}
	return n, true
}

func (f *fields) int32(key string) int32 {
	v, ok := f.optInt32(key)
	if !ok && f.err == nil {
		f.err = fmt.Errorf("the custom field <%s> is null", key)
	}
	return v
}

func (f *fields) optInt32(key string) (int32, bool) {
	v, ok := f.ext[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		if f.err == nil {
			f.err = fmt.Errorf("the custom field <%s> is not a 32-bit integer: %q", key, v)
		}
		return 0, false
	}
	return int32(n), true
}

func (f *fields) boolean(key string) bool {
	return strings.EqualFold(strings.TrimSpace(f.ext[key]), "true")
}

// AlterSyncStateSetHeader is CONTROLLER_ALTER_SYNC_STATE_SET's header.
type AlterSyncStateSetHeader struct {
	BrokerName     string
	MasterBrokerID int64
	MasterEpoch    int32
}

// DecodeAlterSyncStateSetHeader reads an AlterSyncStateSetRequestHeader.
func DecodeAlterSyncStateSetHeader(ext map[string]string) (AlterSyncStateSetHeader, error) {
	f := fields{ext: ext}
	h := AlterSyncStateSetHeader{BrokerName: f.str("brokerName"), MasterBrokerID: f.int64("masterBrokerId"), MasterEpoch: f.int32("masterEpoch")}
	return h, f.err
}

// ElectMasterHeader is CONTROLLER_ELECT_MASTER's header. BrokerID -1 (or
// absent in a controller-triggered election) elects by policy alone.
type ElectMasterHeader struct {
	ClusterName    string
	BrokerName     string
	BrokerID       int64
	DesignateElect bool
}

// DecodeElectMasterHeader reads an ElectMasterRequestHeader; clusterName,
// brokerName, brokerId and designateElect are @CFNotNull in RocketMQ.
func DecodeElectMasterHeader(ext map[string]string) (ElectMasterHeader, error) {
	f := fields{ext: ext}
	h := ElectMasterHeader{ClusterName: f.str("clusterName"), BrokerName: f.str("brokerName"), BrokerID: f.int64("brokerId")}
	f.str("designateElect")
	h.DesignateElect = f.boolean("designateElect")
	return h, f.err
}

// BrokerNameHeader is a header whose only field the controller reads is
// brokerName: GetReplicaInfoRequestHeader.
type BrokerNameHeader struct{ BrokerName string }

// DecodeBrokerNameHeader reads a header that must name a brokerName.
func DecodeBrokerNameHeader(ext map[string]string) (BrokerNameHeader, error) {
	f := fields{ext: ext}
	h := BrokerNameHeader{BrokerName: f.str("brokerName")}
	return h, f.err
}

// BrokerIdentityHeader is GetNextBrokerIdRequestHeader: clusterName and
// brokerName.
type BrokerIdentityHeader struct {
	ClusterName string
	BrokerName  string
}

// DecodeBrokerIdentityHeader reads a GetNextBrokerIdRequestHeader; the
// controller keys groups by brokerName, which is required.
func DecodeBrokerIdentityHeader(ext map[string]string) (BrokerIdentityHeader, error) {
	f := fields{ext: ext}
	h := BrokerIdentityHeader{BrokerName: f.str("brokerName")}
	h.ClusterName, _ = f.optStr("clusterName")
	return h, f.err
}

// ApplyBrokerIDHeader is CONTROLLER_APPLY_BROKER_ID's header.
type ApplyBrokerIDHeader struct {
	ClusterName       string
	BrokerName        string
	AppliedBrokerID   int64
	RegisterCheckCode string
}

// DecodeApplyBrokerIDHeader reads an ApplyBrokerIdRequestHeader.
func DecodeApplyBrokerIDHeader(ext map[string]string) (ApplyBrokerIDHeader, error) {
	f := fields{ext: ext}
	h := ApplyBrokerIDHeader{BrokerName: f.str("brokerName"), AppliedBrokerID: f.int64("appliedBrokerId"), RegisterCheckCode: f.str("registerCheckCode")}
	h.ClusterName, _ = f.optStr("clusterName")
	return h, f.err
}

// RegisterBrokerHeader is CONTROLLER_REGISTER_BROKER's header.
type RegisterBrokerHeader struct {
	ClusterName   string
	BrokerName    string
	BrokerID      int64
	BrokerAddress string
}

// DecodeRegisterBrokerHeader reads a RegisterBrokerToControllerRequestHeader.
func DecodeRegisterBrokerHeader(ext map[string]string) (RegisterBrokerHeader, error) {
	f := fields{ext: ext}
	h := RegisterBrokerHeader{BrokerName: f.str("brokerName"), BrokerID: f.int64("brokerId"), BrokerAddress: f.str("brokerAddress")}
	h.ClusterName, _ = f.optStr("clusterName")
	return h, f.err
}

// CleanBrokerDataHeader is CLEAN_BROKER_DATA's header.
type CleanBrokerDataHeader struct {
	ClusterName string
	BrokerName  string
	// BrokerControllerIDsToClean is ';'-separated ids; empty cleans the
	// whole group.
	BrokerControllerIDsToClean string
	// CleanLivingBroker skips the liveness checks.
	CleanLivingBroker bool
}

// DecodeCleanBrokerDataHeader reads a CleanControllerBrokerDataRequestHeader.
func DecodeCleanBrokerDataHeader(ext map[string]string) (CleanBrokerDataHeader, error) {
	f := fields{ext: ext}
	h := CleanBrokerDataHeader{BrokerName: f.str("brokerName"), CleanLivingBroker: f.boolean("isCleanLivingBroker")}
	h.ClusterName, _ = f.optStr("clusterName")
	h.BrokerControllerIDsToClean, _ = f.optStr("brokerControllerIdsToClean")
	return h, f.err
}

// HeartbeatHeader is BROKER_HEARTBEAT's header as a broker sends it to a
// controller (RocketMQ's BrokerHeartbeatRequestHeader). The optional
// numbers take RocketMQ's stand-ins when absent: -1 for epoch, offsets and
// id, 10 s for the timeout, the largest int32 (lowest priority) for
// electionPriority.
type HeartbeatHeader struct {
	ClusterName      string
	BrokerAddr       string
	BrokerName       string
	BrokerID         int64
	HasBrokerID      bool
	Epoch            int32
	MaxOffset        int64
	ConfirmOffset    int64
	HeartbeatTimeout time.Duration
	ElectionPriority int32
}

// DefaultHeartbeatTimeout is the heartbeat timeout of a broker that sends
// none (RocketMQ's DEFAULT_BROKER_CHANNEL_EXPIRED_TIME).
const DefaultHeartbeatTimeout = 10 * time.Second

// DecodeHeartbeatHeader reads a BrokerHeartbeatRequestHeader; clusterName,
// brokerAddr and brokerName are @CFNotNull.
func DecodeHeartbeatHeader(ext map[string]string) (HeartbeatHeader, error) {
	f := fields{ext: ext}
	h := HeartbeatHeader{ClusterName: f.str("clusterName"), BrokerAddr: f.str("brokerAddr"), BrokerName: f.str("brokerName")}
	h.BrokerID, h.HasBrokerID = f.optInt64("brokerId")
	var ok bool
	if h.Epoch, ok = f.optInt32("epoch"); !ok {
		h.Epoch = -1
	}
	if h.MaxOffset, ok = f.optInt64("maxOffset"); !ok {
		h.MaxOffset = -1
	}
	if h.ConfirmOffset, ok = f.optInt64("confirmOffset"); !ok {
		h.ConfirmOffset = -1
	}
	h.HeartbeatTimeout = DefaultHeartbeatTimeout
	if ms, ok := f.optInt64("heartbeatTimeoutMills"); ok {
		h.HeartbeatTimeout = time.Duration(ms) * time.Millisecond
	}
	if h.ElectionPriority, ok = f.optInt32("electionPriority"); !ok {
		h.ElectionPriority = 1<<31 - 1
	}
	return h, f.err
}

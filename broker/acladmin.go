package broker

import (
	"context"
	"encoding/json"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// aclOffRemark answers an ACL request to a broker without access control.
const aclOffRemark = "access control is off on this broker (aclEnable=false)"

// optField returns a header field and whether the request carried it.
func optField(req *remoting.Command, key string) *string {
	if v, ok := req.ExtFields[key]; ok {
		return &v
	}
	return nil
}

// optList returns a comma-separated header field as a list (nil when the
// request did not carry it; an empty field is an empty list).
func optList(req *remoting.Command, key string) *[]string {
	v, ok := req.ExtFields[key]
	if !ok {
		return nil
	}
	out := splitTopicList(v) // the same comma list, blanks dropped
	if out == nil {
		out = []string{}
	}
	return &out
}

// processUpdateACLConfig answers UPDATE_AND_CREATE_ACL_CONFIG (mqadmin
// updateAclConfig): the account is created or updated in the ACL file.
func (b *Broker) processUpdateACLConfig(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	fail := func(remark string) *remoting.Command {
		return remoting.NewResponse(req, remoting.UpdateAndCreateACLConfigFailed, remark)
	}
	if b.acl == nil {
		return fail(aclOffRemark)
	}
	h := remoting.Header(req.ExtFields)
	key, err := h.String("accessKey")
	if err != nil {
		return fail(err.Error())
	}
	u := acl.AccountUpdate{
		AccessKey:          key,
		SecretKey:          h.OptString("secretKey", ""),
		Admin:              h.OptString("admin", "false") == "true",
		WhiteRemoteAddress: optField(req, "whiteRemoteAddress"),
		DefaultTopicPerm:   optField(req, "defaultTopicPerm"),
		DefaultGroupPerm:   optField(req, "defaultGroupPerm"),
		TopicPerms:         optList(req, "topicPerms"),
		GroupPerms:         optList(req, "groupPerms"),
	}
	if err := b.acl.UpdateAccount(u); err != nil {
		b.log.Warn().Err(err).Stringer("conn", conn).Str("accessKey", key).Msg("ACL account not updated")
		return fail(err.Error())
	}
	b.log.Info().Stringer("conn", conn).Str("accessKey", key).Msg("ACL account updated")
	return remoting.NewResponse(req, remoting.Success, "")
}

// processDeleteACLConfig answers DELETE_ACL_CONFIG (mqadmin
// deleteAclConfig).
func (b *Broker) processDeleteACLConfig(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	fail := func(remark string) *remoting.Command {
		return remoting.NewResponse(req, remoting.DeleteACLConfigFailed, remark)
	}
	if b.acl == nil {
		return fail(aclOffRemark)
	}
	key, err := remoting.Header(req.ExtFields).String("accessKey")
	if err != nil {
		return fail(err.Error())
	}
	found, err := b.acl.DeleteAccount(key)
	if err != nil {
		b.log.Warn().Err(err).Stringer("conn", conn).Str("accessKey", key).Msg("ACL account not deleted")
		return fail(err.Error())
	}
	if !found {
		return fail("The accesskey[" + key + "] corresponding to accessConfig has been deleted failed.")
	}
	b.log.Info().Stringer("conn", conn).Str("accessKey", key).Msg("ACL account deleted")
	return remoting.NewResponse(req, remoting.Success, "")
}

// processUpdateGlobalWhiteAddrs answers UPDATE_GLOBAL_WHITE_ADDRS_CONFIG
// (mqadmin updateGlobalWhiteAddr). aclFileFullPath, when given, must name
// the broker's ACL file.
func (b *Broker) processUpdateGlobalWhiteAddrs(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	fail := func(remark string) *remoting.Command {
		return remoting.NewResponse(req, remoting.UpdateGlobalWhiteAddrsConfigFailed, remark)
	}
	if b.acl == nil {
		return fail(aclOffRemark)
	}
	addrs := optList(req, "globalWhiteAddrs")
	if addrs == nil {
		return fail("the request has no globalWhiteAddrs")
	}
	if path := remoting.Header(req.ExtFields).OptString("aclFileFullPath", ""); path != "" && path != b.acl.Path() {
		return fail("aclFileFullPath " + path + " is not this broker's ACL file " + b.acl.Path())
	}
	if err := b.acl.SetGlobalWhite(*addrs); err != nil {
		b.log.Warn().Err(err).Stringer("conn", conn).Msg("ACL global white list not updated")
		return fail(err.Error())
	}
	b.log.Info().Stringer("conn", conn).Strs("addresses", *addrs).Msg("ACL global white list updated")
	return remoting.NewResponse(req, remoting.Success, "")
}

// processGetACLInfo answers GET_BROKER_CLUSTER_ACL_INFO (mqadmin
// clusterAclConfigVersion): the ACL file's dataVersion and the broker's
// names, in the response header.
func (b *Broker) processGetACLInfo(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	if b.acl == nil {
		return remoting.NewResponse(req, remoting.SystemError, aclOffRemark)
	}
	v := b.acl.Version()
	dv := meta.DataVersion{Timestamp: v.Timestamp, Counter: v.Counter}
	one, err := json.Marshal(dv)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	all, err := json.Marshal(map[string]meta.DataVersion{b.acl.Path(): dv})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{
		"version":           string(one),
		"allAclFileVersion": string(all),
		"brokerName":        b.cfg.BrokerName,
		"brokerAddr":        b.Addr(),
		"clusterName":       b.cfg.BrokerClusterName,
	}
	return resp
}

package broker

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/auth"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// The ACL 2.0 admin requests (AUTH_CREATE_USER 3001 ... AUTH_LIST_ACL
// 3010), answered as RocketMQ 5.3's AdminBrokerProcessor does: the same
// header fields, UserInfo and AclInfo JSON bodies, codes and remarks. Who
// may send them is the check's business (Update or Get on the cluster;
// Super users pass); on top of it only a Super user may create, change or
// delete a Super user. A refusal of the user and access-list rules is
// NO_PERMISSION with RocketMQ's message.

// authRemarkNull is the remark of an ACL request without policies.
const authRemarkNull = "The body of acl is null"

func authFail(req *remoting.Command, err error) *remoting.Command {
	return remoting.NewResponse(req, remoting.NoPermission, err.Error())
}

// authStoreFail answers a request the tables failed, with RocketMQ's
// remark for it; the error itself goes to the log.
func (b *Broker) authStoreFail(req *remoting.Command, err error) *remoting.Command {
	b.log.Error().Err(err).Int32("code", req.Code).Msg("ACL 2.0 admin request failed")
	return remoting.NewResponse(req, remoting.SystemError, "An system error occurred, please try again later.")
}

// callerIsNotSuper reports whether the request is signed by a user who is
// not a Super user. An unsigned request (the checks are off) is not,
// as RocketMQ's isNotSuperUserLogin.
func (b *Broker) callerIsNotSuper(req *remoting.Command) (bool, error) {
	name := req.ExtFields[acl.FieldAccessKey]
	if name == "" {
		return false, nil
	}
	u, ok, err := b.auth.users.Get(name)
	if err != nil {
		return false, err
	}
	return !ok || !auth.IsSuper(u), nil
}

// userRequest reads the username field and the UserInfo body (empty: an
// empty user) of AUTH_CREATE_USER and AUTH_UPDATE_USER; refused is the
// answer when either is missing or wrong.
func userRequest(req *remoting.Command) (name string, in meta.UserInfo, refused *remoting.Command) {
	name = req.ExtFields["username"]
	if name == "" {
		return "", in, remoting.NewResponse(req, remoting.InvalidParameter, "The username is blank")
	}
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, &in); err != nil {
			return "", in, remoting.NewResponse(req, remoting.SystemError, "decode UserInfo: "+err.Error())
		}
	}
	return name, in, nil
}

// processCreateUser answers AUTH_CREATE_USER (mqadmin createUser).
func (b *Broker) processCreateUser(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	name, in, refused := userRequest(req)
	if refused != nil {
		return refused
	}
	in.Username = name
	notSuper, err := b.callerIsNotSuper(req)
	if err != nil {
		return b.authStoreFail(req, err)
	}
	if strings.EqualFold(in.UserType, auth.UserSuper) && notSuper {
		return remoting.NewResponse(req, remoting.SystemError, "The super user can only be create by super user")
	}
	u, err := auth.NewUser(in)
	if err != nil {
		return authFail(req, err)
	}
	if _, ok, err := b.auth.users.Get(name); err != nil {
		return b.authStoreFail(req, err)
	} else if ok {
		return remoting.NewResponse(req, remoting.NoPermission, "The user is existed")
	}
	if err := b.auth.users.Put(u); err != nil {
		return b.authStoreFail(req, err)
	}
	b.log.Info().Stringer("conn", conn).Str("user", name).Str("type", u.UserType).Msg("ACL 2.0 user created")
	return remoting.NewResponse(req, remoting.Success, "")
}

// processUpdateUser answers AUTH_UPDATE_USER (mqadmin updateUser).
func (b *Broker) processUpdateUser(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	name, in, refused := userRequest(req)
	if refused != nil {
		return refused
	}
	notSuper, err := b.callerIsNotSuper(req)
	if err != nil {
		return b.authStoreFail(req, err)
	}
	if strings.EqualFold(in.UserType, auth.UserSuper) && notSuper {
		return remoting.NewResponse(req, remoting.SystemError, "The super user can only be update by super user")
	}
	old, ok, err := b.auth.users.Get(name)
	if err != nil {
		return b.authStoreFail(req, err)
	}
	if !ok {
		return remoting.NewResponse(req, remoting.NoPermission, "The user is not exist")
	}
	if auth.IsSuper(old) && notSuper {
		return remoting.NewResponse(req, remoting.NoPermission, "The super user can only be update by super user")
	}
	u, err := auth.UpdateUser(old, in)
	if err != nil {
		return authFail(req, err)
	}
	if err := b.auth.users.Put(u); err != nil {
		return b.authStoreFail(req, err)
	}
	b.log.Info().Stringer("conn", conn).Str("user", name).Str("type", u.UserType).Str("status", u.UserStatus).Msg("ACL 2.0 user updated")
	return remoting.NewResponse(req, remoting.Success, "")
}

// processDeleteUser answers AUTH_DELETE_USER (mqadmin deleteUser): the
// user and its access list go; an unknown user is a success.
func (b *Broker) processDeleteUser(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	name := req.ExtFields["username"]
	if strings.TrimSpace(name) == "" {
		return remoting.NewResponse(req, remoting.NoPermission, "username can not be blank")
	}
	old, ok, err := b.auth.users.Get(name)
	if err != nil {
		return b.authStoreFail(req, err)
	}
	if !ok {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	notSuper, err := b.callerIsNotSuper(req)
	if err != nil {
		return b.authStoreFail(req, err)
	}
	if auth.IsSuper(old) && notSuper {
		return remoting.NewResponse(req, remoting.NoPermission, "The super user can only be update by super user")
	}
	if err := b.auth.users.Delete(name); err != nil {
		return b.authStoreFail(req, err)
	}
	if err := b.auth.acls.Delete(auth.Subject(name)); err != nil {
		return b.authStoreFail(req, err)
	}
	b.log.Info().Stringer("conn", conn).Str("user", name).Msg("ACL 2.0 user and its access list deleted")
	return remoting.NewResponse(req, remoting.Success, "")
}

// processGetUser answers AUTH_GET_USER (mqadmin getUser): a UserInfo body,
// none for an unknown user.
func (b *Broker) processGetUser(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	name := req.ExtFields["username"]
	if strings.TrimSpace(name) == "" {
		return remoting.NewResponse(req, remoting.InvalidParameter, "The username is blank")
	}
	u, ok, err := b.auth.users.Get(name)
	if err != nil {
		return b.authStoreFail(req, err)
	}
	if !ok {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	return jsonResponse(req, u)
}

// processListUser answers AUTH_LIST_USER (mqadmin listUser): the users
// whose name contains filter, a JSON list (no body when none).
func (b *Broker) processListUser(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	filter := req.ExtFields["filter"]
	var out []meta.UserInfo
	err := b.auth.users.Each(func(u meta.UserInfo) bool {
		if filter == "" || strings.Contains(u.Username, filter) {
			out = append(out, u)
		}
		return true
	})
	if err != nil {
		return b.authStoreFail(req, err)
	}
	if len(out) == 0 {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	return jsonResponse(req, out)
}

// processCreateACL answers AUTH_CREATE_ACL and AUTH_UPDATE_ACL (mqadmin
// createAcl, updateAcl), which RocketMQ treats alike: the policies of the
// body are merged into the subject's access list (see auth.MergeACL).
func (b *Broker) processCreateACL(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var in meta.AclInfo
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, &in); err != nil {
			return remoting.NewResponse(req, remoting.SystemError, "decode AclInfo: "+err.Error())
		}
	}
	if len(in.Policies) == 0 {
		return remoting.NewResponse(req, remoting.SystemError, authRemarkNull)
	}
	if in.Subject == "" {
		in.Subject = req.ExtFields["subject"]
	}
	if _, err := auth.Compile(in); err != nil {
		return authFail(req, err)
	}
	name, _ := auth.SubjectUser(in.Subject) // Compile checked it
	if _, ok, err := b.auth.users.Get(name); err != nil {
		return b.authStoreFail(req, err)
	} else if !ok {
		return remoting.NewResponse(req, remoting.NoPermission, "The subject of "+in.Subject+" is not exist.")
	}
	subject := auth.Subject(name)
	in.Subject = subject
	old, found, err := b.auth.acls.Get(subject)
	if err != nil {
		return b.authStoreFail(req, err)
	}
	var prev *meta.AclInfo
	if found {
		prev = &old
	}
	merged, err := auth.MergeACL(prev, in)
	if err != nil {
		return authFail(req, err)
	}
	if err := b.auth.acls.Put(merged); err != nil {
		return b.authStoreFail(req, err)
	}
	b.log.Info().Stringer("conn", conn).Str("subject", subject).Int32("code", req.Code).Msg("ACL 2.0 access list written")
	return remoting.NewResponse(req, remoting.Success, "")
}

// processDeleteACL answers AUTH_DELETE_ACL (mqadmin deleteAcl): with a
// resource, that entry of the policy of policyType (Custom when absent);
// without, the whole access list.
func (b *Broker) processDeleteACL(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	subject := req.ExtFields["subject"]
	name, err := auth.SubjectUser(subject)
	if err != nil {
		return authFail(req, err)
	}
	typ, err := auth.ParsePolicyType(req.ExtFields["policyType"])
	if err != nil {
		return authFail(req, err)
	}
	var res *auth.Resource
	if raw := req.ExtFields["resource"]; strings.TrimSpace(raw) != "" {
		r, err := auth.ParseResource(raw)
		if err != nil {
			return authFail(req, err)
		}
		res = &r
	}
	if _, ok, err := b.auth.users.Get(name); err != nil {
		return b.authStoreFail(req, err)
	} else if !ok {
		return remoting.NewResponse(req, remoting.NoPermission, "The subject is not exist.")
	}
	subject = auth.Subject(name)
	old, ok, err := b.auth.acls.Get(subject)
	if err != nil {
		return b.authStoreFail(req, err)
	}
	if !ok {
		return remoting.NewResponse(req, remoting.NoPermission, "The acl is not exist.")
	}
	if res == nil {
		err = b.auth.acls.Delete(subject)
	} else if left, empty := auth.DeleteFromACL(old, typ, *res); empty {
		err = b.auth.acls.Delete(subject)
	} else {
		err = b.auth.acls.Put(left)
	}
	if err != nil {
		return b.authStoreFail(req, err)
	}
	b.log.Info().Stringer("conn", conn).Str("subject", subject).Str("resource", req.ExtFields["resource"]).Msg("ACL 2.0 access list entry deleted")
	return remoting.NewResponse(req, remoting.Success, "")
}

// processGetACL answers AUTH_GET_ACL (mqadmin getAcl): an AclInfo body,
// none when the user has no access list.
func (b *Broker) processGetACL(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	name, err := auth.SubjectUser(req.ExtFields["subject"])
	if err != nil {
		return authFail(req, err)
	}
	if _, ok, err := b.auth.users.Get(name); err != nil {
		return b.authStoreFail(req, err)
	} else if !ok {
		return remoting.NewResponse(req, remoting.NoPermission, "The subject is not exist.")
	}
	a, ok, err := b.auth.acls.Get(auth.Subject(name))
	if err != nil {
		return b.authStoreFail(req, err)
	}
	if !ok {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	return jsonResponse(req, a)
}

// processListACL answers AUTH_LIST_ACL (mqadmin listAcl): the access
// lists whose subject contains subjectFilter, cut to the entries whose
// resource contains resourceFilter; a JSON list (no body when none).
func (b *Broker) processListACL(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	subjectFilter, resourceFilter := req.ExtFields["subjectFilter"], req.ExtFields["resourceFilter"]
	var out []meta.AclInfo
	err := b.auth.acls.Each(func(a meta.AclInfo) bool {
		if subjectFilter != "" && !strings.Contains(a.Subject, subjectFilter) {
			return true
		}
		if kept, ok := auth.FilterACL(a, resourceFilter); ok {
			out = append(out, kept)
		}
		return true
	})
	if err != nil {
		return b.authStoreFail(req, err)
	}
	if len(out) == 0 {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	return jsonResponse(req, out)
}

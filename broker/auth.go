package broker

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/auth"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// authState is ACL 2.0 on a running broker: the checker and the tables
// it and the admin requests read and write.
type authState struct {
	checker *auth.Checker
	users   *kvindex.Users
	acls    *kvindex.ACLs
}

// authStore reads the tables for the checker.
type authStore struct{ s *authState }

// User implements auth.Store.
func (a authStore) User(name string) (meta.UserInfo, bool, error) { return a.s.users.Get(name) }

// ACL implements auth.Store.
func (a authStore) ACL(subject string) (meta.AclInfo, bool, error) { return a.s.acls.Get(subject) }

// checkAuthConfig refuses, before the store is opened, a configuration
// that turns on both access controls: RocketMQ 5.3's broker no longer
// reads aclEnable, and running the two side by side would make every
// client satisfy two sets of accounts.
func checkAuthConfig(cfg configs.Broker) error {
	if cfg.AclEnable && cfg.Auth.Enabled() {
		return errors.New("aclEnable (ACL 1.0) and authenticationEnabled/authorizationEnabled (ACL 2.0) are both on: " +
			"turn aclEnable off; migrateAuthFromV1Enabled imports the plain ACL accounts into ACL 2.0")
	}
	return nil
}

// openAuth opens the users and access lists, creates the configured
// users, imports plain_acl.yml when asked, and returns the state of ACL
// 2.0 (also when both checks are off: the admin requests still manage
// users, as on RocketMQ).
func (b *Broker) openAuth() (*authState, error) {
	a := b.cfg.Auth
	s := &authState{}
	var err error
	if s.users, err = b.db.Users(a.UserCacheMaxNum); err != nil {
		return nil, fmt.Errorf("open ACL 2.0 users: %w", err)
	}
	if s.acls, err = b.db.ACLs(a.AclCacheMaxNum); err != nil {
		return nil, fmt.Errorf("open ACL 2.0 access lists: %w", err)
	}
	authnWhite, err := configs.ParseCodeList(a.AuthenticationWhitelist)
	if err != nil {
		return nil, fmt.Errorf("authenticationWhitelist: %w", err)
	}
	authzWhite, err := configs.ParseCodeList(a.AuthorizationWhitelist)
	if err != nil {
		return nil, fmt.Errorf("authorizationWhitelist: %w", err)
	}
	s.checker = auth.NewChecker(auth.Config{Authentication: a.AuthenticationEnabled, Authorization: a.AuthorizationEnabled,
		AuthenticationWhitelist: authnWhite, AuthorizationWhitelist: authzWhite, CompiledACLs: a.AclCacheMaxNum}, authStore{s})

	if u, ok, err := configs.ParseInitUser(a.InitAuthenticationUser); err != nil {
		return nil, fmt.Errorf("initAuthenticationUser: %w", err)
	} else if ok {
		if err := s.ensureSuper(u.Username, u.Password); err != nil {
			return nil, fmt.Errorf("initAuthenticationUser: %w", err)
		}
	}
	if c, ok, err := configs.ParseInnerCredentials(a.InnerClientAuthenticationCredentials); err != nil {
		return nil, fmt.Errorf("innerClientAuthenticationCredentials: %w", err)
	} else if ok {
		if err := s.ensureSuper(c.AccessKey, c.SecretKey); err != nil {
			return nil, fmt.Errorf("innerClientAuthenticationCredentials: %w", err)
		}
	}
	if a.MigrateAuthFromV1Enabled {
		if err := b.migrateAuthFromV1(s); err != nil {
			return nil, err
		}
	}
	if a.Enabled() {
		n, err := s.users.Count()
		if err != nil {
			return nil, fmt.Errorf("count ACL 2.0 users: %w", err)
		}
		if n == 0 {
			b.log.Warn().Msg("access control (ACL 2.0) is on and there is no user: every checked request will be refused; " +
				"set initAuthenticationUser to create a Super user")
		}
		b.log.Info().Bool("authentication", a.AuthenticationEnabled).Bool("authorization", a.AuthorizationEnabled).
			Int("users", n).Msg("access control (ACL 2.0) on")
	}
	return s, nil
}

// ensureSuper creates a Super user unless one of that name exists (which
// is left as it is, as RocketMQ's initUser does).
func (s *authState) ensureSuper(name, password string) error {
	if _, ok, err := s.users.Get(name); err != nil || ok {
		return err
	}
	u, err := auth.NewUser(meta.UserInfo{Username: name, Password: password, UserType: auth.UserSuper})
	if err != nil {
		return err
	}
	return s.users.Put(u)
}

// migrateAuthFromV1 imports the accounts of the plain ACL file, as
// RocketMQ's AuthMigrator: an account whose user exists is skipped.
func (b *Broker) migrateAuthFromV1(s *authState) error {
	path, err := plainACLPath(b.cfg)
	if err != nil {
		return fmt.Errorf("migrateAuthFromV1Enabled: %w", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("migrateAuthFromV1Enabled: read the plain ACL file: %w", err)
	}
	cfg, err := acl.Parse(raw)
	if err != nil {
		return fmt.Errorf("migrateAuthFromV1Enabled: %s: %w", path, err)
	}
	imported := 0
	for _, m := range auth.FromV1(cfg) {
		if m.Refused != nil {
			// As RocketMQ's AuthMigrator: the account is logged and
			// passed over, the others are imported.
			b.log.Error().Err(m.Refused).Str("file", path).Msg("migrateAuthFromV1Enabled: plain ACL account not imported")
			continue
		}
		if _, ok, err := s.users.Get(m.User.Username); err != nil {
			return err
		} else if ok {
			continue
		}
		if m.ACLRefused != nil {
			b.log.Error().Err(m.ACLRefused).Str("file", path).Msg("migrateAuthFromV1Enabled: plain ACL account imported without its permissions")
		}
		if err := s.users.Put(m.User); err != nil {
			return fmt.Errorf("migrate user %s: %w", m.User.Username, err)
		}
		if m.ACL != nil {
			if err := s.acls.Put(*m.ACL); err != nil {
				return fmt.Errorf("migrate the access list of %s: %w", m.User.Username, err)
			}
		}
		imported++
	}
	b.log.Info().Str("file", path).Int("accounts", len(cfg.Accounts)).Int("imported", imported).
		Msg("plain ACL accounts migrated to ACL 2.0 (existing users left alone)")
	return nil
}

// innerSigner signs the broker's own requests (registration with the name
// servers) with innerClientAuthenticationCredentials, as RocketMQ's
// BrokerOuterAPI does; nil when none are set.
func (b *Broker) innerSigner() func(*remoting.Command) {
	c, ok, err := configs.ParseInnerCredentials(b.cfg.Auth.InnerClientAuthenticationCredentials)
	if err != nil || !ok {
		return nil // the configuration was checked when it was loaded
	}
	return acl.RequestSigner(c.AccessKey, c.SecretKey)
}

// authHandler checks every request against ACL 2.0 before next serves it.
type authHandler struct {
	b    *Broker
	s    *authState
	next remoting.Handler
}

// ServeCommand implements remoting.Handler.
func (h authHandler) ServeCommand(ctx context.Context, conn *remoting.Conn, req *remoting.Command) {
	r := &auth.Request{Code: req.Code, Version: req.Version, Remote: remoteIP(conn.RemoteAddr()),
		Fields: req.ExtFields, Body: req.Body}
	if r.Fields == nil {
		r.Fields = map[string]string{}
	}
	if h.s.checker.Config().Authorization {
		r.Needs = authNeeds(req, h.b.cfg.BrokerClusterName)
	}
	if err := h.s.checker.Check(r); err != nil {
		code, remark := authAnswer(err)
		h.b.refusedLog.Warn().Stringer("conn", conn).Int32("code", req.Code).Str("user", r.Fields[acl.FieldAccessKey]).
			Str("reason", err.Error()).Msg("request refused by access control (ACL 2.0, sampled)")
		if !req.IsOneway() {
			_ = conn.Reply(req, remoting.NewResponse(req, code, remark))
		}
		return
	}
	h.next.ServeCommand(ctx, conn, req)
}

// authAnswer is the code and remark a request gets when the check did not
// allow it: NO_PERMISSION with RocketMQ's remark for a refusal, SYSTEM_ERROR
// when the tables failed.
func authAnswer(err error) (code int32, remark string) {
	var d *auth.Denied
	if errors.As(err, &d) {
		return remoting.NoPermission, err.Error()
	}
	return remoting.SystemError, "access control: " + err.Error()
}

// accessControlled reports whether requests are checked (plain ACL or
// ACL 2.0): processors then refuse what the check could not see, such as
// a message read by offset that is not of the topic the check was of.
func (b *Broker) accessControlled() bool { return b.acl != nil || b.cfg.Auth.Enabled() }

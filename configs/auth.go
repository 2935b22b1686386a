package configs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// RocketMQ's class names of its built-in ACL 2.0 parts: the only ones a
// configuration may name (rocketkv has no plug-ins).
const (
	DefaultAuthenticationProvider         = "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider"
	DefaultAuthorizationProvider          = "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider"
	LocalAuthenticationMetadataProvider   = "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider"
	LocalAuthorizationMetadataProvider    = "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider"
	StatelessAuthenticationStrategy       = "org.apache.rocketmq.auth.authentication.strategy.StatelessAuthenticationStrategy"
	StatefulAuthenticationStrategy        = "org.apache.rocketmq.auth.authentication.strategy.StatefulAuthenticationStrategy"
	StatelessAuthorizationStrategy        = "org.apache.rocketmq.auth.authorization.strategy.StatelessAuthorizationStrategy"
	StatefulAuthorizationStrategy         = "org.apache.rocketmq.auth.authorization.strategy.StatefulAuthorizationStrategy"
	defaultAuthCacheMaxNum                = "1000"
	defaultStatefulAuthCacheMaxNum        = "10000"
	defaultAuthCacheExpiredSecond         = "600"
	defaultAuthCacheRefreshSecond         = "60"
	defaultStatefulAuthCacheExpiredSecond = "60"
)

// Auth is RocketMQ 5.3's access control, ACL 2.0 (its AuthConfig keys).
type Auth struct {
	// AuthenticationEnabled checks that each request is signed by an
	// enabled user with its password.
	AuthenticationEnabled bool
	// AuthorizationEnabled checks each request's resources against the
	// signer's access list.
	AuthorizationEnabled bool
	// The providers and strategies: empty or RocketMQ's built-in class
	// names (the store is always the broker's Pebble database; caching is
	// the tables' own, so both strategies behave alike).
	AuthenticationProvider         string
	AuthorizationProvider          string
	AuthenticationMetadataProvider string
	AuthorizationMetadataProvider  string
	AuthenticationStrategy         string
	AuthorizationStrategy          string
	// InitAuthenticationUser, a JSON {"username","password"}, is created
	// as a Super user at start when no user has its name.
	InitAuthenticationUser string
	// InnerClientAuthenticationCredentials, a JSON {"accessKey",
	// "secretKey"}: the Super user the broker is created as at start when
	// absent, and signs its own requests to name servers with.
	InnerClientAuthenticationCredentials string
	// AuthenticationWhitelist and AuthorizationWhitelist are request codes,
	// comma-separated, that skip each check.
	AuthenticationWhitelist string
	AuthorizationWhitelist  string
	// MigrateAuthFromV1Enabled imports the accounts of the plain ACL file
	// (PlainAclFile) as users and access lists at start, leaving users
	// that exist alone.
	MigrateAuthFromV1Enabled bool
	// UserCacheMaxNum and AclCacheMaxNum bound the users and access lists
	// kept in memory.
	UserCacheMaxNum int
	AclCacheMaxNum  int
	// The rest of RocketMQ's cache keys, accepted and reported: the
	// tables' caches are written through on every change, so nothing in
	// them expires or needs a refresh.
	UserCacheExpiredSecond                   int
	UserCacheRefreshSecond                   int
	AclCacheExpiredSecond                    int
	AclCacheRefreshSecond                    int
	StatefulAuthenticationCacheMaxNum        int
	StatefulAuthenticationCacheExpiredSecond int
	StatefulAuthorizationCacheMaxNum         int
	StatefulAuthorizationCacheExpiredSecond  int
}

// Enabled reports whether either check of ACL 2.0 is on.
func (a Auth) Enabled() bool { return a.AuthenticationEnabled || a.AuthorizationEnabled }

// InitUser is initAuthenticationUser decoded.
type InitUser struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// InnerCredentials is innerClientAuthenticationCredentials decoded.
type InnerCredentials struct {
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
}

// ParseInitUser decodes initAuthenticationUser; ok is false when it is
// empty.
func ParseInitUser(raw string) (u InitUser, ok bool, err error) {
	if strings.TrimSpace(raw) == "" {
		return u, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &u); err != nil {
		return u, false, fmt.Errorf("not a JSON {\"username\",\"password\"}: %w", err)
	}
	if strings.TrimSpace(u.Username) == "" || strings.TrimSpace(u.Password) == "" {
		return u, false, fmt.Errorf("username and password must not be blank")
	}
	return u, true, nil
}

// ParseInnerCredentials decodes innerClientAuthenticationCredentials; ok
// is false when it is empty.
func ParseInnerCredentials(raw string) (c InnerCredentials, ok bool, err error) {
	if strings.TrimSpace(raw) == "" {
		return c, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return c, false, fmt.Errorf("not a JSON {\"accessKey\",\"secretKey\"}: %w", err)
	}
	if strings.TrimSpace(c.AccessKey) == "" || strings.TrimSpace(c.SecretKey) == "" {
		return c, false, fmt.Errorf("accessKey and secretKey must not be blank")
	}
	return c, true, nil
}

// ParseCodeList reads a whitelist of request codes: integers separated by
// commas, blanks ignored.
func ParseCodeList(raw string) (map[int32]bool, error) {
	out := map[int32]bool{}
	for _, part := range strings.Split(raw, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		v, err := strconv.ParseInt(part, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a request code", part)
		}
		out[int32(v)] = true
	}
	return out, nil
}

// checked is str with a check of the value.
func checked[T any](key, def string, check func(string) error, ptr func(*T) *string) field[T] {
	f := str(key, def, ptr)
	set := f.set
	f.set = func(c *T, raw string) error {
		if err := check(raw); err != nil {
			return err
		}
		return set(c, raw)
	}
	return f
}

// checkedSecret is secret with a check of the value: a key holding a
// password is reported masked.
func checkedSecret[T any](key string, check func(string) error, ptr func(*T) *string) field[T] {
	f := secret(key, ptr)
	set := f.set
	f.set = func(c *T, raw string) error {
		if raw != maskedSecret {
			if err := check(raw); err != nil {
				return err
			}
		}
		return set(c, raw)
	}
	return f
}

// className is a key naming one of RocketMQ's classes: empty or one of
// allowed; anything else is a plug-in rocketkv cannot load.
func className[T any](key string, ptr func(*T) *string, allowed ...string) field[T] {
	return checked(key, "", func(raw string) error {
		for _, a := range allowed {
			if raw == "" || raw == a {
				return nil
			}
		}
		return fmt.Errorf("%q: rocketkv has only RocketMQ's built-in %s (leave it empty or set %s)",
			raw, key, strings.Join(allowed, " or "))
	}, ptr)
}

func authFields() []field[Broker] {
	a := func(b *Broker) *Auth { return &b.Auth }
	return []field[Broker]{
		boolean("authenticationEnabled", "false", func(b *Broker) *bool { return &a(b).AuthenticationEnabled }),
		boolean("authorizationEnabled", "false", func(b *Broker) *bool { return &a(b).AuthorizationEnabled }),
		className("authenticationProvider", func(b *Broker) *string { return &a(b).AuthenticationProvider }, DefaultAuthenticationProvider),
		className("authorizationProvider", func(b *Broker) *string { return &a(b).AuthorizationProvider }, DefaultAuthorizationProvider),
		className("authenticationMetadataProvider", func(b *Broker) *string { return &a(b).AuthenticationMetadataProvider }, LocalAuthenticationMetadataProvider),
		className("authorizationMetadataProvider", func(b *Broker) *string { return &a(b).AuthorizationMetadataProvider }, LocalAuthorizationMetadataProvider),
		className("authenticationStrategy", func(b *Broker) *string { return &a(b).AuthenticationStrategy }, StatelessAuthenticationStrategy, StatefulAuthenticationStrategy),
		className("authorizationStrategy", func(b *Broker) *string { return &a(b).AuthorizationStrategy }, StatelessAuthorizationStrategy, StatefulAuthorizationStrategy),
		checkedSecret("initAuthenticationUser", func(raw string) error { _, _, err := ParseInitUser(raw); return err },
			func(b *Broker) *string { return &a(b).InitAuthenticationUser }),
		checkedSecret("innerClientAuthenticationCredentials", func(raw string) error { _, _, err := ParseInnerCredentials(raw); return err },
			func(b *Broker) *string { return &a(b).InnerClientAuthenticationCredentials }),
		checked("authenticationWhitelist", "", func(raw string) error { _, err := ParseCodeList(raw); return err },
			func(b *Broker) *string { return &a(b).AuthenticationWhitelist }),
		checked("authorizationWhitelist", "", func(raw string) error { _, err := ParseCodeList(raw); return err },
			func(b *Broker) *string { return &a(b).AuthorizationWhitelist }),
		boolean("migrateAuthFromV1Enabled", "false", func(b *Broker) *bool { return &a(b).MigrateAuthFromV1Enabled }),
		intRange("userCacheMaxNum", defaultAuthCacheMaxNum, 1, 1<<26, func(b *Broker) *int { return &a(b).UserCacheMaxNum }),
		intRange("userCacheExpiredSecond", defaultAuthCacheExpiredSecond, 0, 1<<31-1, func(b *Broker) *int { return &a(b).UserCacheExpiredSecond }),
		intRange("userCacheRefreshSecond", defaultAuthCacheRefreshSecond, 0, 1<<31-1, func(b *Broker) *int { return &a(b).UserCacheRefreshSecond }),
		intRange("aclCacheMaxNum", defaultAuthCacheMaxNum, 1, 1<<26, func(b *Broker) *int { return &a(b).AclCacheMaxNum }),
		intRange("aclCacheExpiredSecond", defaultAuthCacheExpiredSecond, 0, 1<<31-1, func(b *Broker) *int { return &a(b).AclCacheExpiredSecond }),
		intRange("aclCacheRefreshSecond", defaultAuthCacheRefreshSecond, 0, 1<<31-1, func(b *Broker) *int { return &a(b).AclCacheRefreshSecond }),
		intRange("statefulAuthenticationCacheMaxNum", defaultStatefulAuthCacheMaxNum, 0, 1<<26, func(b *Broker) *int { return &a(b).StatefulAuthenticationCacheMaxNum }),
		intRange("statefulAuthenticationCacheExpiredSecond", defaultStatefulAuthCacheExpiredSecond, 0, 1<<31-1, func(b *Broker) *int { return &a(b).StatefulAuthenticationCacheExpiredSecond }),
		intRange("statefulAuthorizationCacheMaxNum", defaultStatefulAuthCacheMaxNum, 0, 1<<26, func(b *Broker) *int { return &a(b).StatefulAuthorizationCacheMaxNum }),
		intRange("statefulAuthorizationCacheExpiredSecond", defaultStatefulAuthCacheExpiredSecond, 0, 1<<31-1, func(b *Broker) *int { return &a(b).StatefulAuthorizationCacheExpiredSecond }),
	}
}

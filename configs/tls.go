package configs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
)

// TLS modes of tls.server.mode.
const (
	TLSModeDisabled   = "disabled"
	TLSModePermissive = "permissive"
	TLSModeEnforcing  = "enforcing"
)

// DefaultTLSConfigFile is RocketMQ's default tls.config.file.
const DefaultTLSConfigFile = "/etc/rocketmq/tls.properties"

// TLS is the TLS configuration of a broker, a name server or a
// controller, under the names of RocketMQ's TLS system properties
// (TlsSystemConfig), which work as keys of the configuration file as they
// are, dots and all: the listener's (tls.server.*) and, for the processes
// that dial with TLS (tls.enable), their client connections'
// (tls.client.*).
type TLS struct {
	// Mode is tls.server.mode: disabled, permissive (TLS and plaintext on
	// the same port, the default) or enforcing (TLS only).
	Mode string
	// TestModeEnable is tls.test.mode.enable: without a certificate
	// (CertPath), a self-signed one is generated at start.
	TestModeEnable bool
	// ConfigFile is tls.config.file: a properties file whose tls.* keys
	// (all but tls.server.mode and tls.enable) win over these fields, as
	// RocketMQ reads it; a missing file is skipped.
	ConfigFile string
	// CertPath is tls.server.certPath, the PEM certificate chain.
	CertPath string
	// KeyPath is tls.server.keyPath, the PEM private key.
	KeyPath string
	// KeyPassword is tls.server.keyPassword, for an encrypted key. It is
	// reported masked.
	KeyPassword string
	// NeedClientAuth is tls.server.need.client.auth: none, optional or
	// require.
	NeedClientAuth string
	// AuthClient is tls.server.authClient: verify client certificates
	// against TrustCertPath (the system's roots when empty).
	AuthClient bool
	// TrustCertPath is tls.server.trustCertPath, the PEM certificates of
	// the authorities trusted for client certificates.
	TrustCertPath string

	// ClientCertPath is tls.client.certPath, the PEM certificate chain the
	// process presents on the TLS connections it opens (to name servers,
	// controllers, brokers) when the server asks for one.
	ClientCertPath string
	// ClientKeyPath is tls.client.keyPath, ClientCertPath's PEM private
	// key.
	ClientKeyPath string
	// ClientKeyPassword is tls.client.keyPassword, for an encrypted
	// ClientKeyPath. It is reported masked.
	ClientKeyPassword string
	// ClientAuthServer is tls.client.authServer: verify the servers'
	// certificates against ClientTrustCertPath (the system's roots when
	// empty). Without it they are not verified, RocketMQ's default.
	ClientAuthServer bool
	// ClientTrustCertPath is tls.client.trustCertPath, the PEM
	// certificates of the authorities trusted for server certificates.
	ClientTrustCertPath string
}

// maskedSecret is how a set secret is reported.
const maskedSecret = "******"

// secret is a string key whose value is never reported: Settings (and so
// GET_BROKER_CONFIG) shows maskedSecret when it is set. Setting the mask
// itself keeps the value, so a report fed back changes nothing.
func secret[T any](key string, ptr func(*T) *string) field[T] {
	return field[T]{key: key, def: "", set: func(c *T, raw string) error {
		if raw != maskedSecret {
			*ptr(c) = raw
		}
		return nil
	}, get: func(c *T) string {
		if *ptr(c) == "" {
			return ""
		}
		return maskedSecret
	}, value: func(c *T) string { return *ptr(c) }}
}

// tlsServerFields are the TLS keys of a server configuration T, whose TLS
// settings ptr returns.
func tlsServerFields[T any](ptr func(*T) *TLS) []field[T] {
	return []field[T]{
		oneOf("tls.server.mode", TLSModePermissive, []string{TLSModeDisabled, TLSModePermissive, TLSModeEnforcing}, func(c *T) *string { return &ptr(c).Mode }),
		boolean("tls.test.mode.enable", "true", func(c *T) *bool { return &ptr(c).TestModeEnable }),
		str("tls.config.file", DefaultTLSConfigFile, func(c *T) *string { return &ptr(c).ConfigFile }),
		str("tls.server.certPath", "", func(c *T) *string { return &ptr(c).CertPath }),
		str("tls.server.keyPath", "", func(c *T) *string { return &ptr(c).KeyPath }),
		secret("tls.server.keyPassword", func(c *T) *string { return &ptr(c).KeyPassword }),
		oneOf("tls.server.need.client.auth", "none", []string{"none", "optional", "require"}, func(c *T) *string { return &ptr(c).NeedClientAuth }),
		boolean("tls.server.authClient", "false", func(c *T) *bool { return &ptr(c).AuthClient }),
		str("tls.server.trustCertPath", "", func(c *T) *string { return &ptr(c).TrustCertPath }),
	}
}

// tlsClientFields are the tls.client.* keys of a configuration T whose
// process dials with TLS (tls.enable), whose TLS settings ptr returns.
func tlsClientFields[T any](ptr func(*T) *TLS) []field[T] {
	return []field[T]{
		str("tls.client.certPath", "", func(c *T) *string { return &ptr(c).ClientCertPath }),
		str("tls.client.keyPath", "", func(c *T) *string { return &ptr(c).ClientKeyPath }),
		secret("tls.client.keyPassword", func(c *T) *string { return &ptr(c).ClientKeyPassword }),
		boolean("tls.client.authServer", "false", func(c *T) *bool { return &ptr(c).ClientAuthServer }),
		str("tls.client.trustCertPath", "", func(c *T) *string { return &ptr(c).ClientTrustCertPath }),
	}
}

// tlsEnableField is tls.enable, RocketMQ's switch for the TLS of a
// process's client connections (TlsSystemConfig reads it as a system
// property; NettyClientConfig, which a broker.conf, a controller's file
// and a name server's file all fill, calls it useTLS, read here as the
// same key). Empty, its default, stands for RocketMQ's default: TLS when
// the process's own listener enforces it (see DialTLS).
func tlsEnableField[T any](ptr func(*T) *string) field[T] {
	return withAliases(oneOf("tls.enable", "", []string{"", "true", "false"}, ptr), "useTLS")
}

// DialTLS reports whether a process whose tls.enable is enable and whose
// listener runs tls.server.mode mode dials its peers with TLS: enable
// when set, otherwise whether mode is enforcing, as RocketMQ's
// NettyClientConfig defaults useTLS.
func DialTLS(enable, mode string) bool {
	if enable == "" {
		return mode == TLSModeEnforcing
	}
	return enable == "true"
}

// tlsFileFields are the keys RocketMQ reads from tls.config.file.
var tlsFileFields = func() []field[TLS] {
	var out []field[TLS]
	self := func(t *TLS) *TLS { return t }
	for _, f := range append(tlsServerFields(self), tlsClientFields(self)...) {
		if f.key != "tls.server.mode" && f.key != "tls.config.file" {
			out = append(out, f)
		}
	}
	return out
}()

// WithConfigFile returns t with the keys of its tls.config.file applied,
// as RocketMQ applies them over its system properties, and the keys the
// file set. Without a file (ConfigFile empty or no such file) t is
// returned as it is. A file that cannot be read or a value that does not
// parse is an error naming the file and the key. The keys it cannot set
// (tls.server.mode, tls.enable) are ignored.
func (t TLS) WithConfigFile() (TLS, []string, error) {
	if t.ConfigFile == "" {
		return t, nil, nil
	}
	raw, err := os.ReadFile(t.ConfigFile)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil, nil
	}
	if err != nil {
		return TLS{}, nil, fmt.Errorf("tls.config.file: %w", err)
	}
	out, set, err := t.applyConfigFile(raw)
	if err != nil {
		return TLS{}, nil, fmt.Errorf("tls.config.file %s: %w", t.ConfigFile, err)
	}
	return out, set, nil
}

// applyConfigFile returns t with the keys of raw, the content of a
// tls.config.file, applied, and the keys it set, sorted.
func (t TLS) applyConfigFile(raw []byte) (TLS, []string, error) {
	entries, err := parseProperties(raw)
	if err != nil {
		return TLS{}, nil, err
	}
	// Keys exactly as RocketMQ's TlsHelper looks them up; the last entry
	// of a key wins.
	p := make(map[string]string, len(entries))
	for _, e := range entries {
		p[e.key] = e.value
	}
	out := t
	var set []string
	for _, f := range tlsFileFields {
		v, ok := p[f.key]
		if !ok {
			continue
		}
		if err := f.set(&out, strings.TrimSpace(v)); err != nil {
			return TLS{}, nil, fmt.Errorf("key %s: %w", f.key, err)
		}
		set = append(set, f.key)
	}
	sort.Strings(set)
	return out, set, nil
}

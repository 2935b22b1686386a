package broker

import (
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/namesrv"
)

// A name server whose listener requires client certificates signed by a
// CA (tls.server.need.client.auth=require, tls.server.authClient with the
// CA as tls.server.trustCertPath) takes the registrations of brokers that
// present one (tls.client.certPath and keyPath, in broker.conf or in
// tls.config.file) and refuses the others, which log why. With
// tls.client.authServer a broker registers only with a name server whose
// certificate its tls.client.trustCertPath vouches for.
func TestBrokerRegistersWithAMutualTLSNameServer(t *testing.T) {
	pki := testutil.NewPKI(t)
	nsCert, nsKey := pki.Issue(t, "namesrv")
	brokerCert, brokerKey := pki.Issue(t, "broker")
	cfg := namesrv.DefaultConfig()
	cfg.Remoting.Addr = "127.0.0.1:0"
	cfg.Remoting.EventLoops = 1
	cfg.TLS.Mode = "enforcing"
	cfg.TLS.ConfigFile = ""
	cfg.TLS.CertPath, cfg.TLS.KeyPath = nsCert, nsKey
	cfg.TLS.NeedClientAuth, cfg.TLS.AuthClient, cfg.TLS.TrustCertPath = "require", true, pki.CAPath
	ns := startNameServerWith(t, cfg, zerolog.Nop())
	nsAddr := ns.Addr().String()

	registers := func(t *testing.T, name string, settings map[string]string) {
		t.Helper()
		o := map[string]string{"namesrvAddr": nsAddr, "tls.enable": "true", "tls.config.file": "", "brokerName": name}
		for k, v := range settings {
			o[k] = v
		}
		startTestBroker(t, o)
		waitFor(t, name+"'s registration", func() bool { return len(ns.Registry().MemberGroup(name)) == 1 })
	}
	// refused starts a broker of settings, waits for its log to say why
	// the registration failed (one of wants), and checks that it did not
	// land.
	refused := func(t *testing.T, name string, wants []string, settings map[string]string) {
		t.Helper()
		o := map[string]string{"namesrvAddr": nsAddr, "tls.enable": "true", "tls.config.file": "", "brokerName": name}
		for k, v := range settings {
			o[k] = v
		}
		logs := &testutil.SyncBuffer{}
		startTestBrokerWith(t, t.TempDir(), o, func(b *Broker) { b.log = zerolog.New(logs) })
		waitFor(t, name+"'s failed registration in its log", func() bool {
			return strings.Contains(logs.String(), "broker not registered with any name server")
		})
		if !slices.ContainsFunc(wants, func(w string) bool { return strings.Contains(logs.String(), w) }) {
			t.Errorf("%s: the failed registration's log says none of %q:\n%s", name, wants, logs.String())
		}
		if len(ns.Registry().MemberGroup(name)) != 0 {
			t.Errorf("%s registered", name)
		}
	}

	t.Run("certificate in broker.conf", func(t *testing.T) {
		registers(t, "broker-mtls", map[string]string{"tls.client.certPath": brokerCert, "tls.client.keyPath": brokerKey})
	})
	t.Run("certificate in tls.config.file, server verified", func(t *testing.T) {
		file := testutil.WriteFile(t, "tls.properties", "tls.client.certPath="+brokerCert+"\ntls.client.keyPath="+brokerKey+
			"\ntls.client.authServer=true\ntls.client.trustCertPath="+pki.CAPath+"\n")
		registers(t, "broker-mtls-file", map[string]string{"tls.config.file": file})
	})
	t.Run("no certificate", func(t *testing.T) {
		// In TLS 1.3 the server checks the client's certificate after
		// the client's handshake returned: the alert ("certificate
		// required") reaches the broker when it reads, but a request
		// written after the server closed fails on the write first.
		refused(t, "broker-no-cert", []string{"certificate required", "broken pipe", "connection reset by peer"}, nil)
	})
	t.Run("server not trusted", func(t *testing.T) {
		other := testutil.NewPKI(t)
		refused(t, "broker-distrust", []string{"tls.client.authServer"}, map[string]string{"tls.client.certPath": brokerCert,
			"tls.client.keyPath": brokerKey, "tls.client.authServer": "true", "tls.client.trustCertPath": other.CAPath})
	})
}

package certwatch

import (
	"crypto/tls"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// served is the configuration a handshake would get now.
func served(t *testing.T, w *Watcher) *tls.Config {
	t.Helper()
	c, err := w.Config().GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func servedName(t *testing.T, w *Watcher) string {
	t.Helper()
	return served(t, w).Certificates[0].Leaf.Subject.CommonName
}

// The watcher's rules, step by step on one set of files: each step
// changes files, runs one pass, and names the certificate served after
// it and whether the pass logged an error.
func TestWatcherFollowsItsFiles(t *testing.T) {
	pki := testutil.NewPKI(t)
	otherCA := testutil.NewPKI(t)
	dir := t.TempDir()
	files := Files{Cert: dir + "/served.pem", Key: dir + "/served.key", Trust: dir + "/trust.pem"}
	aCert, aKey := pki.Issue(t, "a")
	bCert, bKey := pki.Issue(t, "b")
	cCert, _ := pki.Issue(t, "c")
	aRenewed := pki.Reissue(t, "a-renewed", aKey)
	testutil.CopyFile(t, aCert, files.Cert)
	testutil.CopyFile(t, aKey, files.Key)
	testutil.CopyFile(t, pki.CAPath, files.Trust)

	build := func() (*tls.Config, error) {
		_, c, err := remoting.ServerTLS("permissive", remoting.TLSOptions{CertPath: files.Cert, KeyPath: files.Key,
			TrustCertPath: files.Trust, NeedClientAuth: remoting.ClientAuthOptional, AuthClient: true})
		return c, err
	}
	initial, err := build()
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.SyncBuffer
	w := New(files, initial, build, zerolog.New(&logs))
	if got := servedName(t, w); got != "a" {
		t.Fatalf("served %q at start, want a", got)
	}

	steps := []struct {
		name     string
		change   func()
		want     string
		errorLog bool
	}{
		{"nothing changed", func() {}, "a", false},
		{"the certificate renewed for the same key", func() { testutil.CopyFile(t, aRenewed, files.Cert) }, "a-renewed", false},
		{"a new certificate before its key", func() { testutil.CopyFile(t, bCert, files.Cert) }, "a-renewed", false},
		{"then its key", func() { testutil.CopyFile(t, bKey, files.Key) }, "b", false},
		{"a certificate and a key that are no pair", func() {
			testutil.CopyFile(t, cCert, files.Cert)
			testutil.CopyFile(t, aKey, files.Key)
		}, "b", true},
		{"the certificate file removed (being replaced)", func() {
			if err := os.Remove(files.Cert); err != nil {
				t.Fatal(err)
			}
		}, "b", false},
		{"the pair written again", func() {
			testutil.CopyFile(t, bCert, files.Cert)
			testutil.CopyFile(t, bKey, files.Key)
		}, "b", false},
	}
	for _, s := range steps {
		before := len(logs.String())
		s.change()
		w.Check()
		if got := servedName(t, w); got != s.want {
			t.Fatalf("%s: served %q, want %q\n%s", s.name, got, s.want, logs.String())
		}
		logged := logs.String()[before:]
		if hasError := strings.Contains(logged, `"level":"error"`); hasError != s.errorLog {
			t.Fatalf("%s: error logged %v, want %v:\n%s", s.name, hasError, s.errorLog, logged)
		}
	}

	// The trusted authorities alone: a new configuration whose client
	// CAs are the new file's.
	prev := served(t, w)
	testutil.CopyFile(t, otherCA.CAPath, files.Trust)
	w.Check()
	now := served(t, w)
	if now == prev {
		t.Fatal("a change of the trusted authorities built no new configuration")
	}
	if now.ClientCAs == nil || now.ClientCAs.Equal(prev.ClientCAs) {
		t.Fatal("the new configuration trusts the old authorities")
	}
	if w.Passes() != int64(len(steps)+1) {
		t.Fatalf("%d passes counted, want %d", w.Passes(), len(steps)+1)
	}
}

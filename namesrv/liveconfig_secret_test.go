package namesrv

import (
	"os"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// As on the broker: a secret key changed at run time is refused as every
// other fixed key; it used to be answered SUCCESS with nothing changed
// (the masked texts compared equal).
func TestANamesrvSecretKeyUpdateIsRefusedAsFixed(t *testing.T) {
	ns, path := startFromFile(t, "tls.server.keyPassword=old\n")
	c := dial(t, ns)
	resp := invoke(t, c, remoting.UpdateNamesrvConfig, nil, []byte("tls.server.keyPassword=new"))
	if resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "cannot change while the name server runs") || ns.settings().TLS.KeyPassword != "old" {
		raw, _ := os.ReadFile(path)
		t.Fatalf("UPDATE_NAMESRV_CONFIG tls.server.keyPassword=new: code %d %q, want it refused as fixed; file:\n%s", resp.Code, resp.Remark, raw)
	}
}

package broker

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/migrate/dledger/dledgertest"
)

// A broker pointed at a RocketMQ store of DLedger mode refuses it, naming
// the import, instead of serving its config and queue offsets over an
// empty CommitLog.
func TestOpenDLedgerStoreRefused(t *testing.T) {
	src := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	root := filepath.Join(t.TempDir(), "dledger-store")
	dledgertest.FromRocketMQ(t, src, root, "n0", dledgertest.NewLog(16384, 0, 0))
	err := startError(t, map[string]string{"storePathRootDir": root, "listenPort": "0",
		"brokerIP1": "127.0.0.1", "mappedFileSizeCommitLog": "16384"})
	if err == nil || !strings.Contains(err.Error(), "DLedger mode") || !strings.Contains(err.Error(), "import-dledger") ||
		!strings.Contains(err.Error(), filepath.Join(root, "dledger-n0", "data")) {
		t.Fatalf("start over a DLedger store: %v, want the refusal naming import-dledger", err)
	}
}

package kvindex

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// childEnvRestart names the store runRestartChild opens.
const childEnvRestart = "KVINDEX_CRASH_RESTART_DIR"

// runRestartChild opens the store at root as a replica, in double-write,
// and SIGKILLs itself as soon as dispatch dropped a restarted queue,
// before it indexed the record that restarts it. It returns only when no
// restart came.
func runRestartChild(root string) int {
	kill := func(step string) {
		if step == StepQueueRestarted {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	openStackWith(fatalT{}, root, layoutsConfig(root), LayoutKV, LayoutFile, func(o *DispatcherOptions) {
		o.Replica, o.RecoveryStep = true, kill
	})
	fmt.Println("no queue restarted")
	return 0
}

// A replica SIGKILLed between the drop of a restarted queue and the batch
// that indexes the record restarting it starts again with both layouts
// holding the new topic's records only, as if it had not been killed.
func TestReplicaQueueRestartSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	root := t.TempDir()
	g := newDispatchGate()
	replica := func(o *DispatcherOptions) { o.Replica = true }
	s := openStackWith(t, root, layoutsConfig(root), LayoutKV, LayoutFile, g.on("Gate"), replica)
	for i := range 3 {
		appendAt(t, s, "T", 0, int64(i), fmt.Sprint("old-", i))
	}
	s.catchUp(t)
	// The rest stays undispatched: the gate fails every batch from the
	// first record on.
	g.failing.Store(true)
	appendAt(t, s, "Gate", 0, 0, "gate")
	g.waitHeld(t)
	appendAt(t, s, "T", 0, 3, "old-3")
	new1 := appendAt(t, s, "T", 1, 0, "new-1-0")
	new0 := []int64{appendAt(t, s, "T", 0, 0, "new-0-0"), appendAt(t, s, "T", 0, 1, "new-0-1")}
	s.close(t)

	testutil.RunChildToExit(t, time.Minute, -1, []string{"-test.run=^$"}, childEnvRestart+"="+root)

	s = openStackWith(t, root, layoutsConfig(root), LayoutKV, LayoutFile, replica)
	defer s.close(t)
	want0, want1 := fmt.Sprint([2]int64{0, 2}, new0), fmt.Sprint([2]int64{0, 1}, []int64{new1})
	wantQueuesOfT(t, s, LayoutKV, LayoutFile, "after the kill", want0, want1)
	s.agree(t)
}

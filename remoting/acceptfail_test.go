package remoting

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// acceptFailChildEnv makes the test binary run acceptFailChild instead
// of the test that starts it.
const acceptFailChildEnv = "REMOTING_ACCEPT_FAIL_CHILD"

// TestAcceptFailureKeepsServing runs a server in a child process whose
// descriptor limit a flood of connections exhausts: gnet stops its whole
// engine when an accept fails with EMFILE, and the server must listen
// again once descriptors are free, rather than leave the process up with
// its port dead.
func TestAcceptFailureKeepsServing(t *testing.T) {
	if os.Getenv(acceptFailChildEnv) != "" {
		acceptFailChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptFailureKeepsServing$", "-test.v")
	cmd.Env = append(os.Environ(), acceptFailChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &strings.Builder{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("child's log:\n%s", logs.String())
		}
	})
	lines := bufio.NewScanner(stdout)
	addr, accepted := "", make(chan struct{})
	for lines.Scan() {
		if a, ok := strings.CutPrefix(lines.Text(), "addr "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatal("the child printed no address")
	}
	go func() {
		for lines.Scan() {
			if lines.Text() == "accept failed" {
				close(accepted)
			}
		}
	}()
	// The child's limit leaves room for a few dozen descriptors: keep
	// dialing until its acceptor has failed.
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			_ = c.Close()
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for waiting := true; waiting; {
		select {
		case <-accepted:
			waiting = false
		default:
			if time.Now().After(deadline) {
				t.Fatal("the child's acceptor never failed")
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				flood = append(flood, c)
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	for _, c := range flood {
		_ = c.Close()
	}
	flood = nil
	// With its descriptors free again the child must answer a request;
	// the deadline only turns a dead port into a failure.
	deadline = time.Now().Add(20 * time.Second)
	for {
		err := pingOnce(addr)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server does not answer after its descriptors were freed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pingOnce sends one request on a new connection and waits for its answer.
func pingOnce(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, ClientOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.Invoke(ctx, NewRequest(GetBrokerRuntimeInfo, nil, nil))
	if err != nil {
		return err
	}
	if resp.Code != Success {
		return fmt.Errorf("answer %d %q", resp.Code, resp.Remark)
	}
	return nil
}

// acceptFailChild serves in the child: a descriptor limit a little above
// what the process holds, an address on stdout, "accept failed" once gnet
// reported a failed accept, until stdin closes.
func acceptFailChild() {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	lim.Cur = uint64(len(fds) + 32)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	failed := make(chan struct{})
	var once sync.Once
	log := zerolog.New(hookWriter{os.Stderr, func(p []byte) {
		if strings.Contains(string(p), "Accept() failed") {
			once.Do(func() { close(failed) })
		}
	}})
	mux := NewMux()
	mux.HandleFunc(GetBrokerRuntimeInfo, func(_ context.Context, conn *Conn, req *Command) {
		_ = conn.Reply(req, NewResponse(req, Success, ""))
	})
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0", EventLoops: 1}, mux, log)
	if err := s.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("addr %s\n", s.Addr())
	go func() {
		<-failed
		fmt.Println("accept failed")
	}()
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.Shutdown(ctx)
	os.Exit(0)
}

// hookWriter writes to w and shows every write to seen.
type hookWriter struct {
	w    *os.File
	seen func([]byte)
}

func (h hookWriter) Write(p []byte) (int, error) {
	h.seen(p)
	return h.w.Write(p)
}

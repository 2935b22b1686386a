package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// TestMain lets the test binary act as the namesrv command, so the signal
// test runs the real main in a child process.
func TestMain(m *testing.M) {
	if os.Getenv("NAMESRV_TEST_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestServesAndStopsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			addr := freeAddr(t)
			cmd := exec.Command(os.Args[0], "--listen", addr, "--log-format", "json", "--log-level", "info")
			cmd.Env = append(os.Environ(), "NAMESRV_TEST_AS_MAIN=1")
			logs := &lockedBuffer{}
			cmd.Stderr = logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					_ = cmd.Process.Kill()
				}
			})

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var c *remoting.Client
			for c == nil {
				var err error
				if c, err = remoting.Dial(ctx, addr, remoting.ClientOptions{}); err != nil {
					if ctx.Err() != nil {
						t.Fatalf("name server never listened: %v\n%s", err, logs)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil))
			if err != nil || resp.Code != remoting.TopicNotExist {
				t.Fatalf("route: %v %v", resp, err)
			}

			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("exit: %v\n%s", err, logs)
				}
			case <-ctx.Done():
				t.Fatalf("no exit after %v\n%s", sig, logs)
			}
			<-c.Done() // the server closed our connection on its way out
			_ = c.Close()
			if !strings.Contains(logs.String(), "remoting server stopped") {
				t.Fatalf("no clean shutdown in the log:\n%s", logs)
			}
		})
	}
}

func TestBadFlags(t *testing.T) {
	if err := run(context.Background(), options{listen: "127.0.0.1:0", logLevel: "loud", logFormat: "json"}); err == nil {
		t.Fatal("bad log level accepted")
	}
	cmd := newCommand()
	cmd.SetArgs([]string{"extra"})
	cmd.SetOut(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil {
		t.Fatal("positional argument accepted")
	}
	busy := freeAddr(t)
	ln, err := net.Listen("tcp", busy)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := run(context.Background(), options{listen: busy, logLevel: "error", logFormat: "json"}); err == nil {
		t.Fatal("listening on a busy address succeeded")
	}
}

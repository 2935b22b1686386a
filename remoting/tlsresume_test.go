package remoting

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A client that pipelines big requests while it is slow to read its
// answers: the server pauses the connection and keeps the requests in
// gnet's inbound buffer (up to 4 x MaxFrameSize). When the client reads
// its answers, the connection resumes and answers everything, TLS as
// plaintext: the TLS pipe takes what it has room for (2 x MaxFrameSize +
// 1 MiB) and the rest as the reader decrypts, instead of closing the
// connection over 40 MiB fed at once.
func TestAResumedConnectionAnswersEverythingOverTLSToo(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			raw, handled, logs := dialBigAnswerServer(t, useTLS)
			const sent = 160 // 160 x 256 KiB = 40 MiB of requests
			body := make([]byte, 256<<10)
			var all []byte
			for i := range sent {
				f, err := Encode(&Command{Code: SendMessageV2, Language: "GO", Opaque: int32(i + 1), Body: body})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, f...)
			}
			_ = raw.SetDeadline(time.Now().Add(hangGuard))
			if _, err := raw.Write(all); err != nil {
				t.Fatalf("write %d requests: %v (handled %d)", sent, err, handled.Load())
			}
			// Every request is out (the server took what the socket
			// did not hold), and the connection paused over its unread
			// answers before any is read.
			waitFor(t, "the connection to pause", func() bool { return strings.Contains(logs(), "does not read its answers") })
			fr := NewFrameReader(raw, 0)
			for i := range sent {
				if _, err := fr.ReadFrame(); err != nil {
					t.Fatalf("after %d of %d answers: %v (handled %d); paused: %v; closed by backlog: %v", i, sent, err, handled.Load(),
						strings.Contains(logs(), "does not read its answers"), strings.Contains(logs(), "decrypted"))
				}
			}
		})
	}
}

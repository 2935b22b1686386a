// Package remoting speaks RocketMQ's Remoting protocol: the frame codec with
// both header encodings, a gnet-based server and a net.Conn-based client.
//
// Every request and response is a Command. A Command travels as one frame:
//
//	byte 0        4    5            8                      8+H                 4+L
//	+-------------+----+------------+----------------------+-------------------+
//	| L  (int32)  | T  | H (uint24) | header (H bytes)     | body (L-4-H bytes) |
//	+-------------+----+------------+----------------------+-------------------+
//	  L = 4 + H + bodyLength   (the first 4 bytes are not counted)
//	  T = serialize type of this frame's header: 0 = JSON, 1 = ROCKETMQ
//	  H = header length, the low 24 bits of the second word
//
// All integers are big-endian. A frame is at most MaxFrameSize bytes,
// counting the length word (16 MiB by default, as in Java); a longer one is a
// protocol error that closes the connection.
//
// # JSON header (T = 0)
//
// A JSON object. Readers accept the fields in any order and ignore unknown
// ones; numbers and booleans inside extFields are kept as their literal text
// (the Node client ali-ons sends them unquoted). Encode writes the fields in
// the order the Go client does and every extFields value as a JSON string
// (the Go client fails a whole frame on a non-string value):
//
//	{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,
//	 "remark":"","extFields":{"topic":"T"}}
//
// # ROCKETMQ binary header (T = 1)
//
//	offset  size  field
//	+------+-----+---------------------------------------------------------+
//	| 0    | 2   | code      int16 (codes above 32767 cannot be carried)   |
//	| 2    | 1   | language  uint8 (JAVA 0 ... GO 9 ... NODE_JS 13)        |
//	| 3    | 2   | version   int16                                         |
//	| 5    | 4   | opaque    int32                                         |
//	| 9    | 4   | flag      int32                                         |
//	| 13   | 4   | R         remark length in bytes, 0 = none            |
//	| 17   | R   | remark    UTF-8                                         |
//	| 17+R | 4   | E         length of the ext-field area, 0 = none        |
//	| 21+R | E   | repeated: keyLen int16, key, valLen int32, value        |
//	+------+-----+---------------------------------------------------------+
//
// # Flags and opaque
//
// Bit 0 of flag marks a response, bit 1 a oneway request that gets no
// answer. A response carries the opaque of its request; each side numbers
// the requests it sends and matches responses against its own table, so the
// same connection carries requests in both directions (the broker asks a
// producer about a transaction on the producer's own connection).
//
// # Server
//
// Server runs on gnet: event loops only cut the byte stream into frames and
// hand them to a bounded pool of worker goroutines, which decode them and
// call the Handler. A Handler answers with Conn.Reply, at once or later from
// any goroutine (a long-polling pull holds its request and answers when a
// message arrives); oneway requests are never answered. Replies queued for
// one connection while its event loop is busy leave in a single writev.
// Mux routes request codes to handlers and answers
// REQUEST_CODE_NOT_SUPPORTED for the rest.
//
// # TLS
//
// ServerConfig.TLSMode follows RocketMQ's tls.server.mode: disabled
// (plaintext only), permissive (TLS and plaintext on one port, told apart
// by the first byte: 0x16 opens a TLS handshake) or enforcing (TLS only).
// Event loops never run crypto: a TLS connection gets a reader goroutine
// (handshake, decryption, frame cutting; frames then go to the workers
// exactly as plaintext ones) and a writer goroutine (encryption of what
// Conn.Send queued). They talk to the event loop through an in-memory pipe:
// OnTraffic feeds it the ciphertext read, and the ciphertext written goes
// back to the socket through Wake, as plaintext replies do. Plaintext
// connections keep the path above untouched. NewServerTLSConfig builds
// the certificate and client authentication from RocketMQ's tls.*
// settings, with a self-signed certificate in test mode.
//
// # Client
//
// Client is one TCP connection (TLS with ClientOptions.TLS) with a reader
// and a writer goroutine; any
// number of requests may be in flight on it at once (Invoke, InvokeAsync),
// and requests the server sends to the client go to ClientOptions.Handler.
// ClientPool keeps one Client per address.
//
// Server, Conn, Client and ClientPool are safe for concurrent use. Command is
// a plain value: it must not be changed while it is being sent.
package remoting

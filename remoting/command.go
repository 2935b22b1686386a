package remoting

import "fmt"

// Serialize types: the top byte of a frame's second word says how the
// header of that frame is encoded.
const (
	// SerializeJSON marks a JSON header; every client understands it.
	SerializeJSON byte = 0
	// SerializeRocketMQ marks the compact binary header of Java's
	// RocketMQSerializable. Only Java clients configured for it send it.
	SerializeRocketMQ byte = 1
)

// Bits of Command.Flag.
const (
	// FlagResponse (RPC_TYPE) is set on responses.
	FlagResponse int32 = 1 << 0
	// FlagOneway (RPC_ONEWAY) is set on requests that expect no response.
	// The Go client never sets it, even for its oneway calls.
	FlagOneway int32 = 1 << 1
)

// Versions are ordinals of Java's MQVersion.Version.
const (
	// VersionV3_0_11 is the first broker version whose REGISTER_BROKER body
	// is a RegisterBrokerBody rather than a bare topic config wrapper.
	VersionV3_0_11 int32 = 37
	// VersionV4_9_4 is the first client version that gets route JSON with
	// quoted map keys from a Java name server.
	VersionV4_9_4 int32 = 401
	// VersionV5_0_0 is the first broker version whose compressed
	// REGISTER_BROKER body carries static-topic mapping entries.
	VersionV5_0_0 int32 = 413
	// CurrentVersion (V5_3_4, the release rocketkv is compatible with) is
	// stamped on every command this package creates. Java clients record the
	// version of a heartbeat response as the broker's version and gate 5.x
	// features on it being at least 413.
	CurrentVersion int32 = 481
)

// DefaultLanguage is the language name this package stamps on the commands
// it creates, and writes when a Command's Language is empty.
const DefaultLanguage = "GO"

// languages maps the LanguageCode names of Java's LanguageCode enum to the
// byte the binary header carries for them.
var languages = [...]string{
	0:  "JAVA",
	1:  "CPP",
	2:  "DOTNET",
	3:  "PYTHON",
	4:  "DELPHI",
	5:  "ERLANG",
	6:  "RUBY",
	7:  "OTHER",
	8:  "HTTP",
	9:  "GO",
	10: "PHP",
	11: "OMS",
	12: "RUST",
	13: "NODE_JS",
}

// languageOther is the code written for a language name Java does not know.
const languageOther = 7

// LanguageCode returns the binary-header code of a language name
// ("JAVA" 0 ... "NODE_JS" 13) and whether the name is known.
func LanguageCode(name string) (byte, bool) {
	for i, n := range languages {
		if n == name {
			return byte(i), true
		}
	}
	return languageOther, false
}

// LanguageName returns the name of a binary-header language code; unknown
// codes read as "OTHER".
func LanguageName(code byte) string {
	if int(code) < len(languages) {
		return languages[code]
	}
	return languages[languageOther]
}

// Command is one Remoting request or response: the fields of the header
// plus the body. ExtFields holds the request- or response-specific "custom
// header", every value as text (numbers in decimal, booleans as
// "true"/"false").
//
// A decoded Command's Body may share memory with the frame it came from;
// a Command being sent must not be modified until the send returns (for a
// server Conn: until the bytes are handed to the socket, see Conn.Send).
type Command struct {
	// Code is the request code of a request or the response code of a
	// response.
	Code int32
	// Language is the sender's language name, e.g. "JAVA" or "GO".
	Language string
	// Version is the sender's MQVersion ordinal (Go client 317, ali-ons 121).
	Version int32
	// Opaque identifies a request; its response carries the same value.
	Opaque int32
	// Flag holds FlagResponse and FlagOneway.
	Flag int32
	// Remark is free text, usually an error description in responses.
	Remark string
	// ExtFields are the custom header fields. May be nil.
	ExtFields map[string]string
	// Body is the payload after the header. May be nil.
	Body []byte
	// SerializeType is the header encoding used on the wire:
	// SerializeJSON or SerializeRocketMQ.
	SerializeType byte
	// ReleaseBody, when set, is called once the Body is no longer needed
	// by a server Conn's Send: after the frame was written to the socket
	// or copied into the event loop's buffer, or at once when Send fails.
	// A handler that builds its Body in a pooled buffer returns it to the
	// pool here. The client side does not call it. Never sent.
	ReleaseBody func()

	// received is the Server's clock (nanoseconds since it was created)
	// when the request's frame was read off its connection; 0 for a
	// command the server did not read.
	received int64
	// held is set by MarkHeld.
	held bool
}

// MarkHeld records that the request was held by long polling before it
// was answered (RocketMQ's suspended flag, the is_long_polling label of
// its rpc metrics). The handler calls it on the goroutine that serves the
// request again, before the answer: the flag travels with the request,
// which one goroutine at a time owns.
func (c *Command) MarkHeld() { c.held = true }

// Held reports whether MarkHeld was called.
func (c *Command) Held() bool { return c.held }

// IsResponse reports whether c is a response (flag bit 0).
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether c is a request that must not be answered
// (flag bit 1).
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// String describes the header of c for logs; it never prints the body.
func (c *Command) String() string {
	kind := "request"
	if c.IsResponse() {
		kind = "response"
	} else if c.IsOneway() {
		kind = "oneway"
	}
	return fmt.Sprintf("%s code=%d opaque=%d lang=%s ver=%d remark=%q ext=%v body=%dB",
		kind, c.Code, c.Opaque, c.Language, c.Version, c.Remark, c.ExtFields, len(c.Body))
}

// NewRequest returns a JSON request with the given code, custom header and
// body, stamped with DefaultLanguage and CurrentVersion. The opaque is
// assigned when the request is sent.
func NewRequest(code int32, ext map[string]string, body []byte) *Command {
	return &Command{
		Code:      code,
		Language:  DefaultLanguage,
		Version:   CurrentVersion,
		ExtFields: ext,
		Body:      body,
	}
}

// NewResponse returns the response to req with the given code and remark:
// the request's opaque, the response flag and the request's serialize type,
// so a request is answered in the header encoding it came in.
func NewResponse(req *Command, code int32, remark string) *Command {
	return &Command{
		Code:          code,
		Language:      DefaultLanguage,
		Version:       CurrentVersion,
		Opaque:        req.Opaque,
		Flag:          FlagResponse,
		Remark:        remark,
		SerializeType: req.SerializeType,
	}
}

package namesrv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/remoting"
)

// Name servers from an address server
//
// A RocketMQ broker started without namesrvAddr and with
// fetchNamesrvAddrByAddressServer asks an HTTP "address server" for the
// name server list (DefaultTopAddressing). The server answers a GET of
// AddressServerURL with status 200 and a body whose first line is the
// list, "host:port;host:port". The defaults name Alibaba's internal
// jmenv.tbsite.net; a deployment sets its own with rmqAddressServerDomain
// (a host, or host:port) and rmqAddressServerSubGroup (the last path
// element).

// DefaultAddressServerDomain and DefaultAddressServerSubGroup are the
// address server RocketMQ asks without rmqAddressServerDomain and
// rmqAddressServerSubGroup (or the JVM system properties
// rocketmq.namesrv.domain and rocketmq.namesrv.domain.subgroup, their
// defaults, which rocketkv has no equivalent of).
const (
	DefaultAddressServerDomain   = "jmenv.tbsite.net"
	DefaultAddressServerSubGroup = "nsaddr"
)

// AddressServerTimeout bounds the connection to the address server, and
// separately the wait for its answer, as RocketMQ's HttpTinyClient sets
// both timeouts of one request to 3 s.
const AddressServerTimeout = 3 * time.Second

// maxAddressAnswer bounds the body read from an address server: a name
// server list is a few hundred bytes.
const maxAddressAnswer = 64 << 10

// Errors of AddressServer.Fetch.
var (
	// ErrAddressServerStatus is returned when the address server answers
	// with a status other than 200 (RocketMQ logs the status and keeps
	// its list).
	ErrAddressServerStatus = errors.New("address server answered with a status other than 200")
	// ErrEmptyAddressList is returned when the answer's first line is
	// blank (RocketMQ ignores such an answer).
	ErrEmptyAddressList = errors.New("address server answered with no name server address")
)

// AddressServerURL is the URL RocketMQ's MixAll.getWSAddr builds from
// the address server's domain and subgroup:
// http://domain:8080/rocketmq/subgroup, or without the :8080 when domain
// holds a ':' after its first character (it names its own port). Neither
// part is escaped.
func AddressServerURL(domain, subgroup string) string {
	if strings.IndexByte(domain, ':') > 0 {
		return "http://" + domain + "/rocketmq/" + subgroup
	}
	return "http://" + domain + ":8080/rocketmq/" + subgroup
}

// AddressServer asks an HTTP address server for the name server list.
// Safe for concurrent use.
type AddressServer struct {
	url    string
	client *http.Client
	now    func() time.Time
}

// NewAddressServer returns an AddressServer that asks url (see
// AddressServerURL). Its requests time out as RocketMQ's do
// (AddressServerTimeout to connect, as long again to be answered) and
// go through no proxy, as RocketMQ's HttpURLConnection goes through none
// unless the JVM is told to.
func NewAddressServer(url string) *AddressServer {
	dialer := &net.Dialer{Timeout: AddressServerTimeout}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		ResponseHeaderTimeout: AddressServerTimeout,
		DisableKeepAlives:     true,
	}
	return &AddressServer{url: url, client: &http.Client{Transport: transport,
		Timeout: 2 * AddressServerTimeout}, now: time.Now}
}

// URL returns the address the server is asked at.
func (a *AddressServer) URL() string { return a.url }

// Fetch asks the address server for the name server list and returns
// it as RocketMQ reads the answer (DefaultTopAddressing.fetchNSAddr): the
// body of a 200 answer, trimmed of white space and control characters at
// both ends and cut at its first line break. It sends the headers
// RocketMQ's HttpTinyClient sends (Client-Version, Content-Type,
// Metaq-Client-RequestTS). A failed request, a status other than 200
// (ErrAddressServerStatus) and a blank list (ErrEmptyAddressList) are
// errors; the list is not checked (see ParseAddressList).
func (a *AddressServer) Fetch(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url, nil)
	if err != nil {
		return "", fmt.Errorf("address server %s: %w", a.url, err)
	}
	req.Header.Set("Client-Version", remoting.VersionName(int(remoting.CurrentVersion)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded;charset=UTF-8")
	req.Header.Set("Metaq-Client-RequestTS", strconv.FormatInt(a.now().UnixMilli(), 10))
	resp, err := a.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("address server %s: %w", a.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("address server %s: %w: %s", a.url, ErrAddressServerStatus, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAddressAnswer+1))
	if err != nil {
		return "", fmt.Errorf("address server %s: read the answer: %w", a.url, err)
	}
	if len(body) > maxAddressAnswer {
		return "", fmt.Errorf("address server %s: an answer longer than %d bytes is no name server list", a.url, maxAddressAnswer)
	}
	list := firstLine(string(body))
	if list == "" {
		return "", fmt.Errorf("address server %s: %w", a.url, ErrEmptyAddressList)
	}
	return list, nil
}

// firstLine trims s as Java's String.trim does (every character up to
// U+0020 at both ends) and cuts it at its first '\r', or failing one at
// its first '\n'.
func firstLine(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	if i := strings.IndexByte(s, '\r'); i >= 0 {
		return s[:i]
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ParseAddressList splits a name server list an address server gave
// ("host:port;host:port") into addresses, blanks dropped and duplicates
// kept once, and refuses one that names no address or an address that
// namesrvAddr would refuse (configs.CheckNameServerAddrs): RocketMQ takes
// any text for addresses and fails to connect to them; rocketkv keeps
// the list it has.
func ParseAddressList(list string) ([]string, error) {
	var out []string
	for _, a := range ParseNameServers(list) {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q names no name server", list)
	}
	if err := configs.CheckNameServerAddrs(out); err != nil {
		return nil, err
	}
	return out, nil
}

// FetchList asks the address server once (Fetch) and parses its answer
// (ParseAddressList); an answer that is no list is an error naming it.
func (a *AddressServer) FetchList(ctx context.Context) ([]string, error) {
	list, err := a.Fetch(ctx)
	if err != nil {
		return nil, err
	}
	addrs, err := ParseAddressList(list)
	if err != nil {
		return nil, fmt.Errorf("address server %s answered %q: %w", a.url, list, err)
	}
	return addrs, nil
}

// SameAddresses reports whether a and b hold the same addresses, in any
// order (as RocketMQ's NettyRemotingClient compares a new list): a
// lookup that finds them changes nothing.
func SameAddresses(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(x string) bool { return !slices.Contains(b, x) })
}

// LookupFailures logs the failures of a periodic name server lookup
// (the broker's and the proxy's): a failure at warning level when it
// differs from the one before, at debug level while it repeats, and the
// first success after a failure at info level. Not safe for concurrent
// use: its callers serialize their lookups.
type LookupFailures struct{ last string }

// Failed logs err, a lookup from from that failed and kept the list
// kept.
func (f *LookupFailures) Failed(log zerolog.Logger, err error, from string, kept []string) {
	ev := log.Debug()
	if msg := err.Error(); msg != f.last {
		f.last = msg
		ev = log.Warn()
	}
	ev.Err(err).Str("from", from).Strs("kept", kept).Msg("name server lookup failed: the name servers stay as they are")
}

// Succeeded notes a lookup from from that worked, logging it once after
// failures.
func (f *LookupFailures) Succeeded(log zerolog.Logger, from string) {
	if f.last != "" {
		f.last = ""
		log.Info().Str("from", from).Msg("name server lookup works again")
	}
}

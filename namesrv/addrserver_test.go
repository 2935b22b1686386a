package namesrv

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// The address server's URL is built as RocketMQ's MixAll.getWSAddr
// builds it: port 8080 unless the domain names its own.
func TestAddressServerURL(t *testing.T) {
	for _, c := range []struct{ domain, subgroup, want string }{
		{DefaultAddressServerDomain, DefaultAddressServerSubGroup, "http://jmenv.tbsite.net:8080/rocketmq/nsaddr"},
		{"addr.example", "nsaddr-prod", "http://addr.example:8080/rocketmq/nsaddr-prod"},
		{"addr.example:80", "nsaddr", "http://addr.example:80/rocketmq/nsaddr"},
		{"10.0.0.7:18080", "unit-a", "http://10.0.0.7:18080/rocketmq/unit-a"},
	} {
		if got := AddressServerURL(c.domain, c.subgroup); got != c.want {
			t.Errorf("AddressServerURL(%q, %q) = %q, want %q", c.domain, c.subgroup, got, c.want)
		}
	}
}

// Fetch sends a GET with RocketMQ's headers to the URL and reads the
// answer's first line, trimmed, as RocketMQ does; what RocketMQ counts as
// no answer is an error.
func TestAddressServerFetch(t *testing.T) {
	var status int
	var body string
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	a := NewAddressServer(srv.URL + "/rocketmq/nsaddr")
	a.now = func() time.Time { return time.UnixMilli(1700000000123) }
	for _, c := range []struct {
		name   string
		status int
		body   string
		want   string
		err    error
	}{
		{"one line", 200, "10.0.0.1:9876;10.0.0.2:9876", "10.0.0.1:9876;10.0.0.2:9876", nil},
		{"blanks and a newline around", 200, " \t10.0.0.1:9876;10.0.0.2:9876\n", "10.0.0.1:9876;10.0.0.2:9876", nil},
		{"second line dropped", 200, "10.0.0.1:9876\n10.0.0.9:9876\n", "10.0.0.1:9876", nil},
		{"CRLF", 200, "10.0.0.1:9876\r\n10.0.0.9:9876", "10.0.0.1:9876", nil},
		{"blank", 200, " \r\n ", "", ErrEmptyAddressList},
		{"empty", 200, "", "", ErrEmptyAddressList},
		{"not found", 404, "10.0.0.1:9876", "", ErrAddressServerStatus},
		{"server error", 500, "", "", ErrAddressServerStatus},
	} {
		status, body = c.status, c.body
		list, err := a.Fetch(context.Background())
		if list != c.want || !errors.Is(err, c.err) {
			t.Errorf("%s: Fetch = %q, %v; want %q, %v", c.name, list, err, c.want, c.err)
		}
	}
	if got.Method != http.MethodGet || got.URL.Path != "/rocketmq/nsaddr" {
		t.Errorf("request %s %s, want GET /rocketmq/nsaddr", got.Method, got.URL.Path)
	}
	for k, v := range map[string]string{"Client-Version": "V5_3_4", "Metaq-Client-RequestTS": "1700000000123",
		"Content-Type": "application/x-www-form-urlencoded;charset=UTF-8"} {
		if got.Header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, got.Header.Get(k), v)
		}
	}
}

// An address server that cannot be reached, or answers too much, is an
// error, not a list.
func TestAddressServerFetchFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("10.0.0.1:9876;", maxAddressAnswer/14+1)))
	}))
	url := srv.URL
	if _, err := NewAddressServer(url).Fetch(context.Background()); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("an oversized answer: %v, want an error", err)
	}
	srv.Close()
	if list, err := NewAddressServer(url).Fetch(context.Background()); err == nil {
		t.Errorf("a closed server answered %q", list)
	}
}

// An answer is checked as namesrvAddr is, and a bad one refused whole.
func TestParseAddressList(t *testing.T) {
	got, err := ParseAddressList(" 10.0.0.1:9876; ns-2.example:9876;;10.0.0.1:9876;")
	if err != nil || !slices.Equal(got, []string{"10.0.0.1:9876", "ns-2.example:9876"}) {
		t.Errorf("ParseAddressList = %v, %v", got, err)
	}
	for _, bad := range []string{"", ";", "<html>gone</html>", "10.0.0.1:9876;10.0.0.2", "10.0.0.1:0", "10.0.0.1:98760"} {
		if got, err := ParseAddressList(bad); err == nil {
			t.Errorf("ParseAddressList(%q) = %v, want an error", bad, got)
		}
	}
}

// SameAddresses compares lists in any order; FetchList names an answer
// that is no list.
func TestSameAddressesAndFetchList(t *testing.T) {
	if !SameAddresses([]string{"a:1", "b:2"}, []string{"b:2", "a:1"}) ||
		SameAddresses([]string{"a:1"}, []string{"a:1", "b:2"}) || SameAddresses([]string{"a:1", "c:3"}, []string{"a:1", "b:2"}) {
		t.Fatal("SameAddresses is not an order-free comparison")
	}
	answer := "10.0.0.1:9876;10.0.0.2:9876"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(answer)) }))
	defer srv.Close()
	a := NewAddressServer(srv.URL + "/rocketmq/nsaddr")
	if got, err := a.FetchList(context.Background()); err != nil || !slices.Equal(got, []string{"10.0.0.1:9876", "10.0.0.2:9876"}) {
		t.Fatalf("FetchList = %v, %v", got, err)
	}
	answer = "<html>"
	if _, err := a.FetchList(context.Background()); err == nil || !strings.Contains(err.Error(), `answered "<html>"`) {
		t.Fatalf("FetchList of a page that is no list: %v, want an error naming the answer", err)
	}
}

// LookupFailures warns of a new failure, logs a repeat at debug level,
// and says once that lookups work again.
func TestLookupFailuresLevels(t *testing.T) {
	var buf strings.Builder
	log := zerolog.New(&buf).Level(zerolog.DebugLevel)
	var f LookupFailures
	f.Succeeded(log, "x")
	f.Failed(log, errors.New("down"), "x", nil)
	f.Failed(log, errors.New("down"), "x", nil)
	f.Succeeded(log, "x")
	f.Succeeded(log, "x")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{`"level":"warn"`, `"level":"debug"`, `works again`}
	if len(lines) != len(want) {
		t.Fatalf("logged %q, want %d lines", lines, len(want))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d %q lacks %s", i, lines[i], w)
		}
	}
}

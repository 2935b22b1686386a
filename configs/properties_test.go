package configs

import (
	"bufio"
	"errors"
	"maps"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// javaCase is one case of testdata/java-properties.txt: an input and what
// java.util.Properties.load(InputStream) read from it.
type javaCase struct {
	line    int // of the input in the file
	comment string
	input   string
	want    map[string]string
	err     bool
}

// readJavaCases reads testdata/java-properties.txt (its header says the
// format).
func readJavaCases(t *testing.T) []javaCase {
	t.Helper()
	f, err := os.Open("testdata/java-properties.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []javaCase
	var comment string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, "#"):
			comment = strings.TrimSpace(strings.TrimPrefix(line, "#"))
		case strings.HasPrefix(line, "input "):
			in, err := strconv.Unquote(strings.TrimPrefix(line, "input "))
			if err != nil {
				t.Fatalf("line %d: %v", n, err)
			}
			cases = append(cases, javaCase{line: n, comment: comment, input: in, want: map[string]string{}})
		case len(cases) == 0:
			t.Fatalf("line %d: %q before the first input", n, line)
		case line == "error":
			cases[len(cases)-1].err = true
		case line == "empty":
		default:
			k, err := strconv.QuotedPrefix(line)
			if err != nil {
				t.Fatalf("line %d: %v", n, err)
			}
			key, _ := strconv.Unquote(k)
			value, err := strconv.Unquote(strings.TrimPrefix(line[len(k):], " "))
			if err != nil {
				t.Fatalf("line %d: %v", n, err)
			}
			cases[len(cases)-1].want[key] = value
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// asMap is the entries as Java keeps them: the last value of each key.
func asMap(entries []property) map[string]string {
	m := make(map[string]string, len(entries))
	for _, e := range entries {
		m[e.key] = e.value
	}
	return m
}

// parseProperties reads every recorded input as Java's Properties.load
// does.
func TestParsePropertiesAsJava(t *testing.T) {
	cases := readJavaCases(t)
	if len(cases) < 40 {
		t.Fatalf("only %d cases read", len(cases))
	}
	for _, c := range cases {
		entries, err := parseProperties([]byte(c.input))
		switch {
		case c.err && err == nil:
			t.Errorf("line %d (%s): %q read as %q, Java fails", c.line, c.comment, c.input, asMap(entries))
		case c.err && !errors.Is(err, errBadUnicodeEscape):
			t.Errorf("line %d (%s): error %v does not wrap errBadUnicodeEscape", c.line, c.comment, err)
		case !c.err && err != nil:
			t.Errorf("line %d (%s): %q: %v", c.line, c.comment, c.input, err)
		case !c.err && !maps.Equal(asMap(entries), c.want):
			t.Errorf("line %d (%s): %q read as\n%q\nJava reads\n%q", c.line, c.comment, c.input, asMap(entries), c.want)
		}
	}
}

// Where the text is valid UTF-8 beyond ASCII, it is read as UTF-8 (Java
// would take each byte for an ISO-8859-1 character); a byte that is not
// part of valid UTF-8 is still its ISO-8859-1 character, line by line or
// mixed. Entries keep file order and their line numbers.
func TestParsePropertiesEncodingAndOrder(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []property
	}{
		{"UTF-8", "brokerName=café\nstorePathRootDir=/data/中文\n",
			[]property{{"brokerName", "café", 1}, {"storePathRootDir", "/data/中文", 2}}},
		{"ISO-8859-1 beside UTF-8", "a=caf\xe9\nb=café\nc=\xe9t\xe9 ét\xe9\n",
			[]property{{"a", "café", 1}, {"b", "café", 2}, {"c", "été été", 3}}},
		{"a byte-order mark is part of the first key, as in Java", "\ufeffbrokerName=a\n",
			[]property{{"\ufeffbrokerName", "a", 1}}},
		{"duplicates kept in order, lines counted over every kind of line break",
			"#c\r\na=1\r\n\rb=2\\\n  3\n\na=4",
			[]property{{"a", "1", 2}, {"b", "23", 4}, {"a", "4", 7}}},
	} {
		got, err := parseProperties([]byte(c.in))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %q read as %+v (%v), want %+v", c.name, c.in, got, err, c.want)
		}
	}
}

// ParseProperties, the reading of UPDATE_BROKER_CONFIG and
// UPDATE_NAMESRV_CONFIG bodies, yields what Java's Properties holds after
// load for every recorded input, the empty key of "=value" included, and
// fails where Java throws.
func TestParsePropertiesExportedAsJava(t *testing.T) {
	for _, c := range readJavaCases(t) {
		got, err := ParseProperties([]byte(c.input))
		switch {
		case c.err && !errors.Is(err, errBadUnicodeEscape):
			t.Errorf("line %d (%s): %q: %q, %v; Java fails", c.line, c.comment, c.input, got, err)
		case !c.err && (err != nil || !maps.Equal(got, c.want)):
			t.Errorf("line %d (%s): %q read as %q (%v), Java reads %q", c.line, c.comment, c.input, got, err, c.want)
		}
	}
	got, err := ParseProperties([]byte("=x\r\nfileReservedTime=1\r\nfileReservedTime=2\\\r\n  3\r\n"))
	if want := map[string]string{"": "x", "fileReservedTime": "23"}; err != nil || !maps.Equal(got, want) {
		t.Errorf("read as %q (%v), want %q", got, err, want)
	}
}

// A malformed \u escape is an error naming the line, and the key when it
// is in the value.
func TestParsePropertiesErrorNamesTheLine(t *testing.T) {
	_, err := parseProperties([]byte("# broker\nbrokerName=a\nstorePathRootDir=/data/\\u00zz\n"))
	if !errors.Is(err, errBadUnicodeEscape) || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "storePathRootDir") {
		t.Errorf("error %v, want one naming line 3 and storePathRootDir", err)
	}
}

// The settings a broker.conf yields: Java's reading of the file, then
// RocketMQ's setting of the configuration from it, where rocketkv reads
// the file as RocketMQ does. A case gives the settings that must result
// (others keep their defaults) and the unknown keys, or the key the
// error must name.
func TestBrokerConfAsRocketMQReadsIt(t *testing.T) {
	for _, c := range []struct {
		name, file string
		want       map[string]string
		unknown    []string
		errKey     string
	}{
		{name: "separators, white space around keys and values, comments, blank lines",
			file: "# broker\n! also a comment\n\n  brokerClusterName = C1\nbrokerName:b1\nlistenPort 20911\n\tbrokerIP1\t=\t10.0.0.1\n",
			want: map[string]string{"brokerClusterName": "C1", "brokerName": "b1", "listenPort": "20911", "brokerIP1": "10.0.0.1"}},
		{name: "CRLF line endings",
			file: "brokerName=b1\r\nlistenPort=20911\r\n",
			want: map[string]string{"brokerName": "b1", "listenPort": "20911"}},
		{name: "a list continued over CRLF lines",
			file: "messageDelayLevel=1s 5s \\\r\n    10s 30s\r\nnamesrvAddr=10.0.0.1:9876;\\\r\n  10.0.0.2:9876\r\nbrokerName=b1\r\n",
			want: map[string]string{"messageDelayLevel": "1s 5s 10s 30s", "namesrvAddr": "10.0.0.1:9876;10.0.0.2:9876", "brokerName": "b1"}},
		{name: "lone CR line endings",
			file: "brokerName=b1\rlistenPort=20911\r",
			want: map[string]string{"brokerName": "b1", "listenPort": "20911"}},
		{name: "a backslash ending the file",
			file: "listenPort=20911\nbrokerName=b1\\",
			want: map[string]string{"brokerName": "b1", "listenPort": "20911"}},
		{name: "a key continued on the next line",
			file: "broker\\\n    Name=b1\n",
			want: map[string]string{"brokerName": "b1"}},
		{name: "a line with a value and no key is an unknown empty key",
			file: "=oops\nbrokerName=b1\n: also\n",
			want: map[string]string{"brokerName": "b1"}, unknown: []string{""}},
		{name: "escapes",
			file: "storePathRootDir=C:\\\\rmq\\\\store\nbrokerName=caf\\u00e9\nmetricsLabel=a\\=1\\,b\\:2\n",
			want: map[string]string{"storePathRootDir": `C:\rmq\store`, "brokerName": "café", "metricsLabel": "a=1,b:2"}},
		{name: "ISO-8859-1, as Java reads a file",
			file: "brokerName=caf\xe9\n",
			want: map[string]string{"brokerName": "café"}},
		{name: "UTF-8, as its writer meant",
			file: "brokerName=café\n",
			want: map[string]string{"brokerName": "café"}},
		{name: "a key with no value is empty",
			file: "brokerIP1\nbrokerName=b1\nmetricsLabel=\n",
			want: map[string]string{"brokerIP1": "", "brokerName": "b1", "metricsLabel": ""}},
		{name: "a key given twice keeps its last value",
			file: "brokerName=b1\nlistenPort=1\nbrokerName=b2\nlistenPort=2\n",
			want: map[string]string{"brokerName": "b2", "listenPort": "2"}},
		{name: "string values trimmed, as RocketMQ trims them",
			file: "brokerName=  b1  \t\nnamesrvAddr=\\ 10.0.0.1:9876\\ \n",
			want: map[string]string{"brokerName": "b1", "namesrvAddr": "10.0.0.1:9876"}},
		{name: "number values trimmed too (RocketMQ fails to parse them and keeps its default)",
			file: "listenPort=20911 \nbrokerPermission=\\ 4\n",
			want: map[string]string{"listenPort": "20911", "brokerPermission": "4"}},
		{name: "booleans are true or false in any case",
			file: "autoCreateTopicEnable=FALSE\ntraceOn=False\nslaveReadEnable=tRuE\nlongPollingEnable=TRUE\n",
			want: map[string]string{"autoCreateTopicEnable": "false", "traceOn": "false", "slaveReadEnable": "true", "longPollingEnable": "true"}},
		{name: "1 is not a boolean: RocketMQ reads it as false", file: "slaveReadEnable=1\n", errKey: "slaveReadEnable"},
		{name: "t is not a boolean", file: "aclEnable=t\n", errKey: "aclEnable"},
		{name: "yes is not a boolean", file: "traceOn=yes\n", errKey: "traceOn"},
		{name: "an inert boolean is checked alike", file: "clientCloseSocketIfTimeout=1\n", errKey: "clientCloseSocketIfTimeout"},
		{name: "a malformed unicode escape", file: "brokerName=b1\nstorePathRootDir=/data/\\u12\n", errKey: "storePathRootDir"},
		{name: "unknown keys in the file's spelling and order, once each",
			file: "someVendorKey=1\nbrokerName=b1\nAnotherKey=2\nsomeVendorKey=3\n",
			want: map[string]string{"brokerName": "b1"}, unknown: []string{"someVendorKey", "AnotherKey"}},
		{name: "a byte-order mark makes the first key unknown, as in RocketMQ",
			file: "\ufeffbrokerName=b1\nlistenPort=20911\n",
			want: map[string]string{"listenPort": "20911"}, unknown: []string{"\ufeffbrokerName"}},
		{name: "a key in another case only is read as the key",
			file: "brokername=b1\nLISTENPORT=20911\n",
			want: map[string]string{"brokerName": "b1", "listenPort": "20911"}},
		{name: "RocketMQ's spelling wins over another case after it, which is unknown",
			file: "brokerName=b1\nBrokerName=b2\nlistenPort=20911\nListenPort=x\n",
			want: map[string]string{"brokerName": "b1", "listenPort": "20911"}, unknown: []string{"BrokerName", "ListenPort"}},
		{name: "RocketMQ's spelling wins over another case before it",
			file: "BrokerName=b2\nbrokerName=b1\n",
			want: map[string]string{"brokerName": "b1"}, unknown: []string{"BrokerName"}},
		{name: "an alias is RocketMQ's spelling too",
			file: "mapedFileSizeCommitLog=65536\nMappedFileSizeCommitLog=4096\n",
			want: map[string]string{"mappedFileSizeCommitLog": "65536"}, unknown: []string{"MappedFileSizeCommitLog"}},
		{name: "so is an inert key's",
			file:    "sendMessageThreadPoolNums=16\nSendMessageThreadPoolNums=x\n",
			unknown: []string{"SendMessageThreadPoolNums"}},
		{name: "two spellings in other cases: the last wins",
			file: "BROKERNAME=b1\nBrokername=b2\n",
			want: map[string]string{"brokerName": "b2"}},
	} {
		got, err := LoadBroker(testutil.WriteFile(t, "broker.conf", c.file), nil)
		if c.errKey != "" {
			if err == nil || !strings.Contains(err.Error(), "key "+c.errKey) {
				t.Errorf("%s: %q: error %v, want one naming %s", c.name, c.file, err, c.errKey)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %q: %v", c.name, c.file, err)
			continue
		}
		def := DefaultBroker()
		want := def.Settings()
		maps.Copy(want, c.want)
		settings := got.Broker.Settings()
		for k, v := range want {
			if settings[k] != v {
				t.Errorf("%s: %q: %s=%q, want %q", c.name, c.file, k, settings[k], v)
			}
		}
		if !sameStrings(got.UnknownKeys, c.unknown) {
			t.Errorf("%s: %q: unknown keys %q, want %q", c.name, c.file, got.UnknownKeys, c.unknown)
		}
	}
}

// sameStrings is slices.Equal with nil and empty alike.
func sameStrings(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// An error of a properties file names the file, the line and the key.
func TestBrokerConfErrorNamesFileLineAndKey(t *testing.T) {
	p := testutil.WriteFile(t, "broker.conf", "# broker\nbrokerName=b1\nlistenPort=ten\n")
	_, err := LoadBroker(p, nil)
	if err == nil || !strings.Contains(err.Error(), p+" line 3: key listenPort") {
		t.Errorf("error %v, want one naming %s, line 3 and listenPort", err, p)
	}
}

// FuzzParseProperties: any text parses or fails on a \u escape, never
// panics; and a value written by PropertiesText (GET_BROKER_CONFIG, the
// write-back of UPDATE_BROKER_CONFIG) reads back as it was.
func FuzzParseProperties(f *testing.F) {
	f.Add([]byte("a=1\\\r\n  2\n#c\\\n=x\n\\u0062=\\ud83d\\ude00"), " lead\ttab\\back\nline\rcr\ffeed trail ")
	f.Add([]byte("k\\\n"), "")
	f.Add([]byte("caf\xe9=\xff\\"), "#!=: é 中")
	f.Fuzz(func(t *testing.T, text []byte, value string) {
		entries, err := parseProperties(text)
		if err != nil && !errors.Is(err, errBadUnicodeEscape) {
			t.Fatalf("%q: error %v is not a malformed escape", text, err)
		}
		for _, e := range entries {
			if e.line < 1 || e.line > strings.Count(string(text), "\n")+strings.Count(string(text), "\r")+1 {
				t.Fatalf("%q: entry %+v on no line of the text", text, e)
			}
		}
		if !utf8.ValidString(value) {
			return
		}
		back, err := parseProperties(PropertiesText(map[string]string{"key": value}))
		if err != nil || len(back) != 1 || back[0].key != "key" || back[0].value != value {
			t.Fatalf("value %q written and read back as %+v (%v)", value, back, err)
		}
	})
}

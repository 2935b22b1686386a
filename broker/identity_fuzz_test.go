package broker

import "testing"

// FuzzParseIdentity: an identity file's bytes (RocketMQ's BrokerMetadata
// or TempBrokerMetadata, read from the store at start) never panic the
// parser, and what it accepts encodes back to a file it reads the same.
func FuzzParseIdentity(f *testing.F) {
	f.Add("DefaultCluster#broker-a#1", false)
	f.Add("DefaultCluster#broker-a#2#1733460000000-abc", true)
	f.Add("##", false)
	f.Add("c#b#-9223372036854775808\n", false)
	f.Fuzz(func(t *testing.T, raw string, temp bool) {
		id, err := parseIdentity(raw, temp)
		if err != nil {
			return
		}
		again, err := parseIdentity(id.encode(temp), temp)
		if err != nil {
			t.Fatalf("%q parsed as %+v, whose encoding %q does not parse: %v", raw, id, id.encode(temp), err)
		}
		if again != id {
			t.Fatalf("%q: %+v, then %+v after a round trip", raw, id, again)
		}
	})
}

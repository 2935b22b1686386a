package adminbody

import "testing"

// FuzzDecodeBrokerStatsData feeds arbitrary bytes to the
// VIEW_BROKER_STATS_DATA decoder (a broker's answer read by the admin
// tool): it never panics, and what it decodes re-encodes to a body that
// decodes to the same statistics.
func FuzzDecodeBrokerStatsData(f *testing.F) {
	f.Add(EncodeBrokerStatsData(BrokerStatsData{}))
	f.Add(EncodeBrokerStatsData(BrokerStatsData{
		Minute: BrokerStatsItem{Sum: 5, TPS: 0.25, AvgPT: 1.5},
		Hour:   BrokerStatsItem{Sum: -1, TPS: 1e21, AvgPT: 3},
		Day:    BrokerStatsItem{Sum: 1 << 62, TPS: 5e-324},
	}))
	f.Add([]byte(`{"statsMinute":{"sum":"x"}}`))
	f.Add([]byte(`{"statsDay":null,"statsHour":{"avgpt":1e400}}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := DecodeBrokerStatsData(body)
		if err != nil {
			return
		}
		enc := EncodeBrokerStatsData(d)
		back, err := DecodeBrokerStatsData(enc)
		if err != nil {
			t.Fatalf("%q decoded as %+v, which encodes as %q that does not decode: %v", body, d, enc, err)
		}
		if back != d {
			t.Fatalf("%q decoded as %+v, re-encoded as %q, decoded again as %+v", body, d, enc, back)
		}
	})
}

// FuzzDecodeConsumerRunningInfo feeds arbitrary bytes to the decoder of a
// client's GET_CONSUMER_RUNNING_INFO answer: it never panics.
func FuzzDecodeConsumerRunningInfo(f *testing.F) {
	f.Add([]byte(`{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","PROP_CONSUMER_START_TIMESTAMP":1},` +
		`"mqTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"commitOffset":3,"locked":true}},` +
		`"mqPopTable":{},"statusTable":{"t":{"pullRT":1.5}},"subscriptionSet":[{"topic":"t","subString":"*"}],"jstack":"x"}`))
	f.Add([]byte(`{"mqTable":{"k":1}}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		_, _ = DecodeConsumerRunningInfo(body)
	})
}

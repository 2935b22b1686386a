// Package result holds the types of gov5client's RESULT line, a JSON
// object the e2e tests decode: what RocketMQ 5's Go client saw in one
// scenario run through bin/proxy.
package result

// Message is what a consumer saw of one message.
type Message struct {
	Body  string            `json:"body"`
	ID    string            `json:"id"`
	Tag   string            `json:"tag,omitempty"`
	Keys  []string          `json:"keys,omitempty"`
	Props map[string]string `json:"props,omitempty"`
	Group string            `json:"group,omitempty"`
	Topic string            `json:"topic"`
	// Offset is the message's queue offset, BornHost its born host.
	Offset   int64  `json:"offset"`
	BornHost string `json:"bornHost,omitempty"`
	// Attempt is the delivery attempt the message came as.
	Attempt int32 `json:"attempt"`
	// BornMs, DeliveryMs and AtMs are its born and delivery timestamps
	// and when it was received, in Unix milliseconds.
	BornMs     int64 `json:"bornMs"`
	DeliveryMs int64 `json:"deliveryMs,omitempty"`
	AtMs       int64 `json:"atMs"`
}

// Result is the RESULT line: the fields of the scenario run, and the
// client's errors as Failures.
type Result struct {
	// producer
	SentIDs      map[string]string `json:"sentIds,omitempty"`
	SentOffsets  map[string]int64  `json:"sentOffsets,omitempty"`
	Hostname     string            `json:"hostname,omitempty"`
	Normal       []Message         `json:"normal,omitempty"`
	Fifo         []Message         `json:"fifo,omitempty"`
	FifoFirst    []Message         `json:"fifoFirst,omitempty"`
	FifoAgain    []Message         `json:"fifoAgain,omitempty"`
	DelayAtMs    int64             `json:"delayAtMs,omitempty"`
	Delay        []Message         `json:"delay,omitempty"`
	RecallErr    string            `json:"recallErr,omitempty"`
	Refused      string            `json:"refused,omitempty"`
	SentAfter    bool              `json:"sentAfter,omitempty"`
	TxnDelivered []Message         `json:"txnDelivered,omitempty"`
	TxnChecked   map[string]int    `json:"txnChecked,omitempty"`
	// simple
	Tagged         []string  `json:"tagged,omitempty"`
	Selected       []string  `json:"selected,omitempty"`
	FirstReceived  []Message `json:"firstReceived,omitempty"`
	ChangedAtMs    int64     `json:"changedAtMs,omitempty"`
	Again          []Message `json:"again,omitempty"`
	AckAfterChange string    `json:"ackAfterChange,omitempty"`
	Leftover       []string  `json:"leftover,omitempty"`
	// namespace (and push, pushfifo)
	Received []Message `json:"received,omitempty"`
	Consumed []Message `json:"consumed,omitempty"`
	Failed   []string  `json:"failed,omitempty"`

	Failures []string `json:"failures"`
}

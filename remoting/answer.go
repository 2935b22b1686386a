package remoting

import "time"

// AnswerOutcome says what became of an answer given with Conn.Reply.
type AnswerOutcome uint8

// Outcomes of an answer.
const (
	// AnswerQueued: the answer was queued for the connection's event
	// loop, which writes it to the socket.
	AnswerQueued AnswerOutcome = iota
	// AnswerOneway: the request was oneway, so the answer was dropped.
	AnswerOneway
	// AnswerFailed: the answer could not be queued (the connection had
	// closed, or the frame could not be encoded).
	AnswerFailed
)

// Answer is one answer a Server's connection gave a request, as
// ServerConfig.OnAnswer hears of it.
type Answer struct {
	// RequestCode and ResponseCode are the codes of the request and of
	// its answer.
	RequestCode, ResponseCode int32
	// Held is set when the request was held by long polling before this
	// answer (Command.MarkHeld).
	Held bool
	// Elapsed is the time from the read of the request's frame off the
	// connection to the queueing of the answer: the wait for a worker,
	// the handler, a long-polling hold. The write to the socket that
	// follows is not in it. Zero for a request the server did not read.
	Elapsed time.Duration
	// Outcome is what became of the answer.
	Outcome AnswerOutcome
}

package broker

import (
	"slices"
	"sync"

	"github.com/rocketkv/rocketkv/remoting"
)

// maxPooledBody bounds the buffers bodyPool keeps: a larger one (a pull of
// many large messages) is left to the garbage collector.
const maxPooledBody = 1 << 20

// bodyPool recycles the buffers of pull and pop response bodies (copies of
// CommitLog records, the largest allocation of a consuming broker): a
// buffer taken with get goes out as a response's body and comes back
// through remoting.Command.ReleaseBody once the connection has written it.
// A buffer that never goes out is simply not returned.
type bodyPool struct {
	pool sync.Pool // of *[]byte, empty
}

// get returns an empty buffer with room for at least n bytes.
func (p *bodyPool) get(n int) []byte {
	if v, ok := p.pool.Get().(*[]byte); ok {
		return slices.Grow((*v)[:0], n)
	}
	return make([]byte, 0, n)
}

// put hands buf back for reuse; nothing may use it afterwards.
func (p *bodyPool) put(buf []byte) {
	if c := cap(buf); c == 0 || c > maxPooledBody {
		return
	}
	buf = buf[:0]
	p.pool.Put(&buf)
}

// attach makes buf the body of resp, returned to the pool once resp has
// been written.
func (p *bodyPool) attach(resp *remoting.Command, buf []byte) {
	resp.Body = buf
	resp.ReleaseBody = func() { p.put(buf) }
}

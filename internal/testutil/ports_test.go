package testutil

import (
	"net"
	"strconv"
	"testing"
)

// A pair is free, below the ephemeral range (where no bind of port 0 or
// outgoing connection takes it), and reserved until its test ends:
// another caller, here or in another test binary, cannot be handed it
// meanwhile.
func TestFreePortPairIsReservedBelowTheEphemeralRange(t *testing.T) {
	dir := reservationDir()
	var port int
	t.Run("holder", func(t *testing.T) {
		port = FreePortPair(t)
		if port < portFloor || port+1 >= ephemeralLow() {
			t.Fatalf("pair %d,%d not in [%d, %d)", port, port+1, portFloor, ephemeralLow())
		}
		for _, p := range []int{port, port + 1} {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				t.Fatalf("port %d of the pair: %v", p, err)
			}
			_ = l.Close()
		}
		for _, first := range []int{port - 1, port, port + 1} {
			if release, ok := reservePorts(dir, first, 2); ok {
				release()
				t.Fatalf("ports %d,%d reserved again while the pair %d,%d is held", first, first+1, port, port+1)
			}
		}
		if q := FreePortPair(t); q >= port-1 && q <= port+1 {
			t.Fatalf("a second pair %d overlaps the first %d", q, port)
		}
	})
	release, ok := reservePorts(dir, port, 2)
	if !ok {
		t.Fatalf("the pair %d,%d is still reserved after its test ended", port, port+1)
	}
	release()
}

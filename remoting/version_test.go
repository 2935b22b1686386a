package remoting

import "testing"

// Ordinals of RocketMQ's MQVersion.Version and their names, read off the
// enum of 5.3.
func TestVersionName(t *testing.T) {
	for v, want := range map[int]string{
		0: "V3_0_0_SNAPSHOT", 1: "V3_0_0_ALPHA1", 7: "V3_0_0_BETA6_SNAPSHOT", 15: "V3_0_0_FINAL",
		16: "V3_0_1_SNAPSHOT", 45: "V3_0_15", 46: "V3_1_0_SNAPSHOT", 77: "V3_2_5", 78: "V3_2_6_SNAPSHOT",
		100: "V3_3_8_SNAPSHOT", 211: "V3_9_9", 212: "V4_0_0_SNAPSHOT", 317: "V4_5_2", 373: "V4_8_0",
		399: "V4_9_3", 479: "V5_3_3", 481: "V5_3_4", 611: "V5_9_9", 612: "HIGHER_VERSION",
		5000: "HIGHER_VERSION", -1: "-1",
	} {
		if got := VersionName(v); got != want {
			t.Errorf("VersionName(%d) = %q, want %q", v, got, want)
		}
	}
}

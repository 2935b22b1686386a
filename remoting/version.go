package remoting

import "strconv"

// VersionName returns the name RocketMQ gives a client's version number
// (the header's version field), as MQVersion.getVersionDesc does: the
// number is the ordinal of MQVersion.Version, so 479 is "V5_3_3", and a
// number past the last is "HIGHER_VERSION". Metrics label connections
// with it, lower-cased. A negative number, which no RocketMQ client
// sends, is returned as its digits.
//
// The enum's order: sixteen 3.0.0 pre-releases, then for each version a
// SNAPSHOT and a release: 3.0.1 to 3.0.15, 3.1.0 to 3.2.9, 3.3.1 to 3.9.9
// (no x.y.0), then every 4.y.z and 5.y.z for y and z from 0 to 9.
func VersionName(v int) string {
	if v < 0 {
		return strconv.Itoa(v)
	}
	if v < len(preReleases) {
		return preReleases[v]
	}
	v -= len(preReleases)
	var major, minor, patch int
	switch k := v / 2; {
	case k < 15: // 3.0.1 .. 3.0.15
		major, minor, patch = 3, 0, k+1
	case k < 35: // 3.1.0 .. 3.2.9
		major, minor, patch = 3, 1+(k-15)/10, (k-15)%10
	case k < 98: // 3.3.1 .. 3.9.9
		major, minor, patch = 3, 3+(k-35)/9, 1+(k-35)%9
	case k < 298: // 4.0.0 .. 5.9.9
		k -= 98
		major, minor, patch = 4+k/100, k/10%10, k%10
	default:
		return "HIGHER_VERSION"
	}
	name := "V" + strconv.Itoa(major) + "_" + strconv.Itoa(minor) + "_" + strconv.Itoa(patch)
	if v%2 == 0 {
		name += "_SNAPSHOT"
	}
	return name
}

// preReleases are the first sixteen versions, 3.0.0's.
var preReleases = []string{
	"V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1",
	"V3_0_0_BETA1", "V3_0_0_BETA2", "V3_0_0_BETA3", "V3_0_0_BETA4", "V3_0_0_BETA5",
	"V3_0_0_BETA6_SNAPSHOT", "V3_0_0_BETA6", "V3_0_0_BETA7_SNAPSHOT", "V3_0_0_BETA7",
	"V3_0_0_BETA8_SNAPSHOT", "V3_0_0_BETA8", "V3_0_0_BETA9_SNAPSHOT", "V3_0_0_BETA9",
	"V3_0_0_FINAL",
}

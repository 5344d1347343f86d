package runtime

import (
	"testing"

	"github.com/percore/percore/ring"
)

// A loop uses a feature only where it asked for it and the kernel has it,
// and skipped sends never with SQPoll, whose kernel thread submits after
// the enter returns (so the enter's return says nothing of the sends).
func TestUringFeaturesFor(t *testing.T) {
	s, err := ring.Probe()
	if err != nil {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	all := UringRegisteredRing | UringSkipSends | UringNAPI | UringDirectDescriptors | UringIncrementalBuffers
	has := map[UringFeatures]bool{
		UringRegisteredRing:     s.HasFeature(ring.RegisteredRing),
		UringSkipSends:          s.HasFeature(ring.CQESkip),
		UringNAPI:               s.HasFeature(ring.NAPI),
		UringDirectDescriptors:  s.HasFeature(ring.DirectDescriptors) && s.HasFeature(ring.FixedFdInstall),
		UringIncrementalBuffers: s.HasFeature(ring.IncrementalBuffers),
	}
	for _, tc := range []struct {
		name  string
		want  UringFeatures
		flags ring.Flags
		no    UringFeatures // never granted with these flags
	}{
		{"none asked", 0, DefaultRingFlags, all},
		{"all, default flags", all, DefaultRingFlags, 0},
		{"all, SQPoll", all, ring.SQPoll, UringSkipSends},
		{"skip sends alone", UringSkipSends, DefaultRingFlags, UringRegisteredRing | UringNAPI | UringDirectDescriptors | UringIncrementalBuffers},
		{"direct descriptors alone", UringDirectDescriptors, DefaultRingFlags, UringRegisteredRing | UringNAPI | UringSkipSends | UringIncrementalBuffers},
		{"incremental buffers alone", UringIncrementalBuffers, DefaultRingFlags, UringRegisteredRing | UringNAPI | UringSkipSends | UringDirectDescriptors},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := uringFeaturesFor(tc.want, tc.flags, s)
			for f, ok := range has {
				want := tc.want&f != 0 && ok && tc.no&f == 0
				if (got&f != 0) != want {
					t.Errorf("%v: got %v, want it %v", f, got, map[bool]string{true: "on", false: "off"}[want])
				}
			}
		})
	}
}

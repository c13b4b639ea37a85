package csinames

import "testing"

// The expected names are what a v1.37.2 cluster shows for handle "h" of
// driver "d" on node "n".
func TestNames(t *testing.T) {
	for _, tc := range []struct{ name, got, want string }{
		{"unique volume name", string(UniqueVolumeName("d", "h")), "kubernetes.io/csi/d^h"},
		{"volume attachment name", VolumeAttachmentName("h", "d", "n"), "csi-9072ed11cc1acb5fa433a877ff339b6311d013f33bddd1d0092711a8ace5b16d"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

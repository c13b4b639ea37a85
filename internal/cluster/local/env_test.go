package local

import (
	"slices"
	"testing"
)

// The steady sysmon setting must not drop a GODEBUG the user set (gctrace,
// say) nor give a process two GODEBUG entries, of which exec keeps only
// the last.
func TestSteadySysmonEnv(t *testing.T) {
	for _, tc := range []struct {
		name, userGODEBUG string
		want              []string
	}{
		{name: "no GODEBUG of the user's", want: []string{"GODEBUG=schedtrace=2147483647"}},
		{name: "the user's GODEBUG kept, ours after it", userGODEBUG: "gctrace=1",
			want: []string{"GODEBUG=gctrace=1,schedtrace=2147483647"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GODEBUG", tc.userGODEBUG)
			if got := steadySysmonEnv(); !slices.Equal(got, tc.want) {
				t.Errorf("steadySysmonEnv() = %q, want %q", got, tc.want)
			}
		})
	}
}

package kind

import (
	"strings"
	"testing"
)

func TestInotifyShortfall(t *testing.T) {
	for _, tc := range []struct {
		limit, inUse, workers int
		wantErr               string // "" means none
	}{
		{limit: 128, inUse: 0, workers: 2},
		{limit: 128, inUse: 0, workers: 6}, // 32 + 96 = 128
		{limit: 128, inUse: 0, workers: 7, wantErr: "a kind cluster of 7 workers needs about 144 inotify instances"},
		{limit: 128, inUse: 61, workers: 3, wantErr: "61 in use now"}, // another cluster's nodes
		{limit: 128, inUse: 0, workers: 8, wantErr: "fs.inotify.max_user_instances is 128: its nodes would never become Ready. Raise it on the Docker host (sysctl -w fs.inotify.max_user_instances=512)"},
		{limit: 512, inUse: 10, workers: 8},
	} {
		err := inotifyShortfall(tc.limit, tc.inUse, tc.workers)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("limit %d, %d in use, %d workers: %v", tc.limit, tc.inUse, tc.workers, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("limit %d, %d in use, %d workers: error %v, want it to contain %q", tc.limit, tc.inUse, tc.workers, err, tc.wantErr)
		}
	}
}

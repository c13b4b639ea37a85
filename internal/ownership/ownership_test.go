package ownership

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMarkerRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m, err := NewMarker("local", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteMarker(dir, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMarker(dir, "local")
	if err != nil {
		t.Fatal(err)
	}
	if got.Token != m.Token || got.Creator != m.Creator || !got.Kept || len(got.Token) != 32 {
		t.Errorf("read %+v, wrote %+v", got, m)
	}
	if !got.Creator.Alive() {
		t.Errorf("the creating process (this test) is not alive by its record %+v", got.Creator)
	}
	if _, err := ReadMarker(dir, "kind"); !errors.Is(err, ErrNotOurs) || !strings.Contains(err.Error(), `its marker says "local"`) {
		t.Errorf("ReadMarker for kind = %v", err)
	}
	other, _ := NewMarker("local", true)
	if other.Token == m.Token {
		t.Error("two markers share a token")
	}
}

// A pid is this process only with the start time and executable recorded.
func TestProcessIDAlive(t *testing.T) {
	self, err := Identify(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		id   ProcessID
		want bool
	}{
		{"as recorded", self, true},
		{"an earlier process with this pid", ProcessID{PID: self.PID, StartTime: self.StartTime - 1, Executable: self.Executable}, false},
		{"another executable", ProcessID{PID: self.PID, StartTime: self.StartTime, Executable: "/bin/true"}, false},
		{"init", ProcessID{PID: 1, StartTime: 1, Executable: "/sbin/init"}, false},
		{"no such pid", ProcessID{PID: 1 << 22, StartTime: 1, Executable: "/bin/x"}, false},
	}
	for _, tc := range tests {
		if got := tc.id.Alive(); got != tc.want {
			t.Errorf("%s: Alive = %t, want %t", tc.name, got, tc.want)
		}
	}
}

func TestReadMarkerRefuses(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	os.WriteFile(notDir, nil, 0o644)
	markerDir := filepath.Join(dir, "markerdir")
	os.MkdirAll(filepath.Join(markerDir, MarkerFile), 0o755)
	unknown := filepath.Join(dir, "unknown")
	os.Mkdir(unknown, 0o755)
	os.WriteFile(filepath.Join(unknown, MarkerFile), []byte(`{"token": "`+strings.Repeat("a", 32)+`", "owner": 1}`), 0o644)
	tests := []struct{ path, want string }{
		{filepath.Join(dir, "missing"), "no such file"},
		{notDir, "not a directory"},
		{markerDir, "is not a regular file"},
		{unknown, `unknown field "owner"`},
	}
	for _, tc := range tests {
		if _, err := ReadMarker(tc.path, ""); !errors.Is(err, ErrNotOurs) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadMarker(%s) = %v, want %q", tc.path, err, tc.want)
		}
	}
}

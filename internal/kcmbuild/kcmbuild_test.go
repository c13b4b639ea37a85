package kcmbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/provenance"
)

// writeTree writes files (slash path -> contents) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, data := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestList(t *testing.T) {
	tests := []struct {
		name    string
		tree    map[string]string // under tools/upstream/builds
		want    []Spec            // Dir is filled in relative to the builds dir
		wantErr []string          // substrings of the error; none: no error
	}{
		{name: "no builds directory", tree: nil},
		{
			name: "a diff build and a files build, files and hidden entries ignored",
			tree: map[string]string{
				"README.md":                       "# about builds\n",
				".scratch/patch.diff":             "x",
				"b-files/files/pkg/a/a.go":        "package a\n",
				"b-files/README":                  "\n# Replaces a.go\nmore text\n",
				"a-diff/patch.diff":               "--- a/x\n+++ b/x\n",
				"a-diff/description":              "  Patches x  \n",
				"c-nodesc/files/pkg/b/b_test.go":  "package b\n",
				"c-nodesc/files/pkg/b/testdata/x": "data",
			},
			want: []Spec{
				{Name: "a-diff", Kind: KindDiff, Dir: "a-diff", Description: "Patches x"},
				{Name: "b-files", Kind: KindFiles, Dir: "b-files", Description: "Replaces a.go"},
				{Name: "c-nodesc", Kind: KindFiles, Dir: "c-nodesc"},
			},
		},
		{
			name: "invalid builds are reported, valid ones still listed",
			tree: map[string]string{
				"both/patch.diff":       "x",
				"both/files/a.go":       "package a\n",
				"neither/description":   "nothing here",
				"stock/patch.diff":      "x",
				"Upper/patch.diff":      "x",
				"good/files/pkg/a/a.go": "package a\n",
			},
			want:    []Spec{{Name: "good", Kind: KindFiles, Dir: "good"}},
			wantErr: []string{"both: holds both patch.diff and files/", "neither: holds neither", `"stock" is reserved`, `"Upper" is not a build name`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.tree != nil {
				writeTree(t, filepath.Join(root, BuildsDir), tc.tree)
			}
			got, err := List(root)
			for i := range tc.want {
				tc.want[i].Dir = filepath.Join(root, BuildsDir, tc.want[i].Dir)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("List:\n got %+v\nwant %+v", got, tc.want)
			}
			if len(tc.wantErr) == 0 && err != nil {
				t.Errorf("List: unexpected error %v", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("List: error %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestLookup(t *testing.T) {
	root := t.TempDir()
	writeTree(t, filepath.Join(root, BuildsDir), map[string]string{"fix/files/a.go": "package a\n"})
	tests := []struct {
		name     string
		wantKind Kind
		wantErr  string
	}{
		{"stock", KindStock, ""},
		{"fix", KindFiles, ""},
		{"nope", "", `no directory tools/upstream/builds/nope (known: stock, fix)`},
		{"../fix", "", "not a build name"},
	}
	for _, tc := range tests {
		s, err := Lookup(root, tc.name)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Lookup(%q): error %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || s.Kind != tc.wantKind || s.Name != tc.name {
			t.Errorf("Lookup(%q) = %+v, %v; want kind %s", tc.name, s, err, tc.wantKind)
		}
	}
}

func TestSHA256(t *testing.T) {
	filesA := map[string]string{"files/pkg/a/a.go": "package a\n", "files/pkg/b/b.go": "package b\n", "description": "one"}
	// The same files written in the other order, another description.
	filesB := map[string]string{"files/pkg/b/b.go": "package b\n", "files/pkg/a/a.go": "package a\n", "description": "two"}
	changedContent := map[string]string{"files/pkg/a/a.go": "package a // changed\n", "files/pkg/b/b.go": "package b\n"}
	movedFile := map[string]string{"files/pkg/c/a.go": "package a\n", "files/pkg/b/b.go": "package b\n"}
	// Path and content boundaries must not be ambiguous.
	shifted := map[string]string{"files/pkg/a/a.go": "package a\npackage b\n"}
	diff := "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
	sum := sha256.Sum256([]byte(diff))

	hash := func(tree map[string]string) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "build")
		writeTree(t, dir, tree)
		s, err := readSpec(filepath.Dir(dir), "build")
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.SHA256()
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 64 {
			t.Fatalf("sha256 %q is not 64 hex digits", h)
		}
		return h
	}
	a := hash(filesA)
	tests := []struct {
		name string
		tree map[string]string
		same bool
	}{
		{"same files, other order and description", filesB, true},
		{"content changed", changedContent, false},
		{"file moved", movedFile, false},
		{"boundary shifted", shifted, false},
	}
	for _, tc := range tests {
		if got := hash(tc.tree); (got == a) != tc.same {
			t.Errorf("%s: sha %s vs %s, want same=%v", tc.name, got, a, tc.same)
		}
	}
	if got := hash(map[string]string{"patch.diff": diff}); got != hex.EncodeToString(sum[:]) {
		t.Errorf("diff build: sha %s, want sha256 of patch.diff %x", got, sum)
	}
	if got, again := hash(filesA), hash(filesA); got != a || again != a {
		t.Errorf("not stable: %s, %s, %s", a, got, again)
	}
	if s, _ := Lookup(t.TempDir(), Stock); mustSHA(t, s) != "" {
		t.Errorf("stock has a patch sha256")
	}
}

func mustSHA(t *testing.T, s Spec) string {
	t.Helper()
	h, err := s.SHA256()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

const upstreamGo = `package a

func A() string {
	return "upstream"
}

func B() int {
	return 1
}
`

func TestApplyDiff(t *testing.T) {
	up := t.TempDir()
	writeTree(t, up, map[string]string{"pkg/a/a.go": upstreamGo, "pkg/a/old.go": "package a\n", "pkg/a/keep.go": "package a\n"})

	gitModify := `diff --git a/pkg/a/a.go b/pkg/a/a.go
index 1111111..2222222 100644
--- a/pkg/a/a.go
+++ b/pkg/a/a.go
@@ -1,5 +1,5 @@
 package a
 
 func A() string {
-	return "upstream"
+	return "patched"
 }
`
	plainModify := strings.Replace(gitModify, "diff --git a/pkg/a/a.go b/pkg/a/a.go\nindex 1111111..2222222 100644\n", "", 1)
	newAndDelete := `diff --git a/pkg/a/new_test.go b/pkg/a/new_test.go
new file mode 100644
--- /dev/null
+++ b/pkg/a/new_test.go
@@ -0,0 +1,2 @@
+package a
+// added
diff --git a/pkg/a/old.go b/pkg/a/old.go
deleted file mode 100644
--- a/pkg/a/old.go
+++ /dev/null
@@ -1 +0,0 @@
-package a
`
	rename := `diff --git a/pkg/a/keep.go b/pkg/b/keep.go
similarity index 100%
rename from pkg/a/keep.go
rename to pkg/b/keep.go
`
	patched := strings.Replace(upstreamGo, `"upstream"`, `"patched"`, 1)
	tests := []struct {
		name    string
		diff    string
		want    map[string]string // "" = deleted
		wantErr []string
	}{
		{name: "git diff", diff: gitModify, want: map[string]string{"pkg/a/a.go": patched}},
		{name: "plain unified diff", diff: plainModify, want: map[string]string{"pkg/a/a.go": patched}},
		{name: "new and deleted files", diff: newAndDelete, want: map[string]string{"pkg/a/new_test.go": "package a\n// added\n", "pkg/a/old.go": ""}},
		{name: "rename", diff: rename, want: map[string]string{"pkg/a/keep.go": "", "pkg/b/keep.go": "package a\n"}},
		{
			name:    "malformed: hunk shorter than its header says",
			diff:    newAndDelete + strings.Replace(gitModify, "@@ -1,5 +1,5 @@", "@@ -1,7 +1,7 @@", 1),
			wantErr: []string{"fix/patch.diff: malformed diff at pkg/a/a.go:", "line "},
		},
		{
			name:    "malformed: garbage hunk header",
			diff:    strings.Replace(gitModify, "@@ -1,5 +1,5 @@", "@@ -x +y @@", 1),
			wantErr: []string{"malformed diff at pkg/a/a.go"},
		},
		{
			name:    "does not apply: context differs",
			diff:    strings.Replace(gitModify, "\treturn \"upstream\"", "\treturn \"something else\"", 1),
			wantErr: []string{"fix/patch.diff: cannot apply to pkg/a/a.go (example.com/up@v1.2.3)", "conflict"},
		},
		{
			name:    "does not apply: file not upstream",
			diff:    strings.ReplaceAll(gitModify, "pkg/a/a.go", "pkg/z/z.go"),
			wantErr: []string{"cannot apply to pkg/z/z.go: no such file in example.com/up@v1.2.3"},
		},
		{
			name:    "new file that exists",
			diff:    strings.ReplaceAll(strings.SplitN(newAndDelete, "diff --git a/pkg/a/old.go", 2)[0], "new_test.go", "a.go"),
			wantErr: []string{"cannot create pkg/a/a.go: it already exists"},
		},
		{
			name:    "path outside the module",
			diff:    strings.ReplaceAll(plainModify, "pkg/a/a.go", "../../etc/passwd"),
			wantErr: []string{"not a path inside the module"},
		},
		{name: "no diff at all", diff: "just some text\n", wantErr: []string{"no file changes found"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := applyDiff("fix/patch.diff", []byte(tc.diff), up, "example.com/up@v1.2.3")
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotS := map[string]string{}
			for k, v := range got {
				gotS[k] = string(v)
			}
			if !reflect.DeepEqual(gotS, tc.want) {
				t.Errorf("changes:\n got %q\nwant %q", gotS, tc.want)
			}
			for k, v := range tc.want {
				if v == "" && got[k] != nil {
					t.Errorf("%s: want deleted (nil), got %q", k, got[k])
				}
			}
		})
	}
}

func TestWriteOverlay(t *testing.T) {
	dir := t.TempDir()
	upstreamRoot := filepath.Join(dir, "mod", upstreamLink)
	ch := changes{
		"pkg/a/a.go":           []byte("package a // patched\n"),
		"pkg/a/extra_test.go":  []byte("package a\n"),
		"pkg/new/dir/new.go":   []byte("package dir\n"),
		"pkg/a/deleted_gen.go": nil,
	}
	overlay := filepath.Join(dir, "overlay.json")
	if err := writeOverlay(overlay, upstreamRoot, filepath.Join(dir, "files"), ch); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(overlay)
	if err != nil {
		t.Fatal(err)
	}
	var o struct{ Replace map[string]string }
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatalf("overlay.json: %v\n%s", err, data)
	}
	if len(o.Replace) != len(ch) {
		t.Errorf("overlay has %d entries, want %d: %v", len(o.Replace), len(ch), o.Replace)
	}
	for rel, want := range ch {
		key := filepath.Join(upstreamRoot, filepath.FromSlash(rel))
		val, ok := o.Replace[key]
		switch {
		case !ok:
			t.Errorf("%s: no overlay entry for %s", rel, key)
		case want == nil:
			if val != "" {
				t.Errorf("%s: deleted file maps to %q, want \"\"", rel, val)
			}
		default:
			if !strings.HasPrefix(val, filepath.Join(dir, "files")+string(filepath.Separator)) || !strings.HasSuffix(val, filepath.FromSlash(rel)) {
				t.Errorf("%s: maps to %s, want a file under %s at the same relative path", rel, val, filepath.Join(dir, "files"))
			}
			if got, err := os.ReadFile(val); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: overlay file holds %q (%v), want %q", rel, got, err, want)
			}
		}
	}
}

func TestFilesSourceApply(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	writeTree(t, dir, map[string]string{
		"files/pkg/controller/volume/attachdetach/statusupdater/node_status_updater.go": "package statusupdater\n",
		"files/pkg/controller/volume/attachdetach/statusupdater/x_test.go":              "package statusupdater\n",
	})
	s, err := readSpec(filepath.Dir(dir), "b")
	if err != nil {
		t.Fatal(err)
	}
	src, err := s.load()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := src.apply(t.TempDir(), "example.com/up@v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"pkg/controller/volume/attachdetach/statusupdater/node_status_updater.go", "pkg/controller/volume/attachdetach/statusupdater/x_test.go"}
	if got := sortedKeys(ch); !reflect.DeepEqual(got, want) {
		t.Errorf("changed files %q, want %q", got, want)
	}
	if got := packagesOf(ch); !reflect.DeepEqual(got, []string{"pkg/controller/volume/attachdetach/statusupdater"}) {
		t.Errorf("packages %q", got)
	}
}

func TestPackagesOf(t *testing.T) {
	ch := changes{
		"pkg/a/a.go":          []byte("x"),
		"pkg/a/a_test.go":     []byte("x"),
		"pkg/b/gone.go":       nil,
		"pkg/c/c.go":          nil,
		"pkg/c/c2.go":         []byte("x"),
		"pkg/d/testdata/x.go": []byte("x"),
		"pkg/e/README.md":     []byte("x"),
	}
	if got, want := packagesOf(ch), []string{"pkg/a", "pkg/c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("packagesOf = %q, want %q", got, want)
	}
}

func TestCachePath(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	tests := []struct {
		root, version, sha, want string
	}{
		{"/repo", "v1.37.2", sha, "/repo/_output/bin/kcm/v1.37.2-abababababab/kube-controller-manager"},
		{"/repo", "v1.37.2", "0123456789abcdef" + strings.Repeat("0", 48), "/repo/_output/bin/kcm/v1.37.2-0123456789ab/kube-controller-manager"},
	}
	for _, tc := range tests {
		if got := CachePath(tc.root, tc.version, tc.sha); got != filepath.FromSlash(tc.want) {
			t.Errorf("CachePath(%q, %q, %q) = %q, want %q", tc.root, tc.version, tc.sha, got, tc.want)
		}
		if got := kcmTarget(tc.root).cachePath(tc.version, tc.sha); got != filepath.FromSlash(tc.want) {
			t.Errorf("target.cachePath = %q, want %q", got, tc.want)
		}
	}
}

func TestLdflags(t *testing.T) {
	got := ldflags("k8s.io/component-base/version", "v1.37.2")
	want := "-s -w -X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1" +
		" -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean" +
		" -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
	if got != want {
		t.Errorf("ldflags:\n got %s\nwant %s", got, want)
	}
}

// tinyRepo lays out a throwaway "repository" with a tools module that pins
// example.com/up v1.2.3 (a local replacement standing in for the module
// cache), so the real build path runs in seconds instead of compiling
// kubernetes.
func tinyRepo(t *testing.T) (target, string) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"up/go.mod":                "module example.com/up\n\ngo 1.22\n",
		"up/version/version.go":    "package version\n\nvar gitVersion = \"v0.0.0-master\"\n\nfunc Get() string { return gitVersion }\n",
		"up/msg/msg.go":            "package msg\n\nfunc Msg() string { return \"stock\" }\n",
		"up/msg/msg_test.go":       "package msg\n\nimport \"testing\"\n\nfunc TestMsg(t *testing.T) {\n\tif Msg() == \"\" {\n\t\tt.Fatal(\"empty\")\n\t}\n}\n",
		"up/cmd/hello/main.go":     "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/up/msg\"\n\t\"example.com/up/version\"\n)\n\nfunc main() { fmt.Println(version.Get(), msg.Msg()) }\n",
		"tools/up/go.mod":          "module example.com/tools\n\ngo 1.22\n\nrequire example.com/up v1.2.3\n\nreplace example.com/up v1.2.3 => ../../up\n",
		"tools/upstream/builds/.k": "",
		// An upstream integration test that must not run: kcm test runs only
		// a build's own tests in test/integration/.
		"up/test/integration/slow/slow_test.go": "package slow\n\nimport \"testing\"\n\nfunc TestUpstreamSlow(t *testing.T) {\n\tt.Fatal(\"upstream's integration test ran\")\n}\n",
	})
	return target{
		repoRoot:   root,
		toolsDir:   filepath.Join(root, "tools/up"),
		module:     "example.com/up",
		mainPkg:    "example.com/up/cmd/hello",
		versionPkg: "example.com/up/version",
		binary:     "hello",
	}, root
}

func tinyBuild(t *testing.T, root, name string, tree map[string]string) Spec {
	t.Helper()
	writeTree(t, filepath.Join(root, BuildsDir, name), tree)
	s, err := Lookup(root, name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const patchedMsg = "package msg\n\nfunc Msg() string { return \"patched\" }\n"

func TestBuildTinyModule(t *testing.T) {
	tg, root := tinyRepo(t)
	ctx := context.Background()
	diff := "--- a/msg/msg.go\n+++ b/msg/msg.go\n@@ -1,3 +1,3 @@\n package msg\n \n-func Msg() string { return \"stock\" }\n+func Msg() string { return \"from diff\" }\n"
	tests := []struct {
		name    string
		tree    map[string]string
		wantOut string // the binary's output; "" = the build fails
		wantErr string
	}{
		{name: "files", tree: map[string]string{"files/msg/msg.go": patchedMsg}, wantOut: "v1.2.3 patched"},
		{name: "diff", tree: map[string]string{"patch.diff": diff}, wantOut: "v1.2.3 from diff"},
		{name: "compile-error", tree: map[string]string{"files/msg/msg.go": "package msg\n\nfunc Msg() string { return 1 }\n"}, wantErr: "build compile-error hello"},
		{name: "diff-does-not-apply", tree: map[string]string{"patch.diff": strings.Replace(diff, `"stock"`, `"other"`, 1)}, wantErr: "cannot apply to msg/msg.go"},
		{name: "diff-malformed", tree: map[string]string{"patch.diff": strings.Replace(diff, "@@ -1,3 +1,3 @@", "@@ -1,9 +1,9 @@", 1)}, wantErr: "malformed diff at msg/msg.go"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tinyBuild(t, root, tc.name, tc.tree)
			sha := mustSHA(t, s)
			final := tg.cachePath("v1.2.3", sha)
			var progress bytes.Buffer
			res, err := build(ctx, tg, s, &progress)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				// Nothing cached: no binary, not even its directory.
				if _, err := os.Stat(filepath.Dir(final)); !os.IsNotExist(err) {
					entries, _ := os.ReadDir(filepath.Dir(final))
					t.Errorf("failed build left %s (%v): %v", filepath.Dir(final), err, entries)
				}
				return
			}
			if err != nil {
				t.Fatalf("build: %v\n%s", err, progress.String())
			}
			want := Result{Binary: final, Provenance: provenance.ControllerBuild{Module: "example.com/up@v1.2.3", Patch: tc.name, PatchSHA256: sha}}
			if res != want {
				t.Errorf("result %+v, want %+v", res, want)
			}
			out, err := exec.Command(res.Binary).Output()
			if err != nil || strings.TrimSpace(string(out)) != tc.wantOut {
				t.Errorf("binary says %q (%v), want %q (patched and version-stamped)", out, err, tc.wantOut)
			}
			var prov provenance.ControllerBuild
			if data, err := os.ReadFile(filepath.Join(filepath.Dir(final), "provenance.json")); err != nil || json.Unmarshal(data, &prov) != nil || prov != want.Provenance {
				t.Errorf("provenance.json: %+v (%v), want %+v", prov, err, want.Provenance)
			}
			if entries, _ := os.ReadDir(filepath.Dir(final)); len(entries) != 2 {
				t.Errorf("cache dir holds %d entries, want the binary and provenance.json only", len(entries))
			}
			// Second time: cached, no build.
			again, err := build(ctx, tg, s, &progress)
			if err != nil || !again.Cached || again.Binary != final {
				t.Errorf("second build: %+v, %v; want the cached binary", again, err)
			}
		})
	}
	// The upstream module is untouched.
	if data, err := os.ReadFile(filepath.Join(root, "up/msg/msg.go")); err != nil || !strings.Contains(string(data), `"stock"`) {
		t.Errorf("upstream msg.go changed: %q, %v", data, err)
	}
}

// Check is the pre-flight: a diff that does not apply is refused without a
// build and without anything written to the cache.
func TestCheckTinyModule(t *testing.T) {
	tg, root := tinyRepo(t)
	diff := "--- a/msg/msg.go\n+++ b/msg/msg.go\n@@ -1,3 +1,3 @@\n package msg\n \n-func Msg() string { return \"stock\" }\n+func Msg() string { return \"from diff\" }\n"
	tests := []struct {
		name    string
		tree    map[string]string
		wantErr string
	}{
		{name: "check-files", tree: map[string]string{"files/msg/msg.go": patchedMsg}},
		{name: "check-diff", tree: map[string]string{"patch.diff": diff}},
		{name: "check-does-not-apply", tree: map[string]string{"patch.diff": strings.Replace(diff, `"stock"`, `"other"`, 1)}, wantErr: "cannot apply to msg/msg.go"},
		{name: "check-not-upstream", tree: map[string]string{"patch.diff": strings.ReplaceAll(diff, "msg/msg.go", "msg/gone.go")}, wantErr: "msg/gone.go"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tinyBuild(t, root, tc.name, tc.tree)
			err := check(context.Background(), tg, s)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("check = %v, want %q", err, tc.wantErr)
			}
			if _, err := os.Stat(filepath.Dir(tg.cachePath("v1.2.3", mustSHA(t, s)))); !os.IsNotExist(err) {
				t.Errorf("check wrote to the cache (%v)", err)
			}
		})
	}
}

func TestTestTinyModule(t *testing.T) {
	tg, root := tinyRepo(t)
	ctx := context.Background()
	extraTest := "package msg\n\nimport \"testing\"\n\nfunc TestPatched(t *testing.T) {\n\tif Msg() != \"patched\" {\n\t\tt.Fatalf(\"Msg() = %q\", Msg())\n\t}\n}\n"
	tests := []struct {
		name    string
		tree    map[string]string
		wantOK  bool
		wantOut []string
	}{
		{"passes", map[string]string{"files/msg/msg.go": patchedMsg, "files/msg/patched_test.go": extraTest}, true, []string{"ok  \texample.com/up/msg"}},
		// The build's test runs against the patched file, upstream's test too.
		{"fails-without-patch", map[string]string{"files/msg/patched_test.go": extraTest}, false, []string{`Msg() = "stock"`}},
		{"breaks-upstream-test", map[string]string{"files/msg/msg.go": "package msg\n\nfunc Msg() string { return \"\" }\n"}, false, []string{"--- FAIL: TestMsg"}},
	}
	integrationTest := "package slow\n\nimport (\n\t\"testing\"\n\n\t\"example.com/up/msg\"\n)\n\n" +
		"func TestPatchedIntegration(t *testing.T) {\n\tif msg.Msg() != \"patched\" {\n\t\tt.Fatalf(\"Msg() = %q\", msg.Msg())\n\t}\n}\n"
	tests = append(tests, []struct {
		name    string
		tree    map[string]string
		wantOK  bool
		wantOut []string
	}{
		// The build's integration test runs against the patch, upstream's
		// next to it does not.
		{"integration", map[string]string{"files/msg/msg.go": patchedMsg, "files/test/integration/slow/patched_test.go": integrationTest}, true,
			[]string{"go test -run ^(TestPatchedIntegration)$ example.com/up/test/integration/slow", "ok  \texample.com/up/test/integration/slow", "go test example.com/up/msg"}},
		{"integration-fails-without-patch", map[string]string{"files/test/integration/slow/patched_test.go": integrationTest}, false,
			[]string{`Msg() = "stock"`, "--- FAIL: TestPatchedIntegration"}},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tinyBuild(t, root, tc.name, tc.tree)
			var out bytes.Buffer
			err := test(ctx, tg, s, &out, false)
			if (err == nil) != tc.wantOK {
				t.Fatalf("test: %v, want ok=%v\n%s", err, tc.wantOK, out.String())
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestTestOnStockTinyModule: with onStock only a build's _test.go files are
// laid over upstream, so a build whose tests test its change fails, on the
// same packages and tests as without.
func TestTestOnStockTinyModule(t *testing.T) {
	tg, root := tinyRepo(t)
	ctx := context.Background()
	extraTest := "package msg\n\nimport \"testing\"\n\nfunc TestPatched(t *testing.T) {\n\tif Msg() != \"patched\" {\n\t\tt.Fatalf(\"Msg() = %q\", Msg())\n\t}\n}\n"
	s := tinyBuild(t, root, "good", map[string]string{"files/msg/msg.go": patchedMsg, "files/msg/patched_test.go": extraTest})
	var out bytes.Buffer
	if err := test(ctx, tg, s, &out, false); err != nil {
		t.Fatalf("on the patch: %v\n%s", err, out.String())
	}
	out.Reset()
	err := test(ctx, tg, s, &out, true)
	if err == nil {
		t.Fatalf("on stock: no error, want the build's test to fail\n%s", out.String())
	}
	for _, w := range []string{"go test example.com/up/msg (example.com/up@v1.2.3 unmodified + only the _test.go files of good", "--- FAIL: TestPatched", `Msg() = "stock"`} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}

func TestTestRuns(t *testing.T) {
	integration := "package volume\n\nimport \"testing\"\n\n" +
		"func TestMain(m *testing.M) {}\n" +
		"func TestStale(t *testing.T) {}\n" +
		"func Testlower(t *testing.T) {}\n" +
		"func helper(t *testing.T) {}\n" +
		"func (x) TestMethod(t *testing.T) {}\n" +
		"func Test(t *testing.T) {}\n"
	tests := []struct {
		name    string
		ch      changes
		want    []testRun
		wantErr string
	}{
		{
			name: "unit and integration packages",
			ch: changes{
				"pkg/a/a.go":                        []byte("package a\n"),
				"pkg/a/a_test.go":                   []byte("package a\n"),
				"test/integration/volume/x_test.go": []byte(integration),
				"test/integration/volume/y_test.go": []byte("package volume\n\nfunc TestOther(t *testing.T) {}\n"),
			},
			want: []testRun{{dirs: []string{"pkg/a"}}, {dirs: []string{"test/integration/volume"}, run: "^(Test|TestOther|TestStale)$"}},
		},
		{
			name: "an integration package without tests of the build is not run",
			ch:   changes{"pkg/a/a.go": []byte("package a\n"), "test/integration/framework/etcd.go": []byte("package framework\n")},
			want: []testRun{{dirs: []string{"pkg/a"}}},
		},
		{
			name:    "a test file that does not parse",
			ch:      changes{"test/integration/volume/x_test.go": []byte("package volume\n\nfunc {\n")},
			wantErr: "test/integration/volume/x_test.go:",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testRuns(tc.ch)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("testRuns = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// Package kcmbuild builds kube-controller-manager variants: stock or stock
// plus a build's patch, cached by (version, patch sha256).
//
// A build is a directory tools/upstream/builds/<name>/ holding either
//
//   - patch.diff: a unified diff against the k8s.io/kubernetes module root
//     (paths a/pkg/..., b/pkg/..., as `git diff` writes them), or
//   - files/: replacement or added files at their upstream relative paths
//     (files/pkg/controller/.../node_status_updater.go, new _test.go files),
//
// and a one-line description (a file named description or README). "stock"
// is implicit: the unmodified binary built by tools/upstream/build.sh.
//
// Upstream source is never copied: the patched files are written to a
// temporary directory and laid over the pinned module with the go command's
// -overlay flag (see workspace.go for why through a temporary copy of the
// pinning module rather than from tools/upstream/kubernetes itself).
package kcmbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/strandlab/strandlab/internal/process"
	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/upstream"
)

// Stock names the unmodified upstream build.
const Stock = "stock"

// BuildsDir is where builds live, relative to the repository root.
const BuildsDir = "tools/upstream/builds"

// CacheDir is where built binaries are kept, relative to the repository root:
// CacheDir/<version>-<sha12>/kube-controller-manager.
const CacheDir = "_output/bin/kcm"

// Kind says how a build describes its change.
type Kind string

const (
	KindStock Kind = "stock" // no change
	KindDiff  Kind = "diff"  // patch.diff
	KindFiles Kind = "files" // files/
)

// File names inside a build directory.
const (
	diffFile = "patch.diff"
	filesDir = "files"
)

// descriptionFiles are read, in order, for a build's one-line description.
var descriptionFiles = []string{"description", "README", "README.md"}

// Spec is one build as found on disk.
type Spec struct {
	Name        string
	Kind        Kind
	Dir         string // absolute; empty for stock
	Description string // first non-empty line of description/README
}

// Result is a built (or cached) binary.
type Result struct {
	Binary string
	// Provenance: Module k8s.io/kubernetes@v1.37.2; Patch the build name
	// (empty for stock); PatchSHA256 see Spec.SHA256.
	Provenance provenance.ControllerBuild
	// Cached is true when the binary was already there.
	Cached bool
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// List finds the builds under repoRoot/tools/upstream/builds, sorted by
// name (stock is implicit and not listed). Files and hidden entries there
// are ignored. A directory that is not a valid build is reported in the
// error; the valid builds are returned all the same.
func List(repoRoot string) ([]Spec, error) {
	root := filepath.Join(repoRoot, BuildsDir)
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list controller builds: %w", err)
	}
	var specs []Spec
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		s, err := readSpec(root, e.Name())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		specs = append(specs, s)
	}
	return specs, errors.Join(errs...)
}

// Names are the builds a scenario may name: stock and every valid build
// under repoRoot (invalid ones are List's error, reported where they are
// built).
func Names(repoRoot string) []string {
	specs, _ := List(repoRoot)
	names := []string{Stock}
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return names
}

// Lookup returns the build called name; "stock" is always there.
func Lookup(repoRoot, name string) (Spec, error) {
	if name == Stock {
		return Spec{Name: Stock, Kind: KindStock, Description: "unmodified upstream kube-controller-manager"}, nil
	}
	if !namePattern.MatchString(name) {
		return Spec{}, fmt.Errorf("controller build %q: not a build name (lower-case letters, digits, '.', '_', '-')", name)
	}
	root := filepath.Join(repoRoot, BuildsDir)
	if st, err := os.Stat(filepath.Join(root, name)); err != nil || !st.IsDir() {
		var known []string
		specs, _ := List(repoRoot)
		for _, s := range specs {
			known = append(known, s.Name)
		}
		return Spec{}, fmt.Errorf("controller build %q: no directory %s/%s (known: %s)", name, BuildsDir, name, strings.Join(append([]string{Stock}, known...), ", "))
	}
	return readSpec(root, name)
}

func readSpec(root, name string) (Spec, error) {
	dir := filepath.Join(root, name)
	if name == Stock {
		return Spec{}, fmt.Errorf("%s: the name %q is reserved for the unmodified build", dir, Stock)
	}
	if !namePattern.MatchString(name) {
		return Spec{}, fmt.Errorf("%s: %q is not a build name (lower-case letters, digits, '.', '_', '-')", dir, name)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Spec{}, fmt.Errorf("%s: absolute path: %w", dir, err)
	}
	s := Spec{Name: name, Dir: abs}
	_, diffErr := os.Stat(filepath.Join(dir, diffFile))
	st, filesErr := os.Stat(filepath.Join(dir, filesDir))
	hasDiff, hasFiles := diffErr == nil, filesErr == nil && st.IsDir()
	switch {
	case hasDiff && hasFiles:
		return Spec{}, fmt.Errorf("%s: holds both %s and %s/; a build has one or the other", dir, diffFile, filesDir)
	case hasDiff:
		s.Kind = KindDiff
	case hasFiles:
		s.Kind = KindFiles
	default:
		return Spec{}, fmt.Errorf("%s: holds neither %s nor %s/", dir, diffFile, filesDir)
	}
	for _, f := range descriptionFiles {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(strings.TrimLeft(line, "# ")); line != "" {
				s.Description = line
				break
			}
		}
		break
	}
	return s, nil
}

// SHA256 is the hex sha256 of the build's patch: of the bytes of
// patch.diff, or, for files/, of every regular file under it in sorted
// order of slash-separated relative path, each hashed as
// "<path>\x00<length>\x00<contents>". It is empty for stock. It does not
// depend on modification times, the description or the walk order.
func (s Spec) SHA256() (string, error) {
	src, err := s.load()
	return src.sha, err
}

// source is a build's patch as read from disk, with its hash.
type source struct {
	spec  Spec
	diff  []byte            // KindDiff
	files map[string][]byte // KindFiles: slash path -> contents
	sha   string
}

func (s Spec) load() (source, error) {
	src := source{spec: s}
	switch s.Kind {
	case KindStock:
		return src, nil
	case KindDiff:
		data, err := os.ReadFile(filepath.Join(s.Dir, diffFile))
		if err != nil {
			return src, fmt.Errorf("%s: read %s: %w", s.Name, diffFile, err)
		}
		sum := sha256.Sum256(data)
		src.diff, src.sha = data, hex.EncodeToString(sum[:])
		return src, nil
	case KindFiles:
		root := filepath.Join(s.Dir, filesDir)
		src.files = map[string][]byte{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return fmt.Errorf("%s: read %s/: %w", s.Name, filesDir, err)
			}
			if d.IsDir() {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return fmt.Errorf("%s: read %s/: %w", s.Name, filesDir, err)
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s: %s is not a regular file", s.Name, filepath.Join(filesDir, rel))
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("%s: read %s/: %w", s.Name, filesDir, err)
			}
			src.files[filepath.ToSlash(rel)] = data
			return nil
		})
		if err != nil {
			return src, err
		}
		if len(src.files) == 0 {
			return src, fmt.Errorf("%s: %s/ holds no files", s.Name, filesDir)
		}
		h := sha256.New()
		for _, rel := range sortedKeys(src.files) {
			fmt.Fprintf(h, "%s\x00%d\x00", rel, len(src.files[rel]))
			h.Write(src.files[rel])
		}
		src.sha = hex.EncodeToString(h.Sum(nil))
		return src, nil
	}
	return src, fmt.Errorf("%s: unknown kind %q", s.Name, s.Kind)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CachePath is where a build of upstream version with patch hash sha256 is
// kept: <repoRoot>/_output/bin/kcm/<version>-<first 12 hex of sha256>/kube-controller-manager.
func CachePath(repoRoot, version, sha256 string) string {
	return filepath.Join(repoRoot, CacheDir, version+"-"+short(sha256), "kube-controller-manager")
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// target is what gets built; kcmTarget is the real one, tests use a tiny
// module.
type target struct {
	repoRoot   string
	toolsDir   string // module that pins the upstream module
	module     string // upstream module path
	mainPkg    string // package to build
	versionPkg string // package whose gitVersion etc. the -X flags set
	binary     string // file name of the built binary
	// etcdDir returns a directory holding an etcd binary, for upstream's
	// integration tests (test/integration/framework finds etcd on PATH);
	// nil: PATH is left alone.
	etcdDir func(ctx context.Context, progress io.Writer) (string, error)
}

func kcmTarget(repoRoot string) target {
	return target{
		repoRoot:   repoRoot,
		toolsDir:   filepath.Join(repoRoot, "tools/upstream/kubernetes"),
		module:     "k8s.io/kubernetes",
		mainPkg:    "k8s.io/kubernetes/cmd/kube-controller-manager",
		versionPkg: "k8s.io/component-base/version",
		binary:     "kube-controller-manager",
		etcdDir: func(ctx context.Context, progress io.Writer) (string, error) {
			return etcdDir(ctx, repoRoot, progress)
		},
	}
}

// etcdDir returns a directory holding etcd: the one on PATH, else the one
// of $STRANDLAB_BIN_DIR, else the etcd tools/upstream/build.sh builds (pinned
// with k8s.io/kubernetes; the script builds only what is missing and prints
// its directory last). upstream.Ensure is not used: it also rebuilds the
// harness's own binaries, which a running cluster may be using.
func etcdDir(ctx context.Context, repoRoot string, progress io.Writer) (string, error) {
	if p, err := exec.LookPath("etcd"); err == nil {
		return filepath.Dir(p), nil
	}
	if dir := os.Getenv(upstream.BinDirEnv); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "etcd")); err != nil {
			return "", fmt.Errorf("%s=%s: no etcd there: %w", upstream.BinDirEnv, dir, err)
		}
		return dir, nil
	}
	if err := process.CheckUnitOnly("building etcd (tools/upstream/build.sh)"); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot, "tools/upstream/build.sh"), filepath.Join(repoRoot, "_output/bin"))
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, progress
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("tools/upstream/build.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := lines[len(lines)-1]
	if _, err := os.Stat(filepath.Join(dir, "etcd")); err != nil {
		return "", fmt.Errorf("tools/upstream/build.sh printed %q, which holds no etcd: %w", dir, err)
	}
	return dir, nil
}

func (t target) cachePath(version, sha string) string {
	return filepath.Join(t.repoRoot, CacheDir, version+"-"+short(sha), t.binary)
}

// Cached reports whether build s is already built, and where it is or
// would be. For stock it reports the path of nothing (stock is
// tools/upstream/build.sh's, see Build).
func Cached(ctx context.Context, repoRoot string, s Spec) (string, bool, error) {
	if s.Kind == KindStock {
		return "", false, nil
	}
	t := kcmTarget(repoRoot)
	mod, err := resolve(ctx, t)
	if err != nil {
		return "", false, fmt.Errorf("controller build %s: %w", s.Name, err)
	}
	sha, err := s.SHA256()
	if err != nil {
		return "", false, err
	}
	p := t.cachePath(mod.Version, sha)
	return p, isExecutable(p), nil
}

// Check makes sure build name can be built, without building it: its files
// load and its diff applies to the pinned upstream sources (or its binary
// is cached already, or, in prebuilt mode, is in the cache). A run's
// pre-flight calls it, so a patch that does not apply fails before any
// report or cluster exists.
func Check(ctx context.Context, repoRoot, name string) error {
	s, err := Lookup(repoRoot, name)
	if err != nil || s.Kind == KindStock {
		return err
	}
	return check(ctx, kcmTarget(repoRoot), s)
}

func check(ctx context.Context, t target, s Spec) error {
	mod, err := resolve(ctx, t)
	if err != nil {
		return fmt.Errorf("controller build %s: %w", s.Name, err)
	}
	sha, err := s.SHA256()
	if err != nil {
		return err
	}
	if isExecutable(t.cachePath(mod.Version, sha)) {
		return nil
	}
	if _, ok, err := upstream.Prebuilt(); err != nil {
		return fmt.Errorf("controller build %s: %w", s.Name, err)
	} else if ok {
		return fmt.Errorf("controller build %s is not in the prebuilt cache (%s=1 builds nothing)", s.Name, upstream.PrebuiltEnv)
	}
	src, err := s.load()
	if err != nil {
		return err
	}
	if _, err := src.apply(mod.Dir, mod.Path+"@"+mod.Version); err != nil {
		return err
	}
	return nil
}

// Build returns the kube-controller-manager of build name, building it
// when it is not cached. Stock is the binary of upstream.Ensure (built by
// tools/upstream/build.sh, never rebuilt here). Progress, including the go
// command's output, goes to progress. A build that fails, or a patch that
// does not apply, leaves nothing in the cache. In prebuilt mode
// (upstream.PrebuiltEnv, the strandlab image) nothing is built and no go
// command runs: a build that is not in the cache is an error naming it.
func Build(ctx context.Context, repoRoot, name string, progress io.Writer) (Result, error) {
	if progress == nil {
		progress = io.Discard
	}
	s, err := Lookup(repoRoot, name)
	if err != nil {
		return Result{}, err
	}
	if s.Kind == KindStock {
		t := kcmTarget(repoRoot)
		mod, err := resolve(ctx, t)
		if err != nil {
			return Result{}, fmt.Errorf("controller build %s: %w", s.Name, err)
		}
		b, err := upstream.Ensure(ctx, repoRoot, progress)
		if err != nil {
			return Result{}, fmt.Errorf("controller build %s: %w", s.Name, err)
		}
		return Result{Binary: b.KubeControllerManager, Provenance: provenance.ControllerBuild{Module: mod.Path + "@" + mod.Version}, Cached: true}, nil
	}
	return build(ctx, kcmTarget(repoRoot), s, progress)
}

// Test runs `go test` on every package build name touches, with the build's
// files laid over upstream: upstream's own tests of those packages and the
// build's added _test.go files run against the patched code. In upstream's
// integration packages (test/integration/...) only the tests the build
// defines run, with etcd on PATH (see testRuns). Output goes to out.
func Test(ctx context.Context, repoRoot, name string, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	s, err := Lookup(repoRoot, name)
	if err != nil {
		return err
	}
	if s.Kind == KindStock {
		return errors.New("stock changes nothing: there is nothing of its own to test")
	}
	return test(ctx, kcmTarget(repoRoot), s, out, false)
}

// TestOnStock runs the same tests as Test, but lays only the build's
// _test.go files over unmodified upstream. A build's own tests should fail
// here: that is what shows they test its change. It returns go test's
// failure as an error, like Test.
func TestOnStock(ctx context.Context, repoRoot, name string, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	s, err := Lookup(repoRoot, name)
	if err != nil {
		return err
	}
	if s.Kind == KindStock {
		return errors.New("stock has no tests of its own to run on stock")
	}
	return test(ctx, kcmTarget(repoRoot), s, out, true)
}

// integrationDir holds upstream's integration tests (module-relative). Their
// packages need etcd and run for minutes (in test/integration/volume,
// TestPodAddedByDswp alone waits up to 200 s), so of those only the tests a
// build adds or changes run.
const integrationDir = "test/integration/"

// testRun is one go test command: dirs (module-relative), and the -run
// pattern, empty for all tests.
type testRun struct {
	dirs []string
	run  string
}

// testRuns splits the packages a change touches (packagesOf) into one run
// of every test of the packages outside integrationDir and one run of the
// integration packages restricted to the tests the change's _test.go files
// define there (a package whose changed files define none is not run).
func testRuns(ch changes) ([]testRun, error) {
	var unit, integration []string
	names := map[string]bool{}
	for _, d := range packagesOf(ch) {
		if !strings.HasPrefix(d+"/", integrationDir) {
			unit = append(unit, d)
			continue
		}
		found := false
		for _, rel := range sortedKeys(ch) {
			if path.Dir(rel) != d || !isTestFile(rel) || ch[rel] == nil {
				continue
			}
			tests, err := testFuncs(rel, ch[rel])
			if err != nil {
				return nil, err
			}
			for _, n := range tests {
				names[n], found = true, true
			}
		}
		if found {
			integration = append(integration, d)
		}
	}
	var runs []testRun
	if len(unit) > 0 {
		runs = append(runs, testRun{dirs: unit})
	}
	if len(integration) > 0 {
		runs = append(runs, testRun{dirs: integration, run: "^(" + strings.Join(sortedKeys(names), "|") + ")$"})
	}
	return runs, nil
}

func isTestFile(rel string) bool { return strings.HasSuffix(rel, "_test.go") }

// testFuncs returns the names of the top-level TestXxx(t *testing.T)
// functions in a Go file (TestMain excluded).
func testFuncs(rel string, data []byte) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), rel, data, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	var names []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Name.Name == "TestMain" || fn.Type.Params.NumFields() != 1 {
			continue
		}
		if n := strings.TrimPrefix(fn.Name.Name, "Test"); n != fn.Name.Name && (n == "" || !unicode.IsLower([]rune(n)[0])) {
			names = append(names, fn.Name.Name)
		}
	}
	return names, nil
}

// packagesOf lists the directories (module-relative, slash) of the Go
// files a change touches, sorted, skipping directories whose Go files are
// all deleted and testdata.
func packagesOf(ch changes) []string {
	dirs := map[string]bool{}
	for rel, data := range ch {
		if !strings.HasSuffix(rel, ".go") || strings.Contains("/"+rel, "/testdata/") {
			continue
		}
		d := path.Dir(rel)
		if data != nil {
			dirs[d] = true
		} else if _, ok := dirs[d]; !ok {
			dirs[d] = false
		}
	}
	var out []string
	for d, live := range dirs {
		if live {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// writeJSON writes v to p as tmp + rename.
func writeJSON(p string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", p, err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return os.Rename(tmp, p)
}

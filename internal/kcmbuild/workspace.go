package kcmbuild

// How patched files reach the compiler.
//
// The go command's -overlay flag replaces source files at build time, but
// it refuses files beneath GOMODCACHE ("Files beneath GOMODCACHE ... must
// not be replaced"; checked with go1.26), which is where k8s.io/kubernetes
// lives when built from tools/upstream/kubernetes. So the overlay cannot be
// used from within that module directly.
//
// The fallback is not `go mod vendor` but a cheaper temporary copy: the
// workspace is a copy of tools/upstream/kubernetes's go.mod and go.sum plus
// `replace k8s.io/kubernetes => ./upstream`, where upstream is a symlink to
// the module-cache directory of the pinned version. The module's sources
// are then reached through a path outside GOMODCACHE, so -overlay accepts
// them, and nothing is copied. Because builds use -trimpath, the build
// cache keys packages by module path@version (k8s.io/kubernetes@v1.37.2,
// unchanged by a directory replacement), not by directory: every package
// the patch does not touch comes from the cache of the stock build (same
// flags as tools/upstream/build.sh, CGO_ENABLED=0), and only the patched
// packages, their dependents and the link run. Vendoring (measured in
// docs/design.md, "Build facts": 6 s and 128 MB per workspace, a first build of ~7.7 min with a
// cache of its own) also drops _test.go files and test-only dependencies,
// which `Test` needs.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/upstream"
)

// upstreamLink is the workspace's symlink to the upstream module source.
const upstreamLink = "upstream"

// module is the pinned upstream module.
type module struct {
	Path    string
	Version string
	Dir     string
}

// resolve finds the version and source directory of t.module as pinned
// by t.toolsDir, downloading it when it is not in the module cache yet.
// In prebuilt mode (upstream.PrebuiltEnv) it runs no go command: the
// version is the one the prebuilt binaries' versions.txt gives t.binary,
// and there is no source directory.
func resolve(ctx context.Context, t target) (module, error) {
	if dir, ok, err := upstream.Prebuilt(); err != nil {
		return module{}, fmt.Errorf("resolve pinned module %s: %w", t.module, err)
	} else if ok {
		versions, err := upstream.ReadVersions(dir)
		if err != nil {
			return module{}, fmt.Errorf("%s=1: %w", upstream.PrebuiltEnv, err)
		}
		if versions[t.binary] == "" {
			return module{}, fmt.Errorf("%s=1: %s/versions.txt gives no version of %s", upstream.PrebuiltEnv, dir, t.binary)
		}
		return module{Path: t.module, Version: versions[t.binary]}, nil
	}
	list := func() (module, error) {
		out, err := goOutput(ctx, t.toolsDir, "list", "-m", "-json", t.module)
		if err != nil {
			return module{}, err
		}
		var m module
		if err := json.Unmarshal(out, &m); err != nil {
			return module{}, fmt.Errorf("go list -m %s: %w", t.module, err)
		}
		return m, nil
	}
	m, err := list()
	if err == nil && m.Dir == "" {
		if _, err = goOutput(ctx, t.toolsDir, "mod", "download", t.module); err == nil {
			m, err = list()
		}
	}
	if err != nil {
		return module{}, fmt.Errorf("resolve pinned module %s: %w", t.module, err)
	}
	if m.Version == "" || m.Dir == "" {
		return module{}, fmt.Errorf("%s: %s has no version or source directory", t.toolsDir, t.module)
	}
	return m, nil
}

// workspace is a temporary module in which the go command sees the
// upstream module with a build's changes laid over it.
type workspace struct {
	dir     string // temporary; removed by close
	modDir  string // dir/.module: go.mod, go.sum, upstream -> module source
	overlay string // dir/.overlay.json
}

// newWorkspace writes the temporary module and the overlay for ch.
func newWorkspace(ctx context.Context, t target, mod module, name string, ch changes) (*workspace, error) {
	tmp, err := os.MkdirTemp("", "strandlab-kcm-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	// The go command works with the directory it resolves, so the overlay
	// keys must not go through a symlinked TMPDIR.
	if real, err := filepath.EvalSymlinks(tmp); err == nil {
		tmp = real
	}
	// Dot names: they cannot clash with a build's name (see namePattern).
	w := &workspace{dir: tmp, modDir: filepath.Join(tmp, ".module"), overlay: filepath.Join(tmp, ".overlay.json")}
	if err := w.init(ctx, t, mod, name, ch); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *workspace) init(ctx context.Context, t target, mod module, name string, ch changes) error {
	if err := os.MkdirAll(w.modDir, 0o755); err != nil {
		return fmt.Errorf("create workspace module: %w", err)
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(t.toolsDir, f))
		if errors.Is(err, os.ErrNotExist) && f == "go.sum" {
			continue
		}
		if err != nil {
			return fmt.Errorf("read the pinning %s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(w.modDir, f), data, 0o644); err != nil {
			return fmt.Errorf("write workspace %s: %w", f, err)
		}
	}
	if err := os.Symlink(mod.Dir, filepath.Join(w.modDir, upstreamLink)); err != nil {
		return fmt.Errorf("link workspace to %s@%s: %w", mod.Path, mod.Version, err)
	}
	// Drop any replacement of the module the pinning go.mod has, then
	// point it at the symlink.
	out, err := goOutput(ctx, w.modDir, "mod", "edit", "-json")
	if err != nil {
		return err
	}
	var gomod struct {
		Replace []struct {
			Old struct{ Path, Version string }
		}
	}
	if err := json.Unmarshal(out, &gomod); err != nil {
		return fmt.Errorf("go mod edit -json: %w", err)
	}
	args := []string{"mod", "edit"}
	for _, r := range gomod.Replace {
		if r.Old.Path == mod.Path {
			old := r.Old.Path
			if r.Old.Version != "" {
				old += "@" + r.Old.Version
			}
			args = append(args, "-dropreplace="+old)
		}
	}
	args = append(args, "-replace="+mod.Path+"=./"+upstreamLink)
	if _, err := goOutput(ctx, w.modDir, args...); err != nil {
		return err
	}
	// The changed files go to dir/<build name>/<path>, so the compiler's
	// messages read ../<build name>/pkg/...: the path under the build's files/.
	return writeOverlay(w.overlay, filepath.Join(w.modDir, upstreamLink), filepath.Join(w.dir, name), ch)
}

// writeOverlay writes each changed file under filesDir and an overlay file
// mapping <upstreamRoot>/<path> to it ("" for a deleted file: the go
// command then treats the file as absent).
func writeOverlay(overlayPath, upstreamRoot, filesDir string, ch changes) error {
	replace := map[string]string{}
	for _, rel := range sortedKeys(ch) {
		key := filepath.Join(upstreamRoot, filepath.FromSlash(rel))
		data := ch[rel]
		if data == nil {
			replace[key] = ""
			continue
		}
		dst := filepath.Join(filesDir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("overlay %s: %w", rel, err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return fmt.Errorf("overlay %s: %w", rel, err)
		}
		replace[key] = dst
	}
	data, err := json.MarshalIndent(struct{ Replace map[string]string }{replace}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode overlay: %w", err)
	}
	return os.WriteFile(overlayPath, data, 0o644)
}

func (w *workspace) close() { os.RemoveAll(w.dir) }

// trimmedSourceEnv returns the environment that lets a test built with
// -trimpath find files next to its upstream sources. Upstream's test API
// server (cmd/kube-apiserver/app/testing, pkgPath) reads its serving
// certificate from testdata/ beside its own source file, whose path
// -trimpath makes relative (k8s.io/kubernetes@v1.37.2/cmd/...); it then
// resolves the path against $TEST_SRCDIR/$TEST_WORKSPACE, which Bazel sets.
// Both point at a directory where <module>@<version> is the upstream source.
// (Building without -trimpath instead would give every package of the test
// binary a new build cache key in each temporary workspace.)
func (w *workspace) trimmedSourceEnv(mod module) ([]string, error) {
	srcdir := filepath.Join(w.dir, ".srcdir")
	link := filepath.Join(srcdir, filepath.FromSlash(mod.Path+"@"+mod.Version))
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return nil, fmt.Errorf("link upstream sources for -trimpath tests: %w", err)
	}
	if err := os.Symlink(mod.Dir, link); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("link upstream sources for -trimpath tests: %w", err)
	}
	return []string{"TEST_SRCDIR=" + srcdir, "TEST_WORKSPACE=."}, nil
}

// prepare resolves the module, applies the build and writes its workspace.
// The workspace lays over upstream the changes keep selects (all of them
// when keep is nil); ch is all of the build's changes all the same.
func prepare(ctx context.Context, t target, s Spec, keep func(rel string) bool) (module, source, changes, *workspace, error) {
	mod, err := resolve(ctx, t)
	if err != nil {
		return module{}, source{}, nil, nil, fmt.Errorf("controller build %s: %w", s.Name, err)
	}
	src, err := s.load()
	if err != nil {
		return module{}, source{}, nil, nil, err
	}
	ch, err := src.apply(mod.Dir, mod.Path+"@"+mod.Version)
	if err != nil {
		return module{}, source{}, nil, nil, err
	}
	laid := ch
	if keep != nil {
		laid = changes{}
		for rel, data := range ch {
			if keep(rel) {
				laid[rel] = data
			}
		}
	}
	w, err := newWorkspace(ctx, t, mod, s.Name, laid)
	if err != nil {
		return module{}, source{}, nil, nil, fmt.Errorf("controller build %s: %w", s.Name, err)
	}
	return mod, src, ch, w, nil
}

// ldflags stamps the version the binary reports, as tools/upstream/build.sh
// does (without them a module build reports v0.0.0-master).
func ldflags(versionPkg, version string) string {
	minor := ""
	if parts := strings.Split(strings.TrimPrefix(version, "v"), "."); len(parts) > 1 {
		minor = parts[1]
	}
	major := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 2)[0]
	x := func(k, v string) string { return " -X " + versionPkg + "." + k + "=" + v }
	return "-s -w" + x("gitVersion", version) + x("gitMajor", major) + x("gitMinor", minor) +
		x("gitTreeState", "clean") + x("buildDate", "1970-01-01T00:00:00Z")
}

// build builds t with s's changes into the cache, or returns the cached
// binary. The binary is written inside a temporary directory next to its
// final place and renamed when complete; a failure removes everything the
// build created.
func build(ctx context.Context, t target, s Spec, progress io.Writer) (Result, error) {
	mod, err := resolve(ctx, t)
	if err != nil {
		return Result{}, fmt.Errorf("controller build %s: %w", s.Name, err)
	}
	sha, err := s.SHA256()
	if err != nil {
		return Result{}, err
	}
	prov := provenance.ControllerBuild{Module: mod.Path + "@" + mod.Version, Patch: s.Name, PatchSHA256: sha}
	final := t.cachePath(mod.Version, sha)
	if isExecutable(final) {
		fmt.Fprintf(progress, ">> kcm %s: cached (%s)\n", s.Name, final)
		return Result{Binary: final, Provenance: prov, Cached: true}, nil
	}
	if _, ok, _ := upstream.Prebuilt(); ok {
		return Result{}, fmt.Errorf("controller build %s (patch %s) is not prebuilt here: no %s, and %s=1 builds nothing (tools/images/build-strandlab.sh puts builds into the image)",
			s.Name, short(sha), final, upstream.PrebuiltEnv)
	}

	mod, src, _, w, err := prepare(ctx, t, s, nil)
	if err != nil {
		return Result{}, err
	}
	defer w.close()
	if src.sha != sha {
		return Result{}, fmt.Errorf("%s changed while it was being built; build again", s.Dir)
	}

	dir := filepath.Dir(final)
	_, statErr := os.Stat(dir)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("controller build %s: create cache directory: %w", s.Name, err)
	}
	tmp, err := os.MkdirTemp(dir, ".tmp-")
	if err != nil {
		return Result{}, fmt.Errorf("controller build %s: create temporary directory in the cache: %w", s.Name, err)
	}
	ok := false
	defer func() {
		os.RemoveAll(tmp)
		if !ok && created {
			os.Remove(dir) // only when empty: nothing else was cached there
		}
	}()

	fmt.Fprintf(progress, ">> kcm %s: building %s from %s@%s + %s %s (a first build can take minutes)\n",
		s.Name, t.binary, mod.Path, mod.Version, s.Kind, short(sha))
	start := time.Now()
	out := filepath.Join(tmp, t.binary)
	if err := goRun(ctx, w.modDir, progress, nil, "build", "-overlay", w.overlay, "-trimpath",
		"-ldflags", ldflags(t.versionPkg, mod.Version), "-o", out, t.mainPkg); err != nil {
		return Result{}, fmt.Errorf("build %s %s: %w", s.Name, t.binary, err)
	}
	if err := writeJSON(filepath.Join(tmp, "provenance.json"), prov); err != nil {
		return Result{}, fmt.Errorf("controller build %s: %w", s.Name, err)
	}
	if err := os.Rename(filepath.Join(tmp, "provenance.json"), filepath.Join(dir, "provenance.json")); err != nil {
		return Result{}, fmt.Errorf("controller build %s: store provenance: %w", s.Name, err)
	}
	// The binary is renamed last: its presence means the build completed.
	if err := os.Rename(out, final); err != nil {
		return Result{}, fmt.Errorf("controller build %s: store the binary: %w", s.Name, err)
	}
	ok = true
	fmt.Fprintf(progress, ">> kcm %s: built in %s\n", s.Name, time.Since(start).Round(time.Second))
	return Result{Binary: final, Provenance: prov}, nil
}

// test runs go test on the packages s touches, with s's changes laid over;
// with onStock, only s's _test.go files are laid over unmodified upstream
// (the packages and tests run are the same). Upstream's integration packages
// (test/integration/...) run only the tests s defines there, with etcd on
// PATH; every other package runs all its tests.
func test(ctx context.Context, t target, s Spec, out io.Writer, onStock bool) error {
	if _, ok, _ := upstream.Prebuilt(); ok {
		return fmt.Errorf("testing build %s needs the go command and upstream's sources; %s=1 has neither", s.Name, upstream.PrebuiltEnv)
	}
	var keep func(string) bool
	if onStock {
		keep = isTestFile
	}
	mod, _, ch, w, err := prepare(ctx, t, s, keep)
	if err != nil {
		return err
	}
	defer w.close()
	runs, err := testRuns(ch)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	if len(runs) == 0 {
		return fmt.Errorf("%s changes no Go package: nothing to test", s.Name)
	}
	laid := fmt.Sprintf("%s@%s + %s", mod.Path, mod.Version, s.Kind)
	if onStock {
		laid = fmt.Sprintf("%s@%s unmodified + only the _test.go files of %s: they should FAIL here", mod.Path, mod.Version, s.Name)
	}
	var failed []error
	for _, r := range runs {
		var pkgs []string
		for _, d := range r.dirs {
			pkgs = append(pkgs, mod.Path+"/"+d)
		}
		var flags, env []string
		if r.run != "" {
			flags = []string{"-run", r.run}
			if t.etcdDir != nil {
				dir, err := t.etcdDir(ctx, out)
				if err != nil {
					return fmt.Errorf("test %s: integration tests need etcd: %w", s.Name, err)
				}
				env = append(env, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
			}
			srcEnv, err := w.trimmedSourceEnv(mod)
			if err != nil {
				return fmt.Errorf("test %s: %w", s.Name, err)
			}
			env = append(env, srcEnv...)
		}
		shown := append(flags, pkgs...)
		fmt.Fprintf(out, ">> kcm %s: go test %s (%s)\n", s.Name, strings.Join(shown, " "), laid)
		args := append([]string{"test", "-overlay", w.overlay, "-trimpath", "-count=1"}, shown...)
		if err := goRun(ctx, w.modDir, out, env, args...); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("test %s: %w", s.Name, errors.Join(failed...))
	}
	return nil
}

// goEnv is the environment of every go command run here: no workspace
// file, and CGO_ENABLED=0 as in tools/upstream/build.sh, so that builds
// share its build cache; extra (KEY=value) comes last and so wins.
func goEnv(extra ...string) []string {
	return append(append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0"), extra...)
}

// goOutput runs go in dir and returns its stdout.
func goOutput(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	var stderr bytes.Buffer
	cmd.Dir, cmd.Env, cmd.Stderr = dir, goEnv(), &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s (in %s): %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// goRun runs go in dir, with env added to goEnv, its output to w; the
// error carries the end of the output.
func goRun(ctx context.Context, dir string, w io.Writer, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	tail := &tailBuffer{max: 4096}
	out := io.MultiWriter(w, tail)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, goEnv(env...), out, out
	if err := cmd.Run(); err != nil {
		if t := strings.TrimSpace(tail.String()); t != "" {
			return fmt.Errorf("go %s: %w:\n%s", args[0], err, t)
		}
		return fmt.Errorf("go %s: %w", args[0], err)
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }

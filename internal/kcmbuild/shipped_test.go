package kcmbuild

import (
	"bytes"
	"context"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/upstream"
)

// TestShippedBuilds runs every shipped build's own tests, together with
// upstream's tests of the packages it patches, against the patched copy of
// k8s.io/kubernetes, and builds its controller (cached afterwards). Then it
// runs the same tests with only the build's test files over stock: every
// test the build adds must fail there, or it does not test the change. A
// build that changes comments only (commentOnly) stops after upstream's
// tests: it has nothing of its own to build or test. It compiles upstream
// packages, so -short skips it.
func TestShippedBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles k8s.io/kubernetes packages")
	}
	wd, _ := os.Getwd()
	root, err := upstream.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := List(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) < 2 {
		t.Fatalf("found %d shipped builds, want at least fix and retry-empty-patch", len(specs))
	}
	for _, s := range specs {
		t.Run(s.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			var out bytes.Buffer
			if err := Test(ctx, root, s.Name, &out); err != nil {
				t.Fatalf("tests of build %s against the patched copy: %v\n%s", s.Name, err, out.String())
			}
			// A build that changes comments only (stock-copy, the null
			// comparison) has no behaviour of its own to test: its
			// upstream tests passing is all there is to check.
			same, err := commentOnly(ctx, root, s)
			if err != nil {
				t.Fatal(err)
			}
			if same {
				t.Logf("build %s changes comments only: no tests of its own needed", s.Name)
				return
			}
			res, err := Build(ctx, root, s.Name, &out)
			if err != nil {
				t.Fatalf("build %s: %v\n%s", s.Name, err, out.String())
			}
			if res.Provenance.Patch != s.Name || len(res.Provenance.PatchSHA256) != 64 {
				t.Errorf("provenance %+v: want the patch name and its sha256", res.Provenance)
			}

			added, err := addedTests(ctx, root, s)
			if err != nil {
				t.Fatal(err)
			}
			if len(added) == 0 {
				t.Fatalf("build %s adds no test", s.Name)
			}
			out.Reset()
			if err := TestOnStock(ctx, root, s.Name, &out); err == nil {
				t.Fatalf("the tests of build %s pass against stock: they do not test its change\n%s", s.Name, out.String())
			}
			for _, name := range added {
				if !strings.Contains(out.String(), "--- FAIL: "+name+" (") {
					t.Errorf("test %s of build %s does not fail against stock\n%s", name, s.Name, tail(out.String(), 8000))
				}
			}
		})
	}
}

// patchedFiles is the build's changed files over the pinned upstream
// module, and that module's directory.
func patchedFiles(ctx context.Context, root string, s Spec) (string, changes, error) {
	mod, err := resolve(ctx, kcmTarget(root))
	if err != nil {
		return "", nil, err
	}
	src, err := s.load()
	if err != nil {
		return "", nil, err
	}
	ch, err := src.apply(mod.Dir, mod.Path+"@"+mod.Version)
	return mod.Dir, ch, err
}

// commentOnly reports whether every file the build changes has the same
// Go tokens, comments aside, as upstream's: a build that cannot behave
// differently from stock.
func commentOnly(ctx context.Context, root string, s Spec) (bool, error) {
	modDir, ch, err := patchedFiles(ctx, root, s)
	if err != nil {
		return false, err
	}
	for rel, data := range ch {
		old, err := os.ReadFile(filepath.Join(modDir, filepath.FromSlash(rel)))
		if err != nil || data == nil || !strings.HasSuffix(rel, ".go") {
			return false, nil // a new, deleted or non-Go file
		}
		if !slices.Equal(goTokens(old), goTokens(data)) {
			return false, nil
		}
	}
	return len(ch) > 0, nil
}

// goTokens is a Go file's tokens and literals, without its comments.
func goTokens(src []byte) []string {
	var sc scanner.Scanner
	fset := token.NewFileSet()
	sc.Init(fset.AddFile("", fset.Base(), len(src)), src, nil, 0)
	var toks []string
	for {
		_, tok, lit := sc.Scan()
		if tok == token.EOF {
			return toks
		}
		toks = append(toks, tok.String()+" "+lit)
	}
}

// addedTests returns the test functions of the build's _test.go files that
// the upstream versions of those files do not have.
func addedTests(ctx context.Context, root string, s Spec) ([]string, error) {
	modDir, ch, err := patchedFiles(ctx, root, s)
	if err != nil {
		return nil, err
	}
	var added []string
	for _, rel := range sortedKeys(ch) {
		if !isTestFile(rel) || ch[rel] == nil {
			continue
		}
		names, err := testFuncs(rel, ch[rel])
		if err != nil {
			return nil, err
		}
		old := map[string]bool{}
		if data, err := os.ReadFile(filepath.Join(modDir, filepath.FromSlash(rel))); err == nil {
			oldNames, err := testFuncs(rel, data)
			if err != nil {
				return nil, err
			}
			for _, n := range oldNames {
				old[n] = true
			}
		}
		for _, n := range names {
			if !old[n] {
				added = append(added, n)
			}
		}
	}
	return added, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func TestGoTokensIgnoreCommentsOnly(t *testing.T) {
	const base = "package p\n\n// F is f.\nfunc F() int { return 1 }\n"
	for _, tc := range []struct {
		name, changed string
		same          bool
	}{
		{"comment added", "// Package p.\npackage p\n\n// F is f.\nfunc F() int { return 1 } // one\n", true},
		{"comment reworded", "package p\n\n/* F is\nf. */\nfunc F() int { return 1 }\n", true},
		{"literal changed", "package p\n\n// F is f.\nfunc F() int { return 2 }\n", false},
		{"statement added", "package p\n\n// F is f.\nfunc F() int { println(); return 1 }\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := slices.Equal(goTokens([]byte(base)), goTokens([]byte(tc.changed))); got != tc.same {
				t.Errorf("same tokens = %v, want %v", got, tc.same)
			}
		})
	}
}

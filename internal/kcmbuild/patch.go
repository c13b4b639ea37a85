package kcmbuild

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	// go-gitdiff parses and applies git/unified diffs in Go (it follows
	// git's apply.c: strict context matching, new/deleted/renamed files,
	// line-numbered errors), so a build's patch.diff is applied without
	// depending on a patch or git binary, to the module-cache sources
	// read in memory, and without writing anywhere near them.
	"github.com/bluekeyes/go-gitdiff/gitdiff"
)

// changes maps a module-relative slash path to the file's new contents; a
// nil value deletes the file.
type changes map[string][]byte

// apply computes the build's changed files against the upstream module
// source in upstreamDir (read only). modVersion names the module in errors.
func (src source) apply(upstreamDir, modVersion string) (changes, error) {
	switch src.spec.Kind {
	case KindStock:
		return changes{}, nil
	case KindFiles:
		ch := changes{}
		for rel, data := range src.files {
			if !filepath.IsLocal(filepath.FromSlash(rel)) {
				return nil, fmt.Errorf("%s: %s/%s: not a path inside the module", src.spec.Name, filesDir, rel)
			}
			ch[rel] = data
		}
		return ch, nil
	case KindDiff:
		return applyDiff(src.spec.Name+"/"+diffFile, src.diff, upstreamDir, modVersion)
	}
	return nil, fmt.Errorf("%s: unknown kind %q", src.spec.Name, src.spec.Kind)
}

// applyDiff applies a unified diff to the files of upstreamDir in memory.
// name (e.g. fix/patch.diff) prefixes errors, which name the file of the
// diff that is malformed or does not apply.
func applyDiff(name string, diff []byte, upstreamDir, modVersion string) (changes, error) {
	files, _, err := gitdiff.Parse(bytes.NewReader(diff))
	if err != nil {
		return nil, fmt.Errorf("%s: malformed diff at %s: %w", name, fileAtError(diff, err), err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no file changes found (a unified diff with a/ and b/ paths is expected)", name)
	}
	ch := changes{}
	set := func(rel string, data []byte) error {
		if _, dup := ch[rel]; dup {
			return fmt.Errorf("%s: %s is changed twice", name, rel)
		}
		ch[rel] = data
		return nil
	}
	for _, f := range files {
		oldName, err := diffPath(f.OldName)
		if err != nil && !f.IsNew {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		newName, err := diffPath(f.NewName)
		if err != nil && !f.IsDelete {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if f.IsDelete {
			if _, err := os.Stat(filepath.Join(upstreamDir, filepath.FromSlash(oldName))); err != nil {
				return nil, fmt.Errorf("%s: cannot delete %s: not in %s", name, oldName, modVersion)
			}
			if err := set(oldName, nil); err != nil {
				return nil, err
			}
			continue
		}
		var old []byte
		if !f.IsNew {
			old, err = os.ReadFile(filepath.Join(upstreamDir, filepath.FromSlash(oldName)))
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%s: cannot apply to %s: no such file in %s", name, oldName, modVersion)
			} else if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", name, oldName, err)
			}
		} else if _, err := os.Stat(filepath.Join(upstreamDir, filepath.FromSlash(newName))); err == nil {
			return nil, fmt.Errorf("%s: cannot create %s: it already exists in %s", name, newName, modVersion)
		}
		var out bytes.Buffer
		if err := gitdiff.Apply(&out, bytes.NewReader(old), f); err != nil {
			where := ""
			var ae *gitdiff.ApplyError
			if errors.As(err, &ae) && ae.Fragment > 0 {
				where = fmt.Sprintf(" (hunk %d, line %d of the file)", ae.Fragment, ae.Line)
			}
			return nil, fmt.Errorf("%s: cannot apply to %s (%s)%s: %w", name, newName, modVersion, where, err)
		}
		if f.IsRename && oldName != newName {
			if err := set(oldName, nil); err != nil {
				return nil, err
			}
		}
		if err := set(newName, out.Bytes()); err != nil {
			return nil, err
		}
	}
	return ch, nil
}

// diffPath turns a name from a diff header into a module-relative slash
// path. go-gitdiff strips the a/ and b/ prefixes of `diff --git` headers
// but keeps them for plain ---/+++ headers; either way the result is
// relative to the module root (there is no top-level a/ or b/ directory
// in k8s.io/kubernetes).
func diffPath(name string) (string, error) {
	if name == "" {
		return "", errors.New("file header without a file name")
	}
	for _, p := range []string{"a/", "b/"} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			name = rest
			break
		}
	}
	name = path.Clean(name)
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return "", fmt.Errorf("%s: not a path inside the module", name)
	}
	return name, nil
}

var errLine = regexp.MustCompile(`line (\d+)`)

// fileAtError names the file whose section of diff holds the line a parse
// error reports: the last file header at or before that line.
func fileAtError(diff []byte, err error) string {
	m := errLine.FindStringSubmatch(err.Error())
	if m == nil {
		return "an unknown file"
	}
	at, _ := strconv.Atoi(m[1])
	file, minus := "", ""
	sc := bufio.NewScanner(bytes.NewReader(diff))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for n := 1; sc.Scan() && n <= at; n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "diff --git "):
			f := strings.Fields(line)
			file = f[len(f)-1]
		case strings.HasPrefix(line, "--- "):
			minus = headerName(line[4:])
		case strings.HasPrefix(line, "+++ "):
			if plus := headerName(line[4:]); plus != "/dev/null" {
				file = plus
			} else {
				file = minus
			}
		}
	}
	if file == "" {
		return "the start (before any file header)"
	}
	if p, err := diffPath(file); err == nil {
		return p
	}
	return file
}

func headerName(s string) string {
	name, _, _ := strings.Cut(s, "\t")
	return strings.TrimSpace(name)
}

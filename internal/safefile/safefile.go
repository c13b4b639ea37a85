// Package safefile reads the files strandlab is handed and writes the files
// it keeps without surprises: a read takes a regular file of bounded size
// only (a FIFO would block, /dev/zero never end), and a write goes through
// a temporary file renamed over the target (an interrupted write leaves the
// old file whole; a reader never sees half a file).
package safefile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrTooLarge is wrapped by ReadRegular's refusal of a file over its bound.
var ErrTooLarge = fmt.Errorf("file too large")

// ReadRegular reads path, which must be a regular file of at most max
// bytes (checked before it is opened, and again while reading, in case it
// grows). what names the kind of file in errors ("a scenario's").
func ReadRegular(path string, max int64, what string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, fi.Mode().Type())
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: %d bytes, more than %s %d: %w", path, fi.Size(), what, max, ErrTooLarge)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: more than %s %d bytes: %w", path, what, max, ErrTooLarge)
	}
	return data, nil
}

// WriteAtomic writes data to path (mode 0644) through a temporary file in
// its directory, renamed over path.
func WriteAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

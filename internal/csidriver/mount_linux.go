package csidriver

import (
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// isMountPoint reports whether path is the root of a mount, without following
// a symlink at path. It asks statx(2) for STATX_ATTR_MOUNT_ROOT, which also
// answers for a bind mount from the same filesystem, where comparing st_dev
// with the parent directory's (the classic test) says "not a mount point".
func isMountPoint(path string) (bool, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_TYPE, &st); err != nil {
		return false, &fs.PathError{Op: "statx", Path: path, Err: err}
	}
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, fmt.Errorf("statx %s: the kernel does not report mount points (Linux 5.8 or later needed)", path)
	}
	return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}

// bindMount bind-mounts source onto the directory target, read-only if ro.
// It calls mount(2) itself rather than a mount binary (as k8s.io/mount-utils
// does): the driver's image is built FROM scratch.
func bindMount(source, target string, ro bool) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return &fs.PathError{Op: "bind mount " + source + " on", Path: target, Err: err}
	}
	if ro {
		if err := remount(target, true); err != nil {
			// Leave no writable mount for a read-only publish behind.
			_ = unix.Unmount(target, 0)
			return err
		}
	}
	return nil
}

// keptFlags maps the statfs flags of a mount to the mount flags that a bind
// remount must pass again: the remount sets the mount's flags to exactly what
// it is given, so leaving these out would drop nosuid or noexec inherited from
// the source, and in a user namespace (rootless kind) fails with EPERM on
// flags locked by the parent namespace.
var keptFlags = []struct{ statfs, mount uintptr }{
	{unix.ST_NOSUID, unix.MS_NOSUID},
	{unix.ST_NODEV, unix.MS_NODEV},
	{unix.ST_NOEXEC, unix.MS_NOEXEC},
	{unix.ST_NOATIME, unix.MS_NOATIME},
	{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
	{unix.ST_RELATIME, unix.MS_RELATIME},
}

// readOnly reports whether the filesystem at path is mounted read-only.
func readOnly(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false, &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	return uintptr(st.Flags)&unix.ST_RDONLY != 0, nil
}

// remount makes the bind mount at target read-only or read-write, keeping its
// other flags. A bind mount needs this second step: MS_RDONLY on the first
// mount(2) call is ignored with MS_BIND.
func remount(target string, ro bool) error {
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return &fs.PathError{Op: "statfs", Path: target, Err: err}
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT)
	if ro {
		flags |= unix.MS_RDONLY
	}
	for _, f := range keptFlags {
		if uintptr(st.Flags)&f.statfs != 0 {
			flags |= f.mount
		}
	}
	if err := unix.Mount("", target, "", flags, ""); err != nil {
		return &fs.PathError{Op: fmt.Sprintf("remount (readonly=%v)", ro), Path: target, Err: err}
	}
	return nil
}

// unmount unmounts the topmost mount at target. Not lazily: a busy volume
// fails the call, which the CO retries, rather than vanishing from the mount
// table while still in use.
func unmount(target string) error {
	if err := unix.Unmount(target, 0); err != nil {
		return &fs.PathError{Op: "unmount", Path: target, Err: err}
	}
	return nil
}

//go:build !linux

package csidriver

import "errors"

// NewDriver refuses PublishBind off Linux; these only satisfy the compiler.

var errNoBind = errors.New("bind mounts need Linux")

func isMountPoint(string) (bool, error)    { return false, errNoBind }
func bindMount(string, string, bool) error { return errNoBind }
func readOnly(string) (bool, error)        { return false, errNoBind }
func remount(string, bool) error           { return errNoBind }
func unmount(string) error                 { return errNoBind }

// Command pause is the sandbox ("pause") container of strandlab's offline kind
// node image, and the container of the churned StatefulSet's pods: it holds
// the pod's namespaces open and does nothing until it is told to stop.
// Upstream's pause is a C program that is not buildable from a Go module, so
// this is a Go stand-in for the same contract (build/pause/linux/pause.c in
// kubernetes): exit 0 on SIGINT/SIGTERM, reap orphaned children as PID 1.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 {
		// -v, --help or anything else: say what this is, as upstream's does for -v.
		fmt.Println("pause (strandlab): sleeps until SIGINT or SIGTERM, reaping children; takes no arguments")
		return
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child, so that processes orphaned into the pod's
// PID namespace do not stay zombies.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

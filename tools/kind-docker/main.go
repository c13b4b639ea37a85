// Command kind-docker is the `docker` strandlab's kind provider puts first in
// PATH on hosts where `--privileged` cannot work (docs/kind-offline.md): it
// rewrites kind's command line (internal/cluster/kind/unprivileged) and runs
// the real docker, named by STRANDLAB_REAL_DOCKER, with it.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/strandlab/strandlab/internal/cluster/kind/unprivileged"
)

func main() {
	real := os.Getenv("STRANDLAB_REAL_DOCKER")
	if real == "" {
		fmt.Fprintln(os.Stderr, "kind-docker: STRANDLAB_REAL_DOCKER is not set (the path of the docker client to run); "+
			"this program is started by strandlab's kind provider, see docs/kind.md")
		os.Exit(2)
	}
	if len(os.Args) == 2 && (os.Args[1] == "--help" || os.Args[1] == "-h") {
		fmt.Println("kind-docker: runs STRANDLAB_REAL_DOCKER with kind's --privileged replaced by the capabilities the host can grant (docs/kind-offline.md)")
		fmt.Println("STRANDLAB_KIND_DOCKER_LOG=FILE appends every rewritten command line to FILE.")
		return
	}
	_, err := os.Stat("/lib/modules")
	args := unprivileged.Args(os.Args[1:], unprivileged.Host{HasLibModules: err == nil})
	if logFile := os.Getenv("STRANDLAB_KIND_DOCKER_LOG"); logFile != "" {
		if f, err := os.OpenFile(logFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "docker %q\n", args)
			f.Close()
		}
	}
	path, err := exec.LookPath(real)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kind-docker: %v\n", err)
		os.Exit(2)
	}
	// exec, not a child: signals, stdio and the exit status are docker's own.
	err = syscall.Exec(path, append([]string{"docker"}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "kind-docker: exec %s: %v\n", path, err)
	os.Exit(2)
}

// Package unprivileged rewrites the docker command lines of kind's Go
// library for hosts where `--privileged` cannot work: there the capability
// bounding set of the Docker daemon lacks CAP_SYS_RESOURCE, and runc fails
// every privileged `docker run` and `docker exec` with "unable to apply
// caps: operation not permitted" (docs/kind-offline.md). kind v0.33
// hard-codes the flag (providers/docker provision.go and node.go) and calls
// `docker` from PATH, so strandlab puts a `docker` of its own
// (tools/kind-docker) first in kind's PATH, which rewrites the command line
// with Args and runs the real docker.
package unprivileged

// NodeRunFlags replace `--privileged` in `docker run` of a node: every
// capability the daemon can grant, every device, /sys and /proc unmasked
// (systempaths=unconfined), /dev/kmsg and /dev/fuse. What --privileged also
// does and these do not is mount the cgroup hierarchies read-write: the
// node image's first entrypoint (tools/kind-image/cgroup-rw) does that.
var NodeRunFlags = []string{
	"--cap-add=ALL", "--cap-drop=SYS_RESOURCE",
	"--security-opt=systempaths=unconfined",
	"--device-cgroup-rule=a *:* rwm",
	"--device=/dev/kmsg", "--device=/dev/fuse",
}

// Host is what the rewrite needs to know of the machine.
type Host struct {
	// HasLibModules: /lib/modules exists. kind mounts it read-only into
	// every node; when it is missing, docker would create it on the host.
	HasLibModules bool
}

// Args returns the docker arguments to run instead of args (the arguments
// after "docker"). Only `run` and `exec` change: `--privileged` is replaced
// by NodeRunFlags in run and dropped in exec (a plain exec has the node's
// capabilities, which is what kind's commands need). Everything after the
// image or container name is the command's own and is never touched.
func Args(args []string, host Host) []string {
	if len(args) == 0 || (args[0] != "run" && args[0] != "exec") {
		return args
	}
	out := []string{args[0]}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !isFlag(a) {
			// the image (run) or container (exec): the rest is the command's
			return append(out, args[i:]...)
		}
		switch {
		case a == "--privileged":
			if args[0] == "run" {
				out = append(out, NodeRunFlags...)
			}
			continue
		case !host.HasLibModules && (a == "--volume" || a == "-v") && i+1 < len(args) && args[i+1] == "/lib/modules:/lib/modules:ro":
			i++
			continue
		}
		out = append(out, a)
		if takesValue(a) && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' }

// takesValue: the flags kind passes to run and exec as "--flag value"
// (two arguments). kind writes every other valued flag as --flag=value.
func takesValue(a string) bool {
	switch a {
	case "--volume", "-v", "-e", "--env", "--name", "--hostname", "--label", "-l",
		"--network", "--net", "--tmpfs", "--security-opt", "--device", "--publish", "-p",
		"--workdir", "-w", "--user", "-u", "--entrypoint", "--ip", "--ip6":
		return true
	}
	return false
}

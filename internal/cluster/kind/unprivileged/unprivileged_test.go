package unprivileged

import (
	"slices"
	"testing"
)

func TestArgs(t *testing.T) {
	nodeRun := []string{"run", "--name", "c1", "--hostname", "c1", "--label", "io.x-k8s.kind.role=worker",
		"--privileged", "--security-opt", "seccomp=unconfined", "--tmpfs", "/tmp",
		"--volume", "/var", "--volume", "/lib/modules:/lib/modules:ro", "-e", "KIND_CLUSTER_NAME=c",
		"--detach", "--tty", "img:tag", "--privileged"}
	tests := []struct {
		name string
		args []string
		host Host
		want []string
	}{
		{"other commands untouched", []string{"ps", "-a", "--privileged"}, Host{}, []string{"ps", "-a", "--privileged"}},
		{"exec drops --privileged, keeps the command's own flags",
			[]string{"exec", "--privileged", "-i", "-e", "A=B", "node1", "sh", "--privileged"}, Host{},
			[]string{"exec", "-i", "-e", "A=B", "node1", "sh", "--privileged"}},
		{"run replaces --privileged, keeps /lib/modules when the host has it", nodeRun, Host{HasLibModules: true},
			slices.Concat([]string{"run", "--name", "c1", "--hostname", "c1", "--label", "io.x-k8s.kind.role=worker"},
				NodeRunFlags,
				[]string{"--security-opt", "seccomp=unconfined", "--tmpfs", "/tmp",
					"--volume", "/var", "--volume", "/lib/modules:/lib/modules:ro", "-e", "KIND_CLUSTER_NAME=c",
					"--detach", "--tty", "img:tag", "--privileged"})},
		{"run without /lib/modules on the host does not mount it", nodeRun, Host{},
			slices.Concat([]string{"run", "--name", "c1", "--hostname", "c1", "--label", "io.x-k8s.kind.role=worker"},
				NodeRunFlags,
				[]string{"--security-opt", "seccomp=unconfined", "--tmpfs", "/tmp",
					"--volume", "/var", "-e", "KIND_CLUSTER_NAME=c",
					"--detach", "--tty", "img:tag", "--privileged"})},
		{"a value that looks like the flag is a value", []string{"run", "--name", "--privileged", "img"}, Host{},
			[]string{"run", "--name", "--privileged", "img"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Args(tc.args, tc.host); !slices.Equal(got, tc.want) {
				t.Errorf("Args:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

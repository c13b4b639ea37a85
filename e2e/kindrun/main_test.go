// Package kindrun runs `strandlab run --provider kind` as a user does. Its
// tests start their own kind clusters through the CLI, so, unlike e2e/kind,
// it shares no cluster: a second cluster beside a suite's would take the
// CPU a 4-node cluster needs to join its workers on 2 cores. Without
// Docker, or under -short, it is skipped with one line.
package kindrun

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e/kindrun: skipped in -short mode (starts kind clusters)")
		os.Exit(0)
	}
	if err := exec.Command("docker", "version").Run(); err != nil {
		fmt.Printf("e2e/kindrun: skipped: no Docker daemon answers here (%v)\n", err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/strandlab/strandlab/internal/kcmbuild"
	"github.com/strandlab/strandlab/internal/upstream"
)

// kcmCommand is `strandlab kcm`: the controller builds of
// tools/upstream/builds (see docs/controller-builds.md).
func kcmCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kcm",
		Short: "List, build and test kube-controller-manager builds (tools/upstream/builds)",
		Long: `Controller builds are stock kube-controller-manager (the pinned
k8s.io/kubernetes) plus a build's patch: a directory under
tools/upstream/builds/ holding patch.diff or files/. Patched binaries are
cached under _output/bin/kcm/<version>-<sha12>/ by upstream version and
patch sha256. See docs/controller-builds.md.`,
	}
	cmd.AddCommand(kcmListCommand(), kcmBuildCommand(), kcmTestCommand())
	return cmd
}

func kcmRepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return upstream.RepoRoot(wd)
}

func kcmListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the controller builds: name, kind, patch sha256 (12), cached?, description",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := kcmRepoRoot()
			if err != nil {
				return err
			}
			specs, listErr := kcmbuild.List(root)
			stock, _ := kcmbuild.Lookup(root, kcmbuild.Stock)
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tSHA12\tCACHED\tDESCRIPTION")
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t%s (tools/upstream/build.sh)\n", stock.Name, stock.Kind, stock.Description)
			for _, s := range specs {
				sha, cached := "?", "?"
				if sum, err := s.SHA256(); err == nil {
					sha = sum[:12]
				} else {
					fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
				}
				if _, ok, err := kcmbuild.Cached(cmd.Context(), root, s); err == nil {
					cached = map[bool]string{true: "yes", false: "no"}[ok]
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Kind, sha, cached, s.Description)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			return listErr
		},
	}
}

func kcmBuildCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "build NAME",
		Short: "Build (or find cached) the kube-controller-manager of a build; prints its path last",
		Long: `Build the kube-controller-manager of build NAME (stock or a directory under
tools/upstream/builds/), unless it is cached. Progress goes to stderr; the
binary's path and its provenance are printed on stdout, the path last.`,
		Example: `  strandlab kcm build fix
  strandlab kcm build stock`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := kcmRepoRoot()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := kcmbuild.Build(ctx, root, args[0], os.Stderr)
			if err != nil {
				return err
			}
			p := res.Provenance
			fmt.Printf("# %s: %s", args[0], p.Module)
			if p.Patch != "" {
				fmt.Printf(" + %s (sha256 %s)", p.Patch, p.PatchSHA256)
			}
			fmt.Println()
			fmt.Println(res.Binary)
			return nil
		},
	}
}

func kcmTestCommand() *cobra.Command {
	var onStock bool
	cmd := &cobra.Command{
		Use:   "test NAME",
		Short: "go test the upstream packages a build touches, with the build laid over them",
		Long: `Run go test on every k8s.io/kubernetes package build NAME changes, with the
build's files laid over upstream: upstream's own tests of those packages and
the build's added _test.go files run against the patched code. In upstream's
integration packages (test/integration/...) only the tests the build defines
run, with etcd on PATH (yours, or the one tools/upstream/build.sh builds).

With --stock, the same tests run with only the build's _test.go files laid
over unmodified upstream. A build's tests should FAIL there (the exit status
is then non-zero): that is what shows they test the build's change.`,
		Example: `  strandlab kcm test fix
  strandlab kcm test --stock fix    # fix's tests against stock: expected to fail`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := kcmRepoRoot()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if onStock {
				return kcmbuild.TestOnStock(ctx, root, args[0], os.Stdout)
			}
			return kcmbuild.Test(ctx, root, args[0], os.Stdout)
		},
	}
	cmd.Flags().BoolVar(&onStock, "stock", false, "run only the build's _test.go files, over unmodified upstream (they should fail)")
	return cmd
}

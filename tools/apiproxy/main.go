// Command apiproxy is strandlab's throttling proxy between
// kube-controller-manager and kube-apiserver (see internal/proxy). The
// controller's kubeconfig points at --bind; the proxy forwards with the
// controller's own identity (--identity-cert/--identity-key, the same
// credentials the controller holds). Metrics (/metrics), counters
// (/strandlab/counters), the journal of delayed events and controller writes
// (/strandlab/journal) and /healthz are served on --admin-bind.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/proxy"
)

func main() {
	err := run()
	switch {
	case errors.Is(err, flag.ErrHelp):
		// -h/--help printed the flags: asked for, so not a failure.
	case err != nil:
		fmt.Fprintln(os.Stderr, "apiproxy:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("apiproxy", flag.ContinueOnError)
	bind := fs.String("bind", "127.0.0.1:6444", "address the controller connects to (TLS)")
	adminBind := fs.String("admin-bind", "127.0.0.1:6445", "address of /metrics, /strandlab/counters and /healthz (plain HTTP)")
	certFile := fs.String("tls-cert", "", "serving certificate")
	keyFile := fs.String("tls-key", "", "serving key")
	clientCA := fs.String("client-ca", "", "CA that signed the controller's client certificate")
	upstream := fs.String("upstream", "", "API server URL")
	upstreamCA := fs.String("upstream-ca", "", "CA of the API server")
	idCert := fs.String("identity-cert", "", "the controller's client certificate")
	idKey := fs.String("identity-key", "", "the controller's client key")
	profileFile := fs.String("profile", "", "fault profile (YAML or JSON); empty: no faults")
	klog.InitFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	for name, v := range map[string]string{"tls-cert": *certFile, "tls-key": *keyFile, "client-ca": *clientCA, "upstream": *upstream,
		"upstream-ca": *upstreamCA, "identity-cert": *idCert, "identity-key": *idKey} {
		if v == "" {
			return fmt.Errorf("--%s is required", name)
		}
	}
	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		return fmt.Errorf("--upstream %q: not a URL", *upstream)
	}
	upstreamPool, err := certutil.NewPool(*upstreamCA)
	if err != nil {
		return fmt.Errorf("--upstream-ca: %w", err)
	}
	clientPool, err := certutil.NewPool(*clientCA)
	if err != nil {
		return fmt.Errorf("--client-ca: %w", err)
	}
	identity, err := tls.LoadX509KeyPair(*idCert, *idKey)
	if err != nil {
		return fmt.Errorf("--identity-cert/--identity-key: %w", err)
	}
	serving, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	var profile fault.Profile
	if *profileFile != "" {
		data, err := os.ReadFile(*profileFile)
		if err != nil {
			return err
		}
		if err := yaml.UnmarshalStrict(data, &profile); err != nil {
			return fmt.Errorf("--profile %s: %w", *profileFile, err)
		}
	}
	p, err := proxy.New(proxy.Config{Upstream: target, UpstreamCAs: upstreamPool, Identity: identity, Profile: profile})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *bind)
	if err != nil {
		return fmt.Errorf("--bind: %w", err)
	}
	adminLn, err := net.Listen("tcp", *adminBind)
	if err != nil {
		ln.Close()
		return fmt.Errorf("--admin-bind: %w", err)
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second, TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{serving}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: clientPool,
		MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"},
	}}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", p.MetricsHandler())
	mux.Handle("GET /strandlab/counters", p.CountersHandler())
	mux.Handle("GET /strandlab/journal", p.JournalHandler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	admin := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errs := make(chan error, 2)
	go func() { errs <- srv.ServeTLS(ln, "", "") }()
	go func() { errs <- admin.Serve(adminLn) }()
	select {
	case <-ctx.Done():
	case err := <-errs:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = admin.Shutdown(shutdown)
	return srv.Shutdown(shutdown)
}

package pki

import (
	"crypto/x509"
	"net"
	"os"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
)

func TestIssuedCertificatesVerifyAgainstCA(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)

	tests := []struct {
		name  string
		issue func() (string, error)
		usage x509.ExtKeyUsage
		check func(*testing.T, *x509.Certificate)
	}{
		{
			name: "serving cert carries its IP SAN",
			issue: func() (string, error) {
				c, _, err := ca.ServingCert(dir, "apiserver", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
				return c, err
			},
			usage: x509.ExtKeyUsageServerAuth,
			check: func(t *testing.T, c *x509.Certificate) {
				if err := c.VerifyHostname("127.0.0.1"); err != nil {
					t.Error(err)
				}
			},
		},
		{
			name: "node client cert names the node and its group",
			issue: func() (string, error) {
				c, _, err := ca.ClientCert(dir, "node-1", Identity{CommonName: "system:node:node-1", Organization: []string{"system:nodes"}})
				return c, err
			},
			usage: x509.ExtKeyUsageClientAuth,
			check: func(t *testing.T, c *x509.Certificate) {
				if c.Subject.CommonName != "system:node:node-1" || len(c.Subject.Organization) != 1 || c.Subject.Organization[0] != "system:nodes" {
					t.Errorf("subject = %v", c.Subject)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, err := tc.issue()
			if err != nil {
				t.Fatal(err)
			}
			certs, err := certutil.CertsFromFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Fatalf("does not verify against the CA: %v", err)
			}
			tc.check(t, certs[0])
		})
	}
}

func TestKubeconfigLoadsWithClientGo(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	path, err := ca.Kubeconfig(dir, "admin", "https://127.0.0.1:6443", Identity{CommonName: "admin", Organization: []string{"system:masters"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" {
		t.Errorf("host = %q", cfg.Host)
	}
	if st, err := os.Stat(cfg.KeyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file %s: mode %v, err %v; want 0600", cfg.KeyFile, st.Mode().Perm(), err)
	}
}

func TestLoadCA(t *testing.T) {
	orig, err := NewCA(t.TempDir(), "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _ := os.ReadFile(orig.CertFile)
	keyPEM, _ := os.ReadFile(strings.TrimSuffix(orig.CertFile, ".crt") + ".key")
	dir := t.TempDir()
	ca, err := LoadCA(dir, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	// A certificate the loaded CA issues verifies against the original.
	certFile, _, err := ca.ServingCert(dir, "apiproxy", nil, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(certFile)
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(orig.Cert)
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool}); err != nil {
		t.Errorf("issued certificate does not verify against the loaded CA: %v", err)
	}
	for _, bad := range []struct{ name, cert, key string }{{"cert", "junk", string(keyPEM)}, {"key", string(certPEM), "junk"}} {
		if _, err := LoadCA(dir, []byte(bad.cert), []byte(bad.key)); err == nil || !strings.Contains(err.Error(), "CA "+map[string]string{"cert": "certificate", "key": "key"}[bad.name]) {
			t.Errorf("LoadCA with a bad %s: %v", bad.name, err)
		}
	}
}

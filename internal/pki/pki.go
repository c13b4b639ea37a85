// Package pki issues the certificates and kubeconfigs a local cluster needs:
// one CA, the API server's serving certificate, and a client certificate per
// identity (admin, kube-controller-manager, kube-scheduler, each node), so
// every component authenticates as itself and RBAC/Node authorization apply
// exactly as in a real cluster.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// validity is long enough for a multi-day soak and short enough that a
// leaked key is worthless soon.
const validity = 30 * 24 * time.Hour

// CA is a certificate authority that signs every certificate of one cluster.
type CA struct {
	Cert     *x509.Certificate
	Key      crypto.Signer
	CertFile string
}

// Identity is a client certificate: who a component is to the API server.
type Identity struct {
	CommonName   string   // user name, e.g. system:kube-controller-manager
	Organization []string // groups, e.g. system:nodes
}

// NewCA creates a CA and writes ca.crt and ca.key into dir.
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	cert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: name}, key)
	if err != nil {
		return nil, fmt.Errorf("self-signed CA: %w", err)
	}
	ca := &CA{Cert: cert, Key: key, CertFile: filepath.Join(dir, "ca.crt")}
	if err := writePair(dir, "ca", cert, key); err != nil {
		return nil, err
	}
	return ca, nil
}

// LoadCA is the CA of a cluster strandlab did not set up (kubeadm's, in a
// kind node), from its PEM certificate and key; ca.crt is written into dir.
func LoadCA(dir string, certPEM, keyPEM []byte) (*CA, error) {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("CA key: %T cannot sign", key)
	}
	ca := &CA{Cert: certs[0], Key: signer, CertFile: filepath.Join(dir, "ca.crt")}
	if err := certutil.WriteCert(ca.CertFile, certPEM); err != nil {
		return nil, err
	}
	return ca, nil
}

// ServingCert issues a server certificate for the given names and IPs and
// returns the paths of the certificate and key written into dir.
func (ca *CA) ServingCert(dir, name string, dnsNames []string, ips []net.IP) (certFile, keyFile string, err error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	return ca.issue(dir, name, tmpl)
}

// ClientCert issues a client certificate for id and returns the paths of the
// certificate and key written into dir.
func (ca *CA) ClientCert(dir, name string, id Identity) (certFile, keyFile string, err error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: id.CommonName, Organization: id.Organization},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ca.issue(dir, name, tmpl)
}

// Kubeconfig issues a client certificate for id and writes a kubeconfig that
// uses it against server. It returns the kubeconfig's path.
func (ca *CA) Kubeconfig(dir, name, server string, id Identity) (string, error) {
	certFile, keyFile, err := ca.ClientCert(dir, name, id)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".kubeconfig")
	return path, WriteKubeconfig(path, name, server, ca.CertFile, certFile, keyFile)
}

// WriteKubeconfig writes a kubeconfig with one cluster, user and context, all
// named name, referring to the certificate files by absolute path.
func WriteKubeconfig(path, name, server, caFile, certFile, keyFile string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	return clientcmd.WriteToFile(*cfg, path)
}

func (ca *CA) issue(dir, name string, tmpl *x509.Certificate) (string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return "", "", err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = ca.Cert.NotBefore
	tmpl.NotAfter = time.Now().Add(validity)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return "", "", fmt.Errorf("sign certificate %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return "", "", err
	}
	if err := writePair(dir, name, cert, key); err != nil {
		return "", "", err
	}
	return filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"), nil
}

// ServiceAccountKey writes the RSA key that signs service account tokens
// (sa.key) and returns its path. The API server reads the public half from
// the same file (--service-account-key-file accepts private keys).
func ServiceAccountKey(dir string) (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "sa.key")
	return path, keyutil.WriteKey(path, keyPEM)
}

func writePair(dir, name string, cert *x509.Certificate, key crypto.Signer) error {
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return err
	}
	certPEM, err := certutil.EncodeCertificates(cert)
	if err != nil {
		return err
	}
	if err := certutil.WriteCert(filepath.Join(dir, name+".crt"), certPEM); err != nil {
		return err
	}
	return keyutil.WriteKey(filepath.Join(dir, name+".key"), keyPEM)
}

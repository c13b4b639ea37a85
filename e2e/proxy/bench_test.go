package proxy

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/stats"
)

// BenchmarkGetNamespace measures what the proxy adds to a request: GET of a namespace
// with the controller manager's identity, straight to the API server and
// through the proxy (no request faults; the suite's node-event rule does not
// apply to GETs). Run: go test ./e2e/proxy -run '^$' -bench GetNamespace -benchtime 2000x
func BenchmarkGetNamespace(b *testing.B) {
	dir := s.Provider.Cluster().(cluster.StateDirCluster).StateDir()
	for _, tc := range []struct{ name, kubeconfig string }{
		{"direct", "kube-controller-manager.kubeconfig"},
		{"via-proxy", "kube-controller-manager-via-proxy.kubeconfig"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "pki", tc.kubeconfig))
			if err != nil {
				b.Fatal(err)
			}
			rc.QPS, rc.Burst = 1e6, 1e6 // measure the path, not client-side throttling
			rc.ContentType = "application/vnd.kubernetes.protobuf"
			c := kubernetes.NewForConfigOrDie(rc)
			ctx := context.Background()
			if _, err := c.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
				b.Fatal(err) // also warms the connection
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if _, err := c.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.ReportMetric(float64(stats.Percentile(lat, 50).Microseconds()), "p50-µs")
			b.ReportMetric(float64(stats.Percentile(lat, 99).Microseconds()), "p99-µs")
		})
	}
}

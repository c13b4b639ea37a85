package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	k8sjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// Every manifest must decode into known Kubernetes objects, strictly: a typo
// in a field name fails here, not in a user's cluster.
func TestManifestsDecode(t *testing.T) {
	files, _ := filepath.Glob("*.yaml")
	more, _ := filepath.Glob("*/*.yaml")
	files = append(files, more...)
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	strict := k8sjson.NewSerializerWithOptions(k8sjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		k8sjson.SerializerOptions{Yaml: true, Strict: true})
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
			n := 0
			for {
				doc, err := r.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(bytes.TrimSpace(doc)) == 0 {
					continue
				}
				if _, _, err := strict.Decode(doc, nil, nil); err != nil {
					t.Errorf("document %d: %v", n, err)
				}
				n++
			}
			if n == 0 {
				t.Error("no objects")
			}
		})
	}
}

// The upstream hostpath variant (for users with a registry) must keep the
// path under test: the driver attaches (--enable-attach), under the name
// csi/driver.yaml's CSIDriver and StorageClass use, with upstream's images.
func TestUpstreamHostpathVariant(t *testing.T) {
	data, err := os.ReadFile("kind/csi-hostpath-upstream.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, want := range []string{"--enable-attach", "--drivername=" + CSIDriverName,
		"image: registry.k8s.io/sig-storage/hostpathplugin:", "image: registry.k8s.io/sig-storage/csi-node-driver-registrar:",
		"image: registry.k8s.io/sig-storage/csi-attacher:", "image: registry.k8s.io/sig-storage/csi-provisioner:"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("kind/csi-hostpath-upstream.yaml lacks %q", want)
		}
	}
	if bytes.Contains(data, []byte("image: strandlab/")) {
		t.Errorf("the upstream variant runs a strandlab image:\n%s", text)
	}
}

// Package apply creates the objects of strandlab's manifests in a cluster,
// the way `kubectl create -f` would for the kinds the manifests use, so that
// providers need no kubectl.
package apply

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// Decode decodes every object of the multi-document YAML docs.
func Decode(docs ...[]byte) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, doc := range docs {
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(doc)))
		for {
			raw, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			if len(bytes.TrimSpace(raw)) == 0 {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("decode manifest: %w", err)
			}
			out = append(out, obj)
		}
	}
	return out, nil
}

// Create creates every object of docs; objects that exist already are left
// as they are.
func Create(ctx context.Context, client kubernetes.Interface, docs ...[]byte) error {
	objs, err := Decode(docs...)
	if err != nil {
		return err
	}
	return CreateObjects(ctx, client, objs...)
}

// CreateObjects creates objs (as Decode returns them, possibly changed by
// the caller) in order; objects that exist already are left as they are.
func CreateObjects(ctx context.Context, client kubernetes.Interface, objs ...runtime.Object) error {
	for _, o := range objs {
		if err := create(ctx, client, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s: %w", describe(o), err)
		}
	}
	return nil
}

// DryRun sends every object of docs to the API server as a server-side
// dry run (admission, validation and defaulting, nothing persisted) and
// returns every refusal, each naming its object: what a manifest strandlab
// does not deploy here (no registry for its images) must still be
// deployable.
func DryRun(ctx context.Context, client kubernetes.Interface, docs ...[]byte) error {
	objs, err := Decode(docs...)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range objs {
		if err := createWith(ctx, client, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			errs = append(errs, fmt.Errorf("dry run of %s: %w", describe(o), err))
		}
	}
	return errors.Join(errs...)
}

func create(ctx context.Context, client kubernetes.Interface, o runtime.Object) error {
	return createWith(ctx, client, o, metav1.CreateOptions{})
}

func createWith(ctx context.Context, client kubernetes.Interface, o runtime.Object, opts metav1.CreateOptions) error {
	var err error
	switch o := o.(type) {
	case *rbacv1.ClusterRole:
		_, err = client.RbacV1().ClusterRoles().Create(ctx, o, opts)
	case *rbacv1.ClusterRoleBinding:
		_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
	case *storagev1.CSIDriver:
		_, err = client.StorageV1().CSIDrivers().Create(ctx, o, opts)
	case *storagev1.StorageClass:
		_, err = client.StorageV1().StorageClasses().Create(ctx, o, opts)
	case *corev1.ServiceAccount:
		_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
	case *corev1.ConfigMap:
		_, err = client.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, opts)
	case *corev1.Namespace:
		_, err = client.CoreV1().Namespaces().Create(ctx, o, opts)
	case *corev1.PersistentVolumeClaim:
		_, err = client.CoreV1().PersistentVolumeClaims(o.Namespace).Create(ctx, o, opts)
	case *batchv1.Job:
		_, err = client.BatchV1().Jobs(o.Namespace).Create(ctx, o, opts)
	case *appsv1.Deployment:
		_, err = client.AppsV1().Deployments(o.Namespace).Create(ctx, o, opts)
	case *appsv1.DaemonSet:
		_, err = client.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, opts)
	case *appsv1.StatefulSet:
		_, err = client.AppsV1().StatefulSets(o.Namespace).Create(ctx, o, opts)
	default:
		err = fmt.Errorf("unexpected object %T in the manifests", o)
	}
	return err
}

func describe(o runtime.Object) string {
	if m, ok := o.(metav1.Object); ok {
		return fmt.Sprintf("%T %s", o, m.GetName())
	}
	return fmt.Sprintf("%T", o)
}

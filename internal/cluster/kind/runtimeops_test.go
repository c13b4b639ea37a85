package kind

import (
	"reflect"
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/runtimeops"
)

// A kubelet's /metrics as v1.37.2 writes the runtime histogram (two
// operations, a few buckets kept; the real ones have 14).
const kubeletMetrics = `# HELP kubelet_runtime_operations_duration_seconds [ALPHA] Duration in seconds of runtime operations. Broken down by operation type.
# TYPE kubelet_runtime_operations_duration_seconds histogram
kubelet_runtime_operations_duration_seconds_bucket{operation_type="run_podsandbox",le="0.005"} 0
kubelet_runtime_operations_duration_seconds_bucket{operation_type="run_podsandbox",le="0.0125"} 0
kubelet_runtime_operations_duration_seconds_bucket{operation_type="run_podsandbox",le="0.03125"} 1
kubelet_runtime_operations_duration_seconds_bucket{operation_type="run_podsandbox",le="0.078125"} 3
kubelet_runtime_operations_duration_seconds_bucket{operation_type="run_podsandbox",le="+Inf"} 4
kubelet_runtime_operations_duration_seconds_sum{operation_type="run_podsandbox"} 0.5
kubelet_runtime_operations_duration_seconds_count{operation_type="run_podsandbox"} 4
kubelet_runtime_operations_duration_seconds_bucket{operation_type="stop_container",le="0.005"} 2
kubelet_runtime_operations_duration_seconds_bucket{operation_type="stop_container",le="0.0125"} 2
kubelet_runtime_operations_duration_seconds_bucket{operation_type="stop_container",le="0.03125"} 2
kubelet_runtime_operations_duration_seconds_bucket{operation_type="stop_container",le="0.078125"} 2
kubelet_runtime_operations_duration_seconds_bucket{operation_type="stop_container",le="+Inf"} 2
kubelet_runtime_operations_duration_seconds_sum{operation_type="stop_container"} 0.004
kubelet_runtime_operations_duration_seconds_count{operation_type="stop_container"} 2
# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox
# TYPE kubelet_running_pods gauge
kubelet_running_pods 3
`

// The PLEG's relist histograms as v1.37.2 writes them (the default
// buckets, a few kept).
const plegMetrics = `# HELP kubelet_pleg_relist_duration_seconds [ALPHA] Duration in seconds for relisting pods in PLEG.
# TYPE kubelet_pleg_relist_duration_seconds histogram
kubelet_pleg_relist_duration_seconds_bucket{le="0.1"} 5
kubelet_pleg_relist_duration_seconds_bucket{le="1"} 7
kubelet_pleg_relist_duration_seconds_bucket{le="+Inf"} 8
kubelet_pleg_relist_duration_seconds_sum 3.2
kubelet_pleg_relist_duration_seconds_count 8
# HELP kubelet_pleg_relist_interval_seconds [ALPHA] Interval in seconds between relisting in PLEG.
# TYPE kubelet_pleg_relist_interval_seconds histogram
kubelet_pleg_relist_interval_seconds_bucket{le="1"} 0
kubelet_pleg_relist_interval_seconds_bucket{le="2.5"} 6
kubelet_pleg_relist_interval_seconds_bucket{le="+Inf"} 7
kubelet_pleg_relist_interval_seconds_sum 12.5
kubelet_pleg_relist_interval_seconds_count 7
`

// The kubelet's status writes and pod worker starts as v1.37.2 writes
// them (a few of the default buckets kept).
const kubeletDelayMetrics = `# HELP kubelet_pod_status_sync_duration_seconds [ALPHA] Duration in seconds to sync a pod status update.
# TYPE kubelet_pod_status_sync_duration_seconds histogram
kubelet_pod_status_sync_duration_seconds_bucket{le="0.5"} 3
kubelet_pod_status_sync_duration_seconds_bucket{le="1"} 5
kubelet_pod_status_sync_duration_seconds_bucket{le="5"} 9
kubelet_pod_status_sync_duration_seconds_bucket{le="+Inf"} 9
kubelet_pod_status_sync_duration_seconds_sum 11
kubelet_pod_status_sync_duration_seconds_count 9
# HELP kubelet_pod_worker_start_duration_seconds [ALPHA] Duration in seconds from kubelet seeing a pod to starting a worker.
# TYPE kubelet_pod_worker_start_duration_seconds histogram
kubelet_pod_worker_start_duration_seconds_bucket{le="0.005"} 4
kubelet_pod_worker_start_duration_seconds_bucket{le="0.01"} 6
kubelet_pod_worker_start_duration_seconds_bucket{le="+Inf"} 6
kubelet_pod_worker_start_duration_seconds_sum 0.03
kubelet_pod_worker_start_duration_seconds_count 6
`

// kubeletLatencyMetrics: the kubelet's API client, CSI calls and volume
// operations, labelled, two values of each (two hosts for one verb).
const kubeletLatencyMetrics = `# TYPE rest_client_request_duration_seconds histogram
rest_client_request_duration_seconds_bucket{host="cp:6443",verb="GET",le="0.025"} 3
rest_client_request_duration_seconds_bucket{host="cp:6443",verb="GET",le="0.1"} 4
rest_client_request_duration_seconds_bucket{host="cp:6443",verb="GET",le="+Inf"} 5
rest_client_request_duration_seconds_sum{host="cp:6443",verb="GET"} 1
rest_client_request_duration_seconds_count{host="cp:6443",verb="GET"} 5
rest_client_request_duration_seconds_bucket{host="other:6443",verb="GET",le="0.025"} 1
rest_client_request_duration_seconds_bucket{host="other:6443",verb="GET",le="0.1"} 1
rest_client_request_duration_seconds_bucket{host="other:6443",verb="GET",le="+Inf"} 1
rest_client_request_duration_seconds_sum{host="other:6443",verb="GET"} 0.01
rest_client_request_duration_seconds_count{host="other:6443",verb="GET"} 1
rest_client_request_duration_seconds_bucket{host="cp:6443",verb="PATCH",le="0.025"} 0
rest_client_request_duration_seconds_bucket{host="cp:6443",verb="PATCH",le="0.1"} 2
rest_client_request_duration_seconds_bucket{host="cp:6443",verb="PATCH",le="+Inf"} 2
rest_client_request_duration_seconds_sum{host="cp:6443",verb="PATCH"} 0.1
rest_client_request_duration_seconds_count{host="cp:6443",verb="PATCH"} 2
# TYPE csi_operations_seconds histogram
csi_operations_seconds_bucket{driver_name="hostpath.csi.k8s.io",grpc_status_code="OK",method_name="/csi.v1.Node/NodeStageVolume",migrated="false",le="0.1"} 2
csi_operations_seconds_bucket{driver_name="hostpath.csi.k8s.io",grpc_status_code="OK",method_name="/csi.v1.Node/NodeStageVolume",migrated="false",le="+Inf"} 2
csi_operations_seconds_sum{driver_name="hostpath.csi.k8s.io",grpc_status_code="OK",method_name="/csi.v1.Node/NodeStageVolume",migrated="false"} 0.1
csi_operations_seconds_count{driver_name="hostpath.csi.k8s.io",grpc_status_code="OK",method_name="/csi.v1.Node/NodeStageVolume",migrated="false"} 2
# TYPE storage_operation_duration_seconds histogram
storage_operation_duration_seconds_bucket{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/csi:hostpath.csi.k8s.io",le="0.1"} 1
storage_operation_duration_seconds_bucket{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/csi:hostpath.csi.k8s.io",le="+Inf"} 3
storage_operation_duration_seconds_sum{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/csi:hostpath.csi.k8s.io"} 1
storage_operation_duration_seconds_count{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/csi:hostpath.csi.k8s.io"} 3
`

func TestParseRuntimeOps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		text    string
		want    runtimeops.Ops
		wantErr string
	}{
		{"two operations", kubeletMetrics, runtimeops.Ops{
			runtimeops.RunPodSandbox: {Bounds: []float64{0.005, 0.0125, 0.03125, 0.078125}, Counts: []uint64{0, 0, 1, 2, 1}},
			runtimeops.StopContainer: {Bounds: []float64{0.005, 0.0125, 0.03125, 0.078125}, Counts: []uint64{2, 0, 0, 0, 0}},
		}, ""},
		{"the runtime and the PLEG's relists", kubeletMetrics + plegMetrics, runtimeops.Ops{
			runtimeops.RunPodSandbox:      {Bounds: []float64{0.005, 0.0125, 0.03125, 0.078125}, Counts: []uint64{0, 0, 1, 2, 1}},
			runtimeops.StopContainer:      {Bounds: []float64{0.005, 0.0125, 0.03125, 0.078125}, Counts: []uint64{2, 0, 0, 0, 0}},
			runtimeops.PLEGRelist:         {Bounds: []float64{0.1, 1}, Counts: []uint64{5, 2, 1}},
			runtimeops.PLEGRelistInterval: {Bounds: []float64{1, 2.5}, Counts: []uint64{0, 6, 1}},
		}, ""},
		{"the kubelet's status writes and worker starts", kubeletDelayMetrics, runtimeops.Ops{
			runtimeops.PodStatusSync:  {Bounds: []float64{0.5, 1, 5}, Counts: []uint64{3, 2, 4, 0}},
			runtimeops.PodWorkerStart: {Bounds: []float64{0.005, 0.01}, Counts: []uint64{4, 2, 0}},
		}, ""},
		{"the kubelet's API client, CSI calls and volume operations, one operation per label value", kubeletLatencyMetrics, runtimeops.Ops{
			"api_get":              {Bounds: []float64{0.025, 0.1}, Counts: []uint64{4, 1, 1}},
			"api_patch":            {Bounds: []float64{0.025, 0.1}, Counts: []uint64{0, 2, 0}},
			"csi_nodestagevolume":  {Bounds: []float64{0.1}, Counts: []uint64{2, 0}},
			"storage_volume_mount": {Bounds: []float64{0.1}, Counts: []uint64{1, 2}},
		}, ""},
		{"bucket counts that decrease", strings.Replace(plegMetrics, `{le="1"} 7`, `{le="1"} 4`, 1), nil, "kubelet_pleg_relist_duration_seconds: cumulative bucket counts decrease"},
		{"a kubelet that has run nothing yet", "# TYPE kubelet_running_pods gauge\nkubelet_running_pods 0\n", runtimeops.Ops{}, ""},
		{"not metrics", "<html>502 Bad Gateway</html>\n", nil, "parse the kubelet's metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRuntimeOps(strings.NewReader(tc.text))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

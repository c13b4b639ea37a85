#!/usr/bin/env python3
"""Where a pod's start and stop spend their time, from kubelet logs.

Reads the kubelet logs of a run made with `strandlab run --kubelet-verbosity 4`
(kind: <report>/<build>/logs/kind/*worker*/kubelet.log; local:
<report>/<build>/logs/kubelet-sim-node-*.log) and prints percentiles of the
stages of the workload's pods (namespace strandlab):

  start: the volume wait's start -> volumes attached and mounted -> Running
         written (kind: the status manager's PATCH with phase Running;
         kubelet-sim: "Pod running", after its synchronous PATCH)
  stop: the pod workers' "begin teardown" (the delete seen) ->
         SyncTerminatingPod enter (the wait for a relist newer than the
         last sync) -> containers stopped (kind also: killing -> exited)
         -> the pod workers' end of termination; the terminal phase
         PATCHed, and where that PATCH falls against SyncTerminatedPod
         (the relist after the terminating sync). kubelet-sim logs the
         same lines at -v=4, not the container's kill and exit
  teardown: the pod worker's end of termination ("Pod terminated all
         containers successfully", after which the volume manager's
         populator may drop the pod's volumes) -> UnmountVolume started ->
         TearDown succeeded (the CSI NodeUnpublishVolume) -> UnmountDevice
         started -> UnmountDevice succeeded (NodeUnstageVolume) -> "Volume
         detached" (the volume leaves the actual state of the world, so the
         next node status drops it from volumesInUse). The volume manager is
         upstream's on both providers, so both log these lines at -v=0; the
         first needs -v=4.

A diagnostic for docs/kind.md ("Where the time goes"), not part of make test:
verbose kubelets cost CPU, so the absolute figures are a little slower than
a measuring run's.

  released (with --report, the run's report.json): the delete -> the
         old node's pod workers beginning the teardown, the delete -> the
         old node's UnmountVolume started, and "Volume detached" -> the
         harness seeing the volume leave status.volumesInUse (the node
         status update), joined on the pod's name, node and delete time

Usage: tools/diagnostics/kubelet_timeline.py [--report REPORT.json] LOG...
"""
import bisect
import collections
import datetime
import json
import os
import re
import sys

HEADER = re.compile(r'^.*?[IWE]\d{4} (\d\d:\d\d:\d\d\.\d{6})\s+\d+ \S+\] "((?:[^"\\]|\\.)*)"(.*)$')
POD = re.compile(r'\bpod="strandlab/([^"]+)"')
UID = re.compile(r'podUID="([^"]+)"')
PHASE = re.compile(r'\\"phase\\":\\"(\w+)\\"')
TERMINATED = 'Pod terminated all containers successfully'
BEGIN_TEARDOWN = 'Pod is marked for graceful deletion, begin teardown'


def seconds(clock):
    h, m, s = clock.split(':')
    return int(h) * 3600 + int(m) * 60 + float(s)


def read(paths):
    """events[pod name][message] -> sorted times; uids[uid][message] -> times;
    names[uid] -> pod name."""
    names = {}
    by_pod = collections.defaultdict(lambda: collections.defaultdict(list))
    by_uid = collections.defaultdict(lambda: collections.defaultdict(list))
    for path in paths:
        with open(path, errors='replace') as f:
            for line in f:
                m = HEADER.match(line)
                if not m:
                    continue
                msg, rest, t = m.group(2), m.group(3), seconds(m.group(1))
                pod = POD.search(rest)
                if not pod:
                    # The pod workers' end of termination names only the UID.
                    uid = UID.search(rest)
                    if msg == TERMINATED and uid:
                        by_uid[uid.group(1)][msg].append(t)
                    continue
                if msg == 'Patch status for pod':
                    phase = PHASE.search(rest)
                    msg = 'PATCH ' + (phase.group(1) if phase else '-')
                if msg in ('PATCH Running', 'Pod running'):
                    msg = 'RUNNING'
                by_pod[pod.group(1)][msg].append(t)
                uid = UID.search(rest)
                if uid:
                    by_uid[uid.group(1)][msg].append(t)
                    names.setdefault(uid.group(1), pod.group(1))
    for table in (by_pod, by_uid):
        for events in table.values():
            for times in events.values():
                times.sort()
    return by_pod, by_uid, names


def after(times, t):
    i = bisect.bisect_left(times, t)
    return times[i] if i < len(times) else None


def start_stages(by_pod):
    rows = collections.defaultdict(list)
    for events in by_pod.values():
        wait = events.get('Waiting for volumes to attach and mount for pod', [])
        # The real kubelet waits on every sync; its first sync of a pod is
        # marked. kubelet-sim waits once per pod.
        anchors = events.get('Pod is being synced for the first time') or wait
        for a in anchors:
            w = after(wait, a)
            m = after(events.get('All volumes are attached and mounted for pod', []), w) if w is not None else None
            if m is None:
                continue
            rows['start: volume wait -> mounted'].append(m - w)
            r = after(events.get('RUNNING', []), m)
            if r is not None and r - m < 60:
                rows['start: mounted -> Running written'].append(r - m)
                rows['start: volume wait -> Running written'].append(r - w)
    return rows


def stop_stages(by_uid):
    rows = collections.defaultdict(list)
    order = collections.Counter()
    for events in by_uid.values():
        first = {k: v[0] for k, v in events.items() if v}
        enter, stopped = first.get('SyncTerminatingPod enter'), first.get('Pod termination stopped all running containers')
        terminal = min([t for k in ('PATCH Succeeded', 'PATCH Failed') for t in events.get(k, [])], default=None)
        terminated = first.get('SyncTerminatedPod enter')
        begin = first.get(BEGIN_TEARDOWN)
        if begin is not None and enter is not None:
            rows['stop: teardown begins -> terminating sync'].append(enter - begin)
        if enter is None or stopped is None:
            continue
        rows['stop: terminating sync -> containers stopped'].append(stopped - enter)
        kill, exited = first.get('Killing container with a grace period'), first.get('Container exited normally')
        if kill is not None and exited is not None:  # kind only: kubelet-sim does not log these
            rows['stop: terminating sync -> killing container'].append(kill - enter)
            rows['stop: killing container -> container exited'].append(exited - kill)
            rows['stop: container exited -> containers stopped'].append(stopped - exited)
        if first.get(TERMINATED) is not None:
            rows['stop: containers stopped -> containers ended'].append(first[TERMINATED] - stopped)
        if terminated is not None:
            rows['stop: containers stopped -> terminated sync'].append(terminated - stopped)
        if terminal is not None:
            rows['stop: containers stopped -> terminal phase PATCHed'].append(terminal - stopped)
            if terminated is not None:
                order['terminal phase PATCHed before the terminated sync' if terminal < terminated
                      else 'terminal phase PATCHed at or after the terminated sync'] += 1
    return rows, order


# The volume manager's lines, structured (quoted) or klog.Infof (not).
VOLUME_LINE = re.compile(r'^.*?[IWE]\d{4} (\d\d:\d\d:\d\d\.\d{6})\s+\d+ \S+\] "?(.*)$')
UNIQUE = re.compile(r'(?:UniqueName: |for volume )\\?"(kubernetes\.io/csi/[^"\\]+)')
ANY_UID = re.compile(r'(?:UID: |podUID=)\\?"([0-9a-f-]{36})')
TEARDOWN = ('operationExecutor.UnmountVolume started', 'UnmountVolume.TearDown succeeded',
            'operationExecutor.UnmountDevice started', 'UnmountDevice succeeded', 'Volume detached')


def teardown_stages(paths, teardowns=None):
    """Per node log: the pod's end of termination, then its volume's
    teardown steps, each the first of its kind after the one before.
    teardowns, if given, collects (log path, pod UID, started, detached)."""
    rows = collections.defaultdict(list)
    for path in paths:
        ended = {}                                   # pod UID -> time
        steps = collections.defaultdict(lambda: collections.defaultdict(list))  # volume -> step -> times
        unmounts = []                                # (time, volume, pod UID)
        with open(path, errors='replace') as f:
            for line in f:
                m = VOLUME_LINE.match(line)
                if not m:
                    continue
                t, msg = seconds(m.group(1)), m.group(2)
                if msg.startswith(TERMINATED):
                    uid = ANY_UID.search(msg)
                    if uid:
                        ended.setdefault(uid.group(1), t)
                    continue
                step = next((s for s in TEARDOWN if msg.startswith(s)), None)
                vol = UNIQUE.search(msg) if step else None
                if not vol:
                    continue
                steps[vol.group(1)][step].append(t)
                if step == TEARDOWN[0]:
                    uid = ANY_UID.search(msg)
                    unmounts.append((t, vol.group(1), uid.group(1) if uid else None))
        for t0, vol, uid in unmounts:
            if uid in ended and 0 <= t0 - ended[uid] < 60:
                rows['teardown: containers ended -> UnmountVolume started'].append(t0 - ended[uid])
            prev, name = t0, TEARDOWN[0]
            for step in TEARDOWN[1:]:
                t = after(sorted(steps[vol][step]), prev)
                if t is None or t - prev > 60:
                    break
                rows[f'teardown: {name} -> {step}'].append(t - prev)
                prev, name = t, step
            else:
                if teardowns is not None:
                    teardowns.append((path, uid, t0, prev))
                rows['teardown: UnmountVolume started -> Volume detached'].append(prev - t0)
                if uid in ended:
                    rows['teardown: containers ended -> Volume detached'].append(prev - ended[uid])
    return rows


def released_stages(report_path, by_uid, by_uid_names, teardowns):
    """Joins the harness's report (cycle_log: the old pod, its node, the
    delete and the delete -> released) with the old node's teardown: the
    volume's "Volume detached" -> the harness seeing it leave the node's
    status.volumesInUse (the node status update that drops it)."""
    report = json.load(open(report_path))
    rows = collections.defaultdict(list)
    for build in report['builds']:
        for c in build.get('cycle_log') or []:
            if not c.get('delete_to_released_ns'):
                continue
            deleted = datetime.datetime.fromisoformat(c['deleted_at'][:26].rstrip('Z'))
            t_del = deleted.hour * 3600 + deleted.minute * 60 + deleted.second + deleted.microsecond / 1e6
            t_rel = t_del + c['delete_to_released_ns'] / 1e9
            node = c['old_node']
            # kind: <node>/kubelet.log; local: kubelet-sim-<node>.log
            ours = [td for td in teardowns
                    if node in (os.path.basename(os.path.dirname(td[0])), os.path.basename(td[0])[len('kubelet-sim-'):-len('.log')])
                    and by_uid_names.get(td[1]) == c['pod'] and td[2] > t_del]
            if not ours:
                continue
            _, uid, started, detached = min(ours, key=lambda td: td[2])
            begin = after(by_uid.get(uid, {}).get(BEGIN_TEARDOWN, []), t_del)
            if begin is not None and begin < started:
                # The API server's delete reaching the kubelet's pod workers.
                rows['released: delete -> teardown begins'].append(begin - t_del)
            rows['released: delete -> UnmountVolume started'].append(started - t_del)
            rows['released: Volume detached -> released (harness)'].append(t_rel - detached)
    return rows


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(args):
    report = None
    if args[:1] == ['--report']:
        report, args = args[1], args[2:]
    paths = args
    if not paths:
        sys.exit(__doc__)
    by_pod, by_uid, names = read(paths)
    rows = start_stages(by_pod)
    stop, order = stop_stages(by_uid)
    rows.update(stop)
    teardowns = []
    rows.update(teardown_stages(paths, teardowns))
    if report:
        rows.update(released_stages(report, by_uid, names, teardowns))
    print('| stage | n | p10 ms | p50 ms | p90 ms |')
    print('|---|---:|---:|---:|---:|')
    for name, xs in rows.items():
        print(f'| {name} | {len(xs)} | {percentile(xs, .1)*1000:.0f} | {percentile(xs, .5)*1000:.0f} | {percentile(xs, .9)*1000:.0f} |')
    for what, n in order.items():
        print(f'{what}: {n}')


if __name__ == '__main__':
    main(sys.argv[1:])

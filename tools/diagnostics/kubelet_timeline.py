#!/usr/bin/env python3
"""Where a pod's start and stop spend their time, from kubelet logs.

Reads the kubelet logs of a run made with `strandlab run --kubelet-verbosity 4`
(kind: <report>/<build>/logs/kind/*worker*/kubelet.log; local:
<report>/<build>/logs/kubelet-sim-node-*.log) and prints percentiles of the
stages of the workload's pods (namespace strandlab):

  start: the volume wait's start -> volumes attached and mounted -> Running
         written (kind: the status manager's PATCH with phase Running;
         kubelet-sim: "Pod running", after its synchronous PATCH)
  stop (kind only: kubelet-sim does not log these steps):
         SyncTerminatingPod enter -> containers stopped -> terminal phase
         PATCHed, and where that PATCH falls against SyncTerminatedPod
         (the relist after the terminating sync) and TerminatePod

A diagnostic for docs/kind.md ("Where the time goes"), not part of make test:
verbose kubelets cost CPU, so the absolute figures are a little slower than
a measuring run's.

Usage: tools/diagnostics/kubelet_timeline.py LOG...
"""
import bisect
import collections
import re
import sys

HEADER = re.compile(r'^.*?[IWE]\d{4} (\d\d:\d\d:\d\d\.\d{6})\s+\d+ \S+\] "((?:[^"\\]|\\.)*)"(.*)$')
POD = re.compile(r'\bpod="strandlab/([^"]+)"')
UID = re.compile(r'podUID="([^"]+)"')
PHASE = re.compile(r'\\"phase\\":\\"(\w+)\\"')


def seconds(clock):
    h, m, s = clock.split(':')
    return int(h) * 3600 + int(m) * 60 + float(s)


def read(paths):
    """events[pod name][message] -> sorted times; uids[uid][message] -> times."""
    by_pod = collections.defaultdict(lambda: collections.defaultdict(list))
    by_uid = collections.defaultdict(lambda: collections.defaultdict(list))
    for path in paths:
        with open(path, errors='replace') as f:
            for line in f:
                m = HEADER.match(line)
                if not m:
                    continue
                pod = POD.search(m.group(3))
                if not pod:
                    continue
                msg, rest, t = m.group(2), m.group(3), seconds(m.group(1))
                if msg == 'Patch status for pod':
                    phase = PHASE.search(rest)
                    msg = 'PATCH ' + (phase.group(1) if phase else '-')
                if msg in ('PATCH Running', 'Pod running'):
                    msg = 'RUNNING'
                by_pod[pod.group(1)][msg].append(t)
                uid = UID.search(rest)
                if uid:
                    by_uid[uid.group(1)][msg].append(t)
    for table in (by_pod, by_uid):
        for events in table.values():
            for times in events.values():
                times.sort()
    return by_pod, by_uid


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
        if enter is None or stopped is None:
            continue
        rows['stop: terminating sync -> containers stopped'].append(stopped - enter)
        if terminated is not None:
            rows['stop: containers stopped -> terminated sync'].append(terminated - stopped)
        if terminal is not None:
            rows['stop: containers stopped -> terminal phase PATCHed'].append(terminal - stopped)
            if terminated is not None:
                order['terminal phase PATCHed before the terminated sync' if terminal < terminated
                      else 'terminal phase PATCHed at or after the terminated sync'] += 1
    return rows, order


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(paths):
    if not paths:
        sys.exit(__doc__)
    by_pod, by_uid = read(paths)
    rows = start_stages(by_pod)
    stop, order = stop_stages(by_uid)
    rows.update(stop)
    print('| stage | n | p10 ms | p50 ms | p90 ms |')
    print('|---|---:|---:|---:|---:|')
    for name, xs in rows.items():
        print(f'| {name} | {len(xs)} | {percentile(xs, .1)*1000:.0f} | {percentile(xs, .5)*1000:.0f} | {percentile(xs, .9)*1000:.0f} |')
    for what, n in order.items():
        print(f'{what}: {n}')


if __name__ == '__main__':
    main(sys.argv[1:])

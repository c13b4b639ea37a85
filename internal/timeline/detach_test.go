package timeline

import (
	"testing"
	"time"
)

func TestDetachTimings(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	listed := func(ms int, node, volume string) Entry {
		return Entry{Time: at(ms), Source: API, Node: node, Volume: volume, Change: VolumeListed}
	}
	detach := func(ms int, node, pv string) Entry {
		return Entry{Time: at(ms), Source: API, Node: node, PV: pv, Attachment: "csi-" + pv, Change: DetachRequested}
	}
	const deleted, end = 10000, 30000
	tests := []struct {
		name    string
		entries []Entry
		want    DetachTiming
		ok      bool
	}{
		{"detach after the delete, listed before",
			[]Entry{listed(2000, "n1", "v1"), detach(14700, "n1", "pv1")},
			DetachTiming{DeleteToDetach: 4700 * time.Millisecond, ListedToDetach: 12700 * time.Millisecond, Listed: true}, true},
		{"the last listing before the detach counts, not a later one",
			[]Entry{listed(2000, "n1", "v1"), listed(9000, "n1", "v1"), detach(11000, "n1", "pv1"), listed(20000, "n1", "v1")},
			DetachTiming{DeleteToDetach: 1000 * time.Millisecond, ListedToDetach: 2000 * time.Millisecond, Listed: true}, true},
		{"the first detach request in the cycle, in any order",
			[]Entry{detach(16000, "n1", "pv1"), listed(2000, "n1", "v1"), detach(12000, "n1", "pv1")},
			DetachTiming{DeleteToDetach: 2000 * time.Millisecond, ListedToDetach: 10000 * time.Millisecond, Listed: true}, true},
		{"no listing seen: the delete interval only",
			[]Entry{detach(12000, "n1", "pv1")},
			DetachTiming{DeleteToDetach: 2000 * time.Millisecond}, true},
		{"a detach before the delete is an earlier cycle's",
			[]Entry{detach(9000, "n1", "pv1")}, DetachTiming{}, false},
		{"a detach after the cycle's end is a later cycle's",
			[]Entry{detach(31000, "n1", "pv1")}, DetachTiming{}, false},
		{"other nodes, other volumes and other changes do not count",
			[]Entry{listed(2000, "n2", "v1"), listed(3000, "n1", "v2"), detach(12000, "n2", "pv1"), detach(13000, "n1", "pv2"),
				{Time: at(14000), Node: "n1", PV: "pv1", Event: "attached=false"}},
			DetachTiming{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := DetachTimings(tc.entries, "n1", "pv1", "v1", at(deleted), at(end))
			if ok != tc.ok || got != tc.want {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestReleaseTiming(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	released := func(ms int, node, volume string) Entry {
		return Entry{Time: at(ms), Source: API, Node: node, Volume: volume, Change: VolumeReleased}
	}
	const deleted, end = 10000, 30000
	tests := []struct {
		name    string
		entries []Entry
		want    time.Duration
		ok      bool
	}{
		{"released after the delete", []Entry{released(13500, "n1", "v1")}, 3500 * time.Millisecond, true},
		{"the first release in the cycle, in any order", []Entry{released(19000, "n1", "v1"), released(12000, "n1", "v1")}, 2000 * time.Millisecond, true},
		{"a release before the delete is an earlier cycle's", []Entry{released(9000, "n1", "v1")}, 0, false},
		{"a release after the cycle's end is a later cycle's", []Entry{released(31000, "n1", "v1")}, 0, false},
		{"other nodes, other volumes and other changes do not count",
			[]Entry{released(12000, "n2", "v1"), released(12000, "n1", "v2"), {Time: at(13000), Node: "n1", Volume: "v1", Change: VolumeListed}}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ReleaseTiming(tc.entries, "n1", "v1", at(deleted), at(end))
			if ok != tc.ok || got != tc.want {
				t.Errorf("got %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestPodEndTimings(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	pod := func(ms int, key string, change Change) Entry {
		return Entry{Time: at(ms), Source: API, Pod: key, Change: change}
	}
	const deleted, end = 10000, 30000
	tests := []struct {
		name    string
		entries []Entry
		want    PodEnd
	}{
		{"terminal, then gone", []Entry{pod(11200, "ns/web-0", PodTerminal), pod(13900, "ns/web-0", PodGone)},
			PodEnd{ToTerminal: 1200 * time.Millisecond, ToGone: 3900 * time.Millisecond}},
		{"in any order; the first of each", []Entry{pod(16000, "ns/web-0", PodGone), pod(13900, "ns/web-0", PodGone), pod(11200, "ns/web-0", PodTerminal)},
			PodEnd{ToTerminal: 1200 * time.Millisecond, ToGone: 3900 * time.Millisecond}},
		{"force-deleted: gone without a terminal phase", []Entry{pod(10500, "ns/web-0", PodGone)}, PodEnd{ToGone: 500 * time.Millisecond}},
		{"an earlier cycle's and a later one's do not count", []Entry{pod(9000, "ns/web-0", PodTerminal), pod(9500, "ns/web-0", PodGone), pod(31000, "ns/web-0", PodGone)}, PodEnd{}},
		{"other pods and other changes do not count", []Entry{pod(11000, "ns/web-1", PodTerminal), pod(12000, "ns/web-1", PodGone), pod(12500, "ns/web-0", "")}, PodEnd{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodEndTimings(tc.entries, "ns/web-0", at(deleted), at(end)); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

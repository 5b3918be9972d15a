package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
)

func init() { register("block", true, blockCollector{}) }

var (
	readAheadDesc  = desc("block_read_ahead_bytes", "Read-ahead of a block device that holds a trusted server's database files, in bytes (read_ahead_kb x 1024).", "device")
	nrRequestsDesc = desc("block_nr_requests", "Queue depth of a block device that holds a trusted server's database files.", "device")
	rotationalDesc = desc("block_rotational", "1 when a block device that holds a trusted server's database files is rotational.", "device")
	schedulerDesc  = desc("block_scheduler", "The I/O scheduler of a block device that holds a trusted server's database files, as a state set: 1 for the active one.",
		"device", "scheduler")
)

// blockCollector exports the queue settings of the devices trusted
// servers' database files live on (the mounted device, what is below it,
// the physical disks): a host's other disks do not matter here and would
// only add series.
type blockCollector struct{}

func (blockCollector) Update(in *Input, ch chan<- prometheus.Metric) error {
	for _, name := range dbDevices(in.Facts) {
		d := in.Facts.Storage.Devices[name]
		if d == nil {
			continue
		}
		if kb, ok := d.ReadAheadKB.Int(); ok {
			ch <- gauge(readAheadDesc(), float64(kb)*1024, name)
		}
		if d.Partition {
			continue // its queue is its disk's
		}
		number(ch, nrRequestsDesc(), d.NrRequests, name)
		number(ch, rotationalDesc(), d.Rotational, name)
		if d.Scheduler.OK() {
			opts, sel := stateSet(d.Scheduler)
			for _, o := range opts {
				v := 0.0
				if o == sel {
					v = 1
				}
				ch <- gauge(schedulerDesc(), v, name, o)
			}
		}
	}
	return nil
}

// dbDevices lists, sorted, every device a trusted server's database path
// goes through. An untrusted instance names its own data directory: it
// would choose which devices get series.
func dbDevices(f *facts.Facts) []string {
	set := map[string]bool{}
	for _, in := range trustedInstances(f) {
		for _, ps := range in.Storage {
			if ps.Device != "" {
				set[ps.Device] = true
			}
			for _, n := range ps.Stack {
				set[n] = true
			}
			for _, n := range ps.Physical {
				set[n] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func number(ch chan<- prometheus.Metric, d *prometheus.Desc, r host.Reading, labels ...string) {
	if v, ok := r.Int(); ok {
		ch <- gauge(d, float64(v), labels...)
	}
}

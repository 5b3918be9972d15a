package host

import (
	"fmt"

	"github.com/prometheus/procfs"
)

// KernelStat parses /proc/stat with procfs: CPU times in total and per
// online CPU, context switches since boot (ctxt), and the tasks running and
// blocked now.
func (h *Host) KernelStat() (procfs.Stat, error) {
	if err := h.Touch("/proc/stat"); err != nil {
		return procfs.Stat{}, err
	}
	return h.proc.Stat()
}

// LoadAvg parses /proc/loadavg with procfs.
func (h *Host) LoadAvg() (*procfs.LoadAvg, error) {
	if err := h.Touch("/proc/loadavg"); err != nil {
		return nil, err
	}
	return h.proc.LoadAvg()
}

// Tasks lists the thread IDs of a process (/proc/PID/task), sorted.
func (h *Host) Tasks(pid int) ([]int, error) {
	return h.readIDs(procPath(pid, "task"))
}

// TaskStatus parses one thread's /proc/PID/task/TID/status with procfs: a
// process's own status file counts only its main thread's context
// switches.
func (h *Host) TaskStatus(pid, tid int) (procfs.ProcStatus, error) {
	if err := h.Touch(procPath(pid, fmt.Sprintf("task/%d/status", tid))); err != nil {
		return procfs.ProcStatus{}, err
	}
	t, err := h.proc.Thread(pid, tid)
	if err != nil {
		return procfs.ProcStatus{}, err
	}
	return t.NewStatus()
}

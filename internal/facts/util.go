package facts

import "fmt"

func procFile(pid int, name string) string { return fmt.Sprintf("/proc/%d/%s", pid, name) }

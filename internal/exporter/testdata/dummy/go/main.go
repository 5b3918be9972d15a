// Command dummy is dummy.c for hosts without a C compiler: a look-alike
// database server that does nothing until killed. Run it with GOMAXPROCS=1
// and GOGC=off (it allocates nothing): about 1.6 MB resident, 460 kB of it
// its own.
package main

import "syscall"

func main() {
	for {
		syscall.Pause()
	}
}

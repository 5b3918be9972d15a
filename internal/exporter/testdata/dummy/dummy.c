/*
 * A look-alike database server for the untrusted-instance tests and
 * bench/untrusted.sh: installed as "postgres" and started as nobody with a
 * server's command line, it does nothing until killed. Built static where
 * the C library allows (-static): about 700 kB resident, 44 kB of it its
 * own, so a thousand cost well under 100 MB.
 */
#include <unistd.h>

int main(void)
{
	for (;;)
		pause();
}

/*
 * shmdemo: a parent maps a shared memory region and never touches it; two
 * children write to it (the first a quarter, the second a half) and report
 * ready. The test then reads the host as `dbhost mem` would.
 *
 *   shmdemo MODE VARIANT SIZE_MIB [POSIX_NAME]
 *     MODE     anon  (mmap MAP_SHARED|MAP_ANONYMOUS)
 *              sysv  (shmget + shmat)
 *              posix (shm_open + mmap)
 *     VARIANT  stay   children stay alive
 *              exit   children exit after writing, the parent keeps its mapping
 *              orphan children exit, the parent unmaps/detaches too
 *                     (sysv and posix: the object outlives every mapping)
 *
 * Prints one line "ready PARENT CHILD1 CHILD2 START END ID" (ID: the shmid,
 * the POSIX name, or "-"; START-END the parent's mapping in hex, "0-0" once
 * unmapped; CHILD is 0 once exited), then waits until its standard input is
 * closed, and exits, removing the object unless it is orphaned (the test
 * removes it then).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what) {
	perror(what);
	exit(1);
}

int main(int argc, char **argv) {
	if (argc < 4) {
		fprintf(stderr, "usage: shmdemo anon|sysv|posix stay|exit|orphan SIZE_MIB [NAME]\n");
		return 2;
	}
	const char *mode = argv[1], *variant = argv[2];
	size_t size = (size_t)atol(argv[3]) << 20;
	const char *name = argc > 4 ? argv[4] : "/dbhost-shmdemo";
	int shmid = -1;
	char *p;

	if (strcmp(mode, "anon") == 0) {
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) die("mmap");
	} else if (strcmp(mode, "sysv") == 0) {
		shmid = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
		if (shmid < 0) die("shmget");
		p = shmat(shmid, NULL, 0);
		if (p == (void *)-1) die("shmat");
	} else if (strcmp(mode, "posix") == 0) {
		int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
		if (fd < 0) die("shm_open");
		if (ftruncate(fd, (off_t)size) != 0) die("ftruncate");
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) die("mmap");
		close(fd);
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	int stay = strcmp(variant, "stay") == 0;
	int orphan = strcmp(variant, "orphan") == 0;

	int ready[2], hold[2];
	if (pipe(ready) != 0 || pipe(hold) != 0) die("pipe");
	pid_t kids[2];
	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		if (kids[i] < 0) die("fork");
		if (kids[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(ready[0]);
			close(hold[1]);
			memset(p, 'a' + i, size / 4 * (size_t)(i + 1)); /* a quarter, a half */
			if (write(ready[1], "x", 1) != 1) die("write");
			if (stay) {
				char c;
				while (read(hold[0], &c, 1) > 0) {
				}
			}
			_exit(0);
		}
	}
	close(ready[1]);
	close(hold[0]);
	for (int i = 0; i < 2; i++) {
		char c;
		if (read(ready[0], &c, 1) != 1) die("child not ready");
	}
	if (!stay) {
		for (int i = 0; i < 2; i++) {
			waitpid(kids[i], NULL, 0);
			kids[i] = 0;
		}
	}
	unsigned long start = (unsigned long)p, end = (unsigned long)p + size;
	if (orphan) {
		if (shmid >= 0) {
			if (shmdt(p) != 0) die("shmdt");
		} else if (munmap(p, size) != 0) {
			die("munmap");
		}
		start = end = 0;
	}
	char id[64] = "-";
	if (shmid >= 0) snprintf(id, sizeof id, "%d", shmid);
	else if (strcmp(mode, "posix") == 0) snprintf(id, sizeof id, "%s", name);
	printf("ready %d %d %d %lx %lx %s\n", getpid(), kids[0], kids[1], start, end, id);
	fflush(stdout);

	char buf[64];
	while (read(0, buf, sizeof buf) > 0) {
	}
	close(hold[1]); /* children see EOF and exit */
	for (int i = 0; i < 2; i++)
		if (kids[i] > 0) waitpid(kids[i], NULL, 0);
	if (!orphan) {
		if (shmid >= 0) shmctl(shmid, IPC_RMID, NULL);
		if (strcmp(mode, "posix") == 0) shm_unlink(name);
	}
	return 0;
}

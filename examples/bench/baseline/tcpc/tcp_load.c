// tcp_load: the independent C client of BENCHMARKING.md's reference table: a
// closed-loop TCP echo client on one thread and one epoll set, CONNS
// connections with one SIZE-byte message in flight on each. A message carries
// its connection's number and sequence in every byte's pattern, and the reply
// must come back byte for byte before the next is sent (a mismatch is counted
// and the run fails). Partial writes wait for EPOLLOUT; the read takes what
// arrived and the message completes when SIZE bytes are back.
//
// After WARMUP_S seconds it measures for SECONDS: replies per second and, with
// SERVER_PID, the server's CPU per reply (utime+stime from /proc/PID/stat, in
// clock ticks, as examples/bench/load and bench.sh) and its context switches
// per reply (voluntary+nonvoluntary over /proc/PID/task/*/status), the server's
// and its own CPU (getrusage) as a share of the window, and the machine's steal
// (/proc/stat).
// One JSON line, with the keys scripts/ab.sh reads from examples/bench/load.
//
// Build: gcc -O2 -o tcp_load tcp_load.c
// Run:   ./tcp_load 127.0.0.1 PORT CONNS SIZE WARMUP_S SECONDS [SERVER_PID]
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn {
	int fd;
	uint32_t id;
	uint64_t seq;
	int out;  // bytes of the message written
	int in;   // bytes of the reply read
	int want; // EPOLLOUT registered
};

static int size;
static char *msg;  // the message in flight, per connection: conns x size
static char *rbuf; // read scratch

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fill(char *p, uint32_t id, uint64_t seq) {
	for (int i = 0; i < size; i++)
		p[i] = (char)(id * 131 + seq * 31 + i);
}

// proc_cpu returns utime+stime of pid in clock ticks, -1 if unreadable.
static long long proc_cpu(int pid) {
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	// After ") " come fields 3 onwards; utime and stime are 14 and 15.
	unsigned long long ut, st;
	if (sscanf(p + 2, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu", &ut, &st) != 2)
		return -1;
	return (long long)(ut + st);
}

// proc_ctxsw sums the context switches of pid's threads.
static long long proc_ctxsw(int pid) {
	char path[320], line[256];
	snprintf(path, sizeof path, "/proc/%d/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	long long total = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/%d/task/%s/status", pid, e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue; // the thread exited
		while (fgets(line, sizeof line, f)) {
			long long v;
			if (sscanf(line, "voluntary_ctxt_switches: %lld", &v) == 1 ||
			    sscanf(line, "nonvoluntary_ctxt_switches: %lld", &v) == 1)
				total += v;
		}
		fclose(f);
	}
	closedir(d);
	return total;
}

// machine reads the aggregate cpu line of /proc/stat: total and steal ticks.
static void machine(unsigned long long *total, unsigned long long *steal) {
	unsigned long long v[8] = {0};
	FILE *f = fopen("/proc/stat", "r");
	*total = *steal = 0;
	if (!f)
		return;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
		   &v[7]) == 8) {
		for (int i = 0; i < 8; i++)
			*total += v[i];
		*steal = v[7];
	}
	fclose(f);
}

static double self_cpu(void) {
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void arm(int ep, struct conn *c, int out) {
	struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
	c->want = out;
}

// push writes what is left of c's message; -1 on a failed connection.
static int push(int ep, struct conn *c) {
	char *m = msg + (size_t)c->id * size;
	while (c->out < size) {
		ssize_t n = write(c->fd, m + c->out, size - c->out);
		if (n < 0) {
			if (errno == EAGAIN) {
				if (!c->want)
					arm(ep, c, 1);
				return 0;
			}
			if (errno == EINTR)
				continue;
			return -1;
		}
		c->out += n;
	}
	if (c->want)
		arm(ep, c, 0);
	return 0;
}

int main(int argc, char **argv) {
	if (argc != 7 && argc != 8) {
		fprintf(stderr, "usage: tcp_load ADDR PORT CONNS SIZE WARMUP_S SECONDS [SERVER_PID]\n");
		return 2;
	}
	int conns = atoi(argv[3]);
	size = atoi(argv[4]);
	double warm = atof(argv[5]), secs = atof(argv[6]);
	int pid = argc == 8 ? atoi(argv[7]) : 0;
	if (conns < 1 || conns > 100000 || size < 1 || size > (1 << 24) || secs <= 0) {
		fprintf(stderr, "tcp_load: CONNS 1..100000, SIZE 1..16777216, SECONDS > 0\n");
		return 2;
	}
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
	if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
		fprintf(stderr, "tcp_load: bad address %s\n", argv[1]);
		return 2;
	}
	msg = malloc((size_t)conns * size);
	rbuf = malloc(size > 65536 ? size : 65536);
	struct conn *cs = calloc(conns, sizeof *cs);
	int ep = epoll_create1(0);
	for (int i = 0; i < conns; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
			perror("tcp_load: connect");
			return 1;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		cs[i] = (struct conn){.fd = fd, .id = i};
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cs[i]};
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
		fill(msg + (size_t)i * size, i, 0);
	}
	for (int i = 0; i < conns; i++)
		if (push(ep, &cs[i]) < 0) {
			perror("tcp_load: write");
			return 1;
		}
	struct epoll_event evs[1024];
	uint64_t replies = 0, mismatches = 0, failed = 0;
	double start = now(), wstart = start + warm, end = wstart + secs, t = start;
	long long cpu0 = 0, sw0 = 0;
	double self0 = 0;
	unsigned long long tot0 = 0, st0 = 0;
	int measuring = 0;
	while (t < end) {
		int n = epoll_wait(ep, evs, 1024, 100);
		t = now();
		if (!measuring && t >= wstart) {
			measuring = 1;
			replies = 0;
			wstart = t;
			self0 = self_cpu();
			machine(&tot0, &st0);
			if (pid) {
				cpu0 = proc_cpu(pid);
				sw0 = proc_ctxsw(pid);
			}
		}
		for (int k = 0; k < n; k++) {
			struct conn *c = evs[k].data.ptr;
			if (c->fd < 0)
				continue;
			if ((evs[k].events & EPOLLOUT) && push(ep, c) < 0)
				goto fail;
			if (!(evs[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
				continue;
			for (;;) {
				ssize_t r = read(c->fd, rbuf, size - c->in);
				if (r < 0 && errno == EAGAIN)
					break;
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0)
					goto fail;
				char *m = msg + (size_t)c->id * size;
				if (memcmp(rbuf, m + c->in, r) != 0)
					mismatches++;
				c->in += r;
				if (c->in < size)
					continue;
				replies++;
				c->seq++;
				c->in = 0;
				c->out = 0;
				fill(m, c->id, c->seq);
				if (push(ep, c) < 0)
					goto fail;
				break; // one message in flight: nothing more to read now
			}
			continue;
		fail:
			failed++;
			epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
			close(c->fd);
			c->fd = -1;
		}
	}
	double dur = now() - wstart;
	double self1 = self_cpu();
	unsigned long long tot1, st1;
	machine(&tot1, &st1);
	double cpu_us = 0, sw = 0, srv_pct = 0;
	if (pid && replies) {
		long long cpu1 = proc_cpu(pid), sw1 = proc_ctxsw(pid);
		if (cpu0 >= 0 && cpu1 >= 0) {
			double s = (double)(cpu1 - cpu0) / sysconf(_SC_CLK_TCK);
			cpu_us = s * 1e6 / replies;
			srv_pct = 100 * s / dur;
		}
		if (sw0 >= 0 && sw1 >= 0)
			sw = (double)(sw1 - sw0) / replies;
	}
	double steal = tot1 > tot0 ? 100.0 * (st1 - st0) / (tot1 - tot0) : 0;
	printf("{\"rps\":%.0f,\"requests\":%llu,\"seconds\":%.3f,\"server_cpu_us_per_req\":%.3f,"
	       "\"server_ctxsw_per_req\":%.4f,\"server_cpu_pct\":%.1f,\"client_cpu_pct\":%.1f,\"steal_pct\":%.2f,"
	       "\"mismatches\":%llu,\"failed_conns\":%llu}\n",
	       replies / dur, (unsigned long long)replies, dur, cpu_us, sw, srv_pct, 100 * (self1 - self0) / dur, steal,
	       (unsigned long long)mismatches, (unsigned long long)failed);
	return mismatches || failed ? 1 : 0;
}

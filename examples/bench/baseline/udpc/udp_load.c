// udp_load: a closed-loop UDP echo client on one thread: WINDOW datagrams in
// flight from one socket, each carrying a sequence number that its reply
// must echo byte for byte; batches of recvmmsg and sendmmsg. A datagram
// not answered within 200 ms is counted lost and sent again. It reports
// replies per second over the window after a warm-up, mismatches and
// losses. With GSO (a seventh argument, 1) each batch goes out as one
// sendmsg with UDP_SEGMENT (up to 64 datagrams, 64 KiB) instead of
// sendmmsg: the burst reaches a UDP_GRO socket as one receive.
// Build: gcc -O2 -o udp_load udp_load.c
// Run:   ./udp_load 127.0.0.1 7001 SIZE WINDOW WARMUP_S SECONDS [GSO]
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

// send_batch sends omsg[0:n]: one sendmmsg, or with gso one sendmsg with
// UDP_SEGMENT per run of at most maxseg datagrams of size bytes.
static void send_batch(int fd, struct mmsghdr *omsg, struct iovec *oiov, int n, int gso, int size) {
	if (!gso) {
		sendmmsg(fd, omsg, n, 0);
		return;
	}
	int maxseg = 65000 / size;
	if (maxseg > 64)
		maxseg = 64;
	for (int i = 0; i < n;) {
		int k = n - i < maxseg ? n - i : maxseg;
		char ctrl[CMSG_SPACE(sizeof(uint16_t))] = {0};
		struct msghdr m = {.msg_iov = &oiov[i], .msg_iovlen = k, .msg_control = ctrl, .msg_controllen = sizeof ctrl};
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		uint16_t seg = size;
		memcpy(CMSG_DATA(c), &seg, sizeof seg);
		if (k == 1)
			m.msg_control = NULL, m.msg_controllen = 0;
		sendmsg(fd, &m, 0);
		i += k;
	}
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fill(char *p, int size, uint64_t seq) {
	for (int i = 0; i < size; i++)
		p[i] = (char)(seq * 31 + i);
	if (size >= 8)
		memcpy(p, &seq, 8);
}

int main(int argc, char **argv) {
	if (argc != 7 && argc != 8) {
		fprintf(stderr, "usage: udp_load ADDR PORT SIZE WINDOW WARMUP_S SECONDS [GSO]\n");
		return 2;
	}
	int size = atoi(argv[3]), window = atoi(argv[4]);
	double warm = atof(argv[5]), secs = atof(argv[6]);
	int gso = argc == 8 && atoi(argv[7]) != 0;
	if (size < 8 || size > 65000 || window < 1 || window > 4096) {
		fprintf(stderr, "udp_load: SIZE 8..65000, WINDOW 1..4096\n");
		return 2;
	}
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
	inet_pton(AF_INET, argv[1], &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		perror("connect");
		return 1;
	}
	int rcv = 4 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
	double *sent = calloc(window, sizeof(double));
	uint64_t *slotseq = calloc(window, sizeof(uint64_t));
	static char out[BATCH][65536], in[BATCH][65536], want[65536];
	struct iovec oiov[BATCH], iiov[BATCH];
	struct mmsghdr omsg[BATCH], imsg[BATCH];
	uint64_t seq = 0, replies = 0, mismatches = 0, lost = 0, counted = 0;
	// Fill the window: slot i carries seq i*? -- seq mod window is the slot.
	int pend = 0;
	for (int i = 0; i < window; i++) {
		slotseq[i] = seq;
		fill(out[pend], size, seq++);
		sent[i] = now();
		oiov[pend] = (struct iovec){out[pend], size};
		omsg[pend].msg_hdr = (struct msghdr){.msg_iov = &oiov[pend], .msg_iovlen = 1};
		if (++pend == BATCH || i == window - 1) {
			send_batch(fd, omsg, oiov, pend, gso, size);
			pend = 0;
		}
	}
	double start = now(), wstart = start + warm, end = wstart + secs, lastcheck = start;
	int measuring = 0;
	while (now() < end) {
		struct pollfd p = {fd, POLLIN, 0};
		poll(&p, 1, 50);
		for (int i = 0; i < BATCH; i++) {
			iiov[i] = (struct iovec){in[i], 65536};
			imsg[i].msg_hdr = (struct msghdr){.msg_iov = &iiov[i], .msg_iovlen = 1};
		}
		int n = recvmmsg(fd, imsg, BATCH, MSG_DONTWAIT, NULL);
		double t = now();
		if (!measuring && t >= wstart) {
			measuring = 1;
			counted = 0;
			mismatches = 0;
			lost = 0;
			wstart = t;
		}
		pend = 0;
		for (int i = 0; i < n; i++) {
			uint64_t s;
			if ((int)imsg[i].msg_len != size) {
				mismatches++;
				continue;
			}
			memcpy(&s, in[i], 8);
			int slot = s % window;
			if (slotseq[slot] != s)
				continue; // a late reply to a datagram already sent again
			fill(want, size, s);
			if (memcmp(want, in[i], size) != 0) {
				mismatches++;
			}
			replies++;
			counted++;
			slotseq[slot] = s + window;
			uint64_t next = s + window;
			fill(out[pend], size, next);
			sent[slot] = t;
			oiov[pend] = (struct iovec){out[pend], size};
			omsg[pend].msg_hdr = (struct msghdr){.msg_iov = &oiov[pend], .msg_iovlen = 1};
			pend++;
		}
		if (pend)
			send_batch(fd, omsg, oiov, pend, gso, size);
		if (t - lastcheck > 0.05) {
			lastcheck = t;
			for (int i = 0; i < window; i++) {
				if (t - sent[i] > 0.2) {
					lost++;
					fill(out[0], size, slotseq[i]);
					send(fd, out[0], size, 0);
					sent[i] = t;
				}
			}
		}
	}
	double dur = now() - wstart;
	printf("{\"replies_per_s\": %.0f, \"replies\": %llu, \"mismatches\": %llu, \"lost\": %llu, \"seconds\": %.2f}\n",
	       counted / dur, (unsigned long long)counted, (unsigned long long)mismatches, (unsigned long long)lost, dur);
	return mismatches ? 1 : 0;
}

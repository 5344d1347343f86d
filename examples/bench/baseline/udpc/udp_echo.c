// udp_echo: the limit for percore's UDP echo: one thread, one socket, a
// blocking recvmmsg of up to 64 datagrams and one sendmmsg of their
// replies per batch. Build: gcc -O2 -o udp_echo udp_echo.c
// Run:   ./udp_echo 127.0.0.1 7001
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH 64
#define SIZE 65536

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: udp_echo ADDR PORT\n");
		return 2;
	}
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
	inet_pton(AF_INET, argv[1], &sa.sin_addr);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		perror("bind");
		return 1;
	}
	static char bufs[BATCH][SIZE];
	static struct sockaddr_in names[BATCH];
	static struct iovec iov[BATCH];
	static struct mmsghdr msgs[BATCH];
	fprintf(stderr, "udp_echo: listening on %s:%s\n", argv[1], argv[2]);
	for (;;) {
		for (int i = 0; i < BATCH; i++) {
			iov[i].iov_base = bufs[i];
			iov[i].iov_len = SIZE;
			msgs[i].msg_hdr = (struct msghdr){.msg_name = &names[i], .msg_namelen = sizeof names[i], .msg_iov = &iov[i], .msg_iovlen = 1};
		}
		int n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
		if (n < 0)
			continue;
		for (int i = 0; i < n; i++)
			iov[i].iov_len = msgs[i].msg_len;
		for (int off = 0; off < n;) {
			int s = sendmmsg(fd, msgs + off, n - off, 0);
			if (s <= 0)
				break;
			off += s;
		}
	}
}

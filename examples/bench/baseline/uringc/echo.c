// echo.c: a TCP echo server in plain liburing, one thread, one ring: the
// anchor that docs/performance.md calls "C liburing echo" (scripts/bench.sh,
// scripts/bench-latency.sh). It is what a careful C programmer writes with
// liburing's documented features and nothing more: a multishot accept, a
// multishot receive per connection into a provided-buffer ring, and one send
// in flight per connection (data that arrives meanwhile waits, in order, so
// that replies never overtake each other). The ring is set up with
// SINGLE_ISSUER and COOP_TASKRUN when the kernel has them, and without them
// otherwise. (With DEFER_TASKRUN, percore's default, this program's
// submit-and-wait loop stalled on large pipelined echoes here: 57 requests/s
// of 16 KiB against 31,000 without it; the cause was not looked into, and
// the plain program keeps to what works.) No registered files, no fixed
// buffers, no send bundles.
//
//	gcc -O2 -o echo echo.c -luring
//	./echo 127.0.0.1:7000
//
// It prints "listening on ADDR" once it listens, and exits with status 0 on
// SIGINT or SIGTERM.
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ENTRIES 4096
#define NBUFS 1024 // a power of two
#define BUFSZ 16384
#define BGID 0
#define MAXFD 65536

enum { OP_ACCEPT = 1, OP_RECV = 2, OP_SEND = 3 };

// A received buffer waiting to be sent back (or being sent).
struct chunk {
	int bid, len, off;
	struct chunk *next;
};

struct conn {
	int open;                   // its receive is armed (the fd is not closed before it ends)
	int dead;                   // a send failed: what arrives is dropped
	int sending;                // a send is in flight: the head of the queue
	struct chunk *head, *tail;  // what waits to go back, in order
};

static struct io_uring ring;
static struct io_uring_buf_ring *br;
static char *bufs;
static struct conn conns[MAXFD];
static struct chunk *freechunks;
static volatile sig_atomic_t stopping;

static uint64_t ud(int op, int fd) { return ((uint64_t)op << 32) | (uint32_t)fd; }

static struct io_uring_sqe *sqe(void) {
	struct io_uring_sqe *s = io_uring_get_sqe(&ring);
	if (!s) {
		io_uring_submit(&ring);
		s = io_uring_get_sqe(&ring);
	}
	if (!s) {
		fprintf(stderr, "echo: no submission queue entry\n");
		exit(1);
	}
	return s;
}

static void give_back(int bid) {
	io_uring_buf_ring_add(br, bufs + (size_t)bid * BUFSZ, BUFSZ, bid, io_uring_buf_ring_mask(NBUFS), 0);
	io_uring_buf_ring_advance(br, 1);
}

static void arm_recv(int fd) {
	struct io_uring_sqe *s = sqe();
	io_uring_prep_recv_multishot(s, fd, NULL, 0, 0);
	s->flags |= IOSQE_BUFFER_SELECT;
	s->buf_group = BGID;
	io_uring_sqe_set_data64(s, ud(OP_RECV, fd));
}

static void arm_accept(int lfd) {
	struct io_uring_sqe *s = sqe();
	io_uring_prep_multishot_accept(s, lfd, NULL, NULL, 0);
	io_uring_sqe_set_data64(s, ud(OP_ACCEPT, lfd));
}

static void send_head(int fd) {
	struct conn *c = &conns[fd];
	struct chunk *k = c->head;
	struct io_uring_sqe *s = sqe();
	io_uring_prep_send(s, fd, bufs + (size_t)k->bid * BUFSZ + k->off, k->len - k->off, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(s, ud(OP_SEND, fd));
	c->sending = 1;
}

// pop takes the head of fd's queue and gives its buffer back.
static void pop(struct conn *c) {
	struct chunk *k = c->head;
	c->head = k->next;
	if (!c->head) c->tail = NULL;
	give_back(k->bid);
	k->next = freechunks;
	freechunks = k;
}

// drop closes fd, whose receive has ended, once its send (if one is in
// flight) completes; its waiting buffers go back to the ring. A fd is
// closed only here, after its multishot receive ended, so that no
// completion can arrive for a number the kernel has given to a new
// connection.
static void drop(int fd) {
	struct conn *c = &conns[fd];
	c->open = 0;
	if (c->sending) return; // the send's completion comes back here
	while (c->head) pop(c);
	close(fd);
}

static void on_stop(int sig) {
	(void)sig;
	stopping = 1;
}

int main(int argc, char **argv) {
	const char *addr = argc > 1 ? argv[1] : "127.0.0.1:7000";
	char host[64];
	const char *colon = strrchr(addr, ':');
	if (!colon || colon - addr >= (long)sizeof host) {
		fprintf(stderr, "usage: echo HOST:PORT\n");
		return 2;
	}
	memcpy(host, addr, colon - addr);
	host[colon - addr] = 0;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1))};
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "echo: bad address %s\n", addr);
		return 2;
	}
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 4096)) {
		perror("echo: listen");
		return 1;
	}

	struct io_uring_params p = {.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN};
	int err = io_uring_queue_init_params(ENTRIES, &ring, &p);
	if (err == -EINVAL) {
		memset(&p, 0, sizeof p);
		err = io_uring_queue_init_params(ENTRIES, &ring, &p);
	}
	if (err) {
		fprintf(stderr, "echo: io_uring_queue_init: %s\n", strerror(-err));
		return 1;
	}
	if (posix_memalign((void **)&br, 4096, NBUFS * sizeof(struct io_uring_buf)) ||
	    posix_memalign((void **)&bufs, 4096, (size_t)NBUFS * BUFSZ)) {
		fprintf(stderr, "echo: out of memory\n");
		return 1;
	}
	io_uring_buf_ring_init(br);
	struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)br, .ring_entries = NBUFS, .bgid = BGID};
	if ((err = io_uring_register_buf_ring(&ring, &reg, 0))) {
		fprintf(stderr, "echo: register buffer ring: %s\n", strerror(-err));
		return 1;
	}
	for (int i = 0; i < NBUFS; i++)
		io_uring_buf_ring_add(br, bufs + (size_t)i * BUFSZ, BUFSZ, i, io_uring_buf_ring_mask(NBUFS), i);
	io_uring_buf_ring_advance(br, NBUFS);

	struct sigaction act = {.sa_handler = on_stop}; // no SA_RESTART: the wait returns EINTR
	sigaction(SIGINT, &act, NULL);
	sigaction(SIGTERM, &act, NULL);

	arm_accept(lfd);
	printf("listening on %s\n", addr);
	fflush(stdout);

	while (!stopping) {
		struct io_uring_cqe *cqe;
		err = io_uring_submit_and_wait(&ring, 1);
		if (err < 0 && err != -EINTR) {
			fprintf(stderr, "echo: submit and wait: %s\n", strerror(-err));
			return 1;
		}
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&ring, head, cqe) {
			seen++;
			int op = cqe->user_data >> 32, fd = (int)(uint32_t)cqe->user_data, res = cqe->res;
			int more = cqe->flags & IORING_CQE_F_MORE;
			switch (op) {
			case OP_ACCEPT:
				if (res >= 0 && res < MAXFD) {
					setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
					conns[res] = (struct conn){.open = 1};
					arm_recv(res);
				} else if (res >= 0) {
					close(res);
				}
				if (!more) arm_accept(lfd);
				break;
			case OP_RECV:
				if (res > 0 && !conns[fd].dead) {
					struct chunk *k = freechunks;
					if (k) freechunks = k->next;
					else if (!(k = malloc(sizeof *k))) {
						fprintf(stderr, "echo: out of memory\n");
						return 1;
					}
					*k = (struct chunk){.bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT, .len = res};
					struct conn *c = &conns[fd];
					if (c->tail) c->tail->next = k;
					else c->head = k;
					c->tail = k;
					if (!c->sending) send_head(fd);
				} else if (res > 0) {
					give_back(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
				}
				if (!more) {
					if (res > 0 || res == -ENOBUFS) arm_recv(fd); // ended early (buffers ran out): again
					else drop(fd);                                // end of stream or an error
				}
				break;
			case OP_SEND: {
				struct conn *c = &conns[fd];
				c->sending = 0;
				if (res > 0 && !c->dead) {
					c->head->off += res;
					if (c->head->off < c->head->len) {
						send_head(fd); // a partial send: the rest
						break;
					}
				}
				pop(c);
				if (res < 0) {
					c->dead = 1;
					while (c->head) pop(c);
				}
				if (!c->open) drop(fd);
				else if (c->head) send_head(fd);
				break;
			}
			}
		}
		io_uring_cq_advance(&ring, seen);
	}
	return 0;
}

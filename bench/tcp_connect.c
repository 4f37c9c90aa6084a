// SPDX-License-Identifier: MIT
/*
 * cmtime's measurement over TCP: N connections set up and torn down
 * between a server and a client process on this host, step by step, all N
 * at a time, as Debian's cmtime (rdmacm-utils) does it on an rdma_cm
 * device, and printed in cmtime's own table so that one parser reads both
 * (bench/cmtime.sh runs the two side by side over the same address).
 *
 * cmtime's client creates every id, resolves every address, every route,
 * creates every QP, then issues every rdma_connect and waits (sched_yield)
 * until an event thread has seen each ESTABLISHED; then every
 * rdma_disconnect, waiting until each DISCONNECTED (the server answers a
 * DREQ by disconnecting and destroying its id); then destroys every id.
 * Here, the same steps:
 *
 *   create id   socket(SOCK_NONBLOCK) for each connection
 *   bind addr   bind() to -b ADDR, port 0 (only with -b, as cmtime)
 *   connect     a non-blocking connect() each, then wait until an event
 *               thread (epoll) has seen each socket writable: the kernel's
 *               three-way handshake, which no server code takes part in
 *   accept      from the same start until the server process has
 *               accept()ed each connection: established at both ends, as
 *               the server application sees it (cmtime's connect needs
 *               the server's rdma_accept, so this is what compares with it)
 *   disconnect  shutdown(SHUT_WR) each (FIN) and wait until the event
 *               thread has read the end of each: the server closes a
 *               socket when it reads the client's FIN (cmtime's server
 *               disconnects and destroys its id on DISCONNECTED)
 *   destroy     close() each
 *
 * Resolving an address or a route and creating a QP have no TCP step (the
 * kernel looks the route up inside connect()); they are not printed.
 *
 * The columns are cmtime's: "total ms", the step's wall time for all N;
 * "max ms" and "min us", the slowest and fastest connection in the step
 * (from its call to its completion); "us / conn", total / N.
 *
 * The client's event thread starts once its sockets exist, as cmtime's
 * starts after its ids (a process with threads that grows its descriptor
 * table waits for an RCU grace period, milliseconds, which would be charged
 * to create id).
 *
 * The server is a child process (fork) with one epoll loop; it writes when
 * it accepted each connection into shared memory (CLOCK_MONOTONIC, the same
 * clock in both processes), so that the client can time the accept step.
 *   sv_tcp_connect -s ADDR [-b ADDR] [-c N] [-p PORT] [-t SECONDS]
 * -s: the server's address, where it listens and the client connects (IPv4
 * or IPv6, numeric); -c: connections (default 100, as cmtime); -p: the
 * server's port (default 0: the kernel picks one); -t: give up after this
 * long (default 60 s). Exit 0 when every connection went through each step.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

enum step {
	STEP_CREATE_ID,
	STEP_BIND,
	STEP_CONNECT,
	STEP_ACCEPT,
	STEP_DISCONNECT,
	STEP_DESTROY,
	STEP_CNT
};

/* cmtime's names where a step is cmtime's, so that rows line up */
static const char *const step_str[STEP_CNT] = {
	"create id", "bind addr", "connect", "accept", "disconnect", "destroy"
};

enum conn_state { CONNECTING, CONNECTED, DISCONNECTING, DONE };

struct conn {
	int fd;
	_Atomic int state;
	int error;
	uint16_t port;		/* the client's local port */
	double times[STEP_CNT][2];
};

/* what the server process tells the client, in shared memory */
struct shared {
	_Atomic int accepted;
	_Atomic int closed;
	_Atomic int failed;
	struct {
		double t;
		uint16_t port;	/* the peer's (client's) port */
	} acc[];
};

static struct conn *conns;
static struct shared *shm;
static int nconn = 100;
static int epfd;
static double times[STEP_CNT][2];
static _Atomic int completed[STEP_CNT];

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static uint16_t sa_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

static void sa_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)ss)->sin_port = htons(port);
}

static int parse_addr(const char *s, struct sockaddr_storage *ss,
		      socklen_t *len)
{
	struct addrinfo hints = { 0 }, *ai;

	hints.ai_flags = AI_NUMERICHOST;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(s, NULL, &hints, &ai))
		return -1;
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

/* ---- the server: accept each connection, close it on the client's FIN */

static void server(int lfd)
{
	struct epoll_event ev, evs[64];
	char buf[64];
	ssize_t r;
	int ep, n, i;

	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("server: epoll_create1");
	ev.events = EPOLLIN;
	ev.data.fd = lfd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev))
		die("server: epoll_ctl");
	while (atomic_load(&shm->closed) < nconn) {
		n = epoll_wait(ep, evs, 64, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("server: epoll_wait");
		for (i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == lfd) {
				struct sockaddr_storage peer;
				socklen_t plen;
				int c, k;

				for (;;) {
					plen = sizeof(peer);
					c = accept4(lfd, (struct sockaddr *)&peer,
						    &plen,
						    SOCK_NONBLOCK | SOCK_CLOEXEC);
					if (c < 0)
						break;
					k = atomic_load(&shm->accepted);
					if (k >= nconn) {
						fprintf(stderr, "server: more than"
							" %d connections\n", nconn);
						close(c);
						continue;
					}
					shm->acc[k].t = bench_now();
					shm->acc[k].port = sa_port(&peer);
					atomic_store(&shm->accepted, k + 1);
					ev.events = EPOLLIN;
					ev.data.fd = c;
					if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev))
						die("server: epoll_ctl");
				}
				if (errno != EAGAIN && errno != EWOULDBLOCK &&
				    errno != EINTR && errno != ECONNABORTED)
					die("server: accept4");
				continue;
			}
			/* the client sends nothing but its FIN */
			r = read(fd, buf, sizeof(buf));
			if (r > 0 || (r < 0 && errno == EAGAIN))
				continue;
			if (r < 0)
				atomic_fetch_add(&shm->failed, 1);
			close(fd);	/* our FIN: the client's DISCONNECTED */
			atomic_fetch_add(&shm->closed, 1);
		}
	}
	_exit(atomic_load(&shm->failed) ? 1 : 0);
}

/* ---- the client's event thread: cmtime's process_events */

static void *events(void *arg)
{
	struct epoll_event evs[64], ev;
	char buf[64];
	int n, i;

	(void)arg;
	for (;;) {
		n = epoll_wait(epfd, evs, 64, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_wait");
		for (i = 0; i < n; i++) {
			struct conn *c = &conns[evs[i].data.u32];
			int st = atomic_load(&c->state), err = 0;
			socklen_t len = sizeof(err);
			ssize_t r;

			if (st == CONNECTING) {
				c->times[STEP_CONNECT][1] = bench_now();
				if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR,
					       &err, &len) || err) {
					fprintf(stderr, "connect: %s\n",
						strerror(err ? err : errno));
					c->error = 1;
				}
				/* from now on, wait for the server's FIN */
				ev.events = EPOLLIN;
				ev.data.u32 = evs[i].data.u32;
				if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev))
					die("epoll_ctl");
				atomic_store(&c->state, CONNECTED);
				atomic_fetch_add(&completed[STEP_CONNECT], 1);
			} else if (st == DISCONNECTING) {
				r = read(c->fd, buf, sizeof(buf));
				if (r > 0 || (r < 0 && errno == EAGAIN))
					continue;
				c->times[STEP_DISCONNECT][1] = bench_now();
				if (r < 0) {
					perror("disconnect: read");
					c->error = 1;
				}
				epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
				atomic_store(&c->state, DONE);
				atomic_fetch_add(&completed[STEP_DISCONNECT], 1);
			}
			/* CONNECTED: the server sent something early; the
			 * disconnect step reads it */
		}
	}
	return NULL;
}

static void wait_for(_Atomic int *counter, int n)
{
	while (atomic_load(counter) < n)
		sched_yield();
}

/* ---- cmtime's table */

static void show_perf(int with_bind)
{
	int c, i;

	printf("step              total ms     max ms     min us  us / conn\n");
	for (i = 0; i < STEP_CNT; i++) {
		double max = 0, min = 1e18, us;

		if (i == STEP_BIND && !with_bind)
			continue;
		for (c = 0; c < nconn; c++) {
			double *t = conns[c].times[i];

			if (t[0] > 0 && t[1] > 0) {
				us = (t[1] - t[0]) * 1e6;
				max = us > max ? us : max;
				min = us < min ? us : min;
			}
		}
		if (min > 1e17)
			min = 0;
		us = (times[i][1] - times[i][0]) * 1e6;
		printf("%-13s: %11.2f%11.2f%11.2f%11.2f\n", step_str[i],
		       us / 1000., max / 1000., min, us / nconn);
	}
}

static void on_alarm(int sig)
{
	static const char msg[] = "sv_tcp_connect: timed out\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(124);
	_exit(124);
}

static void usage(void)
{
	fprintf(stderr, "usage: sv_tcp_connect -s ADDR [-b ADDR] [-c N]"
		" [-p PORT] [-t SECONDS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct sockaddr_storage dst, src;
	socklen_t dlen = 0, slen = 0;
	const char *dst_s = NULL, *src_s = NULL;
	int op, i, lfd, one = 1, port = 0, limit = 60, failed = 0, status;
	static int by_port[65536];
	struct rlimit rl;
	pthread_t thr;
	pid_t srv;

	while ((op = getopt(argc, argv, "s:b:c:p:t:")) != -1) {
		switch (op) {
		case 's': dst_s = optarg; break;
		case 'b': src_s = optarg; break;
		case 'c': nconn = atoi(optarg); break;
		case 'p': port = atoi(optarg); break;
		case 't': limit = atoi(optarg); break;
		default: usage();
		}
	}
	if (!dst_s || optind != argc || nconn < 1 || nconn > 30000 ||
	    port < 0 || port > 65535 || limit < 1)
		usage();
	if (parse_addr(dst_s, &dst, &dlen)) {
		fprintf(stderr, "sv_tcp_connect: bad address %s\n", dst_s);
		return 2;
	}
	if (src_s && parse_addr(src_s, &src, &slen)) {
		fprintf(stderr, "sv_tcp_connect: bad address %s\n", src_s);
		return 2;
	}
	signal(SIGALRM, on_alarm);
	alarm((unsigned)limit);
	/* a descriptor per connection in each process */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	conns = calloc((size_t)nconn, sizeof(*conns));
	shm = mmap(NULL, sizeof(*shm) + (size_t)nconn * sizeof(shm->acc[0]),
		   PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!conns || shm == MAP_FAILED)
		die("memory");

	/* the server: listening before the client starts, as cmtime's */
	sa_set_port(&dst, (uint16_t)port);
	lfd = socket(dst.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		     0);
	if (lfd < 0)
		die("socket");
	if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		die("setsockopt");
	if (bind(lfd, (struct sockaddr *)&dst, dlen))
		die("bind");
	if (listen(lfd, nconn))
		die("listen");
	{
		struct sockaddr_storage ls;
		socklen_t l = sizeof(ls);

		if (getsockname(lfd, (struct sockaddr *)&ls, &l))
			die("getsockname");
		sa_set_port(&dst, sa_port(&ls));
	}
	fflush(stdout);
	srv = fork();
	if (srv < 0)
		die("fork");
	if (srv == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		alarm((unsigned)limit);	/* not inherited */
		server(lfd);
	}
	close(lfd);
	printf("sv_tcp_connect: %d connections to %s port %u, server pid %d\n",
	       nconn, dst_s, sa_port(&dst), (int)srv);

	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		die("epoll_create1");

	printf("creating id\n");
	times[STEP_CREATE_ID][0] = bench_now();
	for (i = 0; i < nconn; i++) {
		conns[i].times[STEP_CREATE_ID][0] = bench_now();
		conns[i].fd = socket(dst.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
				     SOCK_CLOEXEC, 0);
		if (conns[i].fd < 0)
			die("socket");
		conns[i].times[STEP_CREATE_ID][1] = bench_now();
	}
	times[STEP_CREATE_ID][1] = bench_now();

	if (src_s) {
		printf("binding source address\n");
		times[STEP_BIND][0] = bench_now();
		for (i = 0; i < nconn; i++) {
			conns[i].times[STEP_BIND][0] = bench_now();
			if (bind(conns[i].fd, (struct sockaddr *)&src, slen))
				die("bind");
			conns[i].times[STEP_BIND][1] = bench_now();
		}
		times[STEP_BIND][1] = bench_now();
	}

	/* the event thread starts after the ids, as cmtime's */
	if (pthread_create(&thr, NULL, events, NULL))
		die("pthread_create");

	printf("connecting\n");
	times[STEP_CONNECT][0] = bench_now();
	for (i = 0; i < nconn; i++) {
		struct conn *c = &conns[i];
		struct epoll_event ev = { .events = EPOLLOUT,
					  .data.u32 = (uint32_t)i };
		struct sockaddr_storage ls;
		socklen_t l = sizeof(ls);

		c->times[STEP_CONNECT][0] = bench_now();
		if (connect(c->fd, (struct sockaddr *)&dst, dlen) &&
		    errno != EINPROGRESS)
			die("connect");
		/* writable at once if the handshake is done already */
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev))
			die("epoll_ctl");
		if (getsockname(c->fd, (struct sockaddr *)&ls, &l))
			die("getsockname");
		c->port = sa_port(&ls);
	}
	wait_for(&completed[STEP_CONNECT], nconn);
	times[STEP_CONNECT][1] = bench_now();

	/* accept: the same start, until the server accepted each */
	wait_for(&shm->accepted, nconn);
	for (i = 0; i < nconn; i++)
		by_port[conns[i].port] = i + 1;
	times[STEP_ACCEPT][0] = times[STEP_CONNECT][0];
	times[STEP_ACCEPT][1] = 0;
	for (i = 0; i < nconn; i++) {
		int k = by_port[shm->acc[i].port] - 1;

		if (k < 0) {
			fprintf(stderr, "accept: a connection from port %u is"
				" not ours\n", shm->acc[i].port);
			failed = 1;
			continue;
		}
		conns[k].times[STEP_ACCEPT][0] = conns[k].times[STEP_CONNECT][0];
		conns[k].times[STEP_ACCEPT][1] = shm->acc[i].t;
		if (shm->acc[i].t > times[STEP_ACCEPT][1])
			times[STEP_ACCEPT][1] = shm->acc[i].t;
	}

	printf("disconnecting\n");
	times[STEP_DISCONNECT][0] = bench_now();
	for (i = 0; i < nconn; i++) {
		struct conn *c = &conns[i];

		c->times[STEP_DISCONNECT][0] = bench_now();
		atomic_store(&c->state, DISCONNECTING);
		if (shutdown(c->fd, SHUT_WR))
			die("shutdown");
	}
	wait_for(&completed[STEP_DISCONNECT], nconn);
	times[STEP_DISCONNECT][1] = bench_now();

	printf("destroying id\n");
	times[STEP_DESTROY][0] = bench_now();
	for (i = 0; i < nconn; i++) {
		conns[i].times[STEP_DESTROY][0] = bench_now();
		close(conns[i].fd);
		conns[i].times[STEP_DESTROY][1] = bench_now();
	}
	times[STEP_DESTROY][1] = bench_now();

	/* the server leaves once it closed every connection */
	if (waitpid(srv, &status, 0) != srv)
		die("waitpid");
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "sv_tcp_connect: the server failed (status"
			" 0x%x)\n", status);
		failed = 1;
	}
	for (i = 0; i < nconn; i++)
		failed |= conns[i].error;

	show_perf(src_s != NULL);
	return failed;
}

// SPDX-License-Identifier: MIT
/*
 * rdma_cm's error cases through Debian's librdmacm, on sv0's rdma_cm
 * device (run under 'softverbs run'): what the kernel's rdma_cm answers,
 * the same here. Every wait is bounded (poll on the channel's descriptor).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

/* The ucma ABI's pieces this test writes by hand (<rdma/rdma_user_cm.h>
 * cannot be included beside <rdma/rdma_cma.h>). */
enum { CMD_CREATE_ID = 0, CMD_DESTROY_ID = 1, CMD_BIND_IP = 2,
       CMD_GET_EVENT = 12, CMD_GET_OPTION = 13, CMD_JOIN_IP_MCAST = 16,
       CMD_LEAVE_MCAST = 17, CMD_JOIN_MCAST = 22 };
struct ucm_hdr { uint32_t cmd; uint16_t in, out; };
struct ucm_create_id { uint64_t uid, response; uint16_t ps; uint8_t qp_type, rsvd[5]; };
struct ucm_destroy_id { uint64_t response; uint32_t id, rsvd; };   /* LEAVE_MCAST too */
struct ucm_create_id_resp { uint32_t id; };                       /* JOIN_*MCAST too */
struct ucm_destroy_id_resp { uint32_t events_reported; };
struct ucm_bind_ip { uint64_t response; struct sockaddr_in6 addr; uint32_t id; };
struct ucm_join_ip_mcast { uint64_t response, uid; struct sockaddr_in6 addr; uint32_t id; };
struct ucm_join_mcast {
	uint64_t response, uid;
	uint32_t id;
	uint16_t addr_size, join_flags;
	struct sockaddr_storage addr;
};
struct ucm_get_event { uint64_t response; };
/* struct rdma_ucm_event_resp with its UD parameters (336 bytes) */
struct ucm_event_resp {
	uint64_t uid;
	uint32_t id, event, status;
	uint32_t qp_num, qkey;
	struct {
		uint8_t dgid[16];
		uint32_t flow_label;
		uint8_t sgid_index, hop_limit, traffic_class, rsvd;
		uint16_t dlid;
		uint8_t sl, src_path_bits, static_rate, is_global, port_num, rsvd2;
	} ah;
	uint8_t rest[276];
};
_Static_assert(sizeof(struct ucm_join_ip_mcast) == 48, "join_ip_mcast");
_Static_assert(sizeof(struct ucm_join_mcast) == 152, "join_mcast");
_Static_assert(sizeof(struct ucm_event_resp) == 336, "event_resp");
#define SV_ENOTSUPP 524    /* the kernel's ENOTSUPP: a join of a non-IPv4 group on RoCEv2 */

#define WAIT_MS 10000

static uint16_t next_port = 20000;

static struct sockaddr_in addr4(const char *ip, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };

	assert_int_equal(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
	return sa;
}

/* The next event of ch within WAIT_MS, acked; its type and status. */
static int next_event(struct rdma_event_channel *ch, int *status,
		      struct rdma_cm_id **id, uint8_t *pdata, uint8_t *plen)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int type;

	if (poll(&p, 1, WAIT_MS) != 1)
		return -1;
	assert_int_equal(rdma_get_cm_event(ch, &ev), 0);
	type = ev->event;
	if (status)
		*status = ev->status;
	if (id)
		*id = ev->id;
	if (pdata && ev->param.conn.private_data_len) {
		memcpy(pdata, ev->param.conn.private_data, ev->param.conn.private_data_len);
		*plen = ev->param.conn.private_data_len;
	}
	rdma_ack_cm_event(ev);
	return type;
}

static void expect_event(struct rdma_event_channel *ch, int type, int status)
{
	int st = 0x7fffffff;
	int got = next_event(ch, &st, NULL, NULL, NULL);

	if (got != type)
		fail_msg("event %s (%d), status %d; expected %s",
			 got < 0 ? "none" : rdma_event_str(got), got, st,
			 rdma_event_str(type));
	assert_int_equal(st, status);
}

/* An active id resolved to ip:port, ready to connect. */
static struct rdma_cm_id *resolved(struct rdma_event_channel *ch, const char *ip,
				   uint16_t port)
{
	struct sockaddr_in dst = addr4(ip, port);
	struct rdma_cm_id *id;

	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0);
	expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	assert_int_equal(rdma_resolve_route(id, 2000), 0);
	expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	return id;
}

static struct rdma_cm_id *listener(struct rdma_event_channel *ch, const char *ip,
				   uint16_t port)
{
	struct sockaddr_in sa = addr4(ip, port);
	struct rdma_cm_id *id;

	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_bind_addr(id, (struct sockaddr *)&sa), 0);
	assert_int_equal(rdma_listen(id, 4), 0);
	return id;
}

static void test_bind_twice(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *a, *b;
	uint16_t port = next_port++;
	struct sockaddr_in sa = addr4("127.0.0.1", port), any = addr4("0.0.0.0", port);

	(void)state;
	assert_non_null(ch);
	assert_int_equal(rdma_create_id(ch, &a, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_create_id(ch, &b, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_bind_addr(a, (struct sockaddr *)&sa), 0);
	assert_int_equal(rdma_get_src_port(a), htons(port));
	/* the same address and port: in use */
	assert_int_equal(rdma_bind_addr(b, (struct sockaddr *)&sa), -1);
	assert_int_equal(errno, EADDRINUSE);
	/* the wildcard beside a bound address: the kernel says EADDRNOTAVAIL */
	assert_int_equal(rdma_bind_addr(b, (struct sockaddr *)&any), -1);
	assert_int_equal(errno, EADDRNOTAVAIL);
	/* another port space is another port */
	rdma_destroy_id(b);
	assert_int_equal(rdma_create_id(ch, &b, NULL, RDMA_PS_UDP), 0);
	assert_int_equal(rdma_bind_addr(b, (struct sockaddr *)&sa), 0);
	rdma_destroy_id(b);
	/* port 0 picks a free one; an address not of this host is refused */
	assert_int_equal(rdma_create_id(ch, &b, NULL, RDMA_PS_TCP), 0);
	sa.sin_port = 0;
	assert_int_equal(rdma_bind_addr(b, (struct sockaddr *)&sa), 0);
	assert_int_not_equal(rdma_get_src_port(b), 0);
	rdma_destroy_id(b);
	assert_int_equal(rdma_create_id(ch, &b, NULL, RDMA_PS_TCP), 0);
	sa = addr4("203.0.113.9", port);
	assert_int_equal(rdma_bind_addr(b, (struct sockaddr *)&sa), -1);
	assert_int_equal(errno, EADDRNOTAVAIL);
	rdma_destroy_id(b);
	/* once a goes, its port is free again */
	rdma_destroy_id(a);
	assert_int_equal(rdma_create_id(ch, &b, NULL, RDMA_PS_TCP), 0);
	sa = addr4("127.0.0.1", port);
	assert_int_equal(rdma_bind_addr(b, (struct sockaddr *)&sa), 0);
	rdma_destroy_id(b);
	rdma_destroy_event_channel(ch);
}

static void test_resolve_not_here(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in dst = addr4("203.0.113.9", 7471);
	struct rdma_cm_id *id;

	struct sockaddr_in lo = addr4("127.0.0.1", 0);
	int st = 0;

	(void)state;
	assert_non_null(ch);
	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	/* from loopback to another host: no RDMA device serves that way,
	 * ENODEV as the kernel's (a host with no route at all: ENETUNREACH) */
	assert_int_equal(rdma_resolve_addr(id, (struct sockaddr *)&lo,
					   (struct sockaddr *)&dst, 2000), 0);
	assert_int_equal(next_event(ch, &st, NULL, NULL, NULL),
			 RDMA_CM_EVENT_ADDR_ERROR);
	if (st != -ENODEV && st != -ENETUNREACH)
		fail_msg("ADDR_ERROR status %d, not -ENODEV or -ENETUNREACH", st);
	/* (librdmacm's rdma_resolve_route would now dereference the id's
	 * absent device, as on a kernel: not called) */
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

static void test_connect_refused(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .qp_num = 0x123 };
	uint16_t port = next_port++;
	struct rdma_cm_id *id, *l;

	(void)state;
	assert_non_null(ch);
	/* nobody listens on the port: an invalid service ID (IBTA reason 8) */
	id = resolved(ch, "127.0.0.1", port);
	assert_int_equal(rdma_connect(id, &cp), 0);
	expect_event(ch, RDMA_CM_EVENT_REJECTED, 8);
	rdma_destroy_id(id);
	/* someone listens on the port, on another address: the consumer's
	 * refusal (28), as cma's handler gives */
	l = listener(ch, "127.0.0.2", port);
	id = resolved(ch, "127.0.0.1", port);
	assert_int_equal(rdma_connect(id, &cp), 0);
	expect_event(ch, RDMA_CM_EVENT_REJECTED, 28);
	rdma_destroy_id(id);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/* librdmacm's synchronous calls (an id with no channel, rdma_create_ep):
 * a connect nobody takes is ECONNREFUSED, as on a kernel */
static void test_connect_refused_sync(void **state)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res = NULL;
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	char port[8];
	struct rdma_cm_id *id;

	(void)state;
	snprintf(port, sizeof(port), "%u", next_port++);
	assert_int_equal(rdma_getaddrinfo("127.0.0.1", port, &hints, &res), 0);
	assert_int_equal(rdma_create_ep(&id, res, NULL, &qa), 0);
	errno = 0;
	assert_int_equal(rdma_connect(id, NULL), -1);
	assert_int_equal(errno, ECONNREFUSED);
	rdma_destroy_ep(id);
	rdma_freeaddrinfo(res);
}

/* A REQ that comes just before its listener (perftest -R's data
 * connection): held a moment, then taken by the listener that came */
static void test_listen_after_connect(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .qp_num = 0x123 };
	uint16_t port = next_port++;
	struct rdma_cm_id *id, *l, *child;
	int st;

	(void)state;
	assert_non_null(ch);
	id = resolved(ch, "127.0.0.1", port);
	assert_int_equal(rdma_connect(id, &cp), 0);
	l = listener(ch, "127.0.0.1", port);
	assert_int_equal(next_event(ch, &st, &child, NULL, NULL),
			 RDMA_CM_EVENT_CONNECT_REQUEST);
	assert_int_equal(rdma_reject(child, NULL, 0), 0);
	expect_event(ch, RDMA_CM_EVENT_REJECTED, 28);
	rdma_destroy_id(child);
	rdma_destroy_id(id);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

static void test_reject_with_data(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .qp_num = 0x123,
				      .private_data = "hello", .private_data_len = 6 };
	uint16_t port = next_port++;
	struct rdma_cm_id *id, *l, *child;
	uint8_t pd[256], plen = 0;
	int st;

	(void)state;
	assert_non_null(ch);
	l = listener(ch, "0.0.0.0", port);
	id = resolved(ch, "127.0.0.1", port);
	assert_int_equal(rdma_connect(id, &cp), 0);
	assert_int_equal(next_event(ch, &st, &child, pd, &plen),
			 RDMA_CM_EVENT_CONNECT_REQUEST);
	/* the REQ's room for the user: 92 bytes less the CMA header */
	assert_int_equal(plen, 56);
	assert_string_equal((char *)pd, "hello");
	assert_int_equal(rdma_reject(child, "no thanks", 10), 0);
	plen = 0;
	assert_int_equal(next_event(ch, &st, NULL, pd, &plen), RDMA_CM_EVENT_REJECTED);
	assert_int_equal(st, 28);
	assert_int_equal(plen, 148);
	assert_string_equal((char *)pd, "no thanks");
	/* a second reject, an accept after it: no longer a request */
	assert_int_equal(rdma_reject(child, NULL, 0), -1);
	assert_int_equal(errno, EINVAL);
	rdma_destroy_id(child);
	rdma_destroy_id(id);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/* Connect two ids of this process without QPs (rdma_establish); the
 * passive one in *pass. */
static struct rdma_cm_id *connected(struct rdma_event_channel *ch,
				    struct rdma_cm_id *l, uint16_t port,
				    struct rdma_cm_id **pass)
{
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .qp_num = 0x321 };
	struct rdma_cm_id *id = resolved(ch, "127.0.0.1", port);

	assert_int_equal(rdma_connect(id, &cp), 0);
	assert_int_equal(next_event(ch, NULL, pass, NULL, NULL),
			 RDMA_CM_EVENT_CONNECT_REQUEST);
	cp.qp_num = 0x654;
	assert_int_equal(rdma_accept(*pass, &cp), 0);
	expect_event(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
	assert_int_equal(rdma_establish(id), 0);
	expect_event(ch, RDMA_CM_EVENT_ESTABLISHED, 0);
	(void)l;
	return id;
}

static void test_disconnect_timewait(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	uint16_t port = next_port++;
	struct rdma_cm_id *l, *id, *pass, *who;
	int nd = 0, nt = 0, type;

	(void)state;
	assert_non_null(ch);
	l = listener(ch, "127.0.0.1", port);
	id = connected(ch, l, port, &pass);
	assert_int_equal(rdma_disconnect(id), 0);
	/* both ends: DISCONNECTED, the passive one answers, then each leaves
	 * time-wait once */
	while (nd + nt < 4 && (type = next_event(ch, NULL, &who, NULL, NULL)) >= 0) {
		if (type == RDMA_CM_EVENT_DISCONNECTED) {
			nd++;
			if (who == pass)
				assert_int_equal(rdma_disconnect(pass), 0);
		} else if (type == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
			nt++;
		} else {
			fail_msg("unexpected %s", rdma_event_str(type));
		}
	}
	assert_int_equal(nd, 2);
	assert_int_equal(nt, 2);
	rdma_destroy_id(pass);
	rdma_destroy_id(id);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

static void test_peer_killed(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	uint16_t port = next_port++;
	struct rdma_cm_id *l, *pass;
	int ready[2], st;
	pid_t pid;
	char c;

	(void)state;
	assert_non_null(ch);
	l = listener(ch, "127.0.0.1", port);
	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rdma_event_channel *cc = rdma_create_event_channel();
		struct rdma_conn_param cp = { .responder_resources = 1,
					      .initiator_depth = 1, .qp_num = 0x77 };
		struct rdma_cm_event *ev;
		struct rdma_cm_id *id;
		struct sockaddr_in dst = addr4("127.0.0.1", port);

		if (!cc || rdma_create_id(cc, &id, NULL, RDMA_PS_TCP) ||
		    rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) ||
		    rdma_get_cm_event(cc, &ev) || rdma_ack_cm_event(ev) ||
		    rdma_resolve_route(id, 2000) ||
		    rdma_get_cm_event(cc, &ev) || rdma_ack_cm_event(ev) ||
		    rdma_connect(id, &cp) || rdma_get_cm_event(cc, &ev) ||
		    ev->event != RDMA_CM_EVENT_CONNECT_RESPONSE ||
		    rdma_ack_cm_event(ev) || rdma_establish(id))
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	assert_int_equal(next_event(ch, NULL, &pass, NULL, NULL),
			 RDMA_CM_EVENT_CONNECT_REQUEST);
	{
		struct rdma_conn_param cp = { .responder_resources = 1,
					      .initiator_depth = 1, .qp_num = 0x78 };

		assert_int_equal(rdma_accept(pass, &cp), 0);
	}
	expect_event(ch, RDMA_CM_EVENT_ESTABLISHED, 0);
	assert_int_equal(read(ready[0], &c, 1), 1);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	/* the dead process's ids are destroyed: this end is told */
	expect_event(ch, RDMA_CM_EVENT_DISCONNECTED, 0);
	close(ready[0]);
	rdma_destroy_id(pass);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

static void test_nonblocking_channel(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in dst = addr4("127.0.0.1", 7471);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct pollfd p;

	(void)state;
	assert_non_null(ch);
	assert_int_equal(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
	assert_int_equal(rdma_get_cm_event(ch, &ev), -1);
	assert_int_equal(errno, EAGAIN);
	p = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 0), 0);
	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0);
	assert_int_equal(poll(&p, 1, WAIT_MS), 1);
	assert_int_equal(rdma_get_cm_event(ch, &ev), 0);
	assert_int_equal(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(ev);
	/* read exactly once: no event left */
	assert_int_equal(poll(&p, 1, 0), 0);
	assert_int_equal(rdma_get_cm_event(ch, &ev), -1);
	assert_int_equal(errno, EAGAIN);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/*
 * A thread waits in rdma_get_cm_event while another destroys the channel
 * (rping's teardown does): as with the kernel's file, the waiter keeps the
 * file. Woken through a duplicate of the descriptor (a token and nothing
 * queued), it finds no event and waits again; nothing was freed under it
 * (the ASan pass would say so). In a child, which ends with the waiter
 * still waiting, as a process ends on the kernel's device.
 */
struct waiter {
	struct rdma_event_channel *ch;
	pid_t tid;
	int done;
};

static void *wait_event(void *arg)
{
	struct waiter *w = arg;
	struct rdma_cm_event *ev;

	__atomic_store_n(&w->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	(void)rdma_get_cm_event(w->ch, &ev);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Is thread tid of this process blocked in read()? */
static bool in_read(pid_t tid)
{
	char path[64], buf[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	return atol(buf) == SYS_read;
}

/* Wait up to WAIT_MS for cond(arg): true if it came. */
static bool until(bool (*cond)(void *), void *arg)
{
	for (int i = 0; i < WAIT_MS / 5; i++) {
		if (cond(arg))
			return true;
		usleep(5000);
	}
	return false;
}

static bool waiter_in_read(void *arg)
{
	struct waiter *w = arg;
	pid_t tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE);

	return tid && in_read(tid);
}

static bool token_taken(void *arg)
{
	struct pollfd p = { .fd = *(int *)arg, .events = POLLIN };

	return poll(&p, 1, 0) == 0;
}

static int close_under_waiter(void)
{
	struct waiter w = { 0 };
	uint64_t one = 1;
	pthread_t t;
	int dup_fd;

	w.ch = rdma_create_event_channel();
	if (!w.ch)
		return 10;
	/* the eventfd itself, past the preload (a dup() of the rdma_cm
	 * descriptor is the same file, as the kernel's, whose write() is a
	 * command): the raw system call */
	dup_fd = (int)syscall(SYS_dup, w.ch->fd);
	if (dup_fd < 0 || pthread_create(&t, NULL, wait_event, &w))
		return 11;
	if (!until(waiter_in_read, &w))
		return 12;
	rdma_destroy_event_channel(w.ch);
	/* wake it: a token and nothing queued */
	if (write(dup_fd, &one, sizeof(one)) != sizeof(one))
		return 13;
	if (!until(token_taken, &dup_fd) || !until(waiter_in_read, &w))
		return 14;
	if (__atomic_load_n(&w.done, __ATOMIC_ACQUIRE))
		return 15;      /* it returned: an error where the kernel waits */
	return 0;
}

static void test_close_under_waiter(void **state)
{
	int st;
	pid_t kid;

	(void)state;
	kid = fork();
	assert_true(kid >= 0);
	if (!kid)
		_exit(close_under_waiter());
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* The device itself: bad writes get the kernel's errno, never a crash. */
static void test_bad_writes(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct {
		struct ucm_hdr hdr;
		union {
			struct ucm_create_id create;
			struct ucm_destroy_id destroy;
			uint8_t raw[512];
		};
	} w;
	struct ucm_create_id_resp resp;

	(void)state;
	assert_non_null(ch);
	memset(&w, 0, sizeof(w));
	assert_int_equal(write(ch->fd, &w, 4), -1);                 /* short */
	assert_int_equal(errno, EINVAL);
	w.hdr.cmd = 99;
	assert_int_equal(write(ch->fd, &w, sizeof(w)), -1);         /* unknown */
	assert_int_equal(errno, EINVAL);
	w.hdr.cmd = CMD_GET_OPTION;                   /* never was */
	assert_int_equal(write(ch->fd, &w, sizeof(w)), -1);
	assert_int_equal(errno, ENOSYS);
	w.hdr.cmd = CMD_CREATE_ID;
	w.hdr.in = 600;                                            /* past len */
	assert_int_equal(write(ch->fd, &w, sizeof(w.hdr) + sizeof(w.create)), -1);
	assert_int_equal(errno, EINVAL);
	w.hdr.in = sizeof(w.create);
	w.hdr.out = sizeof(resp);
	w.create.ps = 0x4242;                                      /* bad ps */
	w.create.response = (uintptr_t)&resp;
	assert_int_equal(write(ch->fd, &w, sizeof(w.hdr) + sizeof(w.create)), -1);
	assert_int_equal(errno, EINVAL);
	w.create.ps = RDMA_PS_TCP;
	w.create.response = 16;                                    /* bad address */
	assert_int_equal(write(ch->fd, &w, sizeof(w.hdr) + sizeof(w.create)), -1);
	assert_int_equal(errno, EFAULT);
	w.hdr.out = 2;                                             /* no room */
	assert_int_equal(write(ch->fd, &w, sizeof(w.hdr) + sizeof(w.create)), -1);
	assert_int_equal(errno, ENOSPC);
	{
		/* an address the program cannot read (hidden from the
		 * compiler, which refuses a literal NULL) */
		const void *bad = NULL;

		__asm__("" : "+r"(bad));
		assert_int_equal(write(ch->fd, bad, 64), -1);
	}
	assert_int_equal(errno, EFAULT);
	w.hdr.cmd = CMD_DESTROY_ID;
	w.hdr.in = sizeof(w.destroy);
	w.hdr.out = 4;
	w.destroy.response = (uintptr_t)&resp;
	w.destroy.id = 4000;                                       /* no such id */
	assert_int_equal(write(ch->fd, &w, sizeof(w.hdr) + sizeof(w.destroy)), -1);
	assert_int_equal(errno, ENOENT);
	w.hdr.cmd = CMD_JOIN_IP_MCAST;                /* an address of no family */
	assert_int_equal(write(ch->fd, &w, sizeof(w)), -1);
	assert_int_equal(errno, EINVAL);
	rdma_destroy_event_channel(ch);
}


/* ---- multicast ---- */

static struct sockaddr_in6 addr6(const char *ip)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };

	assert_int_equal(inet_pton(AF_INET6, ip, &sa.sin6_addr), 1);
	return sa;
}

/* An id of port space ps bound to ip (port 0: any). */
static struct rdma_cm_id *bound_id(struct rdma_event_channel *ch, const char *ip,
				   enum rdma_port_space ps)
{
	struct sockaddr_in sa = addr4(ip, 0);
	struct rdma_cm_id *id;

	assert_int_equal(rdma_create_id(ch, &id, NULL, ps), 0);
	assert_int_equal(rdma_bind_addr(id, (struct sockaddr *)&sa), 0);
	return id;
}

static int join4(struct rdma_cm_id *id, const char *ip, void *ctx)
{
	struct sockaddr_in sa = addr4(ip, 0);

	return rdma_join_multicast(id, (struct sockaddr *)&sa, ctx);
}

/* rdma_join_multicast's errors, as the kernel's cma gives them on RoCEv2. */
static void test_mcast_join_errors(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in6 g6 = addr6("ff0e::5:1"), zero6 = addr6("::");
	struct rdma_cm_id *id;

	(void)state;
	assert_non_null(ch);
	/* no address yet, so no device: EINVAL */
	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP), 0);
	assert_int_equal(join4(id, "239.1.2.3", NULL), -1);
	assert_int_equal(errno, EINVAL);
	rdma_destroy_id(id);
	/* bound to the wildcard: still no device */
	id = bound_id(ch, "0.0.0.0", RDMA_PS_UDP);
	assert_int_equal(join4(id, "239.1.2.3", NULL), -1);
	assert_int_equal(errno, EINVAL);
	rdma_destroy_id(id);
	/* a connected-mode id: multicast is for UD */
	id = bound_id(ch, "127.0.0.1", RDMA_PS_TCP);
	assert_int_equal(join4(id, "239.1.2.3", NULL), -1);
	assert_int_equal(errno, EINVAL);
	rdma_destroy_id(id);
	/* a UD id with an address: the zero group (0.0.0.0/8, ::) is EINVAL,
	 * an IPv6 group ENOTSUPP (a RoCEv2 port joins IPv4 groups only) */
	id = bound_id(ch, "127.0.0.1", RDMA_PS_UDP);
	assert_int_equal(join4(id, "0.0.0.0", NULL), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(join4(id, "0.1.2.3", NULL), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(rdma_join_multicast(id, (struct sockaddr *)&zero6, NULL), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(rdma_join_multicast(id, (struct sockaddr *)&g6, NULL), -1);
	assert_int_equal(errno, SV_ENOTSUPP);
	/* nothing was joined: no event */
	{
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };

		assert_int_equal(poll(&p, 1, 0), 0);
	}
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* A UD QP on id, with its own PD and CQ (freed by mc_qp_free). */
struct mc_qp { struct ibv_pd *pd; struct ibv_cq *cq; };

static void mc_qp_make(struct rdma_cm_id *id, struct mc_qp *q)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_UD,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 4,
					       .max_send_sge = 1, .max_recv_sge = 1 } };

	assert_non_null(id->verbs);
	q->pd = ibv_alloc_pd(id->verbs);
	assert_non_null(q->pd);
	q->cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
	assert_non_null(q->cq);
	a.send_cq = a.recv_cq = q->cq;
	assert_int_equal(rdma_create_qp(id, q->pd, &a), 0);
}

static void mc_qp_free(struct rdma_cm_id *id, struct mc_qp *q)
{
	rdma_destroy_qp(id);
	ibv_destroy_cq(q->cq);
	ibv_dealloc_pd(q->pd);
}

/* n completions of cq, polled for at most WAIT_MS: how many came. */
static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct timespec t0, t;
	int got = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		assert_true(r >= 0);
		got += r;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (got < n && (t.tv_sec - t0.tv_sec) * 1000 +
			    (t.tv_nsec - t0.tv_nsec) / 1000000 < WAIT_MS);
	return got;
}

/* The next event of ch (bounded), kept for the caller to ack. */
static struct rdma_cm_event *get_event(struct rdma_event_channel *ch)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	assert_int_equal(poll(&p, 1, WAIT_MS), 1);
	assert_int_equal(rdma_get_cm_event(ch, &ev), 0);
	return ev;
}

/* Join and leave through librdmacm: the event's address handle is the
 * group's (as cma_iboe_join_multicast makes it for IPv4 on RoCEv2), the
 * QP is attached by librdmacm; leaving waits for the event's ack, which
 * the multicast's events_reported must match. */
static void test_mcast_join_leave(void **state)
{
	static const uint8_t mgid[16] = { [10] = 0xff, [11] = 0xff,
					  239, 1, 2, 3 };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in g = addr4("239.1.2.3", 0);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct mc_qp q;
	int ctx;

	(void)state;
	assert_non_null(ch);
	alarm(60);          /* librdmacm's leave waits without a bound */
	id = bound_id(ch, "127.0.0.1", RDMA_PS_UDP);
	mc_qp_make(id, &q);
	assert_int_equal(rdma_join_multicast(id, (struct sockaddr *)&g, &ctx), 0);
	ev = get_event(ch);
	assert_int_equal(ev->event, RDMA_CM_EVENT_MULTICAST_JOIN);
	assert_int_equal(ev->status, 0);
	assert_ptr_equal(ev->id, id);
	assert_ptr_equal(ev->param.ud.private_data, &ctx);
	assert_memory_equal(ev->param.ud.ah_attr.grh.dgid.raw, mgid, 16);
	assert_int_equal(ev->param.ud.ah_attr.is_global, 1);
	assert_int_equal(ev->param.ud.ah_attr.grh.hop_limit, 64);
	assert_int_equal(ev->param.ud.ah_attr.grh.traffic_class, 0);
	assert_int_equal(ev->param.ud.ah_attr.dlid, 0);
	assert_int_equal(ev->param.ud.ah_attr.sl, 0);
	assert_int_equal(ev->param.ud.ah_attr.port_num, 1);
	assert_int_equal(ev->param.ud.qp_num, 0xffffff);
	assert_int_equal(ev->param.ud.qkey, 0x01234567);
	rdma_ack_cm_event(ev);
	/* librdmacm attached the QP: a datagram to the group comes back to
	 * it (sender and receiver) */
	{
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
					  .grh = { .hop_limit = 64 } };
		struct ibv_recv_wr rw = { .wr_id = 1 }, *brw;
		struct ibv_send_wr sw = { .wr_id = 2, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bsw;
		struct ibv_sge rs, ss;
		struct ibv_wc wc[2];
		char buf[40 + 64] = { 0 }, msg[16] = "to the group";
		struct ibv_mr *mr, *smr;
		struct ibv_ah *ah;

		memcpy(aa.grh.dgid.raw, mgid, 16);
		mr = ibv_reg_mr(q.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		smr = ibv_reg_mr(q.pd, msg, sizeof(msg), 0);
		assert_non_null(mr);
		assert_non_null(smr);
		rs = (struct ibv_sge){ (uintptr_t)buf, sizeof(buf), mr->lkey };
		ss = (struct ibv_sge){ (uintptr_t)msg, sizeof(msg), smr->lkey };
		rw.sg_list = &rs;
		rw.num_sge = 1;
		sw.sg_list = &ss;
		sw.num_sge = 1;
		assert_int_equal(ibv_post_recv(id->qp, &rw, &brw), 0);
		ah = ibv_create_ah(q.pd, &aa);
		assert_non_null(ah);
		sw.wr.ud.ah = ah;
		sw.wr.ud.remote_qpn = 0xffffff;
		sw.wr.ud.remote_qkey = 0x01234567;
		assert_int_equal(ibv_post_send(id->qp, &sw, &bsw), 0);
		assert_int_equal(poll_cq(q.cq, 2, wc), 2);
		for (int i = 0; i < 2; i++)
			assert_int_equal(wc[i].status, IBV_WC_SUCCESS);
		assert_string_equal(buf + 40, "to the group");
		ibv_destroy_ah(ah);
		ibv_dereg_mr(smr);
		ibv_dereg_mr(mr);
	}
	assert_int_equal(rdma_leave_multicast(id, (struct sockaddr *)&g), 0);
	/* left: the same group is not joined any more */
	assert_int_equal(rdma_leave_multicast(id, (struct sockaddr *)&g), -1);
	/* the kernel does not check that a group is a multicast address; the
	 * attach then fails, and librdmacm reports MULTICAST_ERROR */
	assert_int_equal(join4(id, "127.0.0.2", NULL), 0);
	ev = get_event(ch);
	assert_int_equal(ev->event, RDMA_CM_EVENT_MULTICAST_ERROR);
	assert_int_not_equal(ev->status, 0);
	rdma_ack_cm_event(ev);
	assert_int_equal(rdma_leave_multicast(id, (struct sockaddr *)&(struct sockaddr_in){
		.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002) }), 0);
	/* a group still joined when the id goes: left with it */
	assert_int_equal(rdma_join_multicast(id, (struct sockaddr *)&g, NULL), 0);
	rdma_ack_cm_event(get_event(ch));
	mc_qp_free(id, &q);
	assert_int_equal(rdma_destroy_id(id), 0);
	alarm(0);
	rdma_destroy_event_channel(ch);
}

/* mckey's way: resolve the group's address from a bound source (the route
 * to a multicast group; no peer answers), then join. */
static void test_mcast_resolve(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in src = addr4("127.0.0.1", 0), g = addr4("239.1.2.9", 0);
	struct sockaddr_in *local;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	(void)state;
	assert_non_null(ch);
	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP), 0);
	assert_int_equal(rdma_resolve_addr(id, (struct sockaddr *)&src,
					   (struct sockaddr *)&g, 2000), 0);
	expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	local = (struct sockaddr_in *)rdma_get_local_addr(id);
	assert_int_equal(local->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	assert_non_null(id->verbs);
	assert_int_equal(rdma_join_multicast(id, (struct sockaddr *)&g, NULL), 0);
	ev = get_event(ch);
	assert_int_equal(ev->event, RDMA_CM_EVENT_MULTICAST_JOIN);
	rdma_ack_cm_event(ev);
	/* the id goes with the group joined (no QP, nothing to detach) */
	assert_int_equal(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

/* The commands themselves, written by hand (no librdmacm id on this
 * channel): their checks, the multicast handle, events_reported. */
static int ucm(struct rdma_event_channel *ch, uint32_t cmd, const void *c,
	       uint16_t in, uint16_t out)
{
	struct { struct ucm_hdr hdr; uint8_t c[200]; } w = { { cmd, in, out }, { 0 } };

	memcpy(w.c, c, in);
	return (int)write(ch->fd, &w, sizeof(w.hdr) + in) == (int)(sizeof(w.hdr) + in) ?
	       0 : -errno;
}

static int raw_join4(struct rdma_event_channel *ch, uint32_t id, const char *ip,
		     uint64_t uid, uint32_t *h)
{
	struct ucm_create_id_resp r = { 0xdead };
	struct ucm_join_ip_mcast j = { .response = (uintptr_t)&r, .uid = uid, .id = id };
	struct sockaddr_in sa = addr4(ip, 0);
	int ret;

	memcpy(&j.addr, &sa, sizeof(sa));
	ret = ucm(ch, CMD_JOIN_IP_MCAST, &j, sizeof(j), sizeof(r));
	*h = r.id;
	return ret;
}

static int raw_leave(struct rdma_event_channel *ch, uint32_t h, uint32_t *reported)
{
	struct ucm_destroy_id_resp r = { 0xdead };
	struct ucm_destroy_id d = { .response = (uintptr_t)&r, .id = h };
	int ret = ucm(ch, CMD_LEAVE_MCAST, &d, sizeof(d), sizeof(r));

	*reported = r.events_reported;
	return ret;
}

static int raw_event(struct rdma_event_channel *ch, struct ucm_event_resp *e)
{
	struct ucm_get_event g = { .response = (uintptr_t)e };

	memset(e, 0, sizeof(*e));
	return ucm(ch, CMD_GET_EVENT, &g, sizeof(g), sizeof(*e));
}

static void test_mcast_raw(void **state)
{
	static const uint8_t mgid4[16] = { [10] = 0xff, [11] = 0xff, 239, 1, 2, 4 };
	struct rdma_event_channel *ch = rdma_create_event_channel(),
				  *other = rdma_create_event_channel();
	struct ucm_create_id_resp cr;
	struct ucm_create_id c = { .uid = 0x1d, .response = (uintptr_t)&cr,
				   .ps = RDMA_PS_UDP, .qp_type = IBV_QPT_UD };
	struct ucm_bind_ip b = { 0 };
	struct ucm_join_mcast jm = { 0 };
	struct ucm_create_id_resp jr;
	struct ucm_destroy_id_resp dr;
	struct ucm_destroy_id d;
	struct ucm_event_resp ev;
	struct sockaddr_in lo = addr4("127.0.0.1", 0), g = addr4("239.1.2.3", 0);
	uint32_t id, h1, h2, h3, h4, rep;
	struct pollfd p;

	(void)state;
	assert_non_null(ch);
	assert_non_null(other);
	assert_int_equal(ucm(ch, CMD_CREATE_ID, &c, sizeof(c), sizeof(cr)), 0);
	id = cr.id;
	/* unbound: no device */
	assert_int_equal(raw_join4(ch, id, "239.1.2.3", 1, &h1), -EINVAL);
	b.id = id;
	memcpy(&b.addr, &lo, sizeof(lo));
	assert_int_equal(ucm(ch, CMD_BIND_IP, &b, sizeof(b), 0), 0);
	/* JOIN_MCAST's own checks: room for the answer, the address's size,
	 * the flags (full member or send-only full member) */
	jm.response = (uintptr_t)&jr;
	jm.uid = 0x51;
	jm.id = id;
	memcpy(&jm.addr, &g, sizeof(g));
	jm.addr_size = sizeof(g);
	assert_int_equal(ucm(ch, CMD_JOIN_MCAST, &jm, sizeof(jm), 2), -ENOSPC);
	jm.addr_size = sizeof(struct sockaddr_in6);
	assert_int_equal(ucm(ch, CMD_JOIN_MCAST, &jm, sizeof(jm), sizeof(jr)), -EINVAL);
	jm.addr_size = sizeof(g);
	jm.join_flags = 2;
	assert_int_equal(ucm(ch, CMD_JOIN_MCAST, &jm, sizeof(jm), sizeof(jr)), -EINVAL);
	jm.join_flags = 1;            /* send-only */
	jm.id = 4000;                 /* no such id */
	assert_int_equal(ucm(ch, CMD_JOIN_MCAST, &jm, sizeof(jm), sizeof(jr)), -ENOENT);
	jm.id = id;
	assert_int_equal(ucm(ch, CMD_JOIN_MCAST, &jm, sizeof(jm), sizeof(jr)), 0);
	h1 = jr.id;
	assert_int_equal(raw_join4(ch, id, "239.1.2.4", 0x52, &h2), 0);
	assert_int_not_equal(h1, h2);
	/* another file's id: EINVAL */
	assert_int_equal(raw_join4(other, id, "239.1.2.4", 0x53, &h3), -EINVAL);
	/* one MULTICAST_JOIN each, named by the multicast's handle and uid */
	assert_int_equal(raw_event(ch, &ev), 0);
	assert_int_equal(ev.event, RDMA_CM_EVENT_MULTICAST_JOIN);
	assert_int_equal(ev.id, h1);
	assert_int_equal(ev.uid, 0x51);
	assert_int_equal(raw_event(ch, &ev), 0);
	assert_int_equal(ev.event, RDMA_CM_EVENT_MULTICAST_JOIN);
	assert_int_equal(ev.id, h2);
	assert_int_equal(ev.uid, 0x52);
	assert_int_equal(ev.status, 0);
	assert_memory_equal(ev.ah.dgid, mgid4, 16);
	assert_int_equal(ev.ah.hop_limit, 64);
	assert_int_equal(ev.ah.is_global, 1);
	assert_int_equal(ev.ah.port_num, 1);
	assert_int_equal(ev.ah.dlid, 0);
	assert_int_equal(ev.qp_num, 0xffffff);
	assert_int_equal(ev.qkey, 0x01234567);
	/* leave: the multicast's events, once; then it is gone; another
	 * file's multicast is EINVAL */
	assert_int_equal(raw_leave(other, h2, &rep), -EINVAL);
	assert_int_equal(raw_leave(ch, h1, &rep), 0);
	assert_int_equal(rep, 1);
	assert_int_equal(raw_leave(ch, h1, &rep), -ENOENT);
	assert_int_equal(raw_leave(ch, 99999, &rep), -ENOENT);
	/* a multicast left before its event was read: the event goes too */
	assert_int_equal(raw_join4(ch, id, "239.1.2.5", 0x54, &h3), 0);
	assert_int_equal(raw_leave(ch, h3, &rep), 0);
	assert_int_equal(rep, 0);
	assert_int_equal(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
	assert_int_equal(raw_event(ch, &ev), -EAGAIN);
	p = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 0), 0);
	/* an answer the program cannot take: EFAULT, and the join is undone
	 * (its handle free again, its event gone), as the kernel leaves it */
	{
		struct ucm_join_ip_mcast j = { .response = 16, .uid = 0x56, .id = id };

		memcpy(&j.addr, &g, sizeof(g));
		assert_int_equal(ucm(ch, CMD_JOIN_IP_MCAST, &j, sizeof(j), 4), -EFAULT);
		assert_int_equal(raw_event(ch, &ev), -EAGAIN);
		assert_int_equal(raw_join4(ch, id, "239.1.2.3", 0x57, &h3), 0);
		assert_int_equal(h3, h1);          /* the lowest free handle */
		assert_int_equal(raw_leave(ch, h3, &rep), 0);
		assert_int_equal(raw_event(ch, &ev), -EAGAIN);
	}
	/* the id goes with two groups joined (one event unread): its
	 * events_reported counts the two read, and both groups are left */
	assert_int_equal(raw_join4(ch, id, "239.1.2.6", 0x55, &h4), 0);
	d = (struct ucm_destroy_id){ .response = (uintptr_t)&dr, .id = id };
	assert_int_equal(ucm(ch, CMD_DESTROY_ID, &d, sizeof(d), sizeof(dr)), 0);
	assert_int_equal(dr.events_reported, 2);
	assert_int_equal(raw_leave(ch, h2, &rep), -ENOENT);
	assert_int_equal(raw_leave(ch, h4, &rep), -ENOENT);
	assert_int_equal(raw_event(ch, &ev), -EAGAIN);
	assert_int_equal(poll(&p, 1, 0), 0);
	rdma_destroy_event_channel(other);
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bind_twice),
		cmocka_unit_test(test_resolve_not_here),
		cmocka_unit_test(test_connect_refused),
		cmocka_unit_test(test_connect_refused_sync),
		cmocka_unit_test(test_listen_after_connect),
		cmocka_unit_test(test_reject_with_data),
		cmocka_unit_test(test_disconnect_timewait),
		cmocka_unit_test(test_peer_killed),
		cmocka_unit_test(test_nonblocking_channel),
		cmocka_unit_test(test_close_under_waiter),
		cmocka_unit_test(test_bad_writes),
		cmocka_unit_test(test_mcast_join_errors),
		cmocka_unit_test(test_mcast_join_leave),
		cmocka_unit_test(test_mcast_resolve),
		cmocka_unit_test(test_mcast_raw),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

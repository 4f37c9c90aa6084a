// SPDX-License-Identifier: MIT
/*
 * rdma_cm's error cases through Debian's librdmacm, on sv0's rdma_cm
 * device (run under 'softverbs run'): what the kernel's rdma_cm answers,
 * the same here. Every wait is bounded (poll on the channel's descriptor).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
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
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

/* The ucma ABI's pieces this test writes by hand (<rdma/rdma_user_cm.h>
 * cannot be included beside <rdma/rdma_cma.h>). */
enum { CMD_CREATE_ID = 0, CMD_DESTROY_ID = 1, CMD_GET_OPTION = 13,
       CMD_JOIN_IP_MCAST = 16 };
struct ucm_hdr { uint32_t cmd; uint16_t in, out; };
struct ucm_create_id { uint64_t uid, response; uint16_t ps; uint8_t qp_type, rsvd[5]; };
struct ucm_destroy_id { uint64_t response; uint32_t id, rsvd; };
struct ucm_create_id_resp { uint32_t id; };

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
	w.hdr.cmd = CMD_JOIN_IP_MCAST;                /* not yet */
	assert_int_equal(write(ch->fd, &w, sizeof(w)), -1);
	assert_int_equal(errno, ENOSYS);
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bind_twice),
		cmocka_unit_test(test_resolve_not_here),
		cmocka_unit_test(test_connect_refused),
		cmocka_unit_test(test_reject_with_data),
		cmocka_unit_test(test_disconnect_timewait),
		cmocka_unit_test(test_peer_killed),
		cmocka_unit_test(test_nonblocking_channel),
		cmocka_unit_test(test_bad_writes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: MIT
/*
 * RDMA netlink (docs/DESIGN.md, "RDMA netlink"), as a program that speaks
 * it sees it under `softverbs run` (netlink.sh runs this): the socket calls
 * with the kernel's addresses and options; the NLDEV answers (device, port,
 * system, resource summary) with what verbs say of sv0; the kernel's rules
 * for a request: acks, NLMSG_ERROR with the request echoed or capped, the
 * extended ack's message, malformed messages and attributes, dumps and
 * their NLMSG_DONE; answers queued before send() returns; and a daemon
 * that outlives a client sending garbage or never reading.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_netlink.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

static uint32_t seq = 1;

static int nl_open(void)
{
	struct sockaddr_nl a = { .nl_family = AF_NETLINK };
	int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);

	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	return s;
}

/* A request being built. */
struct req {
	union {
		struct nlmsghdr h;
		uint8_t b[256];
	};
};

static void req_init(struct req *r, uint32_t cmd, uint16_t flags)
{
	memset(r, 0, sizeof(*r));
	r->h.nlmsg_len = NLMSG_HDRLEN;
	r->h.nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd);
	r->h.nlmsg_flags = NLM_F_REQUEST | flags;
	r->h.nlmsg_seq = ++seq;
}

static void req_attr(struct req *r, uint16_t type, const void *v, uint16_t len)
{
	struct nlattr a = { .nla_len = (uint16_t)(NLA_HDRLEN + len), .nla_type = type };

	memcpy(r->b + r->h.nlmsg_len, &a, sizeof(a));
	memcpy(r->b + r->h.nlmsg_len + NLA_HDRLEN, v, len);
	r->h.nlmsg_len += NLA_ALIGN(a.nla_len);
}

static void req_u32(struct req *r, uint16_t type, uint32_t v)
{
	req_attr(r, type, &v, sizeof(v));
}

static void send_req(int s, const struct req *r)
{
	struct sockaddr_nl k = { .nl_family = AF_NETLINK };

	assert_int_equal(sendto(s, r->b, r->h.nlmsg_len, 0, (struct sockaddr *)&k,
				sizeof(k)), r->h.nlmsg_len);
}

/* One datagram, waited for (bounded): its length, or -errno. */
static ssize_t recv_dgram(int s, void *buf, size_t len, int flags)
{
	struct sockaddr_nl from;
	struct iovec iov = { buf, len };
	struct msghdr m = { .msg_name = &from, .msg_namelen = sizeof(from),
			    .msg_iov = &iov, .msg_iovlen = 1 };
	struct pollfd p = { .fd = s, .events = POLLIN };
	ssize_t n;

	if (!(flags & MSG_DONTWAIT) && poll(&p, 1, 10000) != 1)
		return -ETIMEDOUT;
	n = recvmsg(s, &m, flags);
	if (n < 0)
		return -errno;
	assert_int_equal(m.msg_namelen, sizeof(struct sockaddr_nl));
	assert_int_equal(from.nl_family, AF_NETLINK);
	assert_int_equal(from.nl_pid, 0);
	return n;
}

/* The attribute of type t in message h, or NULL. */
static const struct nlattr *attr(const struct nlmsghdr *h, uint16_t t)
{
	const uint8_t *p = (const uint8_t *)h + NLMSG_HDRLEN;
	size_t left = h->nlmsg_len - NLMSG_HDRLEN;

	while (left >= NLA_HDRLEN) {
		const struct nlattr *a = (const struct nlattr *)p;

		assert_true(a->nla_len >= NLA_HDRLEN && a->nla_len <= left);
		if ((a->nla_type & NLA_TYPE_MASK) == t)
			return a;
		if ((size_t)NLA_ALIGN(a->nla_len) >= left)
			break;
		p += NLA_ALIGN(a->nla_len);
		left -= NLA_ALIGN(a->nla_len);
	}
	return NULL;
}

static const void *data(const struct nlattr *a)
{
	assert_non_null(a);
	return (const uint8_t *)a + NLA_HDRLEN;
}

static uint32_t u32_of(const struct nlmsghdr *h, uint16_t t)
{
	uint32_t v;

	memcpy(&v, data(attr(h, t)), sizeof(v));
	return v;
}

static uint64_t u64_of(const struct nlmsghdr *h, uint16_t t)
{
	uint64_t v;

	memcpy(&v, data(attr(h, t)), sizeof(v));
	return v;
}

static uint8_t u8_of(const struct nlmsghdr *h, uint16_t t)
{
	return *(const uint8_t *)data(attr(h, t));
}

static uint32_t portid_of(int s)
{
	struct sockaddr_nl a;
	socklen_t l = sizeof(a);

	assert_int_equal(getsockname(s, (struct sockaddr *)&a, &l), 0);
	assert_int_equal(l, sizeof(a));
	assert_int_equal(a.nl_family, AF_NETLINK);
	return a.nl_pid;
}

/* The next message must be NLMSG_ERROR for r with error err: its
 * nlmsgerr. */
static void expect_error(int s, const struct req *r, int err, bool echoed)
{
	uint32_t buf[2048];
	const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
	struct nlmsgerr e;
	ssize_t n = recv_dgram(s, buf, sizeof(buf), 0);

	assert_true(n >= (ssize_t)(NLMSG_HDRLEN + sizeof(e)));
	assert_int_equal(h->nlmsg_type, NLMSG_ERROR);
	assert_int_equal(h->nlmsg_seq, r->h.nlmsg_seq);
	assert_int_equal(h->nlmsg_pid, portid_of(s));
	memcpy(&e, (const uint8_t *)h + NLMSG_HDRLEN, sizeof(e));
	assert_int_equal(e.error, err);
	assert_int_equal(e.msg.nlmsg_seq, r->h.nlmsg_seq);
	assert_int_equal(e.msg.nlmsg_type, r->h.nlmsg_type);
	{
		size_t base = NLMSG_HDRLEN + sizeof(int) +
			      NLMSG_ALIGN(echoed ? r->h.nlmsg_len : NLMSG_HDRLEN);

		if (h->nlmsg_flags & NLM_F_ACK_TLVS)
			assert_true(h->nlmsg_len > base);
		else
			assert_int_equal(h->nlmsg_len, base);
	}
	if (echoed)
		assert_memory_equal((const uint8_t *)h + NLMSG_HDRLEN + sizeof(int),
				    r->b, r->h.nlmsg_len);
}

static void expect_nothing(int s)
{
	uint8_t buf[64];

	/* the answer (if any) is queued before send() returns */
	assert_int_equal(recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT), -EAGAIN);
}

static void test_socket(void **st)
{
	int a, b, v = 0;
	socklen_t l = sizeof(v);
	struct sockaddr_nl peer;

	(void)st;
	a = nl_open();
	b = nl_open();
	assert_int_equal(getsockopt(a, SOL_SOCKET, SO_PROTOCOL, &v, &l), 0);
	assert_int_equal(v, NETLINK_RDMA);
	assert_int_equal(getsockopt(a, SOL_SOCKET, SO_DOMAIN, &v, &l), 0);
	assert_int_equal(v, AF_NETLINK);
	/* the pid for the first, as the kernel's autobind */
	assert_int_equal(portid_of(a), (uint32_t)getpid());
	assert_int_not_equal(portid_of(b), portid_of(a));
	l = sizeof(peer);
	assert_int_equal(getpeername(a, (struct sockaddr *)&peer, &l), 0);
	assert_int_equal(peer.nl_family, AF_NETLINK);
	v = 1;
	assert_int_equal(setsockopt(a, SOL_NETLINK, NETLINK_EXT_ACK, &v, sizeof(v)), 0);
	v = 0;
	l = sizeof(v);
	assert_int_equal(getsockopt(a, SOL_NETLINK, NETLINK_EXT_ACK, &v, &l), 0);
	assert_int_equal(v, 1);
	/* only the kernel's port answers */
	peer.nl_pid = 12345;
	assert_int_equal(sendto(a, "x", 1, 0, (struct sockaddr *)&peer,
				sizeof(peer)), -1);
	assert_int_equal(errno, EPERM);
	close(a);
	close(b);
}

static void test_dev(void **st)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	uint32_t buf[2048];
	const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
	struct req r;
	int s = nl_open();
	ssize_t n;

	(void)st;
	assert_non_null(list);
	ctx = ibv_open_device(list[0]);
	assert_non_null(ctx);
	assert_int_equal(ibv_query_device(ctx, &da), 0);
	assert_int_equal(ibv_query_port(ctx, 1, &pa), 0);

	/* a dump: one message, then NLMSG_DONE */
	req_init(&r, RDMA_NLDEV_CMD_GET, NLM_F_DUMP | NLM_F_ACK);
	send_req(s, &r);
	n = recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT);
	assert_true(n > 0);
	assert_int_equal(h->nlmsg_type, RDMA_NL_GET_TYPE(RDMA_NL_NLDEV,
							 RDMA_NLDEV_CMD_GET));
	assert_true(h->nlmsg_flags & NLM_F_MULTI);
	assert_int_equal(h->nlmsg_seq, r.h.nlmsg_seq);
	assert_int_equal(h->nlmsg_pid, portid_of(s));
	assert_string_equal(data(attr(h, RDMA_NLDEV_ATTR_DEV_NAME)),
			    ibv_get_device_name(list[0]));
	assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_DEV_INDEX),
			 (uint32_t)ibv_get_device_index(list[0]));
	assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_PORT_INDEX), da.phys_port_cnt);
	assert_int_equal(u64_of(h, RDMA_NLDEV_ATTR_NODE_GUID), be64toh(da.node_guid));
	assert_int_equal(u64_of(h, RDMA_NLDEV_ATTR_SYS_IMAGE_GUID),
			 be64toh(da.sys_image_guid));
	assert_string_equal(data(attr(h, RDMA_NLDEV_ATTR_FW_VERSION)), da.fw_ver);
	assert_int_equal(u8_of(h, RDMA_NLDEV_ATTR_DEV_NODE_TYPE), 1);
	assert_string_equal(data(attr(h, RDMA_NLDEV_ATTR_DEV_PROTOCOL)), "roce");
	/* NLMSG_DONE in the same datagram or the next */
	if ((size_t)n > NLMSG_ALIGN(h->nlmsg_len)) {
		h = (const struct nlmsghdr *)((const uint8_t *)buf +
					      NLMSG_ALIGN(h->nlmsg_len));
	} else {
		assert_true(recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT) > 0);
	}
	assert_int_equal(h->nlmsg_type, NLMSG_DONE);
	assert_int_equal(h->nlmsg_seq, r.h.nlmsg_seq);
	/* a dump is not acknowledged */
	expect_nothing(s);

	/* the port, asked with an ack: the answer, then the ack */
	req_init(&r, RDMA_NLDEV_CMD_PORT_GET, NLM_F_ACK);
	req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
	req_u32(&r, RDMA_NLDEV_ATTR_PORT_INDEX, 1);
	send_req(s, &r);
	n = recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT);
	h = (const struct nlmsghdr *)buf;
	assert_true(n > 0);
	assert_int_equal(h->nlmsg_type, RDMA_NL_GET_TYPE(RDMA_NL_NLDEV,
							 RDMA_NLDEV_CMD_PORT_GET));
	assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_PORT_INDEX), 1);
	assert_int_equal(u8_of(h, RDMA_NLDEV_ATTR_PORT_STATE), pa.state);
	assert_int_equal(u8_of(h, RDMA_NLDEV_ATTR_PORT_PHYS_STATE), pa.phys_state);
	assert_int_equal(u64_of(h, RDMA_NLDEV_ATTR_CAP_FLAGS) & 0xffffffffu,
			 pa.port_cap_flags);
	expect_error(s, &r, 0, false);

	/* the system */
	req_init(&r, RDMA_NLDEV_CMD_SYS_GET, 0);
	send_req(s, &r);
	assert_true(recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT) > 0);
	assert_int_equal(u8_of(h, RDMA_NLDEV_SYS_ATTR_NETNS_MODE), 1);
	assert_int_equal(u8_of(h, RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK), 1);
	expect_nothing(s);

	close(s);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
}

/* RES_GET's count of name in message h. */
static uint64_t res_count(const struct nlmsghdr *h, const char *name)
{
	const struct nlattr *t = attr(h, RDMA_NLDEV_ATTR_RES_SUMMARY);
	const uint8_t *p = data(t);
	size_t left = t->nla_len - NLA_HDRLEN;

	assert_false(t->nla_type & NLA_F_NESTED);   /* the kernel's _noflag */
	while (left >= NLA_HDRLEN) {
		const struct nlattr *e = (const struct nlattr *)p;
		const uint8_t *q = data(e);
		const struct nlattr *nm = (const struct nlattr *)q;
		const struct nlattr *cur = (const struct nlattr *)(q + NLA_ALIGN(nm->nla_len));
		uint64_t v;

		assert_int_equal(nm->nla_type, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME);
		assert_int_equal(cur->nla_type, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR);
		if (!strcmp(data(nm), name)) {
			memcpy(&v, data(cur), sizeof(v));
			return v;
		}
		p += NLA_ALIGN(e->nla_len);
		left -= NLA_ALIGN(e->nla_len);
	}
	fail_msg("no %s in the summary", name);
	return 0;
}

static void test_res(void **st)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq,
				       .cap = { 1, 1, 1, 1, 0 }, .qp_type = IBV_QPT_RC };
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);
	static char mem[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, mem, sizeof(mem), IBV_ACCESS_LOCAL_WRITE);
	uint32_t buf[2048];
	const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
	struct req r;
	int s = nl_open();

	(void)st;
	assert_non_null(qp);
	assert_non_null(mr);
	assert_non_null(pd2);
	req_init(&r, RDMA_NLDEV_CMD_RES_GET, 0);
	req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
	send_req(s, &r);
	assert_true(recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT) > 0);
	assert_int_equal(h->nlmsg_type, RDMA_NL_GET_TYPE(RDMA_NL_NLDEV,
							 RDMA_NLDEV_CMD_RES_GET));
	/* this test's device is its own (isolated.sh) */
	assert_int_equal(res_count(h, "pd"), 2);
	assert_int_equal(res_count(h, "cq"), 1);
	assert_int_equal(res_count(h, "qp"), 1);
	assert_int_equal(res_count(h, "mr"), 1);
	assert_int_equal(res_count(h, "ctx"), 1);
	assert_int_equal(res_count(h, "srq"), 0);
	assert_int_equal(res_count(h, "cm_id"), 0);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd2);
	req_init(&r, RDMA_NLDEV_CMD_RES_GET, NLM_F_DUMP);
	send_req(s, &r);
	assert_true(recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT) > 0);
	assert_int_equal(res_count(h, "pd"), 1);
	assert_int_equal(res_count(h, "qp"), 0);
	assert_int_equal(res_count(h, "mr"), 0);
	close(s);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
}

/* The kernel's rules for what a request may hold. */
static void test_errors(void **st)
{
	struct req r, r2;
	uint8_t two[2 * 64];
	uint32_t buf[2048];
	const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
	int s = nl_open(), v;
	uint16_t half = 1;
	static uint8_t big[16385];

	(void)st;
	/* no device index; a device that is not there; a malformed index */
	req_init(&r, RDMA_NLDEV_CMD_GET, 0);
	send_req(s, &r);
	expect_error(s, &r, -EINVAL, true);
	req_init(&r, RDMA_NLDEV_CMD_GET, 0);
	req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 7);
	send_req(s, &r);
	expect_error(s, &r, -EINVAL, true);
	req_init(&r, RDMA_NLDEV_CMD_GET, 0);
	req_attr(&r, RDMA_NLDEV_ATTR_DEV_INDEX, &half, sizeof(half));
	send_req(s, &r);
	expect_error(s, &r, -EINVAL, true);
	/* ports 0 and 2 */
	for (uint32_t p = 0; p <= 2; p += 2) {
		req_init(&r, RDMA_NLDEV_CMD_PORT_GET, 0);
		req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
		req_u32(&r, RDMA_NLDEV_ATTR_PORT_INDEX, p);
		send_req(s, &r);
		expect_error(s, &r, -EINVAL, true);
	}
	/* a name without its NUL */
	req_init(&r, RDMA_NLDEV_CMD_GET, 0);
	req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
	req_attr(&r, RDMA_NLDEV_ATTR_DEV_NAME, "sv0", 3);
	send_req(s, &r);
	expect_error(s, &r, -EINVAL, true);
	/* an attribute longer than the message: the walk stops there */
	req_init(&r, RDMA_NLDEV_CMD_GET, 0);
	req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
	r.b[NLMSG_HDRLEN] = 200;
	send_req(s, &r);
	expect_error(s, &r, -EINVAL, true);
	/* unknown command, another client, a dump of a command without one */
	req_init(&r, 200, 0);
	send_req(s, &r);
	expect_error(s, &r, -EINVAL, true);
	req_init(&r, RDMA_NLDEV_CMD_GET, 0);
	r.h.nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_LS, 1);
	send_req(s, &r);
	expect_error(s, &r, -EINVAL, true);
	req_init(&r, RDMA_NLDEV_CMD_SYS_GET, NLM_F_DUMP);
	send_req(s, &r);
	expect_error(s, &r, -EINVAL, true);
	/* not a request: acknowledged only if asked */
	req_init(&r, RDMA_NLDEV_CMD_SYS_GET, 0);
	r.h.nlmsg_flags = 0;
	send_req(s, &r);
	expect_nothing(s);
	r.h.nlmsg_flags = NLM_F_ACK;
	send_req(s, &r);
	expect_error(s, &r, 0, false);
	/* a datagram shorter than a header, a message longer than its
	 * datagram: nothing */
	assert_int_equal(send(s, "abc", 3, 0), 3);
	expect_nothing(s);
	req_init(&r, RDMA_NLDEV_CMD_SYS_GET, NLM_F_ACK);
	r.h.nlmsg_len = 200;
	assert_int_equal(send(s, r.b, NLMSG_HDRLEN, 0), NLMSG_HDRLEN);
	expect_nothing(s);
	/* two messages in one datagram: two answers, in order */
	req_init(&r, RDMA_NLDEV_CMD_GET, 0);
	req_init(&r2, RDMA_NLDEV_CMD_SYS_GET, NLM_F_ACK);
	memcpy(two, r.b, r.h.nlmsg_len);
	memcpy(two + NLMSG_ALIGN(r.h.nlmsg_len), r2.b, r2.h.nlmsg_len);
	assert_int_equal(send(s, two, NLMSG_ALIGN(r.h.nlmsg_len) + r2.h.nlmsg_len, 0),
			 (ssize_t)(NLMSG_ALIGN(r.h.nlmsg_len) + r2.h.nlmsg_len));
	expect_error(s, &r, -EINVAL, true);
	assert_true(recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT) > 0);
	assert_int_equal(h->nlmsg_seq, r2.h.nlmsg_seq);
	expect_error(s, &r2, 0, false);
	/* NETLINK_CAP_ACK: the request is not echoed; NETLINK_EXT_ACK: the
	 * reason comes as NLMSGERR_ATTR_MSG */
	v = 1;
	assert_int_equal(setsockopt(s, SOL_NETLINK, NETLINK_CAP_ACK, &v, sizeof(v)), 0);
	assert_int_equal(setsockopt(s, SOL_NETLINK, NETLINK_EXT_ACK, &v, sizeof(v)), 0);
	req_init(&r, RDMA_NLDEV_CMD_GET, 0);
	send_req(s, &r);
	assert_true(recv_dgram(s, buf, sizeof(buf), MSG_PEEK) > 0);
	assert_true(h->nlmsg_flags & NLM_F_CAPPED);
	assert_true(h->nlmsg_flags & NLM_F_ACK_TLVS);
	{
		const uint8_t *tlv = (const uint8_t *)h + NLMSG_HDRLEN + sizeof(int) +
				     NLMSG_HDRLEN;
		const struct nlattr *a = (const struct nlattr *)tlv;

		assert_int_equal(a->nla_type, NLMSGERR_ATTR_MSG);
		assert_string_equal((const char *)tlv + NLA_HDRLEN,
				    "Device index is missing");
	}
	expect_error(s, &r, -EINVAL, false);
	/* larger than any request the daemon takes */
	assert_int_equal(send(s, big, sizeof(big), 0), -1);
	assert_int_equal(errno, EMSGSIZE);
	/* and the socket still answers */
	req_init(&r, RDMA_NLDEV_CMD_SYS_GET, 0);
	send_req(s, &r);
	assert_true(recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT) > 0);
	assert_int_equal(h->nlmsg_seq, r.h.nlmsg_seq);
	close(s);
}

/* The daemon's socket, spoken to without the preload's manners. */
static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *dir = getenv("SV_TEST_DIR");
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	assert_non_null(dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/rdma_nl", dir);
	assert_true(s >= 0);
	assert_int_equal(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return s;
}

static bool closed_by_daemon(int s)
{
	struct pollfd p = { .fd = s, .events = POLLIN };
	char c[64];

	return poll(&p, 1, 10000) == 1 && recv(s, c, sizeof(c), 0) == 0;
}

static void test_hostile(void **st)
{
	struct req r;
	uint32_t buf[2048];
	int s, p[2], ok = 0, i;

	(void)st;
	/* a hello without the socket it must carry; garbage */
	s = raw_connect();
	assert_int_equal(send(s, "\x53\x56\x4e\x4c\x01\0\0\0", 8, 0), 8);
	assert_true(closed_by_daemon(s));
	close(s);
	s = raw_connect();
	assert_int_equal(send(s, "garbage!garbage!", 16, 0), 16);
	assert_true(closed_by_daemon(s));
	close(s);
	/* a hello carrying a pipe, not a socket */
	s = raw_connect();
	assert_int_equal(pipe(p), 0);
	{
		char cbuf[CMSG_SPACE(sizeof(int))];
		uint32_t h[2] = { 0x4c4e5653u, 1 };
		struct iovec iov = { h, sizeof(h) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &p[1], sizeof(int));
		assert_int_equal(sendmsg(s, &m, 0), sizeof(h));
	}
	assert_true(closed_by_daemon(s));
	close(s);
	close(p[0]);
	close(p[1]);

	/* a program that never reads: its answers wait, up to a bound, then
	 * it is disconnected (its sends fail), and the device goes on */
	s = nl_open();
	for (i = 0; i < 1000; i++) {
		req_init(&r, RDMA_NLDEV_CMD_SYS_GET, 0);
		if (send(s, r.b, r.h.nlmsg_len, 0) < 0) {
			ok = 1;
			break;
		}
	}
	assert_true(ok);
	assert_true(i > 250);
	close(s);
	s = nl_open();
	req_init(&r, RDMA_NLDEV_CMD_SYS_GET, 0);
	send_req(s, &r);
	assert_true(recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT) > 0);
	close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_socket),
		cmocka_unit_test(test_dev),
		cmocka_unit_test(test_res),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_hostile),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

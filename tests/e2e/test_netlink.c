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


/* ---- the per-object resources and the statistics ---- */

/* The attribute of type t inside nest a (a table or an entry), or NULL. */
static const struct nlattr *nested(const struct nlattr *a, uint16_t t)
{
	const uint8_t *p = data(a);
	size_t left = a->nla_len - NLA_HDRLEN;

	while (left >= NLA_HDRLEN) {
		const struct nlattr *x = (const struct nlattr *)p;

		assert_true(x->nla_len >= NLA_HDRLEN && x->nla_len <= left);
		if ((x->nla_type & NLA_TYPE_MASK) == t)
			return x;
		if ((size_t)NLA_ALIGN(x->nla_len) >= left)
			break;
		p += NLA_ALIGN(x->nla_len);
		left -= NLA_ALIGN(x->nla_len);
	}
	return NULL;
}

static uint32_t nu32(const struct nlattr *e, uint16_t t)
{
	uint32_t v;

	memcpy(&v, data(nested(e, t)), sizeof(v));
	return v;
}

static uint64_t nu64(const struct nlattr *e, uint16_t t)
{
	uint64_t v;

	memcpy(&v, data(nested(e, t)), sizeof(v));
	return v;
}

static uint8_t nu8(const struct nlattr *e, uint16_t t)
{
	return *(const uint8_t *)data(nested(e, t));
}

/* Does this process have CAP_NET_ADMIN (keys are shown only then)? */
static bool net_admin(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	unsigned long long caps = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			break;
	fclose(f);
	return (caps >> 12) & 1;
}

#define MAX_ENTRIES 1024

/* A dump's entries, each a copy (entries[i] points into a buffer of its
 * own), and how many datagrams it took. */
struct dump {
	uint8_t *buf[64];
	unsigned int nbuf;
	const struct nlattr *e[MAX_ENTRIES];
	unsigned int n;
};

static void dump_free(struct dump *d)
{
	for (unsigned int i = 0; i < d->nbuf; i++)
		free(d->buf[i]);
	memset(d, 0, sizeof(*d));
}

/* Dump cmd of device 0 (port: 0 none) and collect the entries of table
 * under entry; every message the command's, with the device handle; ends
 * at NLMSG_DONE. */
static void dump_res(int s, uint32_t cmd, uint32_t port, uint16_t table,
		     uint16_t entry, struct dump *d)
{
	struct req r;
	bool done = false;

	memset(d, 0, sizeof(*d));
	req_init(&r, cmd, NLM_F_DUMP);
	req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
	if (port)
		req_u32(&r, RDMA_NLDEV_ATTR_PORT_INDEX, port);
	send_req(s, &r);
	while (!done) {
		uint8_t *buf = malloc(8192);
		ssize_t n;
		size_t off = 0;

		assert_non_null(buf);
		assert_true(d->nbuf < 64);
		d->buf[d->nbuf++] = buf;
		n = recv_dgram(s, buf, 8192, 0);
		assert_true(n > 0);
		assert_true(n <= 3776);   /* NLMSG_GOODSIZE */
		while (off + NLMSG_HDRLEN <= (size_t)n) {
			const struct nlmsghdr *h = (const struct nlmsghdr *)(buf + off);
			const struct nlattr *t;

			assert_int_equal(h->nlmsg_seq, r.h.nlmsg_seq);
			if (h->nlmsg_type == NLMSG_DONE) {
				int st;

				memcpy(&st, (const uint8_t *)h + NLMSG_HDRLEN, sizeof(st));
				assert_int_equal(st, 0);
				done = true;
				break;
			}
			assert_int_equal(h->nlmsg_type, RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd));
			assert_true(h->nlmsg_flags & NLM_F_MULTI);
			assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_DEV_INDEX), 0);
			assert_string_equal(data(attr(h, RDMA_NLDEV_ATTR_DEV_NAME)), "sv0");
			t = attr(h, table);
			assert_non_null(t);
			assert_false(t->nla_type & NLA_F_NESTED); /* _noflag */
			{
				const uint8_t *p = data(t);
				size_t left = t->nla_len - NLA_HDRLEN;

				while (left >= NLA_HDRLEN) {
					const struct nlattr *e = (const struct nlattr *)p;

					assert_int_equal(e->nla_type, entry);
					assert_true(d->n < MAX_ENTRIES);
					d->e[d->n++] = e;
					if ((size_t)NLA_ALIGN(e->nla_len) >= left)
						break;
					p += NLA_ALIGN(e->nla_len);
					left -= NLA_ALIGN(e->nla_len);
				}
			}
			off += NLMSG_ALIGN(h->nlmsg_len);
		}
	}
	expect_nothing(s);
}

/* The entry whose id attribute is id, or NULL. */
static const struct nlattr *find(const struct dump *d, uint16_t id_attr, uint32_t id)
{
	for (unsigned int i = 0; i < d->n; i++) {
		const struct nlattr *a = nested(d->e[i], id_attr);

		if (a && *(const uint32_t *)data(a) == id)
			return d->e[i];
	}
	return NULL;
}

/* A doit of cmd for id (port 0: none): the answer into buf (its message),
 * or the error. */
static int doit(int s, uint32_t cmd, uint32_t port, uint16_t id_attr,
		uint32_t id, uint32_t *buf, size_t len)
{
	struct req r;
	const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
	ssize_t n;

	req_init(&r, cmd, 0);
	req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
	if (port)
		req_u32(&r, RDMA_NLDEV_ATTR_PORT_INDEX, port);
	req_u32(&r, id_attr, id);
	send_req(s, &r);
	n = recv_dgram(s, buf, len, MSG_DONTWAIT);
	assert_true(n > 0);
	if (h->nlmsg_type == NLMSG_ERROR) {
		struct nlmsgerr e;

		memcpy(&e, (const uint8_t *)h + NLMSG_HDRLEN, sizeof(e));
		assert_true(e.error < 0);
		return e.error;
	}
	assert_int_equal(h->nlmsg_type, RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd));
	assert_false(h->nlmsg_flags & NLM_F_MULTI);
	assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_DEV_INDEX), 0);
	/* no table: the attributes directly */
	expect_nothing(s);
	return 0;
}

static void test_res_objects(void **st)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_cq *cq2 = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq,
				       .cap = { 4, 4, 1, 1, 0 }, .qp_type = IBV_QPT_RC };
	struct ibv_qp *qp = ibv_create_qp(pd, &qa), *qp2 = ibv_create_qp(pd, &qa);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	static char mem[8192];
	struct ibv_mr *mr = ibv_reg_mr(pd, mem, sizeof(mem),
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	uint32_t buf[2048], srqn, pdn, cqn = 0, mrn, ctxn;
	const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
	const struct nlattr *e;
	struct dump d;
	bool admin = net_admin();
	int s = nl_open();

	(void)st;
	assert_non_null(qp);
	assert_non_null(qp2);
	assert_non_null(srq);
	assert_non_null(mr);
	assert_non_null(cq2);
	/* qp: INIT, then RTR and RTS against qp2 with known PSNs */
	assert_int_equal(ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	{
		struct ibv_port_attr pa;
		union ibv_gid gid;

		assert_int_equal(ibv_query_port(ctx, 1, &pa), 0);
		assert_int_equal(ibv_query_gid(ctx, 1, 0, &gid), 0);
		memset(&m, 0, sizeof(m));
		m.qp_state = IBV_QPS_RTR;
		m.path_mtu = IBV_MTU_1024;
		m.dest_qp_num = qp2->qp_num;
		m.rq_psn = 0x123;
		m.max_dest_rd_atomic = 1;
		m.min_rnr_timer = 1;
		m.ah_attr.is_global = 1;
		m.ah_attr.grh.dgid = gid;
		m.ah_attr.grh.hop_limit = 1;
		m.ah_attr.port_num = 1;
		assert_int_equal(ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_AV |
					       IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					       IBV_QP_MIN_RNR_TIMER), 0);
		memset(&m, 0, sizeof(m));
		m.qp_state = IBV_QPS_RTS;
		m.sq_psn = 0x456;
		m.timeout = 14;
		m.retry_cnt = 7;
		m.rnr_retry = 7;
		m.max_rd_atomic = 1;
		assert_int_equal(ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_SQ_PSN |
					       IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC), 0);
	}

	/* PDs: ours, with its users (2 QPs, an SRQ, an MR) */
	dump_res(s, RDMA_NLDEV_CMD_RES_PD_GET, 0, RDMA_NLDEV_ATTR_RES_PD,
		 RDMA_NLDEV_ATTR_RES_PD_ENTRY, &d);
	assert_int_equal(d.n, 1);
	e = d.e[0];
	pdn = nu32(e, RDMA_NLDEV_ATTR_RES_PDN);
	ctxn = nu32(e, RDMA_NLDEV_ATTR_RES_CTXN);
	assert_int_not_equal(pdn, 0);
	assert_int_not_equal(ctxn, 0);
	assert_int_equal(nu64(e, RDMA_NLDEV_ATTR_RES_USECNT), 4);
	assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_PID), (uint32_t)getpid());
	assert_int_equal(nested(e, RDMA_NLDEV_ATTR_RES_LOCAL_DMA_LKEY) != NULL, admin);
	assert_null(nested(e, RDMA_NLDEV_ATTR_RES_UNSAFE_GLOBAL_RKEY));
	dump_free(&d);

	/* contexts: ours */
	dump_res(s, RDMA_NLDEV_CMD_RES_CTX_GET, 0, RDMA_NLDEV_ATTR_RES_CTX,
		 RDMA_NLDEV_ATTR_RES_CTX_ENTRY, &d);
	assert_int_equal(d.n, 1);
	assert_int_equal(nu32(d.e[0], RDMA_NLDEV_ATTR_RES_CTXN), ctxn);
	assert_int_equal(nu32(d.e[0], RDMA_NLDEV_ATTR_RES_PID), (uint32_t)getpid());
	dump_free(&d);

	/* CQs: two, cq used by two QPs for sending and receiving */
	dump_res(s, RDMA_NLDEV_CMD_RES_CQ_GET, 0, RDMA_NLDEV_ATTR_RES_CQ,
		 RDMA_NLDEV_ATTR_RES_CQ_ENTRY, &d);
	assert_int_equal(d.n, 2);
	for (unsigned int i = 0; i < 2; i++) {
		e = d.e[i];
		assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_CTXN), ctxn);
		assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_PID), (uint32_t)getpid());
		assert_int_not_equal(nu32(e, RDMA_NLDEV_ATTR_RES_CQN), 0);
		assert_null(nested(e, RDMA_NLDEV_ATTR_RES_POLL_CTX));
		if (nu32(e, RDMA_NLDEV_ATTR_RES_CQE) == (uint32_t)cq->cqe) {
			assert_int_equal(nu64(e, RDMA_NLDEV_ATTR_RES_USECNT), 4);
			cqn = nu32(e, RDMA_NLDEV_ATTR_RES_CQN);
		} else {
			assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_CQE), (uint32_t)cq2->cqe);
			assert_int_equal(nu64(e, RDMA_NLDEV_ATTR_RES_USECNT), 0);
		}
	}
	assert_int_not_equal(nu32(d.e[0], RDMA_NLDEV_ATTR_RES_CQN),
			     nu32(d.e[1], RDMA_NLDEV_ATTR_RES_CQN));
	dump_free(&d);

	/* MRs: keys only with CAP_NET_ADMIN */
	dump_res(s, RDMA_NLDEV_CMD_RES_MR_GET, 0, RDMA_NLDEV_ATTR_RES_MR,
		 RDMA_NLDEV_ATTR_RES_MR_ENTRY, &d);
	assert_int_equal(d.n, 1);
	e = d.e[0];
	if (admin) {
		assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_RKEY), mr->rkey);
		assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_LKEY), mr->lkey);
	} else {
		assert_null(nested(e, RDMA_NLDEV_ATTR_RES_RKEY));
	}
	assert_int_equal(nu64(e, RDMA_NLDEV_ATTR_RES_MRLEN), sizeof(mem));
	assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_PDN), pdn);
	assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_PID), (uint32_t)getpid());
	mrn = nu32(e, RDMA_NLDEV_ATTR_RES_MRN);
	assert_int_not_equal(mrn, 0);
	dump_free(&d);

	/* SRQs: a basic one, no CQ; no QP uses it */
	dump_res(s, RDMA_NLDEV_CMD_RES_SRQ_GET, 0, RDMA_NLDEV_ATTR_RES_SRQ,
		 RDMA_NLDEV_ATTR_RES_SRQ_ENTRY, &d);
	assert_int_equal(d.n, 1);
	e = d.e[0];
	srqn = nu32(e, RDMA_NLDEV_ATTR_RES_SRQN);
	{
		uint32_t num;

		assert_int_equal(ibv_get_srq_num(srq, &num), 0);
		(void)num;         /* a basic SRQ's number is the device's own */
	}
	assert_int_equal(nu8(e, RDMA_NLDEV_ATTR_RES_TYPE), IBV_SRQT_BASIC);
	assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_PDN), pdn);
	assert_null(nested(e, RDMA_NLDEV_ATTR_RES_CQN));
	assert_non_null(nested(e, RDMA_NLDEV_ATTR_RES_QP));
	assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_PID), (uint32_t)getpid());
	dump_free(&d);

	/* QPs: qp on port 1 in RTS with its PSNs; qp2 in RESET, no port */
	dump_res(s, RDMA_NLDEV_CMD_RES_QP_GET, 0, RDMA_NLDEV_ATTR_RES_QP,
		 RDMA_NLDEV_ATTR_RES_QP_ENTRY, &d);
	assert_int_equal(d.n, 2);
	e = find(&d, RDMA_NLDEV_ATTR_RES_LQPN, qp->qp_num);
	assert_non_null(e);
	assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_PORT_INDEX), 1);
	assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_RQPN), qp2->qp_num);
	assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_RQ_PSN), 0x123);
	assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_SQ_PSN), 0x456);
	assert_int_equal(nu8(e, RDMA_NLDEV_ATTR_RES_TYPE), IBV_QPT_RC);
	assert_int_equal(nu8(e, RDMA_NLDEV_ATTR_RES_STATE), IBV_QPS_RTS);
	assert_int_equal(nu8(e, RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE), IBV_MIG_MIGRATED);
	assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_PDN), pdn);
	assert_int_equal(nu32(e, RDMA_NLDEV_ATTR_RES_PID), (uint32_t)getpid());
	/* the kernel's order: port, LQPN, PDN, PID, then the query's */
	assert_int_equal(((const struct nlattr *)data(e))->nla_type,
			 RDMA_NLDEV_ATTR_PORT_INDEX);
	e = find(&d, RDMA_NLDEV_ATTR_RES_LQPN, qp2->qp_num);
	assert_non_null(e);
	assert_null(nested(e, RDMA_NLDEV_ATTR_PORT_INDEX));
	assert_int_equal(nu8(e, RDMA_NLDEV_ATTR_RES_STATE), IBV_QPS_RESET);
	dump_free(&d);
	/* a port filter: qp2 has none yet */
	dump_res(s, RDMA_NLDEV_CMD_RES_QP_GET, 1, RDMA_NLDEV_ATTR_RES_QP,
		 RDMA_NLDEV_ATTR_RES_QP_ENTRY, &d);
	assert_int_equal(d.n, 1);
	assert_int_equal(nu32(d.e[0], RDMA_NLDEV_ATTR_RES_LQPN), qp->qp_num);
	dump_free(&d);

	/* doits: the entry's attributes directly */
	assert_int_equal(doit(s, RDMA_NLDEV_CMD_RES_QP_GET, 1, RDMA_NLDEV_ATTR_RES_LQPN,
			      qp->qp_num, buf, sizeof(buf)), 0);
	assert_null(attr(h, RDMA_NLDEV_ATTR_RES_QP));
	assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_RES_LQPN), qp->qp_num);
	assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_RES_SQ_PSN), 0x456);
	assert_int_equal(u8_of(h, RDMA_NLDEV_ATTR_RES_STATE), IBV_QPS_RTS);
	/* qp2 is on no port: filtered out, as the kernel's -EAGAIN */
	assert_int_equal(doit(s, RDMA_NLDEV_CMD_RES_QP_GET, 1, RDMA_NLDEV_ATTR_RES_LQPN,
			      qp2->qp_num, buf, sizeof(buf)), -EAGAIN);
	/* a QP is per port, the others per device */
	assert_int_equal(doit(s, RDMA_NLDEV_CMD_RES_QP_GET, 0, RDMA_NLDEV_ATTR_RES_LQPN,
			      qp->qp_num, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(doit(s, RDMA_NLDEV_CMD_RES_PD_GET, 1, RDMA_NLDEV_ATTR_RES_PDN,
			      pdn, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(doit(s, RDMA_NLDEV_CMD_RES_PD_GET, 0, RDMA_NLDEV_ATTR_RES_PDN,
			      pdn, buf, sizeof(buf)), 0);
	assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_RES_PDN), pdn);
	assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_RES_PID), (uint32_t)getpid());
	assert_int_equal(doit(s, RDMA_NLDEV_CMD_RES_CQ_GET, 0, RDMA_NLDEV_ATTR_RES_CQN,
			      cqn, buf, sizeof(buf)), 0);
	assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_RES_CQE), (uint32_t)cq->cqe);
	assert_int_equal(doit(s, RDMA_NLDEV_CMD_RES_MR_GET, 0, RDMA_NLDEV_ATTR_RES_MRN,
			      mrn, buf, sizeof(buf)), 0);
	assert_int_equal(u64_of(h, RDMA_NLDEV_ATTR_RES_MRLEN), sizeof(mem));
	assert_int_equal(doit(s, RDMA_NLDEV_CMD_RES_CTX_GET, 0, RDMA_NLDEV_ATTR_RES_CTXN,
			      ctxn, buf, sizeof(buf)), 0);
	assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_RES_PID), (uint32_t)getpid());
	assert_int_equal(doit(s, RDMA_NLDEV_CMD_RES_SRQ_GET, 0, RDMA_NLDEV_ATTR_RES_SRQN,
			      srqn, buf, sizeof(buf)), 0);
	assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_RES_SRQN), srqn);
	/* ids that no object has: ENOENT, as rdma_restrack_get_byid */
	assert_int_equal(doit(s, RDMA_NLDEV_CMD_RES_QP_GET, 1, RDMA_NLDEV_ATTR_RES_LQPN,
			      0xfffffe, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(doit(s, RDMA_NLDEV_CMD_RES_PD_GET, 0, RDMA_NLDEV_ATTR_RES_PDN,
			      pdn + 1000, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(doit(s, RDMA_NLDEV_CMD_RES_MR_GET, 0, RDMA_NLDEV_ATTR_RES_MRN,
			      mrn + 1000, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(doit(s, RDMA_NLDEV_CMD_RES_CM_ID_GET, 1, RDMA_NLDEV_ATTR_RES_CM_IDN,
			      77, buf, sizeof(buf)), -ENOENT);
	/* no cm ids */
	dump_res(s, RDMA_NLDEV_CMD_RES_CM_ID_GET, 0, RDMA_NLDEV_ATTR_RES_CM_ID,
		 RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY, &d);
	assert_int_equal(d.n, 0);
	dump_free(&d);
	/* no device index: EINVAL, a dump too */
	{
		struct req r;

		int stv;

		/* a dump's error comes in its NLMSG_DONE, as netlink_dump */
		req_init(&r, RDMA_NLDEV_CMD_RES_QP_GET, NLM_F_DUMP);
		send_req(s, &r);
		assert_true(recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT) > 0);
		assert_int_equal(h->nlmsg_type, NLMSG_DONE);
		memcpy(&stv, (const uint8_t *)h + NLMSG_HDRLEN, sizeof(stv));
		assert_int_equal(stv, -EINVAL);
		expect_nothing(s);
		req_init(&r, RDMA_NLDEV_CMD_RES_MR_GET, 0);
		req_u32(&r, RDMA_NLDEV_ATTR_RES_MRN, mrn);
		send_req(s, &r);
		expect_error(s, &r, -EINVAL, true);
		/* a missing id attribute */
		req_init(&r, RDMA_NLDEV_CMD_RES_MR_GET, 0);
		req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
		send_req(s, &r);
		expect_error(s, &r, -EINVAL, true);
	}

	close(s);
	ibv_destroy_qp(qp);
	ibv_destroy_qp(qp2);
	ibv_destroy_srq(srq);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_destroy_cq(cq2);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
}

/* 300 QPs: the table takes several parts; each QPN arrives once */
static void test_res_many(void **st)
{
	enum { N = 300 };
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq,
				       .cap = { 1, 1, 1, 1, 0 }, .qp_type = IBV_QPT_UD };
	static struct ibv_qp *qp[N];
	struct dump d;
	int s = nl_open();

	(void)st;
	for (int i = 0; i < N; i++) {
		qp[i] = ibv_create_qp(pd, &qa);
		assert_non_null(qp[i]);
	}
	dump_res(s, RDMA_NLDEV_CMD_RES_QP_GET, 0, RDMA_NLDEV_ATTR_RES_QP,
		 RDMA_NLDEV_ATTR_RES_QP_ENTRY, &d);
	assert_int_equal(d.n, N);
	assert_true(d.nbuf > 2);  /* several parts, then (maybe) NLMSG_DONE */
	for (int i = 0; i < N; i++) {
		unsigned int seen = 0;

		for (unsigned int j = 0; j < d.n; j++)
			seen += nu32(d.e[j], RDMA_NLDEV_ATTR_RES_LQPN) == qp[i]->qp_num;
		assert_int_equal(seen, 1);
	}
	for (unsigned int j = 0; j < d.n; j++) {
		/* UD: no RQPN, RQ_PSN, PATH_MIG_STATE */
		assert_null(nested(d.e[j], RDMA_NLDEV_ATTR_RES_RQPN));
		assert_null(nested(d.e[j], RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE));
		assert_int_equal(nu8(d.e[j], RDMA_NLDEV_ATTR_RES_TYPE), IBV_QPT_UD);
	}
	dump_free(&d);
	/* a port filter drops them all (RESET: no port): nothing but DONE */
	dump_res(s, RDMA_NLDEV_CMD_RES_QP_GET, 1, RDMA_NLDEV_ATTR_RES_QP,
		 RDMA_NLDEV_ATTR_RES_QP_ENTRY, &d);
	assert_int_equal(d.n, 0);
	dump_free(&d);
	for (int i = 0; i < N; i++)
		ibv_destroy_qp(qp[i]);
	close(s);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
}

/* The port's counters: the hw_counters of the device view, by name */
static void test_stat(void **st)
{
	uint32_t buf[2048];
	const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
	struct req r;
	const struct nlattr *t;
	unsigned int n = 0;
	int s = nl_open();

	(void)st;
	req_init(&r, RDMA_NLDEV_CMD_STAT_GET, NLM_F_ACK);
	req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
	req_u32(&r, RDMA_NLDEV_ATTR_PORT_INDEX, 1);
	send_req(s, &r);
	assert_true(recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT) > 0);
	assert_int_equal(h->nlmsg_type, RDMA_NL_GET_TYPE(RDMA_NL_NLDEV,
							 RDMA_NLDEV_CMD_STAT_GET));
	assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_PORT_INDEX), 1);
	t = attr(h, RDMA_NLDEV_ATTR_STAT_HWCOUNTERS);
	assert_non_null(t);
	assert_true(t->nla_type & NLA_F_NESTED);  /* nla_nest_start */
	{
		const uint8_t *p = data(t);
		size_t left = t->nla_len - NLA_HDRLEN;

		while (left >= NLA_HDRLEN) {
			const struct nlattr *e = (const struct nlattr *)p;
			const char *name = data(nested(e, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME));
			char path[256], val[64];
			FILE *f;

			snprintf(path, sizeof(path),
				 "/sys/class/infiniband/sv0/ports/1/hw_counters/%s", name);
			f = fopen(path, "re");
			assert_non_null(f);
			assert_non_null(fgets(val, sizeof(val), f));
			fclose(f);
			/* idle device: the file says what the message says */
			assert_int_equal(strtoull(val, NULL, 10),
					 nu64(e, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE));
			n++;
			if ((size_t)NLA_ALIGN(e->nla_len) >= left)
				break;
			p += NLA_ALIGN(e->nla_len);
			left -= NLA_ALIGN(e->nla_len);
		}
	}
	assert_true(n > 10);
	expect_error(s, &r, 0, false);
	/* no port: EINVAL; the mode: none */
	req_init(&r, RDMA_NLDEV_CMD_STAT_GET, 0);
	req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
	send_req(s, &r);
	expect_error(s, &r, -EINVAL, true);
	req_init(&r, RDMA_NLDEV_CMD_STAT_GET, 0);
	req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
	req_u32(&r, RDMA_NLDEV_ATTR_PORT_INDEX, 1);
	req_u32(&r, RDMA_NLDEV_ATTR_STAT_RES, RDMA_NLDEV_ATTR_RES_QP);
	req_u32(&r, RDMA_NLDEV_ATTR_STAT_MODE, 0);
	send_req(s, &r);
	assert_true(recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT) > 0);
	assert_int_equal(u32_of(h, RDMA_NLDEV_ATTR_STAT_MODE), RDMA_COUNTER_MODE_NONE);
	/* the bound counters: none, only NLMSG_DONE */
	req_init(&r, RDMA_NLDEV_CMD_STAT_GET, NLM_F_DUMP);
	req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
	req_u32(&r, RDMA_NLDEV_ATTR_STAT_RES, RDMA_NLDEV_ATTR_RES_QP);
	send_req(s, &r);
	assert_true(recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT) > 0);
	assert_int_equal(h->nlmsg_type, NLMSG_DONE);
	expect_nothing(s);
	/* the counters' status: as many, with their indexes */
	req_init(&r, RDMA_NLDEV_CMD_STAT_GET_STATUS, 0);
	req_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
	req_u32(&r, RDMA_NLDEV_ATTR_PORT_INDEX, 1);
	send_req(s, &r);
	assert_true(recv_dgram(s, buf, sizeof(buf), MSG_DONTWAIT) > 0);
	assert_int_equal(h->nlmsg_type, RDMA_NL_GET_TYPE(RDMA_NL_NLDEV,
							 RDMA_NLDEV_CMD_STAT_GET_STATUS));
	assert_non_null(attr(h, RDMA_NLDEV_ATTR_STAT_HWCOUNTERS));
	close(s);
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
		cmocka_unit_test(test_res_objects),
		cmocka_unit_test(test_res_many),
		cmocka_unit_test(test_stat),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_hostile),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

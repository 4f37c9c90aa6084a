// SPDX-License-Identifier: MIT
/*
 * The RDMA netlink socket (device/nl/nl.h, abi/sv_nl.h): connections from
 * the preload, requests taken with the kernel's rules, answers queued as
 * the kernel queues them on a netlink socket.
 *
 * A request datagram holds one or more messages. Each is taken as
 * netlink_rcv_skb takes it: a message shorter than its header or longer
 * than what is left ends the datagram; one without NLM_F_REQUEST, or a
 * control message, is only acknowledged (if it asks); otherwise the NLDEV
 * command runs. A command's error, or NLM_F_ACK, gets NLMSG_ERROR with the
 * request's header (and its payload on an error, unless NETLINK_CAP_ACK),
 * and the reason as NLMSGERR_ATTR_MSG under NETLINK_EXT_ACK. A dump
 * (NLM_F_DUMP) answers in records of at most SV_NL_GOODSIZE bytes, the
 * last ending with NLMSG_DONE; it is never acknowledged, and continues as
 * the program reads, one at a time per socket (a second is EBUSY).
 *
 * Answers go out with MSG_DONTWAIT; what does not fit waits in the
 * connection's queue for EPOLLOUT. A program that never reads has at most
 * SV_NL_MAX_QUEUE records waiting; past that it is disconnected, so no
 * connection holds the daemon's memory or its thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "abi/sv_nl.h"
#include "abi/sv_sock.h"
#include "device/nl/nl.h"
#include "device/sv_dev.h"

/* the kernel's NLMSG_GOODSIZE on 4 KiB pages: a page less an skb's share */
#define SV_NL_GOODSIZE   3776u
#define SV_NL_MAX_QUEUE  256u
#define SV_NL_MAX_CONNS  1024u

struct rec {
	struct rec *next;
	size_t len;
	uint8_t data[];
};

struct sv_nl_conn {
	struct sv_nl_conn *next, *prev;
	int req, out;
	pid_t pid;
	uid_t uid;
	bool net_admin;
	void *tags[2];
	struct rec *head, *tail;
	uint32_t nq;
	struct {                   /* the dump under way */
		bool on;
		uint8_t *msg;      /* its request, kept for each part */
		uint32_t portid, flags;
		uint64_t cursor[2];
	} dump;
};

static struct {
	int listen_fd;
	char path[300];
	struct sv_nl_conn conns;   /* list head */
	uint32_t nconns;
} n = { .listen_fd = -1, .conns = { .next = &n.conns, .prev = &n.conns } };

int sv_nl_listen_fd(void)
{
	return n.listen_fd;
}

uint32_t sv_nl_nconns(void)
{
	return n.nconns;
}

int sv_nl_req_fd(const struct sv_nl_conn *c)
{
	return c->req;
}

int sv_nl_out_fd(const struct sv_nl_conn *c)
{
	return c->out;
}

void **sv_nl_tags(struct sv_nl_conn *c)
{
	return c->tags;
}

bool sv_nl_wants_out(const struct sv_nl_conn *c)
{
	return c->out >= 0 && (c->head || c->dump.on);
}

int sv_nl_start(const char *sock_path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int ret = sv_sock_sibling(sock_path, SV_NL_SOCK_NAME, n.path, sizeof(n.path));
	mode_t um;

	if (ret || strlen(n.path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	unlink(n.path);
	n.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (n.listen_fd < 0)
		return -errno;
	memcpy(sa.sun_path, n.path, strlen(n.path) + 1);
	um = umask(0177);          /* 0600 as it is bound */
	ret = bind(n.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
	umask(um);
	if (ret || listen(n.listen_fd, 128)) {
		ret = ret ? ret : -errno;
		close(n.listen_fd);
		n.listen_fd = -1;
		unlink(n.path);
		return ret;
	}
	return 0;
}

void sv_nl_stop(void)
{
	while (n.conns.next != &n.conns)
		sv_nl_close(n.conns.next);
	if (n.listen_fd >= 0) {
		close(n.listen_fd);
		n.listen_fd = -1;
		unlink(n.path);
	}
}

/* Does process pid have CAP_NET_ADMIN (its effective set, as
 * /proc/PID/status says; uid 0 where that cannot be read)? */
static bool net_admin(pid_t pid, uid_t uid)
{
	char path[64], line[256];
	bool ret = uid == 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return ret;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long caps;

		if (sscanf(line, "CapEff: %llx", &caps) == 1) {
			ret = (caps >> 12) & 1;   /* CAP_NET_ADMIN */
			break;
		}
	}
	fclose(f);
	return ret;
}

struct sv_nl_conn *sv_nl_accept(void)
{
	struct sv_nl_conn *c;
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	int s;

	for (;;) {
		s = accept4(n.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (s < 0)
			return NULL;
		if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &crl) ||
		    (cr.uid != geteuid() && cr.uid != 0) ||
		    n.nconns >= SV_NL_MAX_CONNS) {
			sv_log(SV_LOG_WARN, "netlink: connection refused (%s)",
			       n.nconns >= SV_NL_MAX_CONNS ? "too many" :
			       "another uid");
			close(s);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(s);
			continue;
		}
		c->req = s;
		c->out = -1;       /* until the hello brings it */
		c->pid = cr.pid;
		c->uid = cr.uid;
		c->net_admin = net_admin(cr.pid, cr.uid);
		c->next = &n.conns;
		c->prev = n.conns.prev;
		n.conns.prev->next = c;
		n.conns.prev = c;
		n.nconns++;
		return c;
	}
}

/* The first message: the hello with the program's end of the pair. */
static bool hello(struct sv_nl_conn *c)
{
	struct sv_nl_hello h;
	int fd = -1;
	ssize_t len = sv_recv_msg(c->req, &h, sizeof(h), &fd, MSG_DONTWAIT);
	int type = 0, dom = 0;
	socklen_t tl = sizeof(type), dl = sizeof(dom);

	if (len != sizeof(h) || h.magic != SV_NL_MAGIC ||
	    h.version != SV_NL_VERSION || fd < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) ||
	    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl) ||
	    type != SOCK_SEQPACKET || dom != AF_UNIX) {
		if (len == -EAGAIN)
			return true;
		if (fd >= 0)
			close(fd);
		sv_log(SV_LOG_WARN, "netlink: pid %d: bad hello: disconnected",
		       (int)c->pid);
		return false;
	}
	c->out = fd;
	return !sv_send_msg(c->req, &h, sizeof(h), -1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void sv_nl_close(struct sv_nl_conn *c)
{
	c->prev->next = c->next;
	c->next->prev = c->prev;
	n.nconns--;
	while (c->head) {
		struct rec *r = c->head;

		c->head = r->next;
		free(r);
	}
	free(c->dump.msg);
	close(c->req);
	if (c->out >= 0)
		close(c->out);
	free(c);
}

/* ---- the message builder ---- */

static void *room(struct sv_nlb *b, size_t len)
{
	void *p;

	if (b->full || len > b->cap - b->len) {
		b->full = true;
		return NULL;
	}
	p = b->buf + b->len;
	memset(p, 0, len);
	b->len += len;
	return p;
}

static long msg_start(struct sv_nlb *b, uint16_t type, uint16_t flags,
		      uint32_t seq, uint32_t portid)
{
	size_t at = b->len;
	struct nlmsghdr *h = room(b, NLMSG_HDRLEN);

	if (!h)
		return -1;
	h->nlmsg_type = type;
	h->nlmsg_flags = flags;
	h->nlmsg_seq = seq;
	h->nlmsg_pid = portid;
	return (long)at;
}

long sv_nlb_msg(struct sv_nlb *b, const struct sv_nl_ctx *ctx, uint32_t cmd,
		uint16_t flags)
{
	return msg_start(b, RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd), flags,
			 ctx->nlh->nlmsg_seq, ctx->portid);
}

void sv_nlb_msg_end(struct sv_nlb *b, long at)
{
	struct nlmsghdr h;

	memcpy(&h, b->buf + at, sizeof(h));
	h.nlmsg_len = (uint32_t)(b->len - (size_t)at);
	memcpy(b->buf + at, &h, sizeof(h));
}

void sv_nlb_put(struct sv_nlb *b, uint16_t type, const void *v, size_t len)
{
	struct nlattr a = { .nla_len = (uint16_t)(NLA_HDRLEN + len),
			    .nla_type = type };
	uint8_t *p;

	if (len > 0xffff - NLA_HDRLEN) {
		b->full = true;
		return;
	}
	p = room(b, NLA_ALIGN(NLA_HDRLEN + len));
	if (!p)
		return;
	memcpy(p, &a, sizeof(a));
	if (len)
		memcpy(p + NLA_HDRLEN, v, len);
}

void sv_nlb_u8(struct sv_nlb *b, uint16_t type, uint8_t v)
{
	sv_nlb_put(b, type, &v, sizeof(v));
}

void sv_nlb_u32(struct sv_nlb *b, uint16_t type, uint32_t v)
{
	sv_nlb_put(b, type, &v, sizeof(v));
}

void sv_nlb_u64(struct sv_nlb *b, uint16_t type, uint64_t v)
{
	sv_nlb_put(b, type, &v, sizeof(v));
}

void sv_nlb_str(struct sv_nlb *b, uint16_t type, const char *s)
{
	sv_nlb_put(b, type, s, strlen(s) + 1);
}

long sv_nlb_nest(struct sv_nlb *b, uint16_t type)
{
	size_t at = b->len;

	/* as the kernel's nla_nest_start_noflag: nldev's tables carry no
	 * NLA_F_NESTED */
	sv_nlb_put(b, type, NULL, 0);
	return b->full ? -1 : (long)at;
}

void sv_nlb_nest_end(struct sv_nlb *b, long at)
{
	struct nlattr a;

	if (at < 0 || b->full)
		return;
	memcpy(&a, b->buf + at, sizeof(a));
	a.nla_len = (uint16_t)(b->len - (size_t)at);
	memcpy(b->buf + at, &a, sizeof(a));
}

/* ---- requests ---- */

int sv_nl_attr_u32(const struct sv_nl_ctx *ctx, int type, uint32_t *v)
{
	const struct nlattr *a = ctx->tb[type];

	if (!a)
		return -ENOENT;
	if (a->nla_len != NLA_HDRLEN + sizeof(uint32_t))
		return -EINVAL;
	memcpy(v, (const uint8_t *)a + NLA_HDRLEN, sizeof(*v));
	return 0;
}

/* The attributes after the header, as nlmsg_parse_deprecated takes them:
 * up to the first that does not fit; unknown types ignored; a string
 * attribute must hold its NUL. */
static int parse(struct sv_nl_ctx *ctx)
{
	const uint8_t *p = (const uint8_t *)ctx->nlh + NLMSG_HDRLEN;
	size_t left = ctx->nlh->nlmsg_len - NLMSG_HDRLEN;

	memset(ctx->tb, 0, sizeof(ctx->tb));
	while (left >= NLA_HDRLEN) {
		struct nlattr a;
		unsigned int t;

		memcpy(&a, p, sizeof(a));
		if (a.nla_len < NLA_HDRLEN || a.nla_len > left)
			break;
		t = a.nla_type & NLA_TYPE_MASK;
		if (t < RDMA_NLDEV_ATTR_MAX) {
			if ((t == RDMA_NLDEV_ATTR_DEV_NAME ||
			     t == RDMA_NLDEV_ATTR_NDEV_NAME ||
			     t == RDMA_NLDEV_ATTR_LINK_TYPE) &&
			    (a.nla_len == NLA_HDRLEN ||
			     !memchr(p + NLA_HDRLEN, 0, a.nla_len - NLA_HDRLEN))) {
				ctx->why = "Attribute string is not terminated";
				return -EINVAL;
			}
			ctx->tb[t] = (const struct nlattr *)p;
		}
		if ((size_t)NLA_ALIGN(a.nla_len) >= left)
			break;
		p += NLA_ALIGN(a.nla_len);
		left -= NLA_ALIGN(a.nla_len);
	}
	return 0;
}

static void queue(struct sv_nl_conn *c, const void *data, size_t len)
{
	struct rec *r;

	if (c->nq >= SV_NL_MAX_QUEUE) {
		c->nq++;           /* over: sv_nl_output drops the connection */
		return;
	}
	r = malloc(sizeof(*r) + len);
	if (!r) {
		c->nq = SV_NL_MAX_QUEUE + 1;
		return;
	}
	r->next = NULL;
	r->len = len;
	memcpy(r->data, data, len);
	if (c->tail)
		c->tail->next = r;
	else
		c->head = r;
	c->tail = r;
	c->nq++;
}

/* NLMSG_ERROR for nlh: err (0 is an ack), as netlink_ack writes it. */
static void ack(struct sv_nl_conn *c, const struct nlmsghdr *nlh, uint32_t portid,
		uint32_t flags, int err, const char *why)
{
	uint8_t buf[SV_NL_MAX_REQ + 512];
	struct sv_nlb b = { .buf = buf, .cap = sizeof(buf) };
	bool payload = err && !(flags & SV_NL_F_CAP_ACK);
	bool tlv = (flags & SV_NL_F_EXT_ACK) && why && err;
	uint16_t f = (flags & SV_NL_F_CAP_ACK ? NLM_F_CAPPED : 0) |
		     (tlv ? NLM_F_ACK_TLVS : 0);
	long at = msg_start(&b, NLMSG_ERROR, f, nlh->nlmsg_seq, portid);
	size_t echo = payload ? nlh->nlmsg_len : NLMSG_HDRLEN;
	uint8_t *e = room(&b, sizeof(int) + NLMSG_ALIGN(echo));

	if (at < 0 || !e)
		return;
	memcpy(e, &err, sizeof(int));
	memcpy(e + sizeof(int), nlh, echo);
	if (tlv)
		sv_nlb_str(&b, NLMSGERR_ATTR_MSG, why);
	sv_nlb_msg_end(&b, at);
	queue(c, buf, b.len);
}

/* NLMSG_DONE with a dump's status: false when it does not fit in b. */
static bool done_msg(struct sv_nlb *b, uint32_t seq, uint32_t portid, int st)
{
	size_t keep = b->len;
	long at = msg_start(b, NLMSG_DONE, NLM_F_MULTI, seq, portid);
	uint8_t *p = at < 0 ? NULL : room(b, sizeof(st));

	if (!p) {
		b->len = keep;
		b->full = false;
		return false;
	}
	memcpy(p, &st, sizeof(st));
	sv_nlb_msg_end(b, at);
	return true;
}

/* The dump's next part into the queue, and NLMSG_DONE after its last. */
static void dump_step(struct sv_nl_conn *c)
{
	uint8_t buf[SV_NL_GOODSIZE];
	struct sv_nlb b = { .buf = buf, .cap = sizeof(buf) };
	struct sv_nl_ctx ctx = { .nlh = (const struct nlmsghdr *)c->dump.msg,
				 .portid = c->dump.portid, .pid = c->pid,
				 .net_admin = c->net_admin };
	const struct sv_nl_op *op = sv_nldev_op(ctx.nlh->nlmsg_type & 0x3ff);
	uint32_t seq = ctx.nlh->nlmsg_seq;
	int ret = parse(&ctx);

	if (!ret)
		ret = op->dump(&ctx, &b, c->dump.cursor);
	if (ret == 1 && !b.len)
		ret = -EMSGSIZE;   /* one entry larger than a part */
	b.full = false;
	if (ret != 1) {
		free(c->dump.msg);
		c->dump.msg = NULL;
		c->dump.on = false;
		if (!done_msg(&b, seq, c->dump.portid, ret < 0 ? ret : 0)) {
			queue(c, buf, b.len);
			b.len = 0;
			done_msg(&b, seq, c->dump.portid, ret < 0 ? ret : 0);
		}
	}
	queue(c, buf, b.len);
}

/* One message of a request datagram. */
static void take(struct sv_nl_conn *c, const struct nlmsghdr *nlh,
		 const struct sv_nl_req *q)
{
	struct sv_nl_ctx ctx = { .nlh = nlh, .portid = q->portid, .pid = c->pid,
				 .net_admin = c->net_admin };
	unsigned int client = nlh->nlmsg_type >> 10, cmd = nlh->nlmsg_type & 0x3ff;
	const struct sv_nl_op *op;
	int err = 0;

	if (!(nlh->nlmsg_flags & NLM_F_REQUEST) || nlh->nlmsg_type < NLMSG_MIN_TYPE)
		goto out;
	op = client == RDMA_NL_NLDEV ? sv_nldev_op(cmd) : NULL;
	if (!op) {
		err = -EINVAL;
		ctx.why = "Unknown RDMA netlink client or command";
		goto out;
	}
	err = parse(&ctx);
	if (err)
		goto out;
	if (nlh->nlmsg_flags & NLM_F_DUMP) {
		if (!op->dump) {
			err = -EINVAL;
			ctx.why = "This command does not dump";
			goto out;
		}
		if (c->dump.on) {
			err = -EBUSY;
			goto out;
		}
		c->dump.msg = malloc(nlh->nlmsg_len);
		if (!c->dump.msg) {
			err = -ENOMEM;
			goto out;
		}
		memcpy(c->dump.msg, nlh, nlh->nlmsg_len);
		c->dump.portid = q->portid;
		c->dump.flags = q->flags;
		c->dump.cursor[0] = c->dump.cursor[1] = 0;
		c->dump.on = true;
		/* the first part now, as netlink_dump_start; no ack */
		dump_step(c);
		return;
	}
	if (!op->doit) {
		err = -EINVAL;
		ctx.why = "This command only dumps";
		goto out;
	} else {
		uint8_t buf[SV_NL_GOODSIZE];
		struct sv_nlb b = { .buf = buf, .cap = sizeof(buf) };

		err = op->doit(&ctx, &b);
		if (!err && b.full)
			err = -EMSGSIZE;
		if (!err && b.len)
			queue(c, buf, b.len);
	}
out:
	if ((nlh->nlmsg_flags & NLM_F_ACK) || err)
		ack(c, nlh, q->portid, q->flags, err, ctx.why);
}

/* Write what waits, continuing a dump as the room allows: false when the
 * connection must go. */
bool sv_nl_output(struct sv_nl_conn *c)
{
	for (;;) {
		struct rec *r = c->head;
		ssize_t w;

		if (c->nq > SV_NL_MAX_QUEUE) {
			sv_log(SV_LOG_WARN, "netlink: pid %d reads none of its "
			       "answers: disconnected", (int)c->pid);
			return false;
		}
		if (!r) {
			if (!c->dump.on)
				return true;
			dump_step(c);
			continue;
		}
		w = send(c->out, r->data, r->len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (w < 0)
			return false;   /* the program's end is closed */
		c->head = r->next;
		if (!c->head)
			c->tail = NULL;
		c->nq--;
		free(r);
	}
}

bool sv_nl_input(struct sv_nl_conn *c)
{
	static uint8_t buf[SV_NL_REQ_HDR + SV_NL_MAX_REQ];
	struct sv_nl_req q;
	struct sv_nl_done done = { .magic = SV_NL_MAGIC };
	int fd = -1;

	if (c->out < 0)
		return hello(c) && (c->out < 0 || sv_nl_input(c));
	for (;;) {
		ssize_t len = sv_recv_msg(c->req, buf, sizeof(buf), &fd, MSG_DONTWAIT);
		const uint8_t *p;
		size_t left;

		if (fd >= 0) {
			close(fd);
			fd = -1;
		}
		if (len == -EAGAIN)
			return true;
		if (len <= 0)
			return false;
		memcpy(&q, buf, sizeof(q));
		if ((size_t)len < SV_NL_REQ_HDR || (size_t)len > sizeof(buf) ||
		    q.magic != SV_NL_MAGIC || q.len != (size_t)len - SV_NL_REQ_HDR) {
			sv_log(SV_LOG_WARN, "netlink: pid %d: malformed request "
			       "(%zd bytes): disconnected", (int)c->pid, len);
			return false;
		}
		p = buf + SV_NL_REQ_HDR;
		left = q.len;
		while (left >= NLMSG_HDRLEN) {
			struct nlmsghdr h;
			size_t step;

			memcpy(&h, p, sizeof(h));
			if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > left)
				break;
			/* aligned for the attribute walk */
			{
				uint32_t al[(SV_NL_MAX_REQ + 3) / 4];

				memcpy(al, p, h.nlmsg_len);
				take(c, (const struct nlmsghdr *)al, &q);
			}
			step = NLMSG_ALIGN(h.nlmsg_len);
			if (step >= left)
				break;
			p += step;
			left -= step;
		}
		if (!sv_nl_output(c))
			return false;
		if (sv_send_msg(c->req, &done, sizeof(done), -1,
				MSG_DONTWAIT | MSG_NOSIGNAL))
			return false;
	}
}

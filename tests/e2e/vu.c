// SPDX-License-Identifier: MIT
/* Helpers shared by the data-path tests: see vu.h. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vu.h"

pid_t vu_daemon_pid(void)
{
	const char *dir = getenv("SV_TEST_DIR");
	char path[4096], buf[32];
	ssize_t n;
	int fd;

	if (!dir)
		return -1;
	snprintf(path, sizeof(path), "%s/control.lock", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return (pid_t)atoi(buf);
}

long vu_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void vu_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

struct ibv_context *vu_open(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n = 0, i;

	list = ibv_get_device_list(&n);
	if (!list) {
		fprintf(stderr, "ibv_get_device_list: %s\n", strerror(errno));
		return NULL;
	}
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "sv0"))
			break;
	if (i == n)
		fprintf(stderr, "no device sv0 (is SOFTVERBS_SOCKET set?)\n");
	else if (!(ctx = ibv_open_device(list[i])))
		fprintf(stderr, "ibv_open_device: %s\n", strerror(errno));
	ibv_free_device_list(list);
	return ctx;
}

enum ibv_mtu vu_active_mtu(struct ibv_context *ctx)
{
	struct ibv_port_attr pa;

	memset(&pa, 0, sizeof(pa));
	if (ibv_query_port(ctx, 1, &pa))
		return IBV_MTU_1024;
	return pa.active_mtu;
}

unsigned int vu_mtu_bytes(enum ibv_mtu mtu)
{
	return 128u << mtu;
}

int vu_gid(struct ibv_context *ctx, union ibv_gid *gid)
{
	return ibv_query_gid(ctx, 1, 0, gid) ? -1 : 0;
}

struct vu_conn vu_conn_default(void)
{
	struct vu_conn c = {
		.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.min_rnr_timer = 1,
		.max_rd_atomic = 16,
		.max_dest_rd_atomic = 16,
		.qkey = 0x11111111,
		.sq_psn = 0x1234,
		.rq_psn = 0x1234,
		.stop_at = IBV_QPS_RTS,
	};

	return c;
}

int vu_to_init(struct ibv_qp *qp, const struct vu_conn *c)
{
	struct ibv_qp_attr a;
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = c->qkey;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = c->access;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return ibv_modify_qp(qp, &a, mask);
}

int vu_to_rtr(struct ibv_qp *qp, const struct vu_addr *peer,
	      const struct vu_conn *c)
{
	struct ibv_qp_attr a;
	int mask = IBV_QP_STATE;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (qp->qp_type != IBV_QPT_UD) {
		a.path_mtu = vu_active_mtu(qp->context);
		a.dest_qp_num = peer->qpn;
		a.rq_psn = peer->psn;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = peer->gid;
		a.ah_attr.grh.sgid_index = 0;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
	}
	if (qp->qp_type == IBV_QPT_RC) {
		a.max_dest_rd_atomic = c->max_dest_rd_atomic;
		a.min_rnr_timer = c->min_rnr_timer;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	return ibv_modify_qp(qp, &a, mask);
}

int vu_to_rts(struct ibv_qp *qp, const struct vu_conn *c)
{
	struct ibv_qp_attr a;
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = c->sq_psn;
	if (qp->qp_type == IBV_QPT_RC) {
		a.timeout = c->timeout;
		a.retry_cnt = c->retry_cnt;
		a.rnr_retry = c->rnr_retry;
		a.max_rd_atomic = c->max_rd_atomic;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return ibv_modify_qp(qp, &a, mask);
}

int vu_connect(struct ibv_qp *qp, const struct vu_addr *peer,
	       const struct vu_conn *c)
{
	enum ibv_qp_state stop = c->stop_at ? c->stop_at : IBV_QPS_RTS;
	int ret;

	ret = vu_to_init(qp, c);
	if (ret || stop == IBV_QPS_INIT)
		return ret;
	ret = vu_to_rtr(qp, peer, c);
	if (ret || stop == IBV_QPS_RTR)
		return ret;
	return vu_to_rts(qp, c);
}

struct vu_addr vu_addr_of(struct ibv_qp *qp, uint32_t psn)
{
	struct vu_addr a;

	memset(&a, 0, sizeof(a));
	a.qpn = qp->qp_num;
	a.psn = psn;
	vu_gid(qp->context, &a.gid);
	return a;
}

int vu_connect_pair(struct ibv_qp *a, struct ibv_qp *b,
		    const struct vu_conn *c)
{
	struct vu_addr aa = vu_addr_of(a, c->sq_psn);
	struct vu_addr ba = vu_addr_of(b, c->sq_psn);
	int ret;

	ret = vu_connect(a, &ba, c);
	if (!ret)
		ret = vu_connect(b, &aa, c);
	return ret;
}

struct ibv_ah *vu_ah(struct ibv_pd *pd, const union ibv_gid *gid)
{
	struct ibv_ah_attr a;

	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	a.grh.dgid = *gid;
	a.grh.sgid_index = 0;
	a.grh.hop_limit = 64;
	a.port_num = 1;
	return ibv_create_ah(pd, &a);
}

int vu_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int ret;

	memset(&a, 0, sizeof(a));
	ret = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
	if (ret) {
		fprintf(stderr, "ibv_query_qp: %s\n", strerror(ret));
		return -1;
	}
	return (int)a.qp_state;
}

int vu_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n, long ms)
{
	long end = vu_now_ms() + ms;
	unsigned int idle = 0;
	int got = 0, r;

	while (got < n) {
		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0) {
			fprintf(stderr, "ibv_poll_cq: %d\n", r);
			return got;
		}
		got += r;
		if (r) {
			idle = 0;
			continue;
		}
		if (vu_now_ms() > end)
			break;
		/* spin a little, then leave the CPU to the device (two cores
		 * are shared by this test, its peer and the daemon) */
		if (++idle > 200) {
			struct timespec ts = { 0, 50000 };

			nanosleep(&ts, NULL);
		}
	}
	return got;
}

bool vu_fd_readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;

	do {
		n = poll(&p, 1, ms);
	} while (n < 0 && errno == EINTR);
	return n > 0;
}

int vu_xfer(int fd, void *p, size_t n, bool out)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = out ? write(fd, (char *)p + done, n - done)
				: read(fd, (char *)p + done, n - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (!r)
				errno = 0;
			return -1;
		}
		done += (size_t)r;
	}
	return 0;
}

void vu_xfer_all(int fd, void *p, size_t n, bool out)
{
	VU_CHECK(!vu_xfer(fd, p, n, out), "%s: %s", out ? "send" : "receive",
		 errno ? strerror(errno) : "closed");
}

int vu_tcp_listen(int port, int backlog)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port) };
	int one = 1, s = socket(AF_INET, SOCK_STREAM, 0);

	VU_CHECK(s >= 0, "socket");
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	VU_CHECK(!bind(s, (struct sockaddr *)&a, sizeof(a)) &&
		 !listen(s, backlog), "cannot listen on %d", port);
	return s;
}

int vu_tcp_connect(const char *host, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port) };

	VU_CHECK(inet_pton(AF_INET, host, &a.sin_addr) == 1, "bad host %s",
		 host);
	for (int i = 0; i < 200; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);

		if (!connect(s, (struct sockaddr *)&a, sizeof(a)))
			return s;
		close(s);
		vu_sleep_ms(50);
	}
	VU_CHECK(0, "cannot connect to %s:%d", host, port);
	return -1;
}

/* The library drops an event for an object destroyed since it was sent, so
 * a readable descriptor does not promise an event: read non-blocking. */
static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl >= 0 && !(fl & O_NONBLOCK))
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int vu_async_event(struct ibv_context *ctx, struct ibv_async_event *ev,
		   long ms)
{
	long end = vu_now_ms() + ms;

	set_nonblock(ctx->async_fd);
	for (;;) {
		long left = end - vu_now_ms();

		if (!vu_fd_readable(ctx->async_fd, left > 0 ? (int)left : 0))
			return -ETIMEDOUT;
		if (ibv_get_async_event(ctx, ev) == 0)
			break;
		if (errno != EAGAIN)
			return -errno;
	}
	ibv_ack_async_event(ev);
	return 0;
}

int vu_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, long ms)
{
	long end = vu_now_ms() + ms;
	void *cq_ctx;

	set_nonblock(ch->fd);
	for (;;) {
		long left = end - vu_now_ms();

		if (!vu_fd_readable(ch->fd, left > 0 ? (int)left : 0))
			return -ETIMEDOUT;
		if (ibv_get_cq_event(ch, cq, &cq_ctx) == 0)
			break;
		if (errno != EAGAIN)
			return -errno;
	}
	ibv_ack_cq_events(*cq, 1);
	return 0;
}

const char *vu_opcode_str(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND: return "SEND";
	case IBV_WR_SEND_WITH_IMM: return "SEND_WITH_IMM";
	case IBV_WR_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WR_RDMA_WRITE_WITH_IMM: return "RDMA_WRITE_WITH_IMM";
	case IBV_WR_RDMA_READ: return "RDMA_READ";
	case IBV_WR_ATOMIC_CMP_AND_SWP: return "ATOMIC_CMP_AND_SWP";
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return "ATOMIC_FETCH_AND_ADD";
	default: return "?";
	}
}

int vu_ep_create(struct vu_ep *ep, struct ibv_context *ctx, struct ibv_pd *pd,
		 enum ibv_qp_type type, const struct vu_qp_caps *caps)
{
	struct ibv_qp_init_attr ia;
	int cqe = caps->cqe ? caps->cqe : 256;

	memset(ep, 0, sizeof(*ep));
	ep->ctx = ctx;
	if (!ctx) {
		ep->ctx = vu_open();
		if (!ep->ctx)
			return ENODEV;
		ep->own_ctx = true;
	}
	ep->pd = pd;
	if (!pd) {
		ep->pd = ibv_alloc_pd(ep->ctx);
		if (!ep->pd)
			goto err;
		ep->own_pd = true;
	}
	ep->own_scq = !caps->scq;
	ep->scq = caps->scq ? caps->scq : ibv_create_cq(ep->ctx, cqe, NULL,
							 NULL, 0);
	if (!ep->scq)
		goto err;
	ep->own_rcq = !caps->rcq;
	ep->rcq = caps->rcq ? caps->rcq : ibv_create_cq(ep->ctx, cqe, NULL,
							 NULL, 0);
	if (!ep->rcq)
		goto err;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ep->scq;
	ia.recv_cq = ep->rcq;
	ia.srq = caps->srq;
	ia.qp_type = type;
	ia.sq_sig_all = caps->sq_sig_all;
	ia.cap.max_send_wr = caps->send_wr ? caps->send_wr : 64;
	ia.cap.max_recv_wr = caps->srq ? 0 : caps->recv_wr ? caps->recv_wr : 64;
	ia.cap.max_send_sge = caps->send_sge ? caps->send_sge : 1;
	ia.cap.max_recv_sge = caps->srq ? 0 :
			      caps->recv_sge ? caps->recv_sge : 1;
	ia.cap.max_inline_data = caps->inline_data;
	ep->qp = ibv_create_qp(ep->pd, &ia);
	if (!ep->qp)
		goto err;
	return 0;
err:;
	int e = errno ? errno : EIO;

	fprintf(stderr, "vu_ep_create: %s\n", strerror(e));
	vu_ep_destroy(ep);
	return e;
}

void vu_ep_destroy(struct vu_ep *ep)
{
	if (ep->qp)
		ibv_destroy_qp(ep->qp);
	if (ep->own_scq && ep->scq)
		ibv_destroy_cq(ep->scq);
	if (ep->own_rcq && ep->rcq)
		ibv_destroy_cq(ep->rcq);
	if (ep->own_pd && ep->pd)
		ibv_dealloc_pd(ep->pd);
	if (ep->own_ctx && ep->ctx)
		ibv_close_device(ep->ctx);
	memset(ep, 0, sizeof(*ep));
}

int vu_threads_named(pid_t pid, const char *prefix, int *tid)
{
	char path[384], name[64];
	struct dirent *d;
	int n = 0;
	DIR *dir;

	if (tid)
		*tid = -1;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid,
			 d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f) &&
		    !strncmp(name, prefix, strlen(prefix))) {
			if (tid && *tid < 0)
				*tid = atoi(d->d_name);
			n++;
		}
		fclose(f);
	}
	closedir(dir);
	return n;
}

uint8_t vu_pat(unsigned int tag, size_t i)
{
	return (uint8_t)(i * 7 + tag * 31 + (i >> 8) + 1);
}

void vu_fill(uint8_t *p, unsigned int tag, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = vu_pat(tag, i);
}

void vu_expect(const uint8_t *p, unsigned int tag, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		VU_CHECK(p[i] == vu_pat(tag, i), "%s: byte %zu is %#x, not %#x",
			 what, i, p[i], vu_pat(tag, i));
}

enum ibv_wc_status vu_post_one(struct vu_ep *ep, enum ibv_wr_opcode op,
			       uint64_t wr_id, uint64_t laddr, uint32_t lkey,
			       uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	VU_CHECK(!ibv_post_send(ep->qp, &wr, &bad), "post %s",
		 vu_opcode_str(op));
	VU_CHECK(vu_poll(ep->scq, &wc, 1, VU_WAIT_MS) == 1,
		 "no completion for %s", vu_opcode_str(op));
	return wc.status;
}

int vu_softverbs(char *out, size_t outlen, const char *fmt, ...)
{
	const char *b = getenv("SV_BUILD_DIR");
	char cmd[1024], args[512];
	va_list ap;
	FILE *f;
	int st;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "%s/bin/softverbs %s 2>&1",
		 b ? b : "build", args);
	f = popen(cmd, "r");
	VU_CHECK(f, "popen %s", cmd);
	if (out && outlen) {
		size_t n = fread(out, 1, outlen - 1, f);

		out[n] = 0;
	}
	{
		char sink[512];

		while (fread(sink, 1, sizeof(sink), f) > 0)
			;
	}
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

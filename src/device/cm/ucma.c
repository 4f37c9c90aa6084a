// SPDX-License-Identifier: MIT
/*
 * The rdma_cm device's files and commands (docs/DESIGN.md, "rdma_cm").
 *
 * Every open of /dev/infiniband/rdma_cm under the preload is one
 * connection to the socket SV_UCMA_SOCK_NAME beside the control socket: a
 * file, as the kernel's ucma has one per open. The daemon gives the file an
 * eventfd (EFD_SEMAPHORE) that the preload returns as the program's
 * descriptor, and adds 1 to it for each queued event. Each write() of the
 * program arrives here as the bytes written (struct sv_ucma_req); the
 * command is decoded with the kernel's ucma rules (ucma_write: header,
 * sizes, then the command's own checks) and answered with what write()
 * returns and the response bytes. Nothing a client sends is trusted: every
 * size is checked before use, an unknown command is the kernel's EINVAL
 * and one the kernel lacks its ENOSYS.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <infiniband/ib.h>
#include <infiniband/verbs.h>

#include "abi/sv_sock.h"
#include "abi/sv_ucma.h"
#include "device/cm/cm.h"
#include "device/roce/roce.h"
#include "device/sv_dev.h"

static struct {
	int listen_fd, timer_fd;
	char path[300];
	struct sv_cm_file files;   /* list head */
	uint32_t nfiles;
	uint64_t next_token;
} u = { .listen_fd = -1, .timer_fd = -1,
	.files = { .next = &u.files, .prev = &u.files } };

int sv_cm_listen_fd(void)
{
	return u.listen_fd;
}

int sv_cm_timer_fd(void)
{
	return u.timer_fd;
}

struct sv_cm_file *sv_cm_files(void)
{
	return &u.files;
}

uint32_t sv_cm_nfiles(void)
{
	return u.nfiles;
}

void sv_cm_stat_fill(struct sv_rsp_stat_wire *w)
{
	w->cm_files = u.nfiles;
	w->cm_ids = sv_cm_stats.live;
	w->cm_ids_created = sv_cm_stats.ids;
	w->cm_connects = sv_cm_stats.connects;
	w->cm_accepts = sv_cm_stats.accepts;
	w->cm_rejects = sv_cm_stats.rejects;
	w->cm_disconnects = sv_cm_stats.disconnects;
	w->cm_established = sv_cm_stats.established;
	w->cm_mad_sent = sv_cm_stats.mad_sent;
	w->cm_mad_rcvd = sv_cm_stats.mad_rcvd;
	w->cm_mad_retries = sv_cm_stats.mad_retries;
	w->cm_mad_timeouts = sv_cm_stats.mad_timeouts;
	w->cm_mad_dropped = sv_cm_stats.mad_dropped + sv_roce_gsi_drops();
}

int sv_cm_start(const char *sock_path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int ret = sv_sock_sibling(sock_path, SV_UCMA_SOCK_NAME, u.path, sizeof(u.path));
	mode_t um;

	if (ret || strlen(u.path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	u.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (u.timer_fd < 0)
		return -errno;
	unlink(u.path);
	u.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (u.listen_fd < 0)
		return -errno;
	memcpy(sa.sun_path, u.path, strlen(u.path) + 1);
	/* made 0600 as it is bound (no chmod by name, which follows links) */
	um = umask(0177);
	ret = bind(u.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
	umask(um);
	if (ret || listen(u.listen_fd, 128)) {
		ret = ret ? ret : -errno;
		close(u.listen_fd);
		u.listen_fd = -1;
		unlink(u.path);
		return ret;
	}
	return 0;
}

/* ---- the event queue of a file ---- */

static void token_add(struct sv_cm_file *f)
{
	uint64_t one = 1;

	/* an eventfd's counter does not overflow at our numbers: no block */
	if (write(f->efd, &one, sizeof(one)) != sizeof(one))
		sv_log(SV_LOG_WARN, "cm: file %llu: eventfd: %s",
		       (unsigned long long)f->token, strerror(errno));
}

void sv_cm_event_queue(struct sv_cm_file *f, struct sv_cm_event *e)
{
	if (f->dead || f->nev >= SV_CM_MAX_EVENTS) {
		if (!f->dead)
			sv_log(SV_LOG_WARN, "cm: file %llu (pid %d): %u events "
			       "unread, event %u of id %u dropped",
			       (unsigned long long)f->token, (int)f->pid, f->nev,
			       e->resp.event, e->resp.id);
		free(e);
		return;
	}
	e->next = NULL;
	*f->evq_tail = e;
	f->evq_tail = &e->next;
	f->nev++;
	token_add(f);
}

static void evq_fix_tail(struct sv_cm_file *f)
{
	f->evq_tail = &f->evq;
	while (*f->evq_tail)
		f->evq_tail = &(*f->evq_tail)->next;
}

/* An event that leaves unread leaves its token behind: the preload finds
 * the queue empty for it and takes the next (SV_UCMA_STALE). */
void sv_cm_events_drop(struct sv_cm_file *f, struct sv_cm_id *id)
{
	for (struct sv_cm_event **p = &f->evq; *p;) {
		struct sv_cm_event *e = *p;

		if (e->id == id || e->child == id) {
			*p = e->next;
			f->nev--;
			free(e);
		} else {
			p = &e->next;
		}
	}
	evq_fix_tail(f);
	if (f->last && (f->last->id == id || f->last->child == id)) {
		free(f->last);
		f->last = NULL;
	}
}

/* A multicast leaves: its unread events go (ucma_cleanup_mc_events). */
void sv_cm_events_drop_mc(struct sv_cm_file *f, uint32_t handle)
{
	for (struct sv_cm_event **p = &f->evq; *p;) {
		struct sv_cm_event *e = *p;

		if ((e->resp.event == SV_EV_MULTICAST_JOIN ||
		     e->resp.event == SV_EV_MULTICAST_ERROR) && e->resp.id == handle) {
			*p = e->next;
			f->nev--;
			free(e);
		} else {
			p = &e->next;
		}
	}
	evq_fix_tail(f);
	if (f->last && (f->last->resp.event == SV_EV_MULTICAST_JOIN ||
			f->last->resp.event == SV_EV_MULTICAST_ERROR) &&
	    f->last->resp.id == handle) {
		free(f->last);
		f->last = NULL;
	}
}

void sv_cm_events_move(struct sv_cm_file *from, struct sv_cm_file *to,
		       struct sv_cm_id *id)
{
	struct sv_cm_event *moved = NULL, **mt = &moved;

	for (struct sv_cm_event **p = &from->evq; *p;) {
		struct sv_cm_event *e = *p;

		if (e->id == id) {
			*p = e->next;
			from->nev--;
			e->next = NULL;
			*mt = e;
			mt = &e->next;
		} else {
			p = &e->next;
		}
	}
	evq_fix_tail(from);
	if (from->last && from->last->id == id) {
		free(from->last);
		from->last = NULL;
	}
	while (moved) {
		struct sv_cm_event *e = moved;

		moved = e->next;
		if (e->child)    /* a request's new id goes where it is read */
			sv_cm_migrate(e->child, to);
		sv_cm_event_queue(to, e);
	}
}

/* ---- files ---- */

struct sv_cm_file *sv_cm_file_accept(void)
{
	struct sv_ucma_hello h = { SV_UCMA_MAGIC, SV_UCMA_VERSION, 0 };
	struct sv_cm_file *f;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd, efd;

	fd = accept4(u.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return NULL;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) ||
	    (cred.uid != geteuid() && cred.uid != 0)) {
		sv_log(SV_LOG_WARN, "cm: refused an rdma_cm open: not the daemon's uid");
		close(fd);
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	efd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
	if (!f || efd < 0) {
		sv_log(SV_LOG_WARN, "cm: refused an rdma_cm open: %s", strerror(errno));
		free(f);
		if (efd >= 0)
			close(efd);
		close(fd);
		return NULL;
	}
	f->sock = fd;
	f->efd = efd;
	f->pid = cred.pid;
	f->uid = cred.uid;
	f->token = h.token = ++u.next_token;
	f->evq_tail = &f->evq;
	if (sv_send_msg(fd, &h, sizeof(h), efd, MSG_DONTWAIT)) {
		close(efd);
		close(fd);
		free(f);
		return NULL;
	}
	f->next = &u.files;
	f->prev = u.files.prev;
	f->prev->next = f;
	u.files.prev = f;
	u.nfiles++;
	sv_cm_stats.files++;
	sv_log(SV_LOG_DEBUG, "cm: file %llu: pid %d opened rdma_cm",
	       (unsigned long long)f->token, (int)f->pid);
	return f;
}

static struct sv_cm_file *file_by_token(uint64_t token)
{
	for (struct sv_cm_file *f = u.files.next; f != &u.files; f = f->next)
		if (f->token == token && !f->dead)
			return f;
	return NULL;
}

static void rearm_timer(void)
{
	uint64_t next = sv_cm_next_deadline();
	struct itimerspec its = { 0 };

	if (next) {
		its.it_value.tv_sec = (time_t)(next / 1000);
		its.it_value.tv_nsec = (long)(next % 1000) * 1000000;
	}
	timerfd_settime(u.timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

void sv_cm_file_close(struct sv_cm_file *f)
{
	uint32_t n = 0;

	if (f->dead)
		return;
	for (struct sv_cm_id *id = f->ids; id; id = id->file_next)
		n++;
	sv_cm_file_destroy_ids(f);
	f->dead = true;
	while (f->evq) {
		struct sv_cm_event *e = f->evq;

		f->evq = e->next;
		free(e);
	}
	free(f->last);
	f->last = NULL;
	close(f->sock);
	close(f->efd);
	f->prev->next = f->next;
	f->next->prev = f->prev;
	u.nfiles--;
	if (n)
		sv_log(SV_LOG_INFO, "cm: file %llu (pid %d) closed: %u ids destroyed",
		       (unsigned long long)f->token, (int)f->pid, n);
	sv_cm_flush();
	rearm_timer();
}

void sv_cm_file_free(struct sv_cm_file *f)
{
	free(f);
}

void sv_cm_on_timer(void)
{
	uint64_t v;

	if (read(u.timer_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	sv_cm_run_timers(sv_cm_now_ms());
	sv_cm_flush();
	rearm_timer();
}

void sv_cm_on_wire(void)
{
	sv_cm_wire_input();
	rearm_timer();
}

void sv_cm_stop(void)
{
	while (u.files.next != &u.files) {
		struct sv_cm_file *f = u.files.next;

		sv_cm_file_close(f);
		free(f->tag);
		free(f);
	}
	if (u.listen_fd >= 0) {
		close(u.listen_fd);
		unlink(u.path);
	}
	if (u.timer_fd >= 0)
		close(u.timer_fd);
	u.listen_fd = u.timer_fd = -1;
}

/* ---- commands ---- */

struct ctx {
	struct sv_cm_file *f;
	const uint8_t *in;                 /* the command, zero-padded */
	uint32_t out_len;
	const struct sv_ucma_req *q;
	struct sv_ucma_rsp *r;
};

/* The response: at most what the program asked for (hdr.out), to the
 * address its command names. */
static int respond(struct ctx *c, uint64_t addr, const void *resp, size_t size)
{
	size_t n = c->out_len < size ? c->out_len : size;

	c->r->out_addr = addr;
	c->r->out_len = (uint32_t)n;
	memcpy(c->r->out, resp, n);
	return 0;
}

#define CMD(type) type cmd; memcpy(&cmd, c->in, sizeof(cmd))
#define GET_ID(h) struct sv_cm_id *id; int err_ = sv_cm_id_get(c->f, (h), &id); \
	if (err_) return err_

static int cmd_create_id(struct ctx *c)
{
	struct rdma_ucm_create_id_resp resp = { 0 };
	struct sv_cm_id *id;
	uint8_t qpt;
	int ret;
	CMD(struct rdma_ucm_create_id);

	if (c->out_len < sizeof(resp))
		return -ENOSPC;
	switch (cmd.ps) {
	case RDMA_PS_TCP:
		qpt = IBV_QPT_RC;
		break;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		qpt = IBV_QPT_UD;
		break;
	case RDMA_PS_IB:
		/* the kernel takes the QP type as given; here those sv0 has
		 * (XRC: rdma_cm's XRC_SEND and XRC_RECV, the IB CM's XRC
		 * INI and TGT) */
		if (cmd.qp_type != IBV_QPT_RC && cmd.qp_type != IBV_QPT_UD &&
		    cmd.qp_type != IBV_QPT_XRC_SEND &&
		    cmd.qp_type != IBV_QPT_XRC_RECV)
			return -EINVAL;
		qpt = cmd.qp_type;
		break;
	default:
		return -EINVAL;
	}
	ret = sv_cm_id_new(c->f, cmd.uid, cmd.ps, qpt, &id);
	if (ret)
		return ret;
	resp.id = id->handle;
	return respond(c, cmd.response, &resp, sizeof(resp));
}

static int cmd_destroy_id(struct ctx *c)
{
	struct rdma_ucm_destroy_id_resp resp = { 0 };
	CMD(struct rdma_ucm_destroy_id);

	if (c->out_len < sizeof(resp))
		return -ENOSPC;
	GET_ID(cmd.id);
	resp.events_reported = id->events_reported;
	sv_cm_id_destroy(id);
	return respond(c, cmd.response, &resp, sizeof(resp));
}

/* An address of the kernel's rdma_addr_size_in6: IPv4 in the first 16
 * bytes of the sockaddr_in6, or IPv6. */
static const struct sockaddr *addr_in6(const struct sockaddr_in6 *a)
{
	const struct sockaddr *sa = (const void *)a;

	return sv_cm_addr_size(sa) ? sa : NULL;
}

/* rdma_addr_size_kss: the size the family says, AF_IB included. */
static socklen_t addr_size_kss(const struct __kernel_sockaddr_storage *a)
{
	const struct sockaddr *sa = (const void *)a;

	return sa->sa_family == AF_IB ? (socklen_t)sizeof(struct sockaddr_ib) :
	       sv_cm_addr_size(sa);
}

static int cmd_bind_ip(struct ctx *c)
{
	const struct sockaddr *sa;
	CMD(struct rdma_ucm_bind_ip);

	sa = addr_in6(&cmd.addr);
	if (!sa)
		return -EINVAL;
	GET_ID(cmd.id);
	return sv_cm_bind(id, sa);
}

static int cmd_bind(struct ctx *c)
{
	CMD(struct rdma_ucm_bind);

	if (cmd.reserved || !cmd.addr_size || cmd.addr_size != addr_size_kss(&cmd.addr))
		return -EINVAL;
	GET_ID(cmd.id);
	/* AF_IB: this device has no IB addressing (librdmacm then uses the
	 * IP commands) */
	return sv_cm_bind(id, (const struct sockaddr *)&cmd.addr);
}

static int cmd_resolve_ip(struct ctx *c)
{
	const struct sockaddr *src, *dst;
	CMD(struct rdma_ucm_resolve_ip);

	src = addr_in6(&cmd.src_addr);
	dst = addr_in6(&cmd.dst_addr);
	if ((cmd.src_addr.sin6_family && !src) || !dst)
		return -EINVAL;
	GET_ID(cmd.id);
	return sv_cm_resolve_addr(id, src, dst);
}

static int cmd_resolve_addr(struct ctx *c)
{
	CMD(struct rdma_ucm_resolve_addr);

	if (cmd.reserved ||
	    (cmd.src_size && cmd.src_size != addr_size_kss(&cmd.src_addr)) ||
	    !cmd.dst_size || cmd.dst_size != addr_size_kss(&cmd.dst_addr))
		return -EINVAL;
	GET_ID(cmd.id);
	return sv_cm_resolve_addr(id, cmd.src_size ?
				  (const struct sockaddr *)&cmd.src_addr : NULL,
				  (const struct sockaddr *)&cmd.dst_addr);
}

static int cmd_resolve_route(struct ctx *c)
{
	CMD(struct rdma_ucm_resolve_route);
	GET_ID(cmd.id);
	return sv_cm_resolve_route(id);
}

static int cmd_query_route(struct ctx *c)
{
	struct rdma_ucm_query_route_resp resp;
	CMD(struct rdma_ucm_query);

	if (c->out_len < offsetof(struct rdma_ucm_query_route_resp, ibdev_index))
		return -ENOSPC;
	GET_ID(cmd.id);
	sv_cm_route(id, &resp);
	return respond(c, cmd.response, &resp, sizeof(resp));
}

static void addr_kss(struct __kernel_sockaddr_storage *dst, uint16_t *size,
		     const struct sockaddr_storage *src)
{
	socklen_t n = sv_cm_addr_size((const void *)src);

	memset(dst, 0, sizeof(*dst));
	memcpy(dst, src, n);
	*size = (uint16_t)n;
}

static void gid_sib(struct __kernel_sockaddr_storage *dst,
		    const struct sockaddr_storage *src)
{
	struct sockaddr_ib sib = { .sib_family = AF_IB, .sib_pkey = htons(SV_PKEY_DEFAULT) };

	if (src->ss_family)
		sv_cm_gid((const void *)src, sib.sib_addr.sib_raw);
	memset(dst, 0, sizeof(*dst));
	memcpy(dst, &sib, sizeof(sib));
}

static int cmd_query(struct ctx *c)
{
	CMD(struct rdma_ucm_query);

	switch (cmd.option) {
	case RDMA_USER_CM_QUERY_ADDR:
	case RDMA_USER_CM_QUERY_GID: {
		struct rdma_ucm_query_addr_resp resp;

		if (c->out_len < sizeof(resp))
			return -ENOSPC;
		GET_ID(cmd.id);
		memset(&resp, 0, sizeof(resp));
		if (cmd.option == RDMA_USER_CM_QUERY_ADDR) {
			addr_kss(&resp.src_addr, &resp.src_size, &id->src);
			addr_kss(&resp.dst_addr, &resp.dst_size, &id->dst);
		} else {
			gid_sib(&resp.src_addr, &id->src);
			gid_sib(&resp.dst_addr, &id->dst);
			resp.src_size = resp.dst_size = sizeof(struct sockaddr_ib);
		}
		if (id->has_dev) {
			resp.node_guid = sv_dev.attr.node_guid;
			resp.port_num = 1;
			resp.pkey = SV_PKEY_DEFAULT;
		}
		return respond(c, cmd.response, &resp, sizeof(resp));
	}
	case RDMA_USER_CM_QUERY_PATH: {
		/* path records in the SA's wire format: none here (the IP
		 * route is QUERY_ROUTE's, which librdmacm uses without AF_IB) */
		struct rdma_ucm_query_path_resp resp = { 0 };

		if (c->out_len < sizeof(resp))
			return -ENOSPC;
		GET_ID(cmd.id);
		(void)id;
		return respond(c, cmd.response, &resp, sizeof(resp));
	}
	default:
		return -ENOSYS;
	}
}

static int cmd_connect(struct ctx *c)
{
	CMD(struct rdma_ucm_connect);

	if (!cmd.conn_param.valid)
		return -EINVAL;
	GET_ID(cmd.id);
	return sv_cm_connect(id, &cmd.conn_param);
}

static int cmd_listen(struct ctx *c)
{
	CMD(struct rdma_ucm_listen);
	GET_ID(cmd.id);
	return sv_cm_listen(id, cmd.backlog);
}

static int cmd_accept(struct ctx *c)
{
	CMD(struct rdma_ucm_accept);
	GET_ID(cmd.id);
	if (cmd.conn_param.valid)
		return sv_cm_accept(id, &cmd.conn_param, cmd.uid);
	return sv_cm_accept(id, NULL, 0);
}

static int cmd_reject(struct ctx *c)
{
	CMD(struct rdma_ucm_reject);

	if (cmd.reason && cmd.reason != SV_CM_REJ_CONSUMER_DEFINED &&
	    cmd.reason != SV_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED)
		return -EINVAL;
	GET_ID(cmd.id);
	return sv_cm_reject(id, cmd.reason, cmd.private_data, cmd.private_data_len);
}

static int cmd_disconnect(struct ctx *c)
{
	CMD(struct rdma_ucm_disconnect);
	GET_ID(cmd.id);
	return sv_cm_disconnect(id);
}

/* The attributes of a connection that an XRC QP takes (the kernel's
 * ib_cm_init_qp_attr by QP type): an initiator has no receive side (no
 * responder resources, no RNR timer in RTR), a target sends nothing but
 * ACKs (no retry counts, no RDMA reads in RTS; its ACK timeout stays). */
static void xrc_qp_attr(const struct sv_cm_id *id, struct ib_uverbs_qp_attr *a)
{
	if (id->qp_type == IBV_QPT_XRC_SEND && a->qp_state == IBV_QPS_RTR)
		a->qp_attr_mask &= ~(uint32_t)(IBV_QP_MAX_DEST_RD_ATOMIC |
					       IBV_QP_MIN_RNR_TIMER);
	if (id->qp_type == IBV_QPT_XRC_RECV && a->qp_state == IBV_QPS_RTS)
		a->qp_attr_mask &= ~(uint32_t)(IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					       IBV_QP_MAX_QP_RD_ATOMIC);
}

static int cmd_init_qp_attr(struct ctx *c)
{
	struct ib_uverbs_qp_attr resp;
	int ret;
	CMD(struct rdma_ucm_init_qp_attr);

	if (c->out_len < sizeof(resp))
		return -ENOSPC;
	if (cmd.qp_state > IBV_QPS_ERR)
		return -EINVAL;
	GET_ID(cmd.id);
	ret = sv_cm_init_qp_attr(id, cmd.qp_state, &resp);
	if (ret)
		return ret;
	xrc_qp_attr(id, &resp);
	return respond(c, cmd.response, &resp, sizeof(resp));
}

static int cmd_get_event(struct ctx *c)
{
	struct sv_cm_file *f = c->f;
	struct sv_cm_event *e = f->evq;
	CMD(struct rdma_ucm_get_event);

	if (c->out_len < sizeof(e->resp) - sizeof(e->resp.reserved) -
			 sizeof(e->resp.ece))
		return -ENOSPC;
	if (!e)
		return SV_UCMA_STALE;
	f->evq = e->next;
	if (!f->evq)
		f->evq_tail = &f->evq;
	f->nev--;
	e->id->events_reported++;
	sv_cm_mc_reported(e, 1);
	if (e->child) {
		e->child->hidden = false;
		e->id->pending--;
	}
	f->last = e;     /* until the next command: UNGET puts it back */
	return respond(c, cmd.response, &e->resp, sizeof(e->resp));
}

/* The preload could not copy the event out (EFAULT): the kernel keeps an
 * event it could not deliver, so it goes back first in line. */
static int unget(struct sv_cm_file *f)
{
	struct sv_cm_event *e = f->last;

	if (!e)
		return -EINVAL;
	f->last = NULL;
	e->id->events_reported--;
	sv_cm_mc_reported(e, -1);
	if (e->child) {
		e->child->hidden = true;
		e->id->pending++;
	}
	e->next = f->evq;
	f->evq = e;
	if (!e->next)
		f->evq_tail = &e->next;
	f->nev++;
	token_add(f);
	return 0;
}

static int cmd_set_option(struct ctx *c)
{
	CMD(struct rdma_ucm_set_option);

	/* the preload passes the value when it can: up to SV_UCMA_MAX_OPT */
	if (cmd.optlen != c->q->optlen)
		return -EINVAL;
	GET_ID(cmd.id);
	return sv_cm_set_option(id, cmd.level, cmd.optname,
				c->q->data + c->q->nbytes, cmd.optlen);
}

static int cmd_notify(struct ctx *c)
{
	CMD(struct rdma_ucm_notify);
	GET_ID(cmd.id);
	return sv_cm_notify(id, cmd.event);
}

static int cmd_migrate_id(struct ctx *c)
{
	struct rdma_ucm_migrate_resp resp = { 0 };
	struct sv_cm_file *cur;
	struct sv_cm_id *id;
	int ret;
	CMD(struct rdma_ucm_migrate_id);

	switch (c->q->aux_kind) {
	case SV_UCMA_AUX_FILE:
		cur = file_by_token(c->q->aux);
		if (!cur)
			return -EINVAL;
		break;
	case SV_UCMA_AUX_NOT_UCMA:
		return -EINVAL;
	default:
		return -ENOENT;
	}
	ret = sv_cm_id_get(cur, cmd.id, &id);
	if (ret)
		return ret;
	resp.events_reported = id->events_reported;
	sv_cm_migrate(id, c->f);
	c->out_len = sizeof(resp);   /* the kernel copies it whole */
	return respond(c, cmd.response, &resp, sizeof(resp));
}

/* ucma_process_join's checks, then the join (mcast.c). */
static int join(struct ctx *c, uint64_t response, uint64_t uid, uint32_t id,
		const struct sockaddr *sa, uint16_t join_flags)
{
	struct rdma_ucm_create_id_resp resp = { 0 };
	int ret;

	if (c->out_len < sizeof(resp))
		return -ENOSPC;
	if (join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
	    join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return -EINVAL;
	ret = sv_cm_mc_join(c->f, id, uid, sa, join_flags, &resp.id);
	if (ret)
		return ret;
	return respond(c, response, &resp, sizeof(resp));
}

static int cmd_join_ip_mcast(struct ctx *c)
{
	const struct sockaddr *sa;
	CMD(struct rdma_ucm_join_ip_mcast);

	sa = addr_in6(&cmd.addr);
	if (!sa)
		return -EINVAL;
	return join(c, cmd.response, cmd.uid, cmd.id, sa,
		    RDMA_MC_JOIN_FLAG_FULLMEMBER);
}

static int cmd_join_mcast(struct ctx *c)
{
	const struct sockaddr *sa;
	CMD(struct rdma_ucm_join_mcast);

	sa = (const struct sockaddr *)&cmd.addr;
	if (!addr_size_kss(&cmd.addr))
		return -EINVAL;
	if (c->out_len < sizeof(struct rdma_ucm_create_id_resp))
		return -ENOSPC;
	if (cmd.addr_size != addr_size_kss(&cmd.addr))
		return -EINVAL;
	return join(c, cmd.response, cmd.uid, cmd.id, sa, cmd.join_flags);
}

static int cmd_leave_mcast(struct ctx *c)
{
	struct rdma_ucm_destroy_id_resp resp = { 0 };
	int ret;
	CMD(struct rdma_ucm_destroy_id);

	if (c->out_len < sizeof(resp))
		return -ENOSPC;
	ret = sv_cm_mc_leave(c->f, cmd.id, &resp.events_reported);
	if (ret)
		return ret;
	return respond(c, cmd.response, &resp, sizeof(resp));
}

typedef int (*ucma_cmd_fn)(struct ctx *c);

/* The kernel's table (ucma_cmd_table): a NULL entry is ENOSYS.
 * GET_OPTION has never been implemented by the kernel. */
static const ucma_cmd_fn cmds[RDMA_USER_CM_CMD_JOIN_MCAST + 1] = {
	[RDMA_USER_CM_CMD_CREATE_ID] = cmd_create_id,
	[RDMA_USER_CM_CMD_DESTROY_ID] = cmd_destroy_id,
	[RDMA_USER_CM_CMD_BIND_IP] = cmd_bind_ip,
	[RDMA_USER_CM_CMD_RESOLVE_IP] = cmd_resolve_ip,
	[RDMA_USER_CM_CMD_RESOLVE_ROUTE] = cmd_resolve_route,
	[RDMA_USER_CM_CMD_QUERY_ROUTE] = cmd_query_route,
	[RDMA_USER_CM_CMD_CONNECT] = cmd_connect,
	[RDMA_USER_CM_CMD_LISTEN] = cmd_listen,
	[RDMA_USER_CM_CMD_ACCEPT] = cmd_accept,
	[RDMA_USER_CM_CMD_REJECT] = cmd_reject,
	[RDMA_USER_CM_CMD_DISCONNECT] = cmd_disconnect,
	[RDMA_USER_CM_CMD_INIT_QP_ATTR] = cmd_init_qp_attr,
	[RDMA_USER_CM_CMD_GET_EVENT] = cmd_get_event,
	[RDMA_USER_CM_CMD_SET_OPTION] = cmd_set_option,
	[RDMA_USER_CM_CMD_NOTIFY] = cmd_notify,
	[RDMA_USER_CM_CMD_MIGRATE_ID] = cmd_migrate_id,
	[RDMA_USER_CM_CMD_QUERY] = cmd_query,
	[RDMA_USER_CM_CMD_BIND] = cmd_bind,
	[RDMA_USER_CM_CMD_RESOLVE_ADDR] = cmd_resolve_addr,
	[RDMA_USER_CM_CMD_JOIN_IP_MCAST] = cmd_join_ip_mcast,
	[RDMA_USER_CM_CMD_LEAVE_MCAST] = cmd_leave_mcast,
	[RDMA_USER_CM_CMD_JOIN_MCAST] = cmd_join_mcast,
};

/* write()'s result for one request (ucma_write's checks, in its order). */
static int dispatch(struct sv_cm_file *f, const struct sv_ucma_req *q,
		    struct sv_ucma_rsp *r)
{
	uint8_t in[SV_UCMA_MAX_CMD];
	struct rdma_ucm_cmd_hdr hdr;
	struct ctx c = { .f = f, .in = in, .q = q, .r = r };
	int ret;

	if (q->aux_kind == SV_UCMA_UNGET)
		return unget(f);
	free(f->last);
	f->last = NULL;
	if (q->wlen < sizeof(hdr) || q->nbytes < sizeof(hdr))
		return -EINVAL;
	memcpy(&hdr, q->data, sizeof(hdr));
	if (hdr.cmd >= sizeof(cmds) / sizeof(cmds[0]))
		return -EINVAL;
	if ((uint64_t)hdr.in + sizeof(hdr) > q->wlen)
		return -EINVAL;
	if (!cmds[hdr.cmd])
		return -ENOSYS;
	/* the kernel reads the whole command struct whatever hdr.in says;
	 * past what was written we read zeros */
	memset(in, 0, sizeof(in));
	memcpy(in, q->data + sizeof(hdr), q->nbytes - sizeof(hdr));
	c.out_len = hdr.out;
	ret = cmds[hdr.cmd](&c);
	if (ret < 0)
		sv_log(SV_LOG_DEBUG, "cm: file %llu (pid %d): command %u: %s",
		       (unsigned long long)f->token, (int)f->pid, hdr.cmd,
		       strerror(-ret));
	if (ret < 0 || ret == SV_UCMA_STALE)
		return ret;
	return (int)q->wlen;
}

bool sv_cm_file_input(struct sv_cm_file *f)
{
	static struct sv_ucma_req q;     /* the control thread's only */
	static struct sv_ucma_rsp r;

	for (int budget = 64; budget > 0; budget--) {
		int fd = -1;
		ssize_t n = sv_recv_msg(f->sock, &q, sizeof(q), &fd, MSG_DONTWAIT);

		if (fd >= 0)
			close(fd);
		if (n == -EAGAIN)
			return true;
		if (n <= 0)
			return false;
		memset(&r, 0, SV_UCMA_RSP_HDR);
		r.magic = SV_UCMA_MAGIC;
		if ((size_t)n < SV_UCMA_REQ_HDR || (size_t)n > sizeof(q) ||
		    q.magic != SV_UCMA_MAGIC || q.nbytes > SV_UCMA_MAX_CMD ||
		    q.optlen > SV_UCMA_MAX_OPT ||
		    SV_UCMA_REQ_HDR + q.nbytes + q.optlen > (size_t)n) {
			sv_log(SV_LOG_WARN, "cm: file %llu (pid %d): malformed "
			       "request (%zd bytes) refused",
			       (unsigned long long)f->token, (int)f->pid, n);
			r.ret = -EINVAL;
		} else {
			r.ret = dispatch(f, &q, &r);
		}
		if (r.ret < 0 || r.ret == SV_UCMA_STALE)
			r.out_len = 0;
		sv_cm_flush();
		rearm_timer();
		if (sv_send_msg(f->sock, &r, SV_UCMA_RSP_HDR + r.out_len, -1,
				MSG_DONTWAIT)) {
			sv_log(SV_LOG_WARN, "cm: file %llu (pid %d): does not read "
			       "its responses: closed", (unsigned long long)f->token,
			       (int)f->pid);
			return false;
		}
	}
	return true;
}

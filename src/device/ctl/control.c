// SPDX-License-Identifier: MIT
/*
 * The control path: one fixed-size command in, one fixed-size response out.
 * Every field is checked by the handler that uses it; a refused command gets
 * its errno back and a line in the log saying why.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/cm/cm.h"
#include "device/ctl/direct.h"
#include "device/roce/roce.h"
#include "device/sv_dev.h"

typedef int (*sv_handler)(struct sv_req *r);

static int cmd_hello(struct sv_req *r)
{
	const struct sv_cmd_hello *a = &r->cmd->u.hello;
	struct sv_rsp_hello *h = &r->rsp->u.hello;

	if (a->abi != SV_PROTO_VERSION) {
		r->why = "protocol version mismatch";
		return -EPROTO;
	}
	if (a->flags & ~SV_HELLO_PROBE) {
		r->why = "unknown hello flags";
		return -EINVAL;
	}
	/* once a probe, always a probe: a connection cannot shed the limit */
	r->client->probe |= !!(a->flags & SV_HELLO_PROBE);
	h->abi = SV_PROTO_VERSION;
	h->daemon_pid = (uint32_t)getpid();
	h->client_id = r->client->id;
	memcpy(h->dev_name, sv_dev.name, sizeof(h->dev_name));
	h->node_guid = sv_dev.attr.node_guid;
	h->dev_index = 0;
	h->uverbs = sv_dev.uverbs;
	h->owner_uid = (uint32_t)geteuid();
	return 0;
}

static int cmd_query_device(struct sv_req *r)
{
	r->rsp->u.dev = sv_dev.attr;
	return 0;
}

static int cmd_query_port(struct sv_req *r)
{
	if (r->cmd->u.query_port.port_num != 1) {
		r->why = "no such port";
		return -EINVAL;
	}
	r->rsp->u.port = sv_dev.port;
	return 0;
}

static int cmd_query_gid(struct sv_req *r)
{
	const struct sv_cmd_query_gid *a = &r->cmd->u.query_gid;

	if (a->port_num != 1) {
		r->why = "no such port";
		return -EINVAL;
	}
	if (a->index >= SV_GID_TBL_LEN) {
		r->why = "gid index out of range";
		return -EINVAL;
	}
	r->rsp->u.gid = sv_dev.gid[a->index];
	return 0;
}

static int cmd_open_context(struct sv_req *r)
{
	int ret;

	if (r->client->async_fd >= 0) {
		r->why = "context already open on this connection";
		return -EBUSY;
	}
	ret = sv_check_event_socket(r->fd_in, &r->why);
	if (ret)
		return ret;
	if (sv_dev.db_memfd < 0) {
		r->why = "no doorbell pages";
		return -ENODEV;
	}
	r->fd_out = fcntl(sv_dev.db_memfd, F_DUPFD_CLOEXEC, 0);
	if (r->fd_out < 0) {
		r->why = "cannot hand out the doorbell pages";
		return -EMFILE;
	}
	r->client->async_fd = r->fd_in;
	r->fd_in = -1;
	r->rsp->u.open_context.db_pages = SV_DB_PAGES;
	r->rsp->u.open_context.db_bytes = (uint64_t)SV_DB_PAGES * SV_DB_PAGE_BYTES;
	return 0;
}

/* A process that shares this connection since a fork wants its responses
 * apart (clients.c answers this command on the descriptor it brings). */
static int cmd_reply_channel(struct sv_req *r)
{
	int ret = sv_check_event_socket(r->fd_in, &r->why);

	if (ret)
		return ret;
	ret = sv_client_chan_add(r->client, r->fd_in);
	if (ret < 0) {
		r->why = "as many processes share this context as it has "
			 "reply channels";
		return -ENOMEM;
	}
	r->fd_in = -1;
	r->rsp->u.obj.handle = (uint64_t)ret;
	return 0;
}

static int cmd_alloc_pd(struct sv_req *r)
{
	struct sv_pd *pd;
	int ret;

	if (sv_dev.total[SV_OBJ_PD] >= SV_MAX_PD) {
		r->why = "max_pd reached";
		return -ENOMEM;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return -ENOMEM;
	pd->owner = r->client;
	pd->id = ++sv_dev.next_pd_id ? sv_dev.next_pd_id : ++sv_dev.next_pd_id;
	ret = sv_client_add_obj(r, SV_OBJ_PD, pd, &pd->handle);
	if (ret) {
		free(pd);
		return ret;
	}
	r->rsp->u.obj.handle = pd->handle;
	return 0;
}

static int cmd_dealloc_pd(struct sv_req *r)
{
	uint64_t h = r->cmd->u.handle.handle;
	struct sv_pd *pd = sv_req_obj(r, h, SV_OBJ_PD);

	if (!pd)
		return -EINVAL;
	if (pd->refs) {
		r->why = "pd still has objects";
		return -EBUSY;
	}
	sv_client_del_obj(r->client, SV_OBJ_PD, h);
	free(pd);
	return 0;
}

static void stat_fill(struct sv_rsp_stat *s, uint32_t first)
{
	struct sv_client *c;
	uint32_t i = 0;

	s->nclients = sv_dev.nclients;
	memcpy(s->total, sv_dev.total, sizeof(s->total));
	s->keys_live = sv_dev.keys.live;
	s->daemon_pid = (uint32_t)getpid();
	s->refused = sv_dev.refused;
	for (c = sv_dev.clients.next; c != &sv_dev.clients; c = c->next, i++) {
		struct sv_stat_client *e;

		if (i < first)
			continue;
		if (s->nlisted == SV_STAT_PAGE)
			break;
		e = &s->client[s->nlisted++];
		e->client_id = c->id;
		e->pid = (uint32_t)c->pid;
		e->uid = (uint32_t)c->uid;
		memcpy(e->count, c->objs.count, sizeof(e->count));
	}
}

static int cmd_stat(struct sv_req *r)
{
	stat_fill(&r->rsp->u.stat, r->cmd->u.stat.first);
	return 0;
}

void sv_stat_wire_fill(struct sv_rsp_stat_wire *w)
{
	sv_roce_stat_fill(w);
	sv_direct_counts(&w->direct_msgs, &w->direct_bytes, &w->direct_mapped,
			 w->direct_refused);
	w->lo_msgs = sv_dev.lo_msgs + w->direct_msgs;
	w->lo_bytes = sv_dev.lo_bytes + w->direct_bytes;
	sv_cm_stat_fill(w);
}

static int cmd_stat_wire(struct sv_req *r)
{
	const struct sv_cmd_stat *a = &r->cmd->u.stat;

	if (a->first || a->rsvd) {
		r->why = "reserved fields set";
		return -EINVAL;
	}
	sv_stat_wire_fill(&r->rsp->u.stat_wire);
	return 0;
}

/* How many of wq's slots are taken: what the client posted less what the
 * device took, as far as the ring (the client's to write) can be believed. */
static uint32_t wq_used(const struct sv_wq *wq)
{
	uint32_t used;

	if (!wq->entries || !wq->hdr)
		return 0;
	used = __atomic_load_n(&wq->hdr->prod, __ATOMIC_RELAXED) - wq->cons;
	return used > wq->entries ? wq->entries : used;
}

static int cmd_stat_qp(struct sv_req *r)
{
	const struct sv_cmd_stat *a = &r->cmd->u.stat;
	struct sv_rsp_stat_qp *o = &r->rsp->u.stat_qp;
	const uint32_t slots = sizeof(sv_dev.qpn_tab) / sizeof(sv_dev.qpn_tab[0]);
	uint32_t i;

	if (a->rsvd || a->first >= slots) {
		r->why = a->rsvd ? "reserved fields set" : "no such slot";
		return -EINVAL;
	}
	for (i = 0; i < slots; i++)
		o->nqps += sv_dev.qpn_tab[i] != NULL;
	for (i = a->first; i < slots && o->nlisted < SV_STAT_QP_PAGE; i++) {
		const struct sv_qp *qp = sv_dev.qpn_tab[i];
		struct sv_stat_qp *e;

		if (!qp)
			continue;
		e = &o->qp[o->nlisted++];
		e->client_id = qp->owner ? qp->owner->id : 0;
		e->pid = qp->owner ? (uint32_t)qp->owner->pid : 0;
		e->qpn = qp->qpn;
		e->type = (uint8_t)qp->type;
		e->state = (uint8_t)qp->state;
		e->wire = qp->roce != NULL;
		e->srq = qp->srq != NULL;
		e->dest_qpn = qp->attr.dest_qp_num;
		e->sq_entries = qp->sq.entries;
		e->sq_used = wq_used(&qp->sq);
		e->rq_entries = qp->rq.entries;
		e->rq_used = wq_used(&qp->rq);
		e->sends = qp->st_sends;
		e->recvs = qp->st_recvs;
		/* and what ran in the processes (the direct path) */
		sv_direct_qp_counts(qp, &e->sends, &e->recvs);
		e->errors = qp->st_errors;
		e->retrans = qp->st_retrans;
	}
	o->next = i < slots ? i : 0;
	return 0;
}

enum {
	F_FD = 1 << 0,      /* takes a descriptor */
	F_PROBE = 1 << 1,   /* no objects: allowed on a probe connection */
};

static const struct {
	sv_handler fn;
	unsigned int flags;
} handlers[SV_CMD_MAX] = {
	[SV_CMD_HELLO] = { cmd_hello, F_PROBE },
	[SV_CMD_QUERY_DEVICE] = { cmd_query_device, F_PROBE },
	[SV_CMD_QUERY_PORT] = { cmd_query_port, F_PROBE },
	[SV_CMD_QUERY_GID] = { cmd_query_gid, F_PROBE },
	[SV_CMD_OPEN_CONTEXT] = { cmd_open_context, F_FD },
	[SV_CMD_OPEN_DIRECT] = { sv_cmd_open_direct, 0 },
	[SV_CMD_MR_FILE] = { sv_cmd_mr_file, 0 },
	[SV_CMD_DIRECT_EST] = { sv_cmd_direct_est, 0 },
	[SV_CMD_DIRECT_RECV] = { sv_cmd_direct_recv, 0 },
	[SV_CMD_DIRECT_NOTIFY] = { sv_cmd_direct_notify, 0 },
	[SV_CMD_ALLOC_PD] = { cmd_alloc_pd, 0 },
	[SV_CMD_DEALLOC_PD] = { cmd_dealloc_pd, 0 },
	[SV_CMD_REG_MR] = { sv_cmd_reg_mr, 0 },
	[SV_CMD_REREG_MR] = { sv_cmd_rereg_mr, 0 },
	[SV_CMD_DEREG_MR] = { sv_cmd_dereg_mr, 0 },
	[SV_CMD_CREATE_CHANNEL] = { sv_cmd_create_channel, F_FD },
	[SV_CMD_DESTROY_CHANNEL] = { sv_cmd_destroy_channel, 0 },
	[SV_CMD_CREATE_CQ] = { sv_cmd_create_cq, 0 },
	[SV_CMD_RESIZE_CQ] = { sv_cmd_resize_cq, 0 },
	[SV_CMD_NOTIFY_CQ] = { sv_cmd_notify_cq, 0 },
	[SV_CMD_DESTROY_CQ] = { sv_cmd_destroy_cq, 0 },
	[SV_CMD_STAT] = { cmd_stat, F_PROBE },
	[SV_CMD_STAT_WIRE] = { cmd_stat_wire, F_PROBE },
	[SV_CMD_STAT_QP] = { cmd_stat_qp, F_PROBE },
	[SV_CMD_INJECT] = { sv_cmd_inject, F_PROBE },
	[SV_CMD_WHY] = { sv_cmd_why, F_PROBE },
	[SV_CMD_CAPTURE] = { sv_cmd_capture, F_PROBE | F_FD },
	[SV_CMD_REPLY_CHANNEL] = { cmd_reply_channel, F_FD },
	[SV_CMD_CREATE_QP] = { sv_cmd_create_qp, 0 },
	[SV_CMD_MODIFY_QP] = { sv_cmd_modify_qp, 0 },
	[SV_CMD_QUERY_QP] = { sv_cmd_query_qp, 0 },
	[SV_CMD_DESTROY_QP] = { sv_cmd_destroy_qp, 0 },
	[SV_CMD_CREATE_SRQ] = { sv_cmd_create_srq, 0 },
	[SV_CMD_MODIFY_SRQ] = { sv_cmd_modify_srq, 0 },
	[SV_CMD_QUERY_SRQ] = { sv_cmd_query_srq, 0 },
	[SV_CMD_DESTROY_SRQ] = { sv_cmd_destroy_srq, 0 },
	[SV_CMD_CREATE_AH] = { sv_cmd_create_ah, 0 },
	[SV_CMD_DESTROY_AH] = { sv_cmd_destroy_ah, 0 },
	[SV_CMD_CREATE_DOMAIN] = { sv_cmd_create_domain, 0 },
	[SV_CMD_DESTROY_DOMAIN] = { sv_cmd_destroy_domain, 0 },
	[SV_CMD_ALLOC_MR] = { sv_cmd_alloc_mr, 0 },
	[SV_CMD_ALLOC_PAGE_LIST] = { sv_cmd_alloc_page_list, 0 },
	[SV_CMD_FREE_PAGE_LIST] = { sv_cmd_free_page_list, 0 },
	[SV_CMD_ALLOC_DM] = { sv_cmd_alloc_dm, 0 },
	[SV_CMD_FREE_DM] = { sv_cmd_free_dm, 0 },
	[SV_CMD_ADVISE_MR] = { sv_cmd_advise_mr, 0 },
	[SV_CMD_CONTEXT_TOKEN] = { sv_cmd_context_token, 0 },
	[SV_CMD_IMPORT_CONTEXT] = { sv_cmd_import_context, F_FD },
	[SV_CMD_IMPORT_OBJ] = { sv_cmd_import_obj, 0 },
	[SV_CMD_REG_MR_LIST] = { sv_cmd_reg_mr_list, 0 },
	[SV_CMD_ALLOC_MW] = { sv_cmd_alloc_mw, 0 },
	[SV_CMD_DEALLOC_MW] = { sv_cmd_dealloc_mw, 0 },
	[SV_CMD_ATTACH_MCAST] = { sv_cmd_attach_mcast, 0 },
	[SV_CMD_DETACH_MCAST] = { sv_cmd_detach_mcast, 0 },
	[SV_CMD_OPEN_XRCD] = { sv_cmd_open_xrcd, F_FD },
	[SV_CMD_CLOSE_XRCD] = { sv_cmd_close_xrcd, 0 },
	[SV_CMD_OPEN_QP] = { sv_cmd_open_qp, 0 },
};

/* Is the daemon at its descriptor limit (so that a descriptor sent to it
 * was dropped)? Asked only once a command failed. */
static bool out_of_fds(const struct sv_client *c)
{
	int fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);

	if (fd >= 0) {
		close(fd);
		return false;
	}
	return errno == EMFILE || errno == ENFILE;
}

void sv_control_handle(struct sv_client *c, const struct sv_cmd *cmd,
		       ssize_t n, int fd_in, struct sv_rsp *rsp, int *fd_out)
{
	enum sv_cmd_verdict v = sv_cmd_check(cmd, (size_t)n);
	struct sv_req r = {
		.client = c, .cmd = cmd, .rsp = rsp, .fd_in = fd_in, .fd_out = -1,
	};
	unsigned int op = 0;
	bool fd_short = false;
	int ret;

	if (v != SV_CMD_OK) {
		/* answer with what can be read of the header */
		struct sv_cmd hdr_only;

		memset(&hdr_only, 0, sizeof(hdr_only));
		if (n >= (ssize_t)sizeof(cmd->hdr))
			hdr_only.hdr = cmd->hdr;
		sv_rsp_init(rsp, &hdr_only, -EINVAL);
		r.why = sv_cmd_verdict_str(v);
		ret = -EINVAL;
		op = hdr_only.hdr.op;
		goto out;
	}
	op = cmd->hdr.op;
	sv_rsp_init(rsp, cmd, 0);
	if (!handlers[op].fn) {
		r.why = "unknown command";
		ret = -EOPNOTSUPP;
	} else if (c->probe && !(handlers[op].flags & F_PROBE)) {
		r.why = "probe connections create no objects";
		ret = -EPERM;
	} else if (c->orphan && !(handlers[op].flags & F_PROBE)) {
		r.why = "the context this one imported is gone";
		ret = -EIO;
	} else if (r.fd_in >= 0 && !(handlers[op].flags & F_FD)) {
		r.why = "unexpected descriptor";
		ret = -EINVAL;
	} else if (sv_inject_cmd_armed() && (ret = sv_inject_cmd(c, op))) {
		r.why = "a fault injected by softverbs inject";
	} else {
		ret = handlers[op].fn(&r);
		/* a descriptor the kernel could not give the daemon (at its
		 * RLIMIT_NOFILE, recvmsg drops it: MSG_CTRUNC) is missed by
		 * the handler as one never sent */
		if (ret == -EINVAL && fd_in < 0 && (handlers[op].flags & F_FD) &&
		    out_of_fds(c)) {
			r.why = "the descriptor sent was dropped";
			ret = -EMFILE;
		}
	}
	fd_short = ret == -EMFILE || ret == -ENFILE;
	if (fd_short) {
		/* the program hears ENOMEM for an object, EMFILE for a
		 * context (as for a connection refused), never EINVAL */
		sv_log_client(c, "out of descriptors", SV_LOG_WARN,
			      "%s refused: out of descriptors (%s): %s",
			      sv_cmd_name(op), strerror(-ret),
			      r.why ? r.why : "no reason given");
		ret = op == SV_CMD_OPEN_CONTEXT ||
		      op == SV_CMD_CONTEXT_TOKEN ||
		      op == SV_CMD_IMPORT_CONTEXT ? -EMFILE : -ENOMEM;
	}
	rsp->hdr.status = ret;
out:
	if (r.fd_in >= 0)
		close(r.fd_in);
	if (ret) {
		sv_dev.refused++;
		sv_why_cmd(c, op, ret, r.why ? r.why : strerror(-ret));
		if (!fd_short)  /* said above */
			sv_log_client(c, r.why, SV_LOG_INFO,
				      "%s refused: %s (%s)", sv_cmd_name(op),
				      strerror(-ret),
				      r.why ? r.why : "see errno");
		if (r.fd_out >= 0)
			close(r.fd_out);
		r.fd_out = -1;
	}
	*fd_out = r.fd_out;
}

// SPDX-License-Identifier: MIT
/*
 * The device in the fuzzer's process (fuzz_dev.h): what main.c and socket.c set up,
 * without the socket and the event loop, and a client's side of the
 * protocol reduced to what the harnesses need.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device/ctl/qp_state.h"
#include "fuzz_dev.h"

struct sv_device sv_dev = { .lock = PTHREAD_MUTEX_INITIALIZER, .db_memfd = -1 };

/* $FZ_VERBOSE: say what the CQs get (writing seeds) */
static bool verbose;

const uint8_t fz_local_gid[16] = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 };
const uint8_t fz_peer_gid[16] = { [10] = 0xff, [11] = 0xff, 10, 77, 0, 12 };

void fz_dev_init(bool wire)
{
	static bool done;

	if (done)
		return;
	done = true;
	verbose = getenv("FZ_VERBOSE") != NULL;
	/* every refusal is formatted (UBSan sees the arguments) and goes
	 * nowhere */
	FZ_CHECK(sv_log_open("/dev/null") == 0);
	sv_dev.clients.next = sv_dev.clients.prev = &sv_dev.clients;
	FZ_CHECK(sv_keytab_init(&sv_dev.keys, SV_MAX_MR) == 0);
	FZ_CHECK(sv_identity_init("127.0.0.1", NULL) == 0);
	FZ_CHECK(!memcmp(sv_dev.gid[0].gid, fz_local_gid, 16));
	FZ_CHECK(sv_engine_start() == 0);
	if (wire)
		FZ_CHECK(sv_roce_start(0, NULL, true) == 0);
}

struct sv_client *fz_client_new(void)
{
	struct sv_client *c;
	int sv[2];

	FZ_CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	/* the daemon's end; the other is closed at once: responses come
	 * back through fz_cmd, never on the socket */
	sv_dev_lock(true);
	c = sv_client_new(sv[0]);
	sv_dev_unlock();
	FZ_CHECK(c != NULL);
	close(sv[1]);
	return c;
}

void fz_client_free(struct sv_client *c)
{
	sv_dev_lock(true);
	sv_client_teardown(c);
	sv_dev_unlock();
	sv_client_free(c);
}

int fz_cmd(struct sv_client *c, struct sv_cmd *cmd, int fd_in,
	   struct sv_rsp *rsp, int *fd_out, bool raw)
{
	int out = -1;

	if (!raw) {
		cmd->hdr.magic = SV_PROTO_MAGIC;
		cmd->hdr.version = SV_PROTO_VERSION;
	}
	sv_dev_lock(true);
	sv_control_handle(c, cmd, sizeof(*cmd), fd_in, rsp, &out);
	sv_dev_unlock();
	FZ_CHECK(rsp->hdr.magic == SV_PROTO_MAGIC);
	FZ_CHECK(rsp->hdr.status <= 0);
	FZ_CHECK(rsp->hdr.status == 0 || out < 0);
	if (fd_out)
		*fd_out = out;
	else if (out >= 0)
		close(out);
	return rsp->hdr.status;
}

static struct sv_rsp rsp;

uint64_t fz_alloc_pd(struct sv_client *c)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_ALLOC_PD);
	FZ_CHECK(fz_cmd(c, &cmd, -1, &rsp, NULL, false) == 0);
	return rsp.u.obj.handle;
}

uint64_t fz_reg_mr(struct sv_client *c, uint64_t pd, void *buf,
		   uint64_t len, uint32_t access, uint32_t *key)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_REG_MR);
	cmd.u.reg_mr.pd = pd;
	cmd.u.reg_mr.addr = (uintptr_t)buf;
	cmd.u.reg_mr.length = len;
	cmd.u.reg_mr.iova = (uintptr_t)buf;
	cmd.u.reg_mr.access = access;
	if (fz_cmd(c, &cmd, -1, &rsp, NULL, false))
		return 0;
	if (key)
		*key = rsp.u.mr.lkey;
	return rsp.u.mr.handle;
}

uint64_t fz_create_cq(struct sv_client *c, uint32_t cqe)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_CREATE_CQ);
	cmd.u.create_cq.cqe = cqe;
	FZ_CHECK(fz_cmd(c, &cmd, -1, &rsp, NULL, false) == 0);
	return rsp.u.cq.handle;
}

int fz_create_qp(struct sv_client *c, uint32_t type, uint64_t pd,
		 uint64_t cq, uint64_t srq, struct fz_qp *out)
{
	struct sv_cmd cmd;
	int ret;

	sv_cmd_init(&cmd, SV_CMD_CREATE_QP);
	cmd.u.create_qp.pd = pd;
	cmd.u.create_qp.send_cq = cq;
	cmd.u.create_qp.recv_cq = cq;
	cmd.u.create_qp.srq = srq;
	cmd.u.create_qp.qp_type = type;
	cmd.u.create_qp.cap.max_send_wr = 16;
	cmd.u.create_qp.cap.max_recv_wr = srq ? 0 : 16;
	cmd.u.create_qp.cap.max_send_sge = 4;
	cmd.u.create_qp.cap.max_recv_sge = srq ? 0 : 4;
	cmd.u.create_qp.cap.max_inline_data = 64;
	ret = fz_cmd(c, &cmd, -1, &rsp, NULL, false);
	if (ret)
		return ret;
	out->handle = rsp.u.qp.handle;
	out->qpn = rsp.u.qp.qpn;
	out->qp = sv_objtab_lookup(&c->objs, out->handle, SV_OBJ_QP);
	FZ_CHECK(out->qp && out->qp->qpn == out->qpn);
	return 0;
}

/* The attributes of a transition (those the rule allows are all given). */
static void qp_attr(uint32_t next, uint32_t dqpn,
		    const uint8_t dgid[16], uint32_t psn,
		    struct sv_wire_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = next;
	a->port_num = 1;
	a->qkey = 0x11111111;
	a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = dqpn;
	a->rq_psn = psn;
	a->sq_psn = psn;
	a->max_rd_atomic = 4;
	a->max_dest_rd_atomic = 4;
	a->min_rnr_timer = 1;
	a->timeout = 14;
	a->retry_cnt = 3;
	a->rnr_retry = 3;
	a->ah_attr.is_global = 1;
	a->ah_attr.port_num = 1;
	a->ah_attr.hop_limit = 64;
	memcpy(a->ah_attr.dgid, dgid, 16);
}

static int modify(struct sv_client *c, struct fz_qp *q, uint32_t cur,
		  uint32_t next, uint32_t dqpn, const uint8_t dgid[16],
		  uint32_t psn)
{
	uint32_t req, opt;
	struct sv_cmd cmd;

	if (sv_qp_modify_rule(q->qp->type, cur, next, &req, &opt))
		return -EINVAL;
	sv_cmd_init(&cmd, SV_CMD_MODIFY_QP);
	cmd.u.modify_qp.qp = q->handle;
	cmd.u.modify_qp.attr_mask = IBV_QP_STATE | req;
	qp_attr(next, dqpn, dgid, psn, &cmd.u.modify_qp.attr);
	return fz_cmd(c, &cmd, -1, &rsp, NULL, false);
}

int fz_qp_to(struct sv_client *c, struct fz_qp *q, uint32_t state,
	     uint32_t dqpn, const uint8_t dgid[16], uint32_t psn)
{
	static const uint32_t path[] = { IBV_QPS_INIT, IBV_QPS_RTR,
					 IBV_QPS_RTS, IBV_QPS_SQD };
	uint32_t cur = IBV_QPS_RESET;
	int ret;

	if (state == IBV_QPS_RESET)
		return 0;
	if (state == IBV_QPS_ERR)
		return modify(c, q, cur, IBV_QPS_ERR, dqpn, dgid, psn);
	for (unsigned int i = 0; i < sizeof(path) / sizeof(path[0]); i++) {
		ret = modify(c, q, cur, path[i], dqpn, dgid, psn);
		if (ret)
			return ret;
		cur = path[i];
		if (cur == state)
			return 0;
	}
	return -EINVAL;
}

uint64_t fz_create_ah(struct sv_client *c, uint64_t pd,
		      const uint8_t dgid[16])
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_CREATE_AH);
	cmd.u.create_ah.pd = pd;
	cmd.u.create_ah.attr.is_global = 1;
	cmd.u.create_ah.attr.port_num = 1;
	cmd.u.create_ah.attr.hop_limit = 64;
	memcpy(cmd.u.create_ah.attr.dgid, dgid, 16);
	if (fz_cmd(c, &cmd, -1, &rsp, NULL, false))
		return 0;
	return rsp.u.obj.handle;
}

bool fz_post_send(struct sv_qp *qp, const struct sv_send_wqe *w,
		  const void *body, uint32_t body_len)
{
	struct sv_wq_ring *h = qp->sq.hdr;
	uint32_t prod = h->prod;
	uint8_t *slot;

	if (!qp->sq.entries ||
	    prod - __atomic_load_n(&h->cons, __ATOMIC_ACQUIRE) >= qp->sq.entries)
		return false;
	slot = sv_wq_slot(h, qp->sq.entries, qp->sq.stride, prod);
	memcpy(slot, w, sizeof(*w));
	if (body_len > qp->sq.stride - SV_SEND_WQE_HDR)
		body_len = qp->sq.stride - SV_SEND_WQE_HDR;
	memcpy(slot + SV_SEND_WQE_HDR, body, body_len);
	__atomic_store_n(&h->prod, prod + 1, __ATOMIC_RELEASE);
	return true;
}

bool fz_post_recv(struct sv_qp *qp, uint64_t wr_id,
		  const struct sv_wqe_sge *sge, uint32_t nsge)
{
	struct sv_wq_ring *h = qp->rq.hdr;
	struct sv_recv_wqe w = { .wr_id = wr_id, .num_sge = nsge };
	uint32_t prod;
	uint8_t *slot;

	if (!h || !qp->rq.entries)
		return false;
	prod = h->prod;
	if (prod - __atomic_load_n(&h->cons, __ATOMIC_ACQUIRE) >= qp->rq.entries)
		return false;
	if (nsge > qp->rq.max_sge)
		nsge = w.num_sge = qp->rq.max_sge;
	slot = sv_wq_slot(h, qp->rq.entries, qp->rq.stride, prod);
	memcpy(slot, &w, sizeof(w));
	memcpy(slot + SV_RECV_WQE_HDR, sge, nsge * sizeof(*sge));
	__atomic_store_n(&h->prod, prod + 1, __ATOMIC_RELEASE);
	return true;
}

unsigned int fz_poll_cq(struct sv_client *c, uint64_t handle)
{
	struct sv_cq *cq = sv_objtab_lookup(&c->objs, handle, SV_OBJ_CQ);
	struct sv_cq_ring *r;
	unsigned int n = 0;

	if (!cq)
		return 0;
	r = cq->ring;
	while (r->cons != __atomic_load_n(&r->prod, __ATOMIC_ACQUIRE)) {
		const struct sv_cqe *e = sv_cq_slot(r, cq->entries, r->cons);

		FZ_CHECK(e->status <= IBV_WC_GENERAL_ERR);
		if (verbose)
			fprintf(stderr, "cqe: wr_id %llu status %u opcode %u "
				"len %u qp %#x\n", (unsigned long long)e->wr_id,
				e->status, e->opcode, e->byte_len, e->qp_num);
		__atomic_store_n(&r->cons, r->cons + 1, __ATOMIC_RELEASE);
		n++;
	}
	return n;
}

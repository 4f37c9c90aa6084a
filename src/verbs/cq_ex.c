// SPDX-License-Identifier: MIT
/*
 * A CQ's extended polling API (ibv_create_cq_ex): start_poll, next_poll
 * and end_poll, which hold the CQ lock from the first to the last and read
 * one completion at a time in place, and the read_* ops of the completion
 * read. The completions come from the same two rings as sv_poll_cq's
 * (cq.c), in the same order: the daemon's and the direct path's private
 * ring, merged by the private ring's stamps.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <time.h>

#include "verbs/cq_int.h"

static inline struct sv_cq *ex_to_sv(struct ibv_cq_ex *ex)
{
	return (struct sv_cq *)ex;
}

/* The next completion to read, from the private ring first (see
 * sv_poll_cq): false when there is none. */
static inline bool ex_load(struct sv_cq *cq)
{
	/* the daemon's first (acquire), then the private ring (see
	 * sv_poll_cq) */
	uint32_t ready = cq_ready(cq);

	if (unlikely(xnews(cq)))
		sv_direct_xdrain(cq);
	/* a head not due with none of the daemon's loaded: those below its
	 * stamp were written before it, loaded again (poll_merged) */
	if (unlikely(dring_avail_locked(cq)) && !ready && !dring_due(cq, 0)) {
		ready = cq_ready(cq);
		if (ready && xnews(cq))
			sv_direct_xdrain(cq);
	}
	/* the private ring's next, once the daemon's below its stamp are
	 * read (poll_merged) */
	if (unlikely(dring_avail_locked(cq)) &&
	    (dring_due(cq, 0) || !ready ||
	     (cq->xcapped && (int32_t)(cq->cons - cq->xcap) >= 0))) {
		cq->cur = &cq->dring[cq->dcons & cq->dmask];
		cq->cur_direct = true;
	} else if (ready) {
		cq->cur = sv_cq_slot(cq->ring, cq->entries, cq->cons);
		cq->cur_direct = false;
	} else {
		return false;
	}
	cq->ex.status = (enum ibv_wc_status)cq->cur->status;
	cq->ex.wr_id = cq->cur->wr_id;
	return true;
}

/* The completion read is consumed. */
static inline void ex_consume(struct sv_cq *cq)
{
	if (unlikely(cq->cur_direct))
		dring_consume(cq, 1);
	else
		cq_consume(cq, 1);
}

static int ex_start_poll(struct ibv_cq_ex *ex, struct ibv_poll_cq_attr *attr)
{
	struct sv_cq *cq = ex_to_sv(ex);

	if (attr && attr->comp_mask)
		return EINVAL;
	cq_lock(cq);
	if (!ex_load(cq)) {
		cq_unlock(cq);
		return ENOENT; /* and the caller must not call end_poll */
	}
	return 0;
}

static int ex_next_poll(struct ibv_cq_ex *ex)
{
	struct sv_cq *cq = ex_to_sv(ex);

	ex_consume(cq);
	if (!ex_load(cq)) {
		cq->cur = NULL;
		return ENOENT;
	}
	return 0;
}

static void ex_end_poll(struct ibv_cq_ex *ex)
{
	struct sv_cq *cq = ex_to_sv(ex);

	if (cq->cur)
		ex_consume(cq);
	cq->cur = NULL;
	cq_unlock(cq);
}

#define SV_EX_READER(name, type, expr)                                       \
	static type ex_read_##name(struct ibv_cq_ex *ex)                    \
	{                                                                    \
		const struct sv_cqe *e = ex_to_sv(ex)->cur;                  \
		return (type)(expr);                                         \
	}

SV_EX_READER(opcode, enum ibv_wc_opcode, e->opcode)
SV_EX_READER(vendor_err, uint32_t, e->vendor_err)
SV_EX_READER(byte_len, uint32_t, e->byte_len)
SV_EX_READER(imm_data, __be32, e->imm_data)
SV_EX_READER(qp_num, uint32_t, e->qp_num)
SV_EX_READER(src_qp, uint32_t, e->src_qp)
SV_EX_READER(wc_flags, unsigned int, e->wc_flags)
SV_EX_READER(slid, uint32_t, e->slid)
SV_EX_READER(sl, uint8_t, e->sl)
SV_EX_READER(dlid_path_bits, uint8_t, e->dlid_path_bits)
SV_EX_READER(completion_ts, uint64_t, e->timestamp)

static uint16_t ex_read_cvlan(struct ibv_cq_ex *ex)
{
	(void)ex;
	return 0; /* no VLANs on this device */
}

static uint32_t ex_read_flow_tag(struct ibv_cq_ex *ex)
{
	(void)ex;
	return 0; /* no flow steering */
}

static uint64_t ex_read_wallclock_ns(struct ibv_cq_ex *ex)
{
	/* CQE timestamps are CLOCK_MONOTONIC ns; translate to real time */
	struct timespec m, r;
	const struct sv_cqe *e = ex_to_sv(ex)->cur;

	clock_gettime(CLOCK_MONOTONIC, &m);
	clock_gettime(CLOCK_REALTIME, &r);
	return e->timestamp + ((uint64_t)r.tv_sec * 1000000000ull + r.tv_nsec) -
	       ((uint64_t)m.tv_sec * 1000000000ull + m.tv_nsec);
}

/* A receive that matched a tag (IBV_WC_TM_MATCH; a rendezvous left to
 * software too): its TMH's tag and app_ctx; any other completion: 0. */
static void ex_read_tm_info(struct ibv_cq_ex *ex, struct ibv_wc_tm_info *tm)
{
	const struct sv_cqe *e = ex_to_sv(ex)->cur;
	bool match = (e->status == IBV_WC_SUCCESS ||
		      e->status == IBV_WC_TM_RNDV_INCOMPLETE) &&
		     (e->wc_flags & IBV_WC_TM_MATCH);

	memset(tm, 0, sizeof(*tm));
	tm->tag = match ? e->tm_tag : 0;
	tm->priv = match ? e->tm_priv : 0;
}

void sv_cq_set_ex_ops(struct ibv_cq_ex *ex)
{
	ex->start_poll = ex_start_poll;
	ex->next_poll = ex_next_poll;
	ex->end_poll = ex_end_poll;
	ex->read_opcode = ex_read_opcode;
	ex->read_vendor_err = ex_read_vendor_err;
	ex->read_byte_len = ex_read_byte_len;
	ex->read_imm_data = ex_read_imm_data;
	ex->read_qp_num = ex_read_qp_num;
	ex->read_src_qp = ex_read_src_qp;
	ex->read_wc_flags = ex_read_wc_flags;
	ex->read_slid = ex_read_slid;
	ex->read_sl = ex_read_sl;
	ex->read_dlid_path_bits = ex_read_dlid_path_bits;
	ex->read_completion_ts = ex_read_completion_ts;
	ex->read_cvlan = ex_read_cvlan;
	ex->read_flow_tag = ex_read_flow_tag;
	ex->read_tm_info = ex_read_tm_info;
	ex->read_completion_wallclock_ns = ex_read_wallclock_ns;
}

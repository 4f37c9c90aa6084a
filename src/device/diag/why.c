// SPDX-License-Identifier: MIT
/*
 * Why (softverbs why; docs/DESIGN.md "Why"): the device's last refusals
 * and error completions, each with the reason the device had.
 *
 * A refused command's reason is its handler's r->why. An error completion's
 * is what the check that failed said (which key, which bound, which right):
 * a check that fails on the way to an error completion writes its reason
 * into its thread's buffer (sv_why_set, only on failure: nothing on the
 * fast path), and the completion takes it (sv_qp_push). A completion with
 * no such reason (a retry count exceeded, a NAK from a peer across the
 * wire) gets what its status means. Flushes are not kept: they follow an
 * error that is.
 *
 * One ring of SV_WHY_RING records for the whole device, behind a leaf
 * mutex (control, engine and wire threads all record).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "device/sv_dev.h"

static struct {
	pthread_mutex_t lock;
	struct sv_why_rec rec[SV_WHY_RING];
	uint64_t total;
} ring = { .lock = PTHREAD_MUTEX_INITIALIZER };

static __thread char why_buf[SV_WHY_LEN];

void sv_why_set(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why_buf, sizeof(why_buf), fmt, ap);
	va_end(ap);
}

void sv_why_clear(void)
{
	why_buf[0] = 0;
}

static uint64_t now_real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put(const struct sv_why_rec *r)
{
	pthread_mutex_lock(&ring.lock);
	ring.rec[ring.total % SV_WHY_RING] = *r;
	ring.total++;
	pthread_mutex_unlock(&ring.lock);
}

void sv_why_cmd(const struct sv_client *c, unsigned int op, int err,
		const char *why)
{
	struct sv_why_rec r;

	memset(&r, 0, sizeof(r));
	r.time_ns = now_real_ns();
	r.client_id = c ? c->id : 0;
	r.pid = c ? (uint32_t)c->pid : 0;
	r.kind = SV_WHY_CMD;
	r.op = op;
	r.status = err;
	snprintf(r.why, sizeof(r.why), "%s", why ? why : "");
	put(&r);
}

/* What a completion status means, where no check said more. */
static const char *status_means(uint32_t status)
{
	switch (status) {
	case IBV_WC_LOC_LEN_ERR: return "a local length: the message is longer than the receive WQE or the device's limit";
	case IBV_WC_LOC_QP_OP_ERR: return "the WQE is malformed or not allowed on this QP";
	case IBV_WC_LOC_PROT_ERR: return "an lkey: no such MR, another PD, out of its range, or no local write";
	case IBV_WC_MW_BIND_ERR: return "the window, its MR or the rights asked";
	case IBV_WC_BAD_RESP_ERR: return "the responder answered what was not asked";
	case IBV_WC_LOC_ACCESS_ERR: return "a local access";
	case IBV_WC_REM_INV_REQ_ERR: return "the responder found the request invalid (opcode, length, alignment)";
	case IBV_WC_REM_ACCESS_ERR: return "the responder refused the rkey, its range or its rights";
	case IBV_WC_REM_OP_ERR: return "the responder could not do it (its receive WQE or memory)";
	case IBV_WC_RETRY_EXC_ERR: return "no answer from the responder after retry_cnt retransmissions";
	case IBV_WC_RNR_RETRY_EXC_ERR: return "the responder had no receive WQE posted, rnr_retry times";
	case IBV_WC_REM_ABORT_ERR: return "the responder aborted the message";
	case IBV_WC_INV_EECN_ERR:
	case IBV_WC_INV_EEC_STATE_ERR: return "no such EE context";
	case IBV_WC_FATAL_ERR: return "the QP failed";
	case IBV_WC_RESP_TIMEOUT_ERR: return "the response did not come";
	case IBV_WC_GENERAL_ERR: return "the device failed it";
	default: return "";
	}
}

void sv_why_cqe(const struct sv_qp *qp, const struct sv_cqe *e)
{
	struct sv_why_rec r;

	memset(&r, 0, sizeof(r));
	r.time_ns = now_real_ns();
	r.client_id = qp->owner ? qp->owner->id : 0;
	r.pid = qp->owner ? (uint32_t)qp->owner->pid : 0;
	r.qpn = qp->qpn;
	r.kind = SV_WHY_CQE;
	r.op = e->opcode;
	r.status = (int32_t)e->status;
	r.wr_id = e->wr_id;
	snprintf(r.why, sizeof(r.why), "%s",
		 why_buf[0] ? why_buf : status_means(e->status));
	why_buf[0] = 0;
	put(&r);
}

int sv_cmd_why(struct sv_req *r)
{
	const struct sv_cmd_stat *a = &r->cmd->u.stat;
	struct sv_rsp_why *o = &r->rsp->u.why;
	uint64_t n = (uint64_t)a->rsvd << 32 | a->first;

	pthread_mutex_lock(&ring.lock);
	o->total = ring.total;
	o->oldest = ring.total > SV_WHY_RING ? ring.total - SV_WHY_RING : 0;
	if (n < o->oldest)
		n = o->oldest;
	while (n < ring.total && o->nlisted < SV_WHY_PAGE)
		o->rec[o->nlisted++] = ring.rec[n++ % SV_WHY_RING];
	o->next = n > ring.total ? ring.total : n;
	pthread_mutex_unlock(&ring.lock);
	return 0;
}

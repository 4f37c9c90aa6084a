// SPDX-License-Identifier: MIT
/*
 * Tag matching (docs/DESIGN.md "Tag matching"): a tag-matching SRQ's list
 * of tagged buffers, the operations that change it (SRQ_OPS: TAG_ADD,
 * TAG_DEL, TAG_SYNC; qp.c writes their completions) and the lookup that a
 * tagged message makes when it arrives (the responders, loop_resp.c and
 * roce/resp.c). Under sv_dev.lock; nothing here touches a client.
 *
 * Phase synchronisation, as the verbs describe it (ibv_post_srq_ops(3)):
 * every tagged message that finds no tag is "unexpected" and goes to an
 * ordinary receive buffer; the device counts them (unexp) and software
 * says how many it has handled (an op with IBV_OPS_TM_SYNC sets synced).
 * A tag added while software had not seen every unexpected message yet
 * (its phase, the device's count when it was added, is ahead of synced)
 * might have matched one of those messages, so it matches nothing until
 * software catches up; the op's completion says so (IBV_WC_TM_SYNC_REQ).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "abi/sv_tm.h"
#include "device/sv_dev.h"

struct sv_tm *sv_tm_new(uint32_t max_tags, uint32_t max_ops)
{
	struct sv_tm *tm;

	tm = calloc(1, sizeof(*tm) + (size_t)max_tags * sizeof(tm->tag[0]));
	if (!tm)
		return NULL;
	tm->max_tags = max_tags;
	tm->max_ops = max_ops;
	tm->head = tm->tail = SV_TM_NONE;
	tm->free = max_tags ? 0 : SV_TM_NONE;
	for (uint32_t i = 0; i < max_tags; i++)
		tm->tag[i].next = i + 1 < max_tags ? i + 1 : SV_TM_NONE;
	return tm;
}

/* Has software acknowledged every unexpected message that arrived before
 * tag t was added? (Free-running counts: a signed difference.) */
static bool tm_in_phase(const struct sv_tm *tm, const struct sv_tm_tag *t)
{
	return (int32_t)(tm->synced - t->phase) >= 0;
}

struct sv_tm_tag *sv_tm_match(struct sv_tm *tm, uint64_t tag)
{
	for (uint32_t i = tm->head; i != SV_TM_NONE; i = tm->tag[i].next) {
		struct sv_tm_tag *t = &tm->tag[i];

		if (!t->busy && (tag & t->mask) == (t->tag & t->mask) &&
		    tm_in_phase(tm, t))
			return t;
	}
	return NULL;
}

/* Take tag t off the list; its slot is free, its handle names nothing. */
void sv_tm_take(struct sv_tm *tm, struct sv_tm_tag *t)
{
	uint32_t i = (uint32_t)(t - tm->tag);

	if (t->prev != SV_TM_NONE)
		tm->tag[t->prev].next = t->next;
	else
		tm->head = t->next;
	if (t->next != SV_TM_NONE)
		tm->tag[t->next].prev = t->prev;
	else
		tm->tail = t->prev;
	t->posted = false;
	t->busy = false;
	t->gen = (t->gen + 1) & (UINT32_MAX >> SV_TM_HANDLE_IDX_BITS);
	t->next = tm->free;
	tm->free = i;
	tm->posted--;
}

static uint32_t tm_add(struct sv_tm *tm, const struct sv_cmd_srq_ops *a)
{
	uint32_t i = tm->free;
	struct sv_tm_tag *t = &tm->tag[i];

	tm->free = t->next;
	t->tag = a->tag;
	t->mask = a->mask;
	t->wr_id = a->recv_wr_id;
	t->num_sge = a->num_sge;
	t->sge = a->num_sge ? a->sge : (struct sv_wqe_sge){ 0, 0, 0 };
	t->phase = tm->unexp;
	t->posted = true;
	t->next = SV_TM_NONE;
	t->prev = tm->tail;
	if (tm->tail != SV_TM_NONE)
		tm->tag[tm->tail].next = i;
	else
		tm->head = i;
	tm->tail = i;
	tm->posted++;
	return sv_tm_handle(i, t->gen);
}

int sv_tm_op(struct sv_tm *tm, const struct sv_cmd_srq_ops *a,
	     struct sv_tm_done *d, const char **why)
{
	uint32_t opcode, status = IBV_WC_SUCCESS;

	if (a->rsvd || a->flags & ~(uint32_t)(IBV_OPS_SIGNALED |
					      IBV_OPS_TM_SYNC)) {
		*why = "unknown op flags";
		return -EINVAL;
	}
	switch (a->opcode) {
	case IBV_WR_TAG_ADD:
		if (a->num_sge > SV_TM_MAX_SGE) {
			*why = "too many SGEs for a tag";
			return -EINVAL;
		}
		if (tm->free == SV_TM_NONE) {
			*why = "the tag list is full";
			return -ENOMEM;
		}
		opcode = IBV_WC_TM_ADD;
		break;
	case IBV_WR_TAG_DEL:
		if ((a->handle & SV_TM_HANDLE_IDX_MASK) >= tm->max_tags) {
			*why = "no such tag handle";
			return -EINVAL;
		}
		opcode = IBV_WC_TM_DEL;
		break;
	case IBV_WR_TAG_SYNC:
		opcode = IBV_WC_TM_SYNC;
		break;
	default:
		*why = "unknown op";
		return -EINVAL;
	}
	if (a->flags & IBV_OPS_TM_SYNC)
		tm->synced = a->unexpected_cnt;
	d->handle = 0;
	if (a->opcode == IBV_WR_TAG_ADD) {
		d->handle = tm_add(tm, a);
	} else if (a->opcode == IBV_WR_TAG_DEL) {
		struct sv_tm_tag *t =
			&tm->tag[a->handle & SV_TM_HANDLE_IDX_MASK];

		/* consumed (or deleted) already: the verbs' "concurrent
		 * consumption" */
		if (!t->posted || t->busy ||
		    t->gen != a->handle >> SV_TM_HANDLE_IDX_BITS)
			status = IBV_WC_TM_ERR;
		else
			sv_tm_take(tm, t);
	}
	d->opcode = opcode;
	d->status = status;
	d->sync_req = tm->synced != tm->unexp;
	return 0;
}

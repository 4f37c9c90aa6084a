// SPDX-License-Identifier: MIT
/*
 * Tag matching (docs/DESIGN.md "Tag matching"): a tag-matching SRQ's list
 * of tagged buffers, the ops that change it (TAG_ADD, TAG_DEL, TAG_SYNC,
 * from the SRQ's ops ring: qp.c's sv_tm_drain reads them and writes their
 * completions) and the lookup that a tagged message makes when it arrives
 * (the responders, loop/resp.c and roce/resp.c). Under sv_dev.lock;
 * nothing here reads what a client can write.
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

/* One more TAG_ADD holds no place in the list: the library may post one
 * more (sv_tm.h, `done`). */
static void tm_done(struct sv_tm *tm)
{
	tm->done++;
	if (tm->kdone)
		/* release: pairs with the library's acquire load before it
		 * counts the room left */
		__atomic_store_n(tm->kdone, tm->done, __ATOMIC_RELEASE);
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
	t->next = tm->free;
	tm->free = i;
	tm->posted--;
	tm_done(tm);
}

static void tm_add(struct sv_tm *tm, const struct sv_tm_op *o)
{
	uint32_t i = tm->free;
	struct sv_tm_tag *t = &tm->tag[i];

	tm->free = t->next;
	t->tag = o->tag;
	t->mask = o->mask;
	t->wr_id = o->recv_wr_id;
	t->num_sge = o->num_sge;
	t->sge = o->num_sge ? o->sge : (struct sv_wqe_sge){ 0, 0, 0 };
	t->handle = o->handle;
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
}

/* The posted tag of handle h, or NULL. */
static struct sv_tm_tag *tm_find(struct sv_tm *tm, uint32_t h)
{
	for (uint32_t i = tm->head; i != SV_TM_NONE; i = tm->tag[i].next)
		if (tm->tag[i].handle == h)
			return &tm->tag[i];
	return NULL;
}

/*
 * Apply op o (a private copy). What the library checks before it posts
 * (sv_post_srq_ops) arrives here only from a client that wrote its ring
 * itself: such an op fails (IBV_WC_TM_ERR) and changes nothing, nor does a
 * TAG_ADD that finds the list full. A TAG_DEL of a tag not in the list
 * (consumed, deleted, never added) or whose data is landing fails too:
 * the verbs' "concurrent consumption".
 */
void sv_tm_apply(struct sv_tm *tm, const struct sv_tm_op *o,
		 struct sv_tm_done *d)
{
	bool bad = o->rsvd || (o->flags & ~(uint32_t)(IBV_OPS_SIGNALED |
						       IBV_OPS_TM_SYNC));
	struct sv_tm_tag *t;

	d->status = IBV_WC_SUCCESS;
	switch (o->opcode) {
	case IBV_WR_TAG_ADD:
		d->opcode = IBV_WC_TM_ADD;
		if (bad || o->num_sge > SV_TM_MAX_SGE ||
		    tm->free == SV_TM_NONE) {
			d->status = IBV_WC_TM_ERR;
			tm_done(tm);
		}
		break;
	case IBV_WR_TAG_DEL:
		d->opcode = IBV_WC_TM_DEL;
		break;
	case IBV_WR_TAG_SYNC:
		d->opcode = IBV_WC_TM_SYNC;
		break;
	default:
		d->opcode = IBV_WC_TM_SYNC;
		bad = true;
		break;
	}
	if (bad)
		d->status = IBV_WC_TM_ERR;
	if (d->status == IBV_WC_SUCCESS) {
		if (o->flags & IBV_OPS_TM_SYNC)
			tm->synced = o->unexpected_cnt;
		if (o->opcode == IBV_WR_TAG_ADD) {
			tm_add(tm, o);
		} else if (o->opcode == IBV_WR_TAG_DEL) {
			t = tm_find(tm, o->handle);
			if (!t || t->busy)
				d->status = IBV_WC_TM_ERR;
			else
				sv_tm_take(tm, t);
		}
	}
	d->sync_req = tm->synced != tm->unexp;
}

// SPDX-License-Identifier: MIT
/*
 * Per-client object tables: see objtab.h for the handle layout.
 *
 * Slots live in one array grown by doubling (first 16, never past max).
 * Free slots form a LIFO list through next_free. A slot's generation starts
 * at 1 and is bumped on every remove, so a handle of a removed object never
 * names the slot's next tenant (until the 32-bit generation wraps), and no
 * handle with generation 0 is ever valid (the bump skips 0 on wrap).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device/ctl/objtab.h"

#define OBJTAB_IDX_LIMIT ((1u << 24) - 1) /* index + 1 must fit 24 bits */
#define OBJTAB_FIRST	 16u
#define OBJTAB_NONE	 UINT32_MAX

static uint64_t make_handle(const struct sv_objtab *t, uint32_t gen,
			    unsigned int type, uint32_t idx)
{
	return (uint64_t)gen << 32 | (uint64_t)(type & 0xff) << 24 |
	       ((idx + 1) | t->hflag);
}

int sv_objtab_init(struct sv_objtab *t, uint32_t max)
{
	if (!max || max > OBJTAB_IDX_LIMIT)
		return -EINVAL;
	memset(t, 0, sizeof(*t));
	t->max = max;
	t->free_head = OBJTAB_NONE;
	return 0;
}

void sv_objtab_fini(struct sv_objtab *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
	t->free_head = OBJTAB_NONE;
}

int sv_objtab_mark_import(struct sv_objtab *t)
{
	if (t->live)
		return -EBUSY;
	if (t->max >= SV_OBJTAB_IMPORT_BIT)
		return -EINVAL;
	t->hflag = SV_OBJTAB_IMPORT_BIT;
	return 0;
}

/* Double the slot array (bounded by max) and put the new slots, lowest index
 * first, on the (empty) free list. */
static int objtab_grow(struct sv_objtab *t)
{
	uint64_t want = t->nslots ? (uint64_t)t->nslots * 2 : OBJTAB_FIRST;
	struct sv_objtab_slot *s;
	uint32_t n, i;

	n = want > t->max ? t->max : (uint32_t)want;
	if (n <= t->nslots)
		return -ENOSPC;
	s = realloc(t->slots, (size_t)n * sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (i = t->nslots; i < n; i++) {
		s[i].obj = NULL;
		s[i].gen = 1;
		s[i].type = SV_OBJ_NONE;
		s[i].next_free = i + 1 < n ? i + 1 : t->free_head;
	}
	t->free_head = t->nslots;
	t->slots = s;
	t->nslots = n;
	return 0;
}

int sv_objtab_insert(struct sv_objtab *t, unsigned int type, void *obj,
		     uint64_t *handle)
{
	struct sv_objtab_slot *s;
	uint32_t idx;
	int ret;

	if (!obj || type == SV_OBJ_NONE || type >= SV_OBJ_TYPE_MAX)
		return -EINVAL;
	if (t->live >= t->max)
		return -ENOSPC;
	if (t->free_head == OBJTAB_NONE) {
		ret = objtab_grow(t);
		if (ret)
			return ret;
	}
	idx = t->free_head;
	s = &t->slots[idx];
	t->free_head = s->next_free;
	s->next_free = OBJTAB_NONE;
	s->obj = obj;
	s->type = type;
	t->live++;
	t->count[type]++;
	*handle = make_handle(t, s->gen, type, idx);
	return 0;
}

/* The live slot named by handle as an object of type, else NULL. */
static struct sv_objtab_slot *objtab_find(const struct sv_objtab *t,
					  uint64_t handle, unsigned int type)
{
	/* a handle of the other kind gets bit 23, past every slot */
	uint32_t idx1 = (handle & 0xffffff) ^ t->hflag;
	struct sv_objtab_slot *s;

	if (type == SV_OBJ_NONE || type >= SV_OBJ_TYPE_MAX)
		return NULL;
	if (((handle >> 24) & 0xff) != type)
		return NULL;
	if (!idx1 || idx1 > t->nslots)
		return NULL;
	s = &t->slots[idx1 - 1];
	if (!s->obj || s->type != type || s->gen != (uint32_t)(handle >> 32))
		return NULL;
	return s;
}

void *sv_objtab_lookup(const struct sv_objtab *t, uint64_t handle,
		       unsigned int type)
{
	struct sv_objtab_slot *s = objtab_find(t, handle, type);

	return s ? s->obj : NULL;
}

uint64_t sv_objtab_widen(const struct sv_objtab *t, uint32_t low,
			 unsigned int type)
{
	uint32_t idx1 = (low & 0xffffff) ^ t->hflag;
	uint64_t h;

	if (!idx1 || idx1 > t->nslots)
		return 0;
	h = (uint64_t)t->slots[idx1 - 1].gen << 32 | low;
	return objtab_find(t, h, type) ? h : 0;
}

void *sv_objtab_remove(struct sv_objtab *t, uint64_t handle,
		       unsigned int type)
{
	struct sv_objtab_slot *s = objtab_find(t, handle, type);
	void *obj;

	if (!s)
		return NULL;
	obj = s->obj;
	s->obj = NULL;
	s->type = SV_OBJ_NONE;
	if (!++s->gen)
		s->gen = 1;
	s->next_free = t->free_head;
	t->free_head = s - t->slots;
	t->live--;
	t->count[type]--;
	return obj;
}

void *sv_objtab_replace(struct sv_objtab *t, uint64_t handle,
			unsigned int type, void *obj)
{
	struct sv_objtab_slot *s = objtab_find(t, handle, type);
	void *old;

	if (!s || !obj)
		return NULL;
	old = s->obj;
	s->obj = obj;
	return old;
}

void sv_objtab_foreach(const struct sv_objtab *t,
		       void (*fn)(void *arg, unsigned int type, void *obj,
				  uint64_t handle),
		       void *arg)
{
	const struct sv_objtab_slot *s;
	unsigned int type;
	uint32_t i;

	for (type = SV_OBJ_TYPE_MAX - 1; type > SV_OBJ_NONE; type--) {
		if (!t->count[type])
			continue;
		for (i = 0; i < t->nslots; i++) {
			s = &t->slots[i];
			if (s->obj && s->type == type)
				fn(arg, type, s->obj,
				   make_handle(t, s->gen, type, i));
		}
	}
}

// SPDX-License-Identifier: MIT
/*
 * The device-wide lkey/rkey table: see keys.h for the key layout.
 *
 * slots[0] is never handed out, so nslots - 1 slots are usable; the array
 * grows by doubling the usable count (first 16, never past max). Free slots
 * form a LIFO list through next_free (index 0 ends it) and keep their last
 * key.
 *
 * Consumer keys: a slot's first key takes a fixed, non-zero consumer key
 * derived from the index (a Fibonacci hash, so neighbouring slots do not get
 * neighbouring keys); each reuse of the slot takes the previous consumer key
 * plus one (mod 256), so a freed key comes back only after 256 reuses of its
 * slot (or if rekey picks it on purpose).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device/keys.h"

#define KEYTAB_IDX_LIMIT ((1u << SV_KEY_INDEX_BITS) - 1)
#define KEYTAB_FIRST	 16u
#define KEYTAB_NONE	 0u

static uint32_t first_consumer(uint32_t idx)
{
	uint32_t ck = (idx * 0x9e3779b1u) >> 24;

	return ck ? ck : 1;
}

int sv_keytab_init(struct sv_keytab *t, uint32_t max)
{
	if (!max || max > KEYTAB_IDX_LIMIT)
		return -EINVAL;
	memset(t, 0, sizeof(*t));
	t->max = max;
	t->free_head = KEYTAB_NONE;
	return 0;
}

void sv_keytab_fini(struct sv_keytab *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
	t->free_head = KEYTAB_NONE;
}

/* Double the usable slots (bounded by max); new slots go on the empty free
 * list, lowest index first. */
static int keytab_grow(struct sv_keytab *t)
{
	uint32_t used = t->nslots ? t->nslots - 1 : 0;
	uint64_t want = used ? (uint64_t)used * 2 : KEYTAB_FIRST;
	struct sv_keyslot *s;
	uint32_t n, i;

	n = (want > t->max ? t->max : (uint32_t)want) + 1;
	if (n <= t->nslots)
		return -ENOSPC;
	s = realloc(t->slots, (size_t)n * sizeof(*s));
	if (!s)
		return -ENOMEM;
	i = t->nslots;
	if (!i) {
		memset(&s[0], 0, sizeof(s[0]));
		i = 1;
	}
	t->free_head = i;
	for (; i < n; i++) {
		s[i].obj = NULL;
		/* the consumer key one before the first, advanced on alloc */
		s[i].key = SV_KEY_MAKE(i, first_consumer(i) - 1);
		s[i].next_free = i + 1 < n ? i + 1 : KEYTAB_NONE;
		s[i].kind = 0;
	}
	t->slots = s;
	t->nslots = n;
	return 0;
}

int sv_keytab_alloc_kind(struct sv_keytab *t, void *obj, unsigned int kind,
			 uint32_t *key)
{
	struct sv_keyslot *s;
	uint32_t idx;
	int ret;

	if (!obj || kind > SV_KEY_MW)
		return -EINVAL;
	if (t->live >= t->max)
		return -ENOSPC;
	if (t->free_head == KEYTAB_NONE) {
		ret = keytab_grow(t);
		if (ret)
			return ret;
	}
	idx = t->free_head;
	s = &t->slots[idx];
	t->free_head = s->next_free;
	s->next_free = KEYTAB_NONE;
	s->obj = obj;
	s->kind = kind;
	s->key = SV_KEY_MAKE(idx, SV_KEY_CONSUMER(s->key) + 1);
	t->live++;
	*key = s->key;
	return 0;
}

/* The live slot whose current key is exactly key, else NULL. */
static struct sv_keyslot *keytab_find(const struct sv_keytab *t, uint32_t key)
{
	uint32_t idx = SV_KEY_INDEX(key);
	struct sv_keyslot *s;

	if (!idx || idx >= t->nslots)
		return NULL;
	s = &t->slots[idx];
	if (!s->obj || s->key != key)
		return NULL;
	return s;
}

void *sv_keytab_lookup(const struct sv_keytab *t, uint32_t key)
{
	struct sv_keyslot *s = keytab_find(t, key);

	return s ? s->obj : NULL;
}

void *sv_keytab_find(const struct sv_keytab *t, uint32_t key,
		     unsigned int *kind)
{
	struct sv_keyslot *s = keytab_find(t, key);

	if (!s)
		return NULL;
	*kind = s->kind;
	return s->obj;
}

void *sv_keytab_by_index(const struct sv_keytab *t, uint32_t key,
			 unsigned int kind)
{
	uint32_t idx = SV_KEY_INDEX(key);
	struct sv_keyslot *s;

	if (!idx || idx >= t->nslots)
		return NULL;
	s = &t->slots[idx];
	return s->obj && s->kind == kind ? s->obj : NULL;
}

int sv_keytab_free(struct sv_keytab *t, uint32_t key)
{
	struct sv_keyslot *s = keytab_find(t, key);

	if (!s)
		return -ENOENT;
	s->obj = NULL;
	s->next_free = t->free_head;
	t->free_head = SV_KEY_INDEX(key);
	t->live--;
	return 0;
}

int sv_keytab_rekey(struct sv_keytab *t, uint32_t key, uint8_t consumer,
		    uint32_t *new_key)
{
	struct sv_keyslot *s = keytab_find(t, key);

	if (!s)
		return -ENOENT;
	s->key = SV_KEY_MAKE(SV_KEY_INDEX(key), consumer);
	*new_key = s->key;
	return 0;
}

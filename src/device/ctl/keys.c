// SPDX-License-Identifier: MIT
/*
 * The device-wide lkey/rkey table: see keys.h for the key layout.
 *
 * slots[0] is never handed out, so nslots - 1 slots are usable; the array
 * grows by doubling the usable count (first 16, never past max). Free slots
 * form a LIFO list through next_free (slot 0 ends it) and keep their last
 * key. A slot's key carries its visible index, perm(slot), from the slot's
 * making on; a key names the slot perm^-1(index), and lookup then compares
 * all 32 bits.
 *
 * Consumer keys: a slot's first key takes a non-zero consumer key drawn
 * from the slot number through the table's secret (so it says nothing about
 * the slot either); each reuse of the slot takes the previous consumer key
 * plus one (mod 256), so a freed key comes back only after 256 reuses of its
 * slot (or if rekey picks it on purpose).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "device/ctl/keys.h"

#define KEYTAB_FIRST	 16u
#define KEYTAB_NONE	 0u

static uint32_t first_consumer(const struct sv_keytab *t, uint32_t slot)
{
	uint32_t ck = (uint32_t)(sv_mix64(t->perm.ck ^ slot) >> 56);

	return ck ? ck : 1;
}

int sv_keytab_init_seeded(struct sv_keytab *t, uint32_t max, uint64_t seed)
{
	if (!max || max > SV_KEY_SLOT_MAX)
		return -EINVAL;
	memset(t, 0, sizeof(*t));
	t->max = max;
	t->free_head = KEYTAB_NONE;
	sv_keyperm_seed(&t->perm, seed);
	return 0;
}

int sv_keytab_init(struct sv_keytab *t, uint32_t max)
{
	struct sv_keyperm p;
	size_t got = 0;
	ssize_t n;
	int ret;

	/* the secret: every round key and the consumer keys' from the
	 * kernel's generator (a short read only before it is seeded) */
	while (got < sizeof(p)) {
		n = getrandom((char *)&p + got, sizeof(p) - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	ret = sv_keytab_init_seeded(t, max, 0);
	if (!ret)
		t->perm = p;
	memset(&p, 0, sizeof(p));
	return ret;
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
		/* the visible index for good; the consumer key one before
		 * the first, advanced on alloc */
		s[i].key = SV_KEY_MAKE(sv_keyperm_fwd(&t->perm, i),
				       first_consumer(t, i) - 1);
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
	uint32_t slot;
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
	slot = t->free_head;
	s = &t->slots[slot];
	t->free_head = s->next_free;
	s->next_free = KEYTAB_NONE;
	s->obj = obj;
	s->kind = kind;
	s->key = SV_KEY_MAKE(SV_KEY_INDEX(s->key), SV_KEY_CONSUMER(s->key) + 1);
	t->live++;
	*key = s->key;
	return 0;
}

/* The slot that key's visible index names (live or not), else NULL. */
static struct sv_keyslot *keytab_slot(const struct sv_keytab *t, uint32_t key)
{
	uint32_t slot = sv_keyperm_inv(&t->perm, SV_KEY_INDEX(key));

	if (!slot || slot >= t->nslots)
		return NULL;
	return &t->slots[slot];
}

/* The live slot whose current key is exactly key, else NULL. */
static struct sv_keyslot *keytab_find(const struct sv_keytab *t, uint32_t key)
{
	struct sv_keyslot *s = keytab_slot(t, key);

	if (!s || !s->obj || s->key != key)
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
	const struct sv_keyslot *s = keytab_slot(t, key);

	return s && s->obj && s->kind == kind ? s->obj : NULL;
}

int sv_keytab_free(struct sv_keytab *t, uint32_t key)
{
	struct sv_keyslot *s = keytab_find(t, key);

	if (!s)
		return -ENOENT;
	s->obj = NULL;
	s->next_free = t->free_head;
	t->free_head = (uint32_t)(s - t->slots);
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

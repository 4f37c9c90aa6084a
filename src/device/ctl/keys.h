/* SPDX-License-Identifier: MIT */
/*
 * The device-wide key table of softverbsd: every lkey/rkey of every MR and
 * every rkey of every MW of every client. A slot holds one object and says
 * which kind it is (enum sv_key_kind).
 *
 *   key = index:24 << 8 | consumer key:8,   index = perm(slot)
 *
 * The visible index is not the slot number: perm is a bijection of
 * [1, 2^24 - 2] chosen at random when the table is made (a keyed Feistel
 * network, struct sv_keyperm), so the keys of MRs registered one after the
 * other look random and a peer that knows one live key learns nothing about
 * the others (docs/DESIGN.md "Keys"). Index 0 is never produced (a zero key
 * is always invalid), nor index 0xffffff (no key 0xffffffxx, which programs
 * use as "no key"). A slot's consumer key
 * advances each time the slot is reused, so a key that named a freed object
 * does not name the next object in the same slot for the next 255 reuses;
 * and lookup compares the full 32 bits, so a key with a stale consumer key is
 * refused. sv_keytab_rekey() sets a new consumer key (fast-register, MW bind,
 * ibv_inc_rkey) on a live slot; the work requests that rekey name their
 * object by index (sv_keytab_by_index), since the key they carry is the new
 * one.
 */
#ifndef SV_DEVICE_KEYS_H
#define SV_DEVICE_KEYS_H

#include <stdint.h>

#include "abi/sv_keyperm.h" /* SV_KEY_*, struct sv_keyperm, sv_keyperm_* */

enum sv_key_kind {
	SV_KEY_MR = 0,      /* struct sv_mr */
	SV_KEY_MW = 1,      /* struct sv_mw */
};

struct sv_keyslot {
	void *obj;          /* NULL when free */
	uint32_t key;       /* current full key of this slot */
	uint32_t next_free : SV_KEY_INDEX_BITS; /* a slot; 0 = none (slot 0
						 * is never used) */
	uint32_t kind : 8;  /* enum sv_key_kind of obj */
};

struct sv_keytab {
	struct sv_keyslot *slots; /* by slot; slots[0] unused */
	uint32_t nslots;
	uint32_t max;             /* most live keys (<= SV_KEY_SLOT_MAX) */
	uint32_t free_head;       /* a slot; 0 = none */
	uint32_t live;
	struct sv_keyperm perm;   /* slot <-> visible index */
};

/* An empty table of at most max keys, its permutation drawn from
 * getrandom(): 0, -EINVAL (max 0 or past SV_KEY_SLOT_MAX) or -errno. */
int sv_keytab_init(struct sv_keytab *t, uint32_t max);
/* The same with the permutation made from seed (tests). */
int sv_keytab_init_seeded(struct sv_keytab *t, uint32_t max, uint64_t seed);
void sv_keytab_fini(struct sv_keytab *t);

/* Allocate a key for obj (non-NULL) of kind: 0 and *key set, -ENOSPC,
 * -ENOMEM or -EINVAL. Thread safety is the caller's. */
int sv_keytab_alloc_kind(struct sv_keytab *t, void *obj, unsigned int kind,
			 uint32_t *key);

/* The same for an MR (SV_KEY_MR). */
static inline int sv_keytab_alloc(struct sv_keytab *t, void *obj,
				  uint32_t *key)
{
	return sv_keytab_alloc_kind(t, obj, SV_KEY_MR, key);
}

/* The object whose current key is exactly key, of any kind, else NULL. Any
 * 32-bit value is a safe input. */
void *sv_keytab_lookup(const struct sv_keytab *t, uint32_t key);

/* The same, and its kind in *kind. */
void *sv_keytab_find(const struct sv_keytab *t, uint32_t key,
		     unsigned int *kind);

/* The live object of kind in the slot that key's index names, whatever its
 * consumer key (FAST_REG_MR and BIND_MW carry the key they set), else NULL.
 * Every other use compares all 32 bits. */
void *sv_keytab_by_index(const struct sv_keytab *t, uint32_t key,
			 unsigned int kind);

/* Free the slot that key names exactly; -ENOENT if it names none. */
int sv_keytab_free(struct sv_keytab *t, uint32_t key);

/* Replace the consumer key of the live slot named exactly by key:
 * 0 and *new_key set, or -ENOENT. */
int sv_keytab_rekey(struct sv_keytab *t, uint32_t key, uint8_t consumer,
		    uint32_t *new_key);

#endif

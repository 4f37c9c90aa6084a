/* SPDX-License-Identifier: MIT */
/*
 * The device-wide key table of softverbsd: every lkey/rkey of every MR (and
 * later MW) of every client.
 *
 *   key = index:24 << 8 | consumer key:8
 *
 * Index 0 is never used (a zero key is always invalid). A slot's consumer key
 * advances each time the slot is reused, so a key that named a freed object
 * does not name the next object in the same slot for the next 255 reuses;
 * and lookup compares the full 32 bits, so a key with a stale consumer key is
 * refused. sv_keytab_rekey() sets a new consumer key (fast-register, MW bind,
 * ibv_inc_rkey) on a live slot.
 */
#ifndef SV_DEVICE_KEYS_H
#define SV_DEVICE_KEYS_H

#include <stdint.h>

#define SV_KEY_INDEX_BITS 24
#define SV_KEY_INDEX(k)   ((uint32_t)(k) >> 8)
#define SV_KEY_CONSUMER(k) ((uint32_t)(k) & 0xff)
#define SV_KEY_MAKE(idx, ck) (((uint32_t)(idx) << 8) | ((uint32_t)(ck) & 0xff))

struct sv_keyslot {
	void *obj;          /* NULL when free */
	uint32_t key;       /* current full key of this slot */
	uint32_t next_free; /* UINT32_MAX = none */
};

struct sv_keytab {
	struct sv_keyslot *slots; /* slots[0] unused */
	uint32_t nslots;
	uint32_t max;             /* most live keys (<= (1 << 24) - 1) */
	uint32_t free_head;
	uint32_t live;
};

int sv_keytab_init(struct sv_keytab *t, uint32_t max);
void sv_keytab_fini(struct sv_keytab *t);

/* Allocate a key for obj (non-NULL): 0 and *key set, -ENOSPC, -ENOMEM or
 * -EINVAL. Thread safety is the caller's. */
int sv_keytab_alloc(struct sv_keytab *t, void *obj, uint32_t *key);

/* The object whose current key is exactly key, else NULL. Any 32-bit value is
 * a safe input. */
void *sv_keytab_lookup(const struct sv_keytab *t, uint32_t key);

/* Free the slot that key names exactly; -ENOENT if it names none. */
int sv_keytab_free(struct sv_keytab *t, uint32_t key);

/* Replace the consumer key of the live slot named exactly by key:
 * 0 and *new_key set, or -ENOENT. */
int sv_keytab_rekey(struct sv_keytab *t, uint32_t key, uint8_t consumer,
		    uint32_t *new_key);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Per-client object tables of softverbsd.
 *
 * Every object a client creates (PD, MR, CQ, ...) is entered in that
 * client's table and named to the client by a 64-bit handle. A handle is
 * meaningful only in the table that issued it, so one client can never name
 * another client's object. A handle carries the slot index, a generation
 * that changes each time the slot is reused (stale handles are refused), and
 * the object type (a PD handle cannot be used as a CQ).
 *
 *   handle = (generation:32) << 32 | (type:8) << 24 | (index + 1):24
 *
 * The table of a client that imported another's context (import.c) issues
 * its handles with SV_OBJTAB_IMPORT_BIT set in the index field (its tables
 * hold fewer than 1 << 23 objects), so that a handle says which of the two
 * tables such a client sees it is in.
 *
 * Handle 0 is never issued. All functions are O(1) except iteration.
 */
#ifndef SV_DEVICE_OBJTAB_H
#define SV_DEVICE_OBJTAB_H

#include <stddef.h>
#include <stdint.h>

#include "abi/sv_cmd.h" /* enum sv_obj_type, SV_OBJ_TYPE_MAX */

#define SV_OBJTAB_IMPORT_BIT (1u << 23)

struct sv_objtab_slot {
	void *obj;            /* NULL when free */
	uint32_t gen;
	uint8_t type;
	uint32_t next_free;   /* index of next free slot, UINT32_MAX = none */
};

struct sv_objtab {
	struct sv_objtab_slot *slots;
	uint32_t nslots;      /* allocated slots */
	uint32_t max;         /* hard limit on live objects (<= 1 << 24) */
	uint32_t free_head;   /* UINT32_MAX = none */
	uint32_t live;
	uint32_t hflag;       /* 0 or SV_OBJTAB_IMPORT_BIT, in every handle */
	uint32_t count[SV_OBJ_TYPE_MAX]; /* live objects per type */
};

/* max: most live objects the table will hold (at most 1 << 24 - 1). */
int sv_objtab_init(struct sv_objtab *t, uint32_t max);
void sv_objtab_fini(struct sv_objtab *t);

/* From now on issue handles with SV_OBJTAB_IMPORT_BIT set: 0, or -EBUSY
 * when the table holds objects, -EINVAL when max is too large for it. */
int sv_objtab_mark_import(struct sv_objtab *t);

/* Enter obj (non-NULL) of type (1 .. SV_OBJ_TYPE_MAX-1); 0 and *handle set,
 * or -ENOSPC when full, -ENOMEM, -EINVAL for a bad type or NULL obj. */
int sv_objtab_insert(struct sv_objtab *t, unsigned int type, void *obj,
		     uint64_t *handle);

/* The object named by handle if it is live and of the given type, else NULL.
 * Any 64-bit value is a safe input. */
void *sv_objtab_lookup(const struct sv_objtab *t, uint64_t handle,
		       unsigned int type);

/* The whole handle of the live object of type whose handle's low 32 bits
 * are low (what the verbs' 32-bit handle fields hold), else 0. */
uint64_t sv_objtab_widen(const struct sv_objtab *t, uint32_t low,
			 unsigned int type);

/* Remove and return the object (NULL, nothing changed, if the handle does not
 * name a live object of that type). */
void *sv_objtab_remove(struct sv_objtab *t, uint64_t handle,
		       unsigned int type);

/* Let handle name obj instead (same type): the object it named, or NULL
 * (nothing changed) if it names no live object of that type. */
void *sv_objtab_replace(struct sv_objtab *t, uint64_t handle,
			unsigned int type, void *obj);

/* Call fn for every live object; fn may not modify the table. Objects of
 * higher-numbered types are visited first (so QPs go before CQs before PDs
 * when the enum orders them by dependency). */
void sv_objtab_foreach(const struct sv_objtab *t,
		       void (*fn)(void *arg, unsigned int type, void *obj,
				  uint64_t handle),
		       void *arg);

#endif

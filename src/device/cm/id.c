// SPDX-License-Identifier: MIT
/*
 * rdma_cm ids: the device-wide table (SV_CM_MAX_IDS handles below 65536,
 * as librdmacm's index map needs), each id's comm id (handle and a
 * generation, random per start) and transaction ID, its deadline, its file,
 * its events, and its end: destroying an id tells its peer (conn.c), frees
 * its port (bind.c) and leaves a ghost while a wire disconnect runs on.
 *
 * Owns the id table, the timer count and the CM's counters. Calls conn.c
 * (what a destroyed id's connection says), bind.c (its port), mcast.c and
 * ucma.c (its groups and events); called by all of cm/.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "device/cm/cm.h"
#include "device/cm/cm_int.h"
#include "device/sv_dev.h"

#define SV_STR(s) #s,
const char *const sv_cm_state_names[] = { SV_CM_STATES(SV_STR) };
const char *const sv_cm_conn_names[] = { SV_CM_CONNS(SV_STR) };
#undef SV_STR

struct sv_cm_stats sv_cm_stats;

static struct sv_cm_id *ids[SV_CM_MAX_IDS];
static uint16_t id_gen[SV_CM_MAX_IDS];
static uint16_t gen_base;          /* random: comm ids differ per start */
static uint32_t tid_hi;            /* random: our MADs' transaction IDs */
static uint32_t id_cursor;
static uint32_t nl_last;           /* the last id's nl_id */
static uint32_t ntimers;           /* ids with a deadline */

uint64_t sv_cm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint32_t sv_cm_rand32(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)random();
	return v;
}

void sv_cm_set_deadline(struct sv_cm_id *id, uint32_t ms)
{
	if (!id->deadline_ms && ms)
		ntimers++;
	if (id->deadline_ms && !ms)
		ntimers--;
	id->deadline_ms = ms ? sv_cm_now_ms() + ms : 0;
}

/* How many ids have a deadline (timers of conn.c walk the table when some
 * do). */
bool sv_cm_timers_armed(void)
{
	return ntimers != 0;
}

struct sv_cm_id *sv_cm_id_at(uint32_t handle)
{
	return handle < SV_CM_MAX_IDS ? ids[handle] : NULL;
}

/* ---- ids ---- */

int sv_cm_id_new(struct sv_cm_file *f, uint64_t uid, uint16_t ps, uint8_t qp_type,
		 struct sv_cm_id **out)
{
	struct sv_cm_id *id;
	uint32_t h = SV_CM_MAX_IDS;

	/* the next free handle after the last one given: a handle is not
	 * reused at once, so a late message finds no one rather than a
	 * stranger (the comm id's generation catches the rest) */
	for (uint32_t i = 0; i < SV_CM_MAX_IDS; i++) {
		uint32_t c = (id_cursor + i) % SV_CM_MAX_IDS;

		if (!ids[c]) {
			h = c;
			break;
		}
	}
	if (h == SV_CM_MAX_IDS)
		return -ENOMEM;
	id = calloc(1, sizeof(*id));
	if (!id)
		return -ENOMEM;
	if (!gen_base) {
		gen_base = (uint16_t)(sv_cm_rand32() | 1);
		tid_hi = sv_cm_rand32();
	}
	id_cursor = h + 1;
	id->handle = h;
	id->comm = h | (uint32_t)(uint16_t)(++id_gen[h] + gen_base) << 16;
	if (!id->comm)  /* 0 means "no id" in a message */
		id->comm = h | (uint32_t)(uint16_t)(++id_gen[h] + gen_base) << 16;
	id->tid = (uint64_t)tid_hi << 32 | id->comm;
	id->nl_id = ++nl_last ? nl_last : ++nl_last;
	id->file = f;
	id->uid = uid;
	id->ps = ps;
	id->qp_type = qp_type;
	id->psn = sv_cm_rand32() & SV_PSN_MASK;
	id->qkey = SV_CM_UDP_QKEY;
	id->mtu = sv_dev.port.active_mtu;
	id->file_next = f->ids;
	f->ids = id;
	ids[h] = id;
	sv_cm_stats.ids++;
	sv_cm_stats.live++;
	*out = id;
	return 0;
}

int sv_cm_id_get(struct sv_cm_file *f, uint32_t handle, struct sv_cm_id **out)
{
	struct sv_cm_id *id = handle < SV_CM_MAX_IDS ? ids[handle] : NULL;

	if (!id || id->hidden || !id->file)
		return -ENOENT;
	if (id->file != f)
		return -EINVAL;
	*out = id;
	return 0;
}

struct sv_cm_id *sv_cm_by_comm(uint32_t comm)
{
	struct sv_cm_id *id = ids[(comm & 0xffff) % SV_CM_MAX_IDS];

	return id && id->comm == comm ? id : NULL;
}

static void file_unlink(struct sv_cm_id *id)
{
	for (struct sv_cm_id **p = &id->file->ids; *p; p = &(*p)->file_next)
		if (*p == id) {
			*p = id->file_next;
			break;
		}
}

int sv_cm_migrate(struct sv_cm_id *id, struct sv_cm_file *to)
{
	if (id->file == to)
		return 0;
	sv_cm_events_move(id->file, to, id);
	file_unlink(id);
	id->file = to;
	id->file_next = to->ids;
	to->ids = id;
	return 0;
}

/* ---- events ---- */

struct sv_cm_event *sv_cm_ev_new(struct sv_cm_id *id, uint32_t type, int32_t status)
{
	struct sv_cm_event *e;

	if (!id->file)
		return NULL;   /* a ghost (below): nobody to tell */
	e = calloc(1, sizeof(*e));
	if (!e) {
		sv_log(SV_LOG_WARN, "cm: id %u: event %u lost: out of memory",
		       id->handle, type);
		return NULL;
	}
	e->id = id;
	e->resp.uid = id->uid;
	e->resp.id = id->handle;
	e->resp.event = type;
	e->resp.status = (uint32_t)status;
	return e;
}

void sv_cm_ev_post(struct sv_cm_id *id, uint32_t type, int32_t status)
{
	struct sv_cm_event *e = sv_cm_ev_new(id, type, status);

	if (e)
		sv_cm_event_queue(id->file, e);
}

/* An id's last breath: its slot and memory. */
void sv_cm_id_free(struct sv_cm_id *id)
{
	sv_cm_set_deadline(id, 0);
	free(id->rtx);
	ids[id->handle] = NULL;
	free(id);
}

/* ---- destroying ---- */

void sv_cm_id_destroy(struct sv_cm_id *id)
{
	struct sv_cm_file *f = id->file;
	struct sv_cm_event **p;

	sv_cm_mc_id_destroy(id);
	sv_cm_conn_leave(id);
	/* a listener's requests nobody fetched: their ids go too (and
	 * refuse their REQs) */
	for (p = &f->evq; *p;) {
		struct sv_cm_event *e = *p;

		if (e->id == id && e->child) {
			struct sv_cm_id *c = e->child;

			*p = e->next;
			f->nev--;
			free(e);
			if (f->last == e)
				f->last = NULL;
			sv_cm_id_destroy(c);
			p = &f->evq;   /* the queue may have changed */
			continue;
		}
		p = &(*p)->next;
	}
	sv_cm_events_drop(f, id);
	sv_cm_unbind(id);
	file_unlink(id);
	sv_cm_stats.live--;
	if (sv_cm_conn_linger(id))
		return;
	sv_cm_id_free(id);
}

void sv_cm_file_destroy_ids(struct sv_cm_file *f)
{
	while (f->ids)
		sv_cm_id_destroy(f->ids);
}

// SPDX-License-Identifier: MIT
/*
 * The engine of src/device/exec/engine.c without its threads, for the fuzzers:
 * the same interface (sv_dev.h, exec/engine.h), the same doorbell pages and QP
 * lists, but nothing runs a QP until the harness calls fz_run, so that one
 * input always does the same thing. The control thread's waits
 * (sv_engine_ctl_pause, while DESTROY_QP drains a send queue) run a pass
 * themselves instead of letting a thread run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_dev.h"

static struct sv_engine engines[SV_DB_PAGES];
static uint8_t bounce[64 * 1024];

unsigned int sv_engine_index(const struct sv_engine *e)
{
	return e ? e->index : 0;
}

void sv_dev_lock(bool ctl)
{
	(void)ctl;
	pthread_mutex_lock(&sv_dev.lock);
}

void sv_dev_unlock(void)
{
	pthread_mutex_unlock(&sv_dev.lock);
}

void sv_engine_quiesce(void)
{
	/* no copy ever runs without the lock here (x.copy_seq is NULL) */
}

static unsigned int run_locked(unsigned int steps)
{
	struct sv_exec x = { .bounce = bounce, .bounce_bytes = sizeof(bounce) };
	unsigned int did = 0;

	x.now = sv_now_ns();
	for (unsigned int i = 0; i < SV_DB_PAGES; i++) {
		struct sv_engine *e = &engines[i];
		uint32_t n = e->nqp;

		for (uint32_t k = 0; k < n && e->qps; k++) {
			struct sv_qp *qp;

			if (!e->cursor)
				e->cursor = e->qps;
			qp = e->cursor;
			e->cursor = qp->eng_next;
			for (unsigned int s = 0; s < steps; s++) {
				if (!sv_exec_step(&x, qp))
					break;
				did++;
			}
		}
		for (struct sv_srq *srq = e->tm_srqs; srq; srq = srq->tm_next)
			did += sv_tm_drain(srq);
	}
	return did;
}

unsigned int fz_run(unsigned int steps)
{
	unsigned int did;

	sv_dev_lock(false);
	did = run_locked(steps);
	sv_dev_unlock();
	return did;
}

void sv_engine_ctl_pause(unsigned int round)
{
	/* the lock is held: a pass here is what the engine would do while
	 * the control thread sleeps */
	if (!run_locked(1) && round > 16) {
		struct timespec ts = { 0, 100000 };

		nanosleep(&ts, NULL);
	}
}

void sv_async_event(struct sv_client *c, uint32_t type, uint64_t cookie,
		    uint64_t handle)
{
	struct sv_event ev = {
		.magic = SV_PROTO_MAGIC,
		.type = type,
		.cookie = cookie,
		.handle = handle,
	};

	if (!c || c->dead || c->async_fd < 0)
		return;
	(void)send(c->async_fd, &ev, sizeof(ev), MSG_DONTWAIT | MSG_NOSIGNAL);
}

void sv_engine_add_qp(struct sv_qp *qp, struct sv_engine *e)
{
	if (!e)
		e = &engines[0];
	qp->engine = e;
	if (!e->qps) {
		qp->eng_next = qp->eng_prev = qp;
		e->qps = qp;
	} else {
		qp->eng_next = e->qps;
		qp->eng_prev = e->qps->eng_prev;
		qp->eng_prev->eng_next = qp;
		e->qps->eng_prev = qp;
	}
	e->nqp++;
}

void sv_engine_add_srq(struct sv_srq *srq)
{
	struct sv_engine *e = &engines[0];

	srq->tm_engine = e;
	srq->tm_next = e->tm_srqs;
	e->tm_srqs = srq;
}

void sv_engine_remove_srq(struct sv_srq *srq)
{
	struct sv_engine *e = srq->tm_engine;

	if (!e)
		return;
	for (struct sv_srq **p = &e->tm_srqs; *p; p = &(*p)->tm_next)
		if (*p == srq) {
			*p = srq->tm_next;
			break;
		}
	srq->tm_engine = NULL;
}

void sv_engine_remove_qp(struct sv_qp *qp)
{
	struct sv_engine *e = qp->engine;

	if (!e || !qp->eng_next)
		return;
	if (qp->eng_next == qp) {
		e->qps = e->cursor = NULL;
	} else {
		if (e->qps == qp)
			e->qps = qp->eng_next;
		if (e->cursor == qp)
			e->cursor = qp->eng_next;
		qp->eng_prev->eng_next = qp->eng_next;
		qp->eng_next->eng_prev = qp->eng_prev;
	}
	qp->eng_next = qp->eng_prev = NULL;
	qp->engine = NULL;
	e->nqp--;
}

void sv_engine_kick(struct sv_engine *e)
{
	(void)e;
}

struct sv_engine *sv_engine_claim(uint32_t msg_model, bool dedicated_only,
				  bool *dedicated)
{
	struct sv_engine *e = NULL;

	for (unsigned int i = 1; i < SV_DB_PAGES; i++) {
		struct sv_engine *c = &engines[i];

		if (!c->domains) {
			c->msg_model = msg_model;
			c->domains = 1;
			c->exclusive = dedicated_only;
			*dedicated = true;
			return c;
		}
		if (!c->exclusive && (!e || c->domains < e->domains))
			e = c;
	}
	*dedicated = false;
	if (dedicated_only)
		return NULL;
	if (!e)
		e = &engines[0];
	e->domains++;
	return e;
}

void sv_engine_release(struct sv_engine *e)
{
	if (e && e->domains && !--e->domains)
		e->exclusive = false;
}

int sv_engine_start(void)
{
	int ret = sv_ring_alloc("softverbs-doorbell",
				(size_t)SV_DB_PAGES * SV_DB_PAGE_BYTES,
				&sv_dev.db_memfd, &sv_dev.db_map);

	if (ret)
		return ret;
	for (unsigned int i = 0; i < SV_DB_PAGES; i++) {
		struct sv_engine *e = &engines[i];

		e->index = i;
		e->db = (struct sv_doorbell *)((char *)sv_dev.db_map +
					       (size_t)i * SV_DB_PAGE_BYTES);
		e->started = true;
		e->batch = 1;
		sv_dev.engine[i] = e;
	}
	return 0;
}

void sv_engine_stop(void)
{
	for (unsigned int i = 0; i < SV_DB_PAGES; i++)
		sv_dev.engine[i] = NULL;
	if (sv_dev.db_map)
		munmap(sv_dev.db_map, (size_t)SV_DB_PAGES * SV_DB_PAGE_BYTES);
	sv_dev.db_map = NULL;
	if (sv_dev.db_memfd >= 0)
		close(sv_dev.db_memfd);
	sv_dev.db_memfd = -1;
}

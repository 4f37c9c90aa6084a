// SPDX-License-Identifier: MIT
/*
 * The engine threads of softverbsd: each owns a doorbell page and a list of
 * QPs, and executes their WQEs (exec.c) one at a time, round-robin.
 *
 * Locking: an engine holds sv_dev.lock while it looks at objects and runs a
 * step, and lets the control thread in between two steps whenever that one
 * waits for the lock (sv_dev.ctl_wait), so commands are never starved by a
 * busy engine.
 *
 * Sleeping: with nothing to do, an engine spins for a few tens of
 * microseconds, then announces it sleeps (doorbell->sleeping), looks at every
 * ring once more, and waits on the doorbell's futex word (seq). A poster
 * publishes its producer counter, fences, and wakes the futex only when it
 * sees `sleeping`; the fences on both sides make sure that either the engine
 * sees the new WQE or the poster sees `sleeping`. The futex is not private:
 * the page is shared with the clients. The wait has a timeout only while a
 * QP has a timer pending (RNR, transport timeout), so an idle device uses no
 * CPU at all.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "abi/sv_cpu.h"
#include "device/engine.h"
#include "device/sv_dev.h"

#define SV_BOUNCE_BYTES (1u << 20)
#define SV_SPIN_NS      30000u      /* spin this long before sleeping */
#define SV_SPIN_NS_FEW  2000u       /* ... on a machine of 2 CPUs or fewer */

/*
 * How long an engine spins with nothing to do before it sleeps, read once at
 * start: $SOFTVERBSD_SPIN_US (0 .. 10 s) if set, else SV_SPIN_NS, or
 * SV_SPIN_NS_FEW where there are 2 CPUs or fewer: there a spinning engine
 * takes a core from the applications that busy-poll their CQs (measured on
 * 2 cores: ib_write_lat 20.5 us typical with a 30 us spin, 5.8 us with none;
 * see docs/PERFORMANCE.md).
 */
static uint64_t spin_ns = SV_SPIN_NS;

static struct sv_engine engines[SV_ENGINES];

static long futex(uint32_t *uaddr, int op, uint32_t val,
		  const struct timespec *ts)
{
	return syscall(SYS_futex, uaddr, op, val, ts, NULL, 0);
}

unsigned int sv_engine_index(const struct sv_engine *e)
{
	return e ? e->index : 0;
}

/* ---- events ---- */

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
	/* never wait for a client: one that does not read loses events */
	if (send(c->async_fd, &ev, sizeof(ev), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		sv_log(SV_LOG_DEBUG, "client %llu: async event %u dropped",
		       (unsigned long long)c->id, type);
}

/* ---- the QP lists (under sv_dev.lock) ---- */

void sv_engine_add_qp(struct sv_qp *qp)
{
	struct sv_engine *e = NULL;

	for (unsigned int i = 0; i < SV_ENGINES; i++)
		if (engines[i].started && (!e || engines[i].nqp < e->nqp))
			e = &engines[i];
	qp->engine = e;
	if (!e) {
		qp->eng_next = qp->eng_prev = NULL;
		return;
	}
	if (!e->qps) {
		qp->eng_next = qp->eng_prev = qp;
		e->qps = qp;
	} else {
		/* at the tail: just before the head */
		qp->eng_next = e->qps;
		qp->eng_prev = e->qps->eng_prev;
		qp->eng_prev->eng_next = qp;
		e->qps->eng_prev = qp;
	}
	e->nqp++;
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

static void wake(struct sv_engine *e)
{
	__atomic_add_fetch(&e->db->seq, 1, __ATOMIC_SEQ_CST);
	futex(&e->db->seq, FUTEX_WAKE, INT_MAX, NULL);
}

void sv_engine_kick(struct sv_engine *e)
{
	if (!e || !e->db)
		return;
	/* pairs with the fence between `sleeping = 1` and the last look */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&e->db->sleeping, __ATOMIC_RELAXED))
		wake(e);
}

/* ---- the loop ---- */

/* Let the control thread take the lock if it waits for it. */
static void step_aside(void)
{
	unsigned int spins = 0;

	if (!__atomic_load_n(&sv_dev.ctl_wait, __ATOMIC_RELAXED))
		return;
	pthread_mutex_unlock(&sv_dev.lock);
	/* it clears its flag once it holds the lock */
	while (__atomic_load_n(&sv_dev.ctl_wait, __ATOMIC_ACQUIRE)) {
		if (++spins < 100)
			sv_cpu_relax();
		else
			sched_yield();
	}
	pthread_mutex_lock(&sv_dev.lock);
}

static bool stopping(struct sv_engine *e)
{
	return __atomic_load_n(&e->stop, __ATOMIC_ACQUIRE) != 0;
}

/* One pass: one step for each QP, from the cursor on. true if anything was
 * done. */
static bool engine_pass(struct sv_engine *e, struct sv_exec *x)
{
	bool progress = false;
	uint32_t n = e->nqp;

	x->now = sv_now_ns();
	for (uint32_t i = 0; i < n; i++) {
		struct sv_qp *qp;

		if (!e->cursor)
			e->cursor = e->qps;
		if (!e->cursor)
			break;
		qp = e->cursor;
		e->cursor = qp->eng_next;
		if (sv_exec_step(x, qp))
			progress = true;
		step_aside();   /* may change the list: cursor stays valid */
	}
	return progress;
}

/* Is any QP ready? *timer gets the earliest pending deadline. */
static bool engine_ready(struct sv_engine *e, uint64_t now, uint64_t *timer)
{
	struct sv_qp *qp = e->qps;

	if (!qp)
		return false;
	do {
		if (sv_exec_ready(qp, now, timer))
			return true;
		qp = qp->eng_next;
	} while (qp != e->qps);
	return false;
}

/* Spin a little before sleeping: true if work showed up. */
static bool engine_spin(struct sv_engine *e)
{
	uint64_t end = sv_now_ns() + spin_ns, now;

	do {
		for (int i = 0; i < 32; i++)
			sv_cpu_relax();
		step_aside();
		now = sv_now_ns();
		if (stopping(e) || engine_ready(e, now, NULL))
			return true;
	} while (now < end);
	return false;
}

static void engine_sleep(struct sv_engine *e)
{
	struct sv_doorbell *db = e->db;
	uint64_t timer = UINT64_MAX, now;
	uint32_t s = __atomic_load_n(&db->seq, __ATOMIC_ACQUIRE);
	struct timespec ts;

	__atomic_store_n(&db->sleeping, 1, __ATOMIC_RELAXED);
	/* pairs with the poster's fence between its prod store and its look
	 * at `sleeping` */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	now = sv_now_ns();
	if (stopping(e) || engine_ready(e, now, &timer)) {
		__atomic_store_n(&db->sleeping, 0, __ATOMIC_RELAXED);
		return;
	}
	if (timer != UINT64_MAX) {
		uint64_t d = timer > now ? timer - now : 0;

		ts.tv_sec = (time_t)(d / 1000000000u);
		ts.tv_nsec = (long)(d % 1000000000u);
	}
	pthread_mutex_unlock(&sv_dev.lock);
	futex(&db->seq, FUTEX_WAIT, s, timer != UINT64_MAX ? &ts : NULL);
	__atomic_store_n(&db->sleeping, 0, __ATOMIC_RELAXED);
	pthread_mutex_lock(&sv_dev.lock);
}

static void *engine_main(void *arg)
{
	struct sv_engine *e = arg;
	struct sv_exec x = {
		.bounce = e->bounce,
		.bounce_bytes = e->bounce_bytes,
	};
	char name[16];

	snprintf(name, sizeof(name), "sv-engine%u", e->index);
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&sv_dev.lock);
	while (!stopping(e)) {
		if (engine_pass(e, &x))
			continue;
		if (engine_spin(e))
			continue;
		engine_sleep(e);
	}
	pthread_mutex_unlock(&sv_dev.lock);
	return NULL;
}

int sv_engine_start(void)
{
	sigset_t all, old;
	int ret;

	{
		const char *v = getenv("SOFTVERBSD_SPIN_US");
		char *end;
		unsigned long us;

		if (sysconf(_SC_NPROCESSORS_ONLN) <= 2)
			spin_ns = SV_SPIN_NS_FEW;
		if (v && *v) {
			us = strtoul(v, &end, 10);
			if (!*end && us <= 10000000ul)
				spin_ns = (uint64_t)us * 1000u;
			else
				sv_log(SV_LOG_WARN, "ignoring SOFTVERBSD_SPIN_US=%s", v);
		}
	}
	ret = sv_ring_alloc("softverbs-doorbell",
			    (size_t)SV_ENGINES * SV_DB_PAGE_BYTES,
			    &sv_dev.db_memfd, &sv_dev.db_map);
	if (ret)
		return ret;
	for (unsigned int i = 0; i < SV_ENGINES; i++) {
		struct sv_engine *e = &engines[i];

		e->index = i;
		e->db = (struct sv_doorbell *)((char *)sv_dev.db_map +
					       (size_t)i * SV_DB_PAGE_BYTES);
		e->bounce_bytes = SV_BOUNCE_BYTES;
		e->bounce = mmap(NULL, e->bounce_bytes, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (e->bounce == MAP_FAILED) {
			e->bounce = NULL;
			ret = -ENOMEM;
			goto err;
		}
		sv_dev.engine[i] = e;
	}
	/* the threads take no signal: the main thread reads them from a
	 * signalfd */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (unsigned int i = 0; i < SV_ENGINES; i++) {
		ret = -pthread_create(&engines[i].thread, NULL, engine_main,
				      &engines[i]);
		if (ret)
			break;
		engines[i].started = true;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		goto err;
	return 0;

err:
	sv_engine_stop();
	return ret;
}

void sv_engine_stop(void)
{
	for (unsigned int i = 0; i < SV_ENGINES; i++) {
		struct sv_engine *e = &engines[i];

		if (e->started) {
			__atomic_store_n(&e->stop, 1, __ATOMIC_RELEASE);
			wake(e);
			pthread_join(e->thread, NULL);
			e->started = false;
		}
		if (e->bounce) {
			munmap(e->bounce, e->bounce_bytes);
			e->bounce = NULL;
		}
		sv_dev.engine[i] = NULL;
	}
	if (sv_dev.db_map) {
		munmap(sv_dev.db_map, (size_t)SV_ENGINES * SV_DB_PAGE_BYTES);
		sv_dev.db_map = NULL;
	}
	if (sv_dev.db_memfd >= 0) {
		close(sv_dev.db_memfd);
		sv_dev.db_memfd = -1;
	}
}

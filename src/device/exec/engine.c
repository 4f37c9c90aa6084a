// SPDX-License-Identifier: MIT
/*
 * The engines of softverbsd: each owns a doorbell page and a list of QPs,
 * and executes their WQEs (exec.c) round-robin; an engine thread runs the
 * engines of one or more pages (at most CPUs - 1 threads; see ethreads
 * below). Page 0's engine serves
 * every QP without a resource domain; pages 1 .. SV_MAX_RES_DOMAINS are
 * claimed by domains (ctl/domain.c), one each while they last, then shared by
 * the least used. A page's first domain sets its engine's policy: how long
 * it spins before sleeping (LOW_LATENCY: longer) and how many WQEs of one QP
 * it runs in a pass (HIGH_BW: a batch).
 *
 * Locking: an engine holds sv_dev.lock while it looks at objects and runs a
 * step, and lets the control thread in between two steps whenever that one
 * waits for the lock (sv_dev.ctl_wait), so commands are never starved by a
 * busy engine; other engines get it between two passes (sv_dev.eng_wait).
 * The bytes of a large message are copied without the lock (loop/resp.c),
 * which is where engines of different domains really run in parallel.
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
#include "device/exec/engine.h"
#include "device/sv_dev.h"

#define SV_BOUNCE_BYTES (1u << 20)
#define SV_SPIN_NS      30000u      /* spin this long before sleeping */
#define SV_SPIN_NS_FEW  2000u       /* ... on a machine of 2 CPUs or fewer */
#define SV_SPIN_NS_LL   50000u      /* LOW_LATENCY domains, > SV_FEW_CPUS_LL */
#define SV_FEW_CPUS_LL  4           /* ... at most this many CPUs: no spin */
#define SV_BATCH_HIGH_BW 32u        /* HIGH_BW domains: WQEs per QP per pass */

/*
 * How long an engine spins with nothing to do before it sleeps, read once at
 * start: $SOFTVERBSD_SPIN_US (0 .. 10 s) if set, else SV_SPIN_NS, or
 * SV_SPIN_NS_FEW where there are 2 CPUs or fewer: there a spinning engine
 * takes a core from the applications that busy-poll their CQs (measured on
 * 2 cores: ib_write_lat 20.5 us typical with a 30 us spin, 5.8 us with none;
 * see docs/PERFORMANCE.md).
 *
 * A LOW_LATENCY domain's engine spins SV_SPIN_NS_LL where CPUs are plenty,
 * and not at all on machines of SV_FEW_CPUS_LL CPUs or fewer: a ping-pong
 * there already has two busy-polling applications and two engines on too
 * few cores, and a spinning engine only takes the CPU its poster needs.
 * Measured on 2 CPUs (softverbs bench -t write -m lat, 8 B, p50 / p99):
 * no spin 6.6 / 7.5 us, 2 us 8.3 / 9.9 us, 10 us 17.4 / 299 us, 50 us
 * 68.7 / 883 us. $SOFTVERBSD_LL_SPIN_US overrides it.
 */
static uint64_t spin_ns = SV_SPIN_NS;
static uint64_t ll_spin_ns = SV_SPIN_NS_LL;

static struct sv_engine engines[SV_DB_PAGES];

/*
 * The threads that run the pages' work. A machine runs at most (CPUs - 1)
 * of them (at least one; sv_engine_start): more engine threads than the
 * cores left to the applications only take turns on them, and a domain of
 * its own would be slower than none (issue 22). Page i is served by thread
 * i % nthreads, which sleeps on the futex words of all its pages at once
 * (futex_waitv, Linux 5.16). Where futex_waitv is missing, every page has a
 * thread of its own, as before.
 */
struct sv_ethread {
	unsigned int index;
	pthread_t thread;
	bool running;
	uint32_t stop;             /* atomic: leave the loop */
};

static struct sv_ethread ethreads[SV_DB_PAGES];
static unsigned int nthreads = SV_DB_PAGES;

static struct sv_ethread *thread_of(const struct sv_engine *e)
{
	return &ethreads[e->index % nthreads];
}

static long futex(uint32_t *uaddr, int op, uint32_t val,
		  const struct timespec *ts)
{
	return syscall(SYS_futex, uaddr, op, val, ts, NULL, 0);
}

unsigned int sv_engine_index(const struct sv_engine *e)
{
	return e ? e->index : 0;
}

/* ---- the device lock ---- */

void sv_dev_lock(bool ctl)
{
	uint32_t *w = ctl ? &sv_dev.ctl_wait : &sv_dev.eng_wait;

	if (pthread_mutex_trylock(&sv_dev.lock) == 0)
		return;
	__atomic_add_fetch(w, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&sv_dev.lock);
	__atomic_sub_fetch(w, 1, __ATOMIC_SEQ_CST);
}

void sv_dev_unlock(void)
{
	pthread_mutex_unlock(&sv_dev.lock);
}

void sv_engine_quiesce(void)
{
	uint32_t seen[SV_DB_PAGES];
	bool busy = false;

	for (unsigned int i = 0; i < SV_DB_PAGES; i++) {
		seen[i] = __atomic_load_n(&engines[i].copy_seq, __ATOMIC_ACQUIRE);
		busy |= (seen[i] & 1) != 0;
	}
	if (!busy)
		return;
	sv_dev_unlock();
	/* a copy, or a fence that waits for copies: both end by themselves */
	for (unsigned int i = 0; i < SV_DB_PAGES; i++)
		if (seen[i] & 1)
			sv_seq_wait(&engines[i].copy_seq, seen[i]);
	sv_dev_lock(true);
}

/*
 * DESTROY_QP and DESTROY_AH wait for posted work (ctl/qp.c): round 0 only
 * yields the CPU (an engine woken on this one runs), later rounds sleep
 * 20 us << round, at most 1 ms, so a long wait costs the control thread
 * no CPU. Never without the lock dropped: the engine needs it to run.
 */
void sv_engine_ctl_pause(unsigned int round)
{
	struct timespec ts = { 0, 0 };
	long ns = 20000L << (round < 6 ? round : 6);

	sv_dev_unlock();
	if (!round) {
		sched_yield();
	} else {
		ts.tv_nsec = ns < 1000000L ? ns : 1000000L;
		nanosleep(&ts, NULL);
	}
	sv_dev_lock(true);
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

void sv_engine_add_qp(struct sv_qp *qp, struct sv_engine *e)
{
	if (!e)
		e = &engines[0];
	qp->engine = e;
	if (!e->started) {
		qp->eng_next = qp->eng_prev = NULL;
		qp->engine = NULL;
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

void sv_engine_add_srq(struct sv_srq *srq)
{
	struct sv_engine *e = &engines[0];

	if (!e->started)
		return;
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

/*
 * Let others have the lock: the control thread whenever it waits (between
 * two steps), other engines when `engines` is set (between two passes, so
 * that busy engines take turns a pass at a time). true if the lock was let
 * go: objects seen before may be gone.
 */
static bool step_aside(bool engines_too)
{
	uint32_t *w;
	unsigned int spins = 0;

	if (__atomic_load_n(&sv_dev.ctl_wait, __ATOMIC_RELAXED))
		w = &sv_dev.ctl_wait;
	else if (engines_too && __atomic_load_n(&sv_dev.eng_wait, __ATOMIC_RELAXED))
		w = &sv_dev.eng_wait;
	else
		return false;
	sv_dev_unlock();
	/* a waiter clears its count once it holds the lock */
	while (__atomic_load_n(w, __ATOMIC_ACQUIRE)) {
		if (++spins < 100)
			sv_cpu_relax();
		else
			sched_yield();
		if (spins > 1000)
			break;      /* more keep coming: queue up like them */
	}
	sv_dev_lock(false);
	return true;
}

static bool stopping(struct sv_ethread *t)
{
	return __atomic_load_n(&t->stop, __ATOMIC_ACQUIRE) != 0;
}

/* The pages thread t serves now (under sv_dev.lock): their count. */
static unsigned int thread_pages(const struct sv_ethread *t,
				 struct sv_engine *out[SV_DB_PAGES])
{
	unsigned int n = 0;

	/* its first page always: waking that one wakes the thread */
	for (unsigned int i = t->index; i < SV_DB_PAGES; i += nthreads)
		if (engines[i].started || i == t->index)
			out[n++] = &engines[i];
	return n;
}

/* One pass: up to e->batch steps for each QP, from the cursor on. true if
 * anything was done. */
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
		for (uint32_t b = 0; b < e->batch; b++) {
			if (!sv_exec_step(x, qp))
				break;
			progress = true;
			/* may change the list (the cursor stays valid) and
			 * free qp */
			if (step_aside(false))
				break;
		}
	}
	/* the ops of tag-matching SRQs (no lock let go in between: the list
	 * stays) */
	for (struct sv_srq *srq = e->tm_srqs; srq; srq = srq->tm_next)
		progress |= sv_tm_drain(srq);
	step_aside(true);
	return progress;
}

/* Is any QP ready? *timer gets the earliest pending deadline. */
static bool engine_ready(struct sv_engine *e, uint64_t now, uint64_t *timer)
{
	struct sv_qp *qp = e->qps;

	for (const struct sv_srq *srq = e->tm_srqs; srq; srq = srq->tm_next) {
		uint32_t n = __atomic_load_n(&srq->tm_ops.hdr->prod,
					     __ATOMIC_ACQUIRE) -
			     srq->tm_ops.cons;

		if (n && n <= srq->tm_ops.entries)
			return true;   /* ops to apply (a corrupt ring: none) */
	}
	if (!qp)
		return false;
	do {
		if (sv_exec_ready(qp, now, timer))
			return true;
		qp = qp->eng_next;
	} while (qp != e->qps);
	return false;
}

/* Spin a little before sleeping, the longest spin of its pages: true if
 * work showed up. */
static bool engine_spin(struct sv_ethread *t, struct sv_engine **pg,
			unsigned int n)
{
	uint64_t spin = 0, end, now;

	for (unsigned int i = 0; i < n; i++)
		if (pg[i]->spin_ns > spin)
			spin = pg[i]->spin_ns;
	end = sv_now_ns() + spin;
	do {
		for (int i = 0; i < 32; i++)
			sv_cpu_relax();
		if (step_aside(true))
			return true;    /* the pages may have changed */
		now = sv_now_ns();
		if (stopping(t))
			return true;
		for (unsigned int i = 0; i < n; i++)
			if (engine_ready(pg[i], now, NULL))
				return true;
	} while (now < end);
	return false;
}

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef FUTEX_32
#define FUTEX_32 2
#endif
struct sv_futex_waitv {            /* the kernel's struct futex_waitv */
	uint64_t val;
	uint64_t uaddr;
	uint32_t flags;
	uint32_t reserved;
};

/* Sleep until a page's doorbell rings (or its earliest timer). Every page
 * says it sleeps, then every ring is looked at once more (the poster's
 * fence pairs with ours: either we see its WQE or it sees `sleeping`). */
static void engine_sleep(struct sv_ethread *t, struct sv_engine **pg,
			 unsigned int n)
{
	struct sv_futex_waitv w[SV_DB_PAGES];
	uint64_t timer = UINT64_MAX, now;
	struct timespec ts;
	bool ready = false;

	for (unsigned int i = 0; i < n; i++) {
		w[i] = (struct sv_futex_waitv){
			.val = __atomic_load_n(&pg[i]->db->seq, __ATOMIC_ACQUIRE),
			.uaddr = (uintptr_t)&pg[i]->db->seq,
			.flags = FUTEX_32,         /* shared: clients post */
		};
		__atomic_store_n(&pg[i]->db->sleeping, 1, __ATOMIC_RELAXED);
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	now = sv_now_ns();
	ready = stopping(t);
	for (unsigned int i = 0; i < n && !ready; i++)
		ready = engine_ready(pg[i], now, &timer);
	if (!ready) {
		sv_dev_unlock();
		if (n == 1) {
			if (timer != UINT64_MAX) {
				uint64_t d = timer > now ? timer - now : 0;

				ts.tv_sec = (time_t)(d / 1000000000u);
				ts.tv_nsec = (long)(d % 1000000000u);
			}
			futex(&pg[0]->db->seq, FUTEX_WAIT, (uint32_t)w[0].val,
			      timer != UINT64_MAX ? &ts : NULL);
		} else {
			/* futex_waitv's timeout is absolute */
			if (timer != UINT64_MAX) {
				clock_gettime(CLOCK_MONOTONIC, &ts);
				uint64_t d = (timer > now ? timer - now : 0) +
					     (uint64_t)ts.tv_nsec;

				ts.tv_sec += (time_t)(d / 1000000000u);
				ts.tv_nsec = (long)(d % 1000000000u);
			}
			syscall(SYS_futex_waitv, w, n, 0,
				timer != UINT64_MAX ? &ts : NULL,
				CLOCK_MONOTONIC);
		}
		sv_dev_lock(false);
	}
	for (unsigned int i = 0; i < n; i++)
		__atomic_store_n(&pg[i]->db->sleeping, 0, __ATOMIC_RELAXED);
}

static void *engine_main(void *arg)
{
	struct sv_ethread *t = arg;
	struct sv_exec x[SV_DB_PAGES];
	struct sv_engine *pg[SV_DB_PAGES];
	char name[16];

	/* a context per page: its bounce buffer and its copy sequence */
	for (unsigned int i = 0; i < SV_DB_PAGES; i++)
		x[i] = (struct sv_exec){
			.copy_seq = &engines[i].copy_seq,
			.fencing = &engines[i].fencing,
		};
	snprintf(name, sizeof(name), "sv-engine%u", t->index);
	pthread_setname_np(pthread_self(), name);
	sv_dev_lock(false);
	while (!stopping(t)) {
		unsigned int n = thread_pages(t, pg);
		bool progress = false;

		for (unsigned int i = 0; i < n; i++) {
			struct sv_exec *xi = &x[pg[i]->index];

			xi->bounce = pg[i]->bounce;
			xi->bounce_bytes = pg[i]->bounce_bytes;
			progress |= engine_pass(pg[i], xi);
		}
		if (progress || engine_spin(t, pg, n))
			continue;
		engine_sleep(t, pg, n);
	}
	sv_dev_unlock();
	return NULL;
}

/* Put e's page to work: start its thread, or have its running thread take
 * the page on (under sv_dev.lock, or before any thread runs). */
static int engine_launch(struct sv_engine *e)
{
	struct sv_ethread *t = thread_of(e);
	sigset_t all, old;
	int ret;

	if (e->started)
		return 0;
	if (!e->bounce) {
		e->bounce_bytes = SV_BOUNCE_BYTES;
		e->bounce = mmap(NULL, e->bounce_bytes, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (e->bounce == MAP_FAILED) {
			e->bounce = NULL;
			return -ENOMEM;
		}
	}
	if (t->running) {
		e->started = true;
		/* it may sleep on its other pages' words: the first of them
		 * (t->index, its own page, always among them) wakes it */
		wake(&engines[t->index]);
		return 0;
	}
	/* the threads take no signal: the main thread reads them from a
	 * signalfd */
	e->started = true;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&t->thread, NULL, engine_main, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		e->started = false;
		return ret;
	}
	t->running = true;
	return 0;
}

/* The policy of a page's first domain. */
static void engine_policy(struct sv_engine *e, uint32_t msg_model)
{
	e->msg_model = msg_model;
	e->spin_ns = spin_ns;
	e->batch = 1;
	if (msg_model == SV_MSG_LOW_LATENCY)
		e->spin_ns = ll_spin_ns;
	if (msg_model == SV_MSG_HIGH_BW)
		e->batch = SV_BATCH_HIGH_BW;
}

struct sv_engine *sv_engine_claim(uint32_t msg_model, bool dedicated_only,
				  bool *dedicated)
{
	struct sv_engine *e = NULL;

	for (unsigned int i = 1; i < SV_DB_PAGES; i++) {
		struct sv_engine *c = &engines[i];

		if (!c->domains) {
			if (engine_launch(c) == 0) {
				engine_policy(c, msg_model);
				c->domains = 1;
				c->exclusive = dedicated_only;
				*dedicated = true;
				return c;
			}
			continue;
		}
		/* a page promised to a FORCE domain stays its own */
		if (!c->exclusive && (!e || c->domains < e->domains))
			e = c;
	}
	*dedicated = false;
	if (dedicated_only)
		return NULL;
	if (!e)
		e = &engines[0];       /* every page is someone's own */
	e->domains++;
	return e;
}

void sv_engine_release(struct sv_engine *e)
{
	if (e && e->domains && !--e->domains)
		e->exclusive = false;
}

/* A spin time from the environment: $name in microseconds, 0 .. 10 s. */
static void env_spin(const char *name, uint64_t *ns)
{
	const char *v = getenv(name);
	char *end;
	unsigned long us;

	if (!v || !*v)
		return;
	us = strtoul(v, &end, 10);
	if (!*end && us <= 10000000ul)
		*ns = (uint64_t)us * 1000u;
	else
		sv_log(SV_LOG_WARN, "ignoring %s=%s", name, v);
}

/* How many engine threads: CPUs - 1 (at least 1), $SOFTVERBSD_ENGINE_THREADS
 * (1 .. SV_DB_PAGES) if set; one per page where the kernel has no
 * futex_waitv. */
static unsigned int engine_threads(long ncpu)
{
	const char *v = getenv("SOFTVERBSD_ENGINE_THREADS");
	long n = ncpu - 1;

	/* no futexes is invalid where the call exists */
	if (syscall(SYS_futex_waitv, NULL, 0, 0, NULL, CLOCK_MONOTONIC) < 0 &&
	    errno == ENOSYS) {
		sv_log(SV_LOG_INFO, "no futex_waitv: one engine thread per page");
		return SV_DB_PAGES;
	}
	if (v && *v) {
		char *end;
		unsigned long u = strtoul(v, &end, 10);

		if (!*end && u >= 1 && u <= SV_DB_PAGES)
			n = (long)u;
		else
			sv_log(SV_LOG_WARN, "ignoring SOFTVERBSD_ENGINE_THREADS=%s", v);
	}
	if (n < 1)
		n = 1;
	if (n > SV_DB_PAGES)
		n = SV_DB_PAGES;
	return (unsigned int)n;
}

int sv_engine_start(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int ret;

	nthreads = engine_threads(ncpu);
	for (unsigned int i = 0; i < SV_DB_PAGES; i++)
		ethreads[i].index = i;
	if (ncpu <= 2)
		spin_ns = SV_SPIN_NS_FEW;
	if (ncpu <= SV_FEW_CPUS_LL)
		ll_spin_ns = 0;
	env_spin("SOFTVERBSD_SPIN_US", &spin_ns);
	env_spin("SOFTVERBSD_LL_SPIN_US", &ll_spin_ns);
	ret = sv_ring_alloc("softverbs-doorbell",
			    (size_t)SV_DB_PAGES * SV_DB_PAGE_BYTES,
			    &sv_dev.db_memfd, &sv_dev.db_map);
	if (ret)
		return ret;
	for (unsigned int i = 0; i < SV_DB_PAGES; i++) {
		struct sv_engine *e = &engines[i];

		e->index = i;
		e->db = (struct sv_doorbell *)((char *)sv_dev.db_map +
					       (size_t)i * SV_DB_PAGE_BYTES);
		engine_policy(e, SV_MSG_DEFAULT);
		sv_dev.engine[i] = e;
	}
	/* the default page's engine runs from the start, the others once a
	 * domain has their page */
	ret = engine_launch(&engines[0]);
	if (ret)
		goto err;
	return 0;

err:
	sv_engine_stop();
	return ret;
}

void sv_engine_stop(void)
{
	for (unsigned int i = 0; i < SV_DB_PAGES; i++) {
		struct sv_ethread *t = &ethreads[i];

		if (t->running) {
			__atomic_store_n(&t->stop, 1, __ATOMIC_RELEASE);
			wake(&engines[t->index]);
			pthread_join(t->thread, NULL);
			t->running = false;
			t->stop = 0;
		}
	}
	for (unsigned int i = 0; i < SV_DB_PAGES; i++) {
		struct sv_engine *e = &engines[i];

		e->started = false;
		if (e->bounce) {
			munmap(e->bounce, e->bounce_bytes);
			e->bounce = NULL;
		}
		sv_dev.engine[i] = NULL;
	}
	if (sv_dev.db_map) {
		munmap(sv_dev.db_map, (size_t)SV_DB_PAGES * SV_DB_PAGE_BYTES);
		sv_dev.db_map = NULL;
	}
	if (sv_dev.db_memfd >= 0) {
		close(sv_dev.db_memfd);
		sv_dev.db_memfd = -1;
	}
}

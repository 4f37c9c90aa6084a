// SPDX-License-Identifier: MIT
/*
 * The copy limits that softverbs' figures are measured against, on this
 * machine, in this run:
 *   - memcpy of each size inside one process;
 *   - one process_vm_writev of each size into another process (a child);
 *   - the daemon's way: process_vm_readv from one process into a bounce
 *     buffer, then process_vm_writev into another, in bounce-sized chunks
 *     (two copies, what a WQE costs the engine at best);
 *   - latency floors between two processes: a spinning ping-pong on one
 *     shared cache line (what busy polling can reach) and a pipe ping-pong
 *     (what a sleep and a wake-up cost).
 * Prints one JSON object on stdout and a short table on stderr.
 *   sv_limits [--sizes a,b,c] [--min-time SECONDS] [--lat-iters N]
 *             [--bounce BYTES]
 * Sizes default to the sweep of 'softverbs bench -a': 2 .. 8 MiB, powers of
 * two.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES 64

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield" ::: "memory")
#else
#define cpu_relax() do { } while (0)
#endif

struct result {
	size_t size;
	uint64_t iters;
	double seconds;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "sv_limits: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void *map(size_t bytes, int shared)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	memset(p, 0x5a, bytes);		/* touched: no page faults in timing */
	return p;
}

/* ---- a child process that only holds memory for the other side ---- */

struct child {
	pid_t pid;
	uintptr_t addr;		/* its buffer */
};

static struct child spawn_holder(size_t bytes)
{
	pid_t parent = getpid();
	struct child c;
	int up[2];

	if (pipe(up))
		die("pipe");
	c.pid = fork();
	if (c.pid < 0)
		die("fork");
	if (c.pid == 0) {
		uintptr_t a;

		/* never outlive the measuring process */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		a = (uintptr_t)map(bytes, 0);
		close(up[0]);
		if (write(up[1], &a, sizeof(a)) != sizeof(a))
			_exit(1);
		close(up[1]);
		for (;;)
			pause();
	}
	close(up[1]);
	if (read(up[0], &c.addr, sizeof(c.addr)) != sizeof(c.addr)) {
		fprintf(stderr, "sv_limits: the holder process died\n");
		exit(1);
	}
	close(up[0]);
	return c;
}

static void reap(struct child *c)
{
	kill(c->pid, SIGKILL);
	while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* ---- the copies; each does one transfer of 'size' bytes ---- */

struct copy_ctx {
	char *src, *dst;
	struct child a, b;	/* pvw writes into a; the bounce path a -> b */
	char *bounce;
	size_t bounce_bytes;
};

static void do_memcpy(struct copy_ctx *x, size_t size)
{
	memcpy(x->dst, x->src, size);
	__asm__ volatile("" : : "r"(x->dst) : "memory");
}

static void do_pvw(struct copy_ctx *x, size_t size)
{
	struct iovec l = { x->src, size };
	struct iovec r = { (void *)x->a.addr, size };

	if (process_vm_writev(x->a.pid, &l, 1, &r, 1, 0) != (ssize_t)size)
		die("process_vm_writev");
}

static void do_bounce(struct copy_ctx *x, size_t size)
{
	size_t off = 0;

	while (off < size) {
		size_t n = size - off < x->bounce_bytes ? size - off
						       : x->bounce_bytes;
		struct iovec l = { x->bounce, n };
		struct iovec ra = { (char *)x->a.addr + off, n };
		struct iovec rb = { (char *)x->b.addr + off, n };

		if (process_vm_readv(x->a.pid, &l, 1, &ra, 1, 0) != (ssize_t)n)
			die("process_vm_readv");
		if (process_vm_writev(x->b.pid, &l, 1, &rb, 1, 0) != (ssize_t)n)
			die("process_vm_writev");
		off += n;
	}
}

/* Repeat one copy until min_time has passed (batches double, so the clock
 * is read rarely), after one untimed warm-up. */
static struct result measure(void (*fn)(struct copy_ctx *, size_t),
			     struct copy_ctx *x, size_t size, double min_time)
{
	struct result r = { .size = size };
	uint64_t batch = 1;
	double t0, t;

	fn(x, size);
	t0 = now();
	for (;;) {
		for (uint64_t i = 0; i < batch; i++)
			fn(x, size);
		r.iters += batch;
		t = now() - t0;
		if (t >= min_time)
			break;
		if (batch < (1u << 20))
			batch *= 2;
	}
	r.seconds = t;
	return r;
}

/* ---- latency floors between two processes ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

struct lat {
	uint64_t iters;
	double p50, p99, min, max;	/* one-way: half a round trip, us */
};

static struct lat summarize(double *rtt, uint64_t n)
{
	struct lat l = { .iters = n };

	qsort(rtt, n, sizeof(*rtt), cmp_double);
	l.min = rtt[0] / 2 * 1e6;
	l.p50 = rtt[n / 2] / 2 * 1e6;
	l.p99 = rtt[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] / 2 * 1e6;
	l.max = rtt[n - 1] / 2 * 1e6;
	return l;
}

/* Two processes, both spinning, each polls a cache line of its own that
 * the other writes (as a ping-pong of RDMA WRITEs polls its own buffer). */
static struct lat pingpong_shm(uint64_t iters)
{
	char *page = map(4096, 1);
	_Atomic uint64_t *ping = (_Atomic uint64_t *)page;	/* child polls */
	_Atomic uint64_t *pong = (_Atomic uint64_t *)(page + 256);
	double *rtt = calloc(iters, sizeof(*rtt));
	uint64_t warm = iters / 10 + 10, total = warm + iters;
	pid_t pid;

	if (!rtt)
		die("calloc");
	atomic_store(ping, 0);
	atomic_store(pong, 0);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (uint64_t i = 1; i <= total; i++) {
			while (atomic_load_explicit(ping, memory_order_acquire)
			       != i)
				cpu_relax();
			atomic_store_explicit(pong, i, memory_order_release);
		}
		_exit(0);
	}
	for (uint64_t i = 1; i <= total; i++) {
		double t0 = now();

		atomic_store_explicit(ping, i, memory_order_release);
		while (atomic_load_explicit(pong, memory_order_acquire) != i)
			cpu_relax();
		if (i > warm)
			rtt[i - warm - 1] = now() - t0;
	}
	waitpid(pid, NULL, 0);
	struct lat l = summarize(rtt, iters);
	free(rtt);
	munmap(page, 4096);
	return l;
}

/* One byte back and forth over two pipes: each side sleeps in read(). */
static struct lat pingpong_pipe(uint64_t iters)
{
	int ab[2], ba[2];
	double *rtt = calloc(iters, sizeof(*rtt));
	uint64_t warm = iters / 10 + 10, total = warm + iters;
	char c = 0;
	pid_t pid;

	if (!rtt)
		die("calloc");
	if (pipe(ab) || pipe(ba))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (uint64_t i = 0; i < total; i++)
			if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	for (uint64_t i = 0; i < total; i++) {
		double t0 = now();

		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			die("pipe ping-pong");
		if (i >= warm)
			rtt[i - warm] = now() - t0;
	}
	waitpid(pid, NULL, 0);
	close(ab[0]); close(ab[1]); close(ba[0]); close(ba[1]);
	struct lat l = summarize(rtt, iters);
	free(rtt);
	return l;
}

/* ---- output ---- */

static void json_results(const char *name, const struct result *r, int n,
			 int last)
{
	printf("  \"%s\": [\n", name);
	for (int i = 0; i < n; i++) {
		double op = r[i].seconds / (double)r[i].iters;

		printf("    {\"size\": %zu, \"iters\": %" PRIu64
		       ", \"seconds\": %.6f, \"bw_MBps\": %.2f"
		       ", \"op_us\": %.4f}%s\n",
		       r[i].size, r[i].iters, r[i].seconds,
		       (double)r[i].size / op / 1e6, op * 1e6,
		       i + 1 < n ? "," : "");
	}
	printf("  ]%s\n", last ? "" : ",");
}

static void json_lat(const char *name, struct lat l, int last)
{
	printf("    \"%s\": {\"iters\": %" PRIu64 ", \"lat_p50_us\": %.4f"
	       ", \"lat_p99_us\": %.4f, \"lat_min_us\": %.4f"
	       ", \"lat_max_us\": %.4f}%s\n",
	       name, l.iters, l.p50, l.p99, l.min, l.max, last ? "" : ",");
}

static int parse_sizes(const char *s, size_t *out)
{
	int n = 0;

	while (*s) {
		char *end;
		unsigned long long v = strtoull(s, &end, 0);

		if (end == s || v == 0 || v > (1ull << 30) || n == MAX_SIZES)
			return -1;
		out[n++] = (size_t)v;
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return n;
}

static void usage(void)
{
	fprintf(stderr, "usage: sv_limits [--sizes a,b,c] [--min-time SECONDS]"
		" [--lat-iters N] [--bounce BYTES]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sizes", required_argument, NULL, 's' },
		{ "min-time", required_argument, NULL, 't' },
		{ "lat-iters", required_argument, NULL, 'n' },
		{ "bounce", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static struct result rm[MAX_SIZES], rw[MAX_SIZES], rb[MAX_SIZES];
	size_t sizes[MAX_SIZES], max = 0;
	int nsizes = 0, c;
	double min_time = 0.2;
	long lat_iters = 20000;
	long bounce = 1 << 20;	/* the engine's bounce buffer (exec/engine.c) */
	struct copy_ctx x;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			nsizes = parse_sizes(optarg, sizes);
			if (nsizes <= 0)
				usage();
			break;
		case 't':
			min_time = atof(optarg);
			if (!(min_time > 0 && min_time < 60))
				usage();
			break;
		case 'n':
			lat_iters = atol(optarg);
			if (lat_iters < 10 || lat_iters > 10000000)
				usage();
			break;
		case 'b':
			bounce = atol(optarg);
			if (bounce < 4096 || bounce > (1l << 30))
				usage();
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	if (!nsizes)
		for (size_t s = 2; s <= (8u << 20); s *= 2)
			sizes[nsizes++] = s;
	for (int i = 0; i < nsizes; i++)
		if (sizes[i] > max)
			max = sizes[i];

	x.src = map(max, 0);
	x.dst = map(max, 0);
	x.bounce_bytes = (size_t)bounce;
	x.bounce = map(x.bounce_bytes, 0);
	x.a = spawn_holder(max);
	x.b = spawn_holder(max);

	for (int i = 0; i < nsizes; i++) {
		rm[i] = measure(do_memcpy, &x, sizes[i], min_time);
		rw[i] = measure(do_pvw, &x, sizes[i], min_time);
		rb[i] = measure(do_bounce, &x, sizes[i], min_time);
	}
	reap(&x.a);
	reap(&x.b);

	struct lat shm = pingpong_shm((uint64_t)lat_iters);
	struct lat pip = pingpong_pipe((uint64_t)lat_iters / 4 + 10);

	printf("{\n  \"tool\": \"sv_limits\", \"min_time_s\": %.3f,"
	       " \"bounce_bytes\": %zu,\n", min_time, x.bounce_bytes);
	json_results("memcpy", rm, nsizes, 0);
	json_results("process_vm_writev", rw, nsizes, 0);
	json_results("readv_writev_bounce", rb, nsizes, 0);
	printf("  \"pingpong\": {\n");
	json_lat("shm_spin", shm, 0);
	json_lat("pipe", pip, 1);
	printf("  }\n}\n");

	fprintf(stderr, "%10s %14s %14s %14s   (MB/s, 1 MB = 1e6 B; us per op)\n",
		"size", "memcpy", "pv_writev", "readv+writev");
	for (int i = 0; i < nsizes; i++) {
		double om = rm[i].seconds / (double)rm[i].iters;
		double ow = rw[i].seconds / (double)rw[i].iters;
		double ob = rb[i].seconds / (double)rb[i].iters;

		fprintf(stderr, "%10zu %8.0f %5.2f %8.0f %5.2f %8.0f %5.2f\n",
			sizes[i], (double)sizes[i] / om / 1e6, om * 1e6,
			(double)sizes[i] / ow / 1e6, ow * 1e6,
			(double)sizes[i] / ob / 1e6, ob * 1e6);
	}
	fprintf(stderr, "ping-pong one-way p50: shared cache line %.3f us,"
		" pipe %.3f us\n", shm.p50, pip.p50);
	return 0;
}

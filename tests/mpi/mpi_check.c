/*
 * mpi_check: an MPI job whose every result is checked against values
 * computed independently on each rank. Built once per MPI (Open MPI and
 * MPICH, tests/mpi/CMakeLists.txt) and run by tests/mpi/mpi_netns.sh over
 * two network namespaces with a softverbsd each.
 *
 *   point-to-point  every size class, 0 B to 16 MiB (eager and rendezvous):
 *                   blocking Send/Recv between partners in the two halves of
 *                   the job (rank r and r + n/2: with 4 ranks per host, the
 *                   pairs cross the hosts), Ssend, nonblocking Isend/Irecv
 *                   around a ring both ways, MPI_ANY_SOURCE with Probe,
 *                   received counts checked
 *   collectives     Bcast from two roots, Reduce to two roots, Allreduce
 *                   (SUM int64, MAX double, in place), Alltoall, Barrier
 *   one-sided       MPI_Put, MPI_Get, MPI_Accumulate (SUM, and MAX) inside
 *                   fences, on a window of every rank
 *
 * Any mismatch: "mpi_check: rank R: TEST: ..." on stderr and MPI_Abort
 * (exit status 1 from the launcher). Rank 0 prints one line per test and
 * "mpi_check: all checks passed" at the end.
 *
 *   mpi_check [--max-size BYTES] [--iters N] [--loop SECONDS] [--corrupt]
 * --loop: after the checks, allreduce and exchange in a loop for SECONDS
 * (the killed-rank test kills a rank there); errors return to the caller
 * (MPI_ERRORS_RETURN), which prints them and exits 3. Each rank writes
 * "looping" on stdout when it enters the loop. --corrupt: rank 1 changes
 * a byte of a message it received, and the check must fail (the checker's
 * own test, tests/mpi/detects.sh).
 */
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;
static const char *test = "init";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "mpi_check: rank %d: %s: %s\n", rank, test, msg);
	fflush(stderr);
	/* the launcher forwards our output asynchronously and drops what it
	 * had not read when the abort kills the job (hydra) */
	usleep(500000);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

/* every MPI call's status: the handler is MPI_ERRORS_RETURN */
#define CK(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) {	\
	char s_[MPI_MAX_ERROR_STRING]; int l_ = 0;			\
	MPI_Error_string(rc_, s_, &l_);					\
	die("%s failed: %s", #call, s_); } } while (0)

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		die("out of memory (%zu bytes)", n);
	return p;
}

/* The byte at offset i of the message from src to dst of length len in
 * round k: a mix of all of them, so a misplaced, stale or misrouted byte
 * shows. Filled and checked 8 bytes at a time. */
static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static uint64_t seed_of(int src, int dst, size_t len, int k)
{
	return mix(((uint64_t)src << 48) ^ ((uint64_t)dst << 32) ^
		   ((uint64_t)k << 24) ^ len);
}

static void fill(unsigned char *b, size_t len, int src, int dst, int k)
{
	uint64_t s = seed_of(src, dst, len, k), w;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		w = s + i * 0x9e3779b97f4a7c15ULL;
		memcpy(b + i, &w, 8);
	}
	w = s + i * 0x9e3779b97f4a7c15ULL;
	if (i < len)
		memcpy(b + i, &w, len - i);
}

static void verify(const unsigned char *b, size_t len, int src, int dst, int k,
		   const char *what)
{
	uint64_t s = seed_of(src, dst, len, k), w;
	size_t i, j;

	for (i = 0; i < len; i += 8) {
		w = s + i * 0x9e3779b97f4a7c15ULL;
		size_t n = len - i < 8 ? len - i : 8;
		if (memcmp(b + i, &w, n) == 0)
			continue;
		for (j = 0; j < n; j++)
			if (b[i + j] != ((unsigned char *)&w)[j])
				break;
		die("%s: %zu-byte message from rank %d: byte %zu is 0x%02x, "
		    "expected 0x%02x", what, len, src, i + j, b[i + j],
		    ((unsigned char *)&w)[j]);
	}
}

static double t_start;
static const char *step;

static void begin(const char *name)
{
	test = step = name;
	CK(MPI_Barrier(MPI_COMM_WORLD));
	t_start = MPI_Wtime();
}

static void done(void)
{
	CK(MPI_Barrier(MPI_COMM_WORLD));
	if (rank == 0) {
		printf("mpi_check: %-28s ok (%.3f s)\n", step, MPI_Wtime() - t_start);
		fflush(stdout);
	}
}

static const size_t size_classes[] = {
	0, 1, 8, 64, 1024, 8192, 65536, 1 << 20, 16 << 20,
};
#define NSIZES (sizeof(size_classes) / sizeof(size_classes[0]))
static size_t max_size = 16 << 20;
static int iters = 2;
static int corrupt;   /* --corrupt: the checker's own test */

/* Blocking: rank r and its partner r +- n/2 (the other host when the ranks
 * are placed by host); the lower sends first. An odd rank out pairs with
 * itself through MPI_Sendrecv. Plain Send for even rounds, Ssend for odd. */
static void p2p_blocking(void)
{
	int half = nranks / 2, peer, k;
	size_t si;
	MPI_Status st;
	int count;

	peer = rank < half ? rank + half : rank - half;
	if (nranks % 2 && rank == nranks - 1)
		peer = rank;
	for (si = 0; si < NSIZES; si++) {
		size_t len = size_classes[si];
		unsigned char *sb, *rb;

		if (len > max_size)
			continue;
		sb = xmalloc(len);
		rb = xmalloc(len);
		for (k = 0; k < iters; k++) {
			fill(sb, len, rank, peer, k);
			memset(rb, 0xa5, len);
			if (peer == rank) {
				CK(MPI_Sendrecv(sb, (int)len, MPI_BYTE, peer, 10 + k,
						rb, (int)len, MPI_BYTE, peer, 10 + k,
						MPI_COMM_WORLD, &st));
			} else if (rank < peer) {
				if (k % 2)
					CK(MPI_Ssend(sb, (int)len, MPI_BYTE, peer, 10 + k, MPI_COMM_WORLD));
				else
					CK(MPI_Send(sb, (int)len, MPI_BYTE, peer, 10 + k, MPI_COMM_WORLD));
				CK(MPI_Recv(rb, (int)len, MPI_BYTE, peer, 10 + k,
					    MPI_COMM_WORLD, &st));
			} else {
				CK(MPI_Recv(rb, (int)len, MPI_BYTE, peer, 10 + k,
					    MPI_COMM_WORLD, &st));
				if (k % 2)
					CK(MPI_Ssend(sb, (int)len, MPI_BYTE, peer, 10 + k, MPI_COMM_WORLD));
				else
					CK(MPI_Send(sb, (int)len, MPI_BYTE, peer, 10 + k, MPI_COMM_WORLD));
			}
			CK(MPI_Get_count(&st, MPI_BYTE, &count));
			if ((size_t)count != len || st.MPI_SOURCE != peer ||
			    st.MPI_TAG != 10 + k)
				die("status of a %zu-byte receive: count %d, source %d, "
				    "tag %d (expected %zu, %d, %d)", len, count,
				    st.MPI_SOURCE, st.MPI_TAG, len, peer, 10 + k);
			/* --corrupt: one byte of what rank 1 received is
			 * changed, as a transport that lost it would */
			if (corrupt && rank == 1 && len == 65536)
				rb[len / 3] ^= 0x10;
			verify(rb, len, peer, rank, k, "Send/Recv");
		}
		free(sb);
		free(rb);
	}
}

/* Nonblocking: every size class at once, to both ring neighbours, all
 * receives posted before any send (the 8 tags keep them apart). */
static void p2p_nonblocking(void)
{
	int left = (rank + nranks - 1) % nranks, right = (rank + 1) % nranks;
	unsigned char *sbuf[NSIZES][2], *rbuf[NSIZES][2];
	MPI_Request req[NSIZES * 4];
	MPI_Status st[NSIZES * 4];
	int nreq = 0, k, d, count;
	size_t si;

	for (k = 0; k < iters; k++) {
		nreq = 0;
		for (si = 0; si < NSIZES; si++) {
			size_t len = size_classes[si];

			if (len > max_size)
				continue;
			for (d = 0; d < 2; d++) {
				int from = d ? right : left;

				rbuf[si][d] = xmalloc(len);
				memset(rbuf[si][d], 0x5a, len);
				CK(MPI_Irecv(rbuf[si][d], (int)len, MPI_BYTE, from,
					     (int)(100 + si * 2 + d), MPI_COMM_WORLD,
					     &req[nreq++]));
			}
		}
		for (si = 0; si < NSIZES; si++) {
			size_t len = size_classes[si];

			if (len > max_size)
				continue;
			for (d = 0; d < 2; d++) {
				/* d = 0 goes right (the right one receives it
				 * from its left), d = 1 goes left */
				int to = d ? left : right;

				sbuf[si][d] = xmalloc(len);
				fill(sbuf[si][d], len, rank, to, k + 50);
				CK(MPI_Isend(sbuf[si][d], (int)len, MPI_BYTE, to,
					     (int)(100 + si * 2 + d), MPI_COMM_WORLD,
					     &req[nreq++]));
			}
		}
		CK(MPI_Waitall(nreq, req, st));
		nreq = 0;
		for (si = 0; si < NSIZES; si++) {
			size_t len = size_classes[si];

			if (len > max_size)
				continue;
			for (d = 0; d < 2; d++) {
				int from = d ? right : left;

				CK(MPI_Get_count(&st[nreq], MPI_BYTE, &count));
				if ((size_t)count != len)
					die("Irecv of %zu bytes from %d: count %d",
					    len, from, count);
				nreq++;
				verify(rbuf[si][d], len, from, rank, k + 50, "Isend/Irecv");
				free(rbuf[si][d]);
			}
		}
		for (si = 0; si < NSIZES; si++) {
			if (size_classes[si] > max_size)
				continue;
			free(sbuf[si][0]);
			free(sbuf[si][1]);
		}
	}
}

/* MPI_ANY_SOURCE: every rank sends rank 0 one message of 64 KiB and one of
 * 8 bytes; rank 0 probes for each, sizes the buffer from the probe, and
 * receives from whoever it names. */
static void p2p_any_source(void)
{
	size_t lens[2] = { 8, 65536 };
	int got[2][1024] = { { 0 } };
	int i, j;

	if (nranks > 1024)
		die("too many ranks");
	if (rank != 0) {
		for (j = 0; j < 2; j++) {
			unsigned char *b = xmalloc(lens[j]);
			fill(b, lens[j], rank, 0, 77);
			CK(MPI_Send(b, (int)lens[j], MPI_BYTE, 0, 200 + j, MPI_COMM_WORLD));
			free(b);
		}
		return;
	}
	for (i = 0; i < 2 * (nranks - 1); i++) {
		MPI_Status st;
		int count, src;
		unsigned char *b;

		CK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
		CK(MPI_Get_count(&st, MPI_BYTE, &count));
		src = st.MPI_SOURCE;
		j = st.MPI_TAG - 200;
		if (j < 0 || j > 1 || src <= 0 || src >= nranks || (size_t)count != lens[j])
			die("probe: source %d tag %d count %d", src, st.MPI_TAG, count);
		if (got[j][src]++)
			die("a second message from %d with tag %d", src, st.MPI_TAG);
		b = xmalloc((size_t)count);
		CK(MPI_Recv(b, count, MPI_BYTE, src, st.MPI_TAG, MPI_COMM_WORLD, &st));
		verify(b, (size_t)count, src, 0, 77, "ANY_SOURCE");
		free(b);
	}
}

static void coll_bcast(void)
{
	static const size_t lens[] = { 1, 1024, 65536, 1 << 20, 4 << 20 };
	int roots[2] = { 0, nranks - 1 }, r;
	size_t i;

	for (r = 0; r < 2; r++) {
		for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			size_t len = lens[i];
			unsigned char *b;

			if (len > max_size)
				continue;
			b = xmalloc(len);
			if (rank == roots[r])
				fill(b, len, roots[r], -1, 3);
			else
				memset(b, 0, len);
			CK(MPI_Bcast(b, (int)len, MPI_BYTE, roots[r], MPI_COMM_WORLD));
			verify(b, len, roots[r], -1, 3, "Bcast");
			free(b);
		}
	}
}

/* element j of rank r's contribution */
static int64_t contrib(int r, size_t j)
{
	return (int64_t)r * 1000003 + (int64_t)(j * 7919 % 100000) - 50000;
}

static const size_t red_counts[] = { 1, 1000, 262144 };

static void coll_reduce(void)
{
	int roots[2] = { 0, nranks - 1 }, r, q;
	size_t i, j;

	for (r = 0; r < 2; r++) {
		for (i = 0; i < sizeof(red_counts) / sizeof(red_counts[0]); i++) {
			size_t n = red_counts[i];
			int64_t *s = xmalloc(n * 8), *d = xmalloc(n * 8);

			if (n * 8 > max_size)
				n = max_size / 8 ? max_size / 8 : 1;
			for (j = 0; j < n; j++)
				s[j] = contrib(rank, j), d[j] = -1;
			CK(MPI_Reduce(s, d, (int)n, MPI_INT64_T, MPI_SUM, roots[r],
				      MPI_COMM_WORLD));
			if (rank == roots[r]) {
				for (j = 0; j < n; j++) {
					int64_t want = 0;
					for (q = 0; q < nranks; q++)
						want += contrib(q, j);
					if (d[j] != want)
						die("Reduce(SUM) of %zu to %d: element %zu "
						    "is %lld, expected %lld", n, roots[r], j,
						    (long long)d[j], (long long)want);
				}
			}
			free(s);
			free(d);
		}
	}
}

static void coll_allreduce(void)
{
	size_t i, j;
	int q;

	for (i = 0; i < sizeof(red_counts) / sizeof(red_counts[0]); i++) {
		size_t n = red_counts[i];
		int64_t *s = xmalloc(n * 8), *d = xmalloc(n * 8);
		double *x = xmalloc(n * sizeof(double)), *y = xmalloc(n * sizeof(double));

		if (n * 8 > max_size)
			n = max_size / 8 ? max_size / 8 : 1;
		for (j = 0; j < n; j++) {
			s[j] = contrib(rank, j);
			/* the maximum moves from rank to rank with j */
			x[j] = (double)((rank + j) % nranks) + 0.25 * (double)j;
		}
		CK(MPI_Allreduce(s, d, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
		CK(MPI_Allreduce(x, y, (int)n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
		for (j = 0; j < n; j++) {
			int64_t want = 0;
			for (q = 0; q < nranks; q++)
				want += contrib(q, j);
			if (d[j] != want)
				die("Allreduce(SUM) of %zu: element %zu is %lld, expected %lld",
				    n, j, (long long)d[j], (long long)want);
			if (y[j] != (double)(nranks - 1) + 0.25 * (double)j)
				die("Allreduce(MAX) of %zu: element %zu is %g, expected %g",
				    n, j, y[j], (double)(nranks - 1) + 0.25 * (double)j);
		}
		/* in place */
		for (j = 0; j < n; j++)
			d[j] = contrib(rank, j);
		CK(MPI_Allreduce(MPI_IN_PLACE, d, (int)n, MPI_INT64_T, MPI_SUM,
				 MPI_COMM_WORLD));
		for (j = 0; j < n; j++) {
			int64_t want = 0;
			for (q = 0; q < nranks; q++)
				want += contrib(q, j);
			if (d[j] != want)
				die("Allreduce(SUM, IN_PLACE) of %zu: element %zu is %lld, "
				    "expected %lld", n, j, (long long)d[j], (long long)want);
		}
		free(s), free(d), free(x), free(y);
	}
}

static void coll_alltoall(void)
{
	static const size_t lens[] = { 1, 1024, 65536, 1 << 20 };
	size_t i;
	int q;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t len = lens[i];
		unsigned char *s, *d;

		if (len > max_size)
			continue;
		s = xmalloc(len * (size_t)nranks);
		d = xmalloc(len * (size_t)nranks);
		for (q = 0; q < nranks; q++)
			fill(s + len * (size_t)q, len, rank, q, 9);
		memset(d, 0xee, len * (size_t)nranks);
		CK(MPI_Alltoall(s, (int)len, MPI_BYTE, d, (int)len, MPI_BYTE,
				MPI_COMM_WORLD));
		for (q = 0; q < nranks; q++)
			verify(d + len * (size_t)q, len, q, rank, 9, "Alltoall");
		free(s);
		free(d);
	}
}

/* Nobody may leave a barrier before every rank entered it. By time: the
 * last rank enters 1 s late, and says (after) when it entered; every other
 * rank must have left after that moment, less 0.25 s for the clocks of
 * two hosts (one host's ranks read one clock). Not by how long the others
 * spent inside: under load they may leave the barrier before late enough
 * that little of the second is left. Exactly, by a counter: every rank
 * adds 1 to rank 0's window and completes it (unlock) before it enters, so
 * rank 0 must read n when it leaves. */
static double now_real(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void coll_barrier(void)
{
	int64_t *cnt, one = 1, seen = 0;
	MPI_Win win;
	double t;
	int k;

	for (k = 0; k < 2; k++) {
		double entered = 0;

		CK(MPI_Barrier(MPI_COMM_WORLD));
		if (rank == nranks - 1) {
			usleep(1000000);
			entered = now_real();
		}
		CK(MPI_Barrier(MPI_COMM_WORLD));
		t = now_real();
		CK(MPI_Bcast(&entered, 1, MPI_DOUBLE, nranks - 1, MPI_COMM_WORLD));
		if (rank != nranks - 1 && t < entered - 0.25)
			die("round %d: left the barrier %.3f s before the last "
			    "rank (1 s late) entered", k, entered - t);
	}
	CK(MPI_Win_allocate(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL,
			    MPI_COMM_WORLD, &cnt, &win));
	for (k = 0; k < 3; k++) {
		CK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
		*cnt = 0;
		CK(MPI_Win_unlock(rank, win));
		CK(MPI_Barrier(MPI_COMM_WORLD));
		if (rank == nranks - 1)
			usleep(200000);
		CK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
		CK(MPI_Accumulate(&one, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T,
				  MPI_SUM, win));
		CK(MPI_Win_unlock(0, win));
		CK(MPI_Barrier(MPI_COMM_WORLD));
		if (rank == 0) {
			CK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
			seen = *cnt;
			CK(MPI_Win_unlock(0, win));
			if (seen != nranks)
				die("round %d: %lld of %d ranks had arrived when rank 0 "
				    "left the barrier", k, (long long)seen, nranks);
		}
	}
	CK(MPI_Win_free(&win));
}

/* the value rank r puts into rank t's window at element j, round k */
static int64_t putval(int r, int t, size_t j, int k)
{
	return (int64_t)(mix(((uint64_t)r << 40) ^ ((uint64_t)t << 24) ^
			     ((uint64_t)k << 56) ^ j) >> 2);
}

/* The window: nranks blocks of blk int64; rank r owns block r of every
 * other rank's window. */
static void rma(void)
{
	size_t blk = 64 * 1024, j;   /* 512 KiB per block: RDMA sizes */
	size_t small[] = { 1, 7, 1000 };
	int64_t *win_mem, *buf, *acc;
	MPI_Win win;
	int t, k, q;
	size_t si;

	if (blk * 8 > max_size)
		blk = max_size / 8 ? max_size / 8 : 1;
	CK(MPI_Alloc_mem((MPI_Aint)(blk * 8 * (size_t)nranks), MPI_INFO_NULL, &win_mem));
	CK(MPI_Win_create(win_mem, (MPI_Aint)(blk * 8 * (size_t)nranks), 8,
			  MPI_INFO_NULL, MPI_COMM_WORLD, &win));
	buf = xmalloc(blk * 8 * (size_t)nranks);
	acc = xmalloc(blk * 8);

	for (k = 0; k < iters; k++) {
		/* MPI_Put: my block of every window, small ones then the whole */
		test = "MPI_Put";
		for (j = 0; j < blk * (size_t)nranks; j++)
			win_mem[j] = -1;
		CK(MPI_Win_fence(0, win));
		for (t = 0; t < nranks; t++) {
			int64_t *src = buf + blk * (size_t)t;
			for (j = 0; j < blk; j++)
				src[j] = putval(rank, t, j, k);
			/* the first elements by small puts, the rest by one */
			size_t off = 0;
			for (si = 0; si < 3 && off + small[si] <= blk; si++) {
				CK(MPI_Put(src + off, (int)small[si], MPI_INT64_T, t,
					   (MPI_Aint)(blk * (size_t)rank + off),
					   (int)small[si], MPI_INT64_T, win));
				off += small[si];
			}
			if (off < blk)
				CK(MPI_Put(src + off, (int)(blk - off), MPI_INT64_T, t,
					   (MPI_Aint)(blk * (size_t)rank + off),
					   (int)(blk - off), MPI_INT64_T, win));
		}
		CK(MPI_Win_fence(0, win));
		for (q = 0; q < nranks; q++)
			for (j = 0; j < blk; j++)
				if (win_mem[blk * (size_t)q + j] != putval(q, rank, j, k))
					die("round %d: element %zu of rank %d's block is "
					    "%lld, expected %lld", k, j, q,
					    (long long)win_mem[blk * (size_t)q + j],
					    (long long)putval(q, rank, j, k));

		/* MPI_Get: the block the next rank received from the one after
		 * it, from the next rank's window */
		test = "MPI_Get";
		{
			int from = (rank + 1) % nranks, owner = (rank + 2) % nranks;
			for (j = 0; j < blk; j++)
				buf[j] = -2;
			CK(MPI_Get(buf, (int)blk, MPI_INT64_T, from,
				   (MPI_Aint)(blk * (size_t)owner), (int)blk,
				   MPI_INT64_T, win));
			/* and a small one from the end of rank 0's block */
			CK(MPI_Get(acc, 3, MPI_INT64_T, from,
				   (MPI_Aint)(blk - 3), 3, MPI_INT64_T, win));
			CK(MPI_Win_fence(0, win));
			for (j = 0; j < blk; j++)
				if (buf[j] != putval(owner, from, j, k))
					die("round %d: element %zu from rank %d is %lld, "
					    "expected %lld", k, j, from, (long long)buf[j],
					    (long long)putval(owner, from, j, k));
			for (j = 0; j < 3 && j < blk; j++)
				if (blk >= 3 && acc[j] != putval(0, from, blk - 3 + j, k))
					die("round %d: small get element %zu from rank %d "
					    "is %lld", k, j, from, (long long)acc[j]);
		}

		/* MPI_Accumulate: everybody adds its contribution to block 0 of
		 * every window (SUM), and takes the maximum into block 1 */
		test = "MPI_Accumulate";
		for (j = 0; j < blk * (size_t)nranks; j++)
			win_mem[j] = 0;
		CK(MPI_Win_fence(0, win));
		for (j = 0; j < blk; j++)
			acc[j] = contrib(rank, j) + k;
		for (t = 0; t < nranks; t++) {
			CK(MPI_Accumulate(acc, (int)blk, MPI_INT64_T, t, 0, (int)blk,
					  MPI_INT64_T, MPI_SUM, win));
			if (nranks > 1)
				CK(MPI_Accumulate(acc, (int)blk, MPI_INT64_T, t,
						  (MPI_Aint)blk, (int)blk,
						  MPI_INT64_T, MPI_MAX, win));
		}
		CK(MPI_Win_fence(0, win));
		for (j = 0; j < blk; j++) {
			int64_t sum = 0, max = 0;
			for (q = 0; q < nranks; q++) {
				int64_t c = contrib(q, j) + k;
				sum += c;
				if (c > max)
					max = c;
			}
			if (win_mem[j] != sum)
				die("round %d: SUM element %zu is %lld, expected %lld",
				    k, j, (long long)win_mem[j], (long long)sum);
			if (nranks > 1 && win_mem[blk + j] != max)
				die("round %d: MAX element %zu is %lld, expected %lld",
				    k, j, (long long)win_mem[blk + j], (long long)max);
		}
		CK(MPI_Win_fence(0, win));
	}
	CK(MPI_Win_free(&win));
	CK(MPI_Free_mem(win_mem));
	free(buf);
	free(acc);
}

/* --loop: keep the network busy until SECONDS have passed; report an MPI
 * error instead of aborting (the killed-rank test reads it). */
static int loop(double seconds)
{
	int64_t v[1024], w[1024];
	unsigned char *sb = xmalloc(65536), *rb = xmalloc(65536);
	int half = nranks / 2, peer = rank < half ? rank + half : rank - half;
	double end = MPI_Wtime() + seconds;
	long n = 0;
	int rc, flag, j;

	printf("mpi_check: rank %d pid %d looping\n", rank, (int)getpid());
	fflush(stdout);
	for (j = 0; j < 1024; j++)
		v[j] = rank + j;
	while (1) {
		rc = MPI_Allreduce(v, w, 1024, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
		if (rc == MPI_SUCCESS && peer != rank)
			rc = MPI_Sendrecv(sb, 65536, MPI_BYTE, peer, 7, rb, 65536,
					  MPI_BYTE, peer, 7, MPI_COMM_WORLD,
					  MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS) {
			char s[MPI_MAX_ERROR_STRING];
			int l = 0;
			MPI_Error_string(rc, s, &l);
			fprintf(stderr, "mpi_check: rank %d: loop: MPI error after %ld "
				"rounds: %s\n", rank, n, s);
			fflush(stderr);
			return 3;
		}
		n++;
		/* everybody stops together: rank 0's clock decides */
		flag = rank == 0 && MPI_Wtime() >= end;
		rc = MPI_Bcast(&flag, 1, MPI_INT, 0, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS) {
			char s[MPI_MAX_ERROR_STRING];
			int l = 0;
			MPI_Error_string(rc, s, &l);
			fprintf(stderr, "mpi_check: rank %d: loop: MPI error after %ld "
				"rounds: %s\n", rank, n, s);
			fflush(stderr);
			return 3;
		}
		if (flag)
			break;
	}
	free(sb);
	free(rb);
	return 0;
}

int main(int argc, char **argv)
{
	double loop_s = 0, t0;
	int i, rc = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--max-size") && i + 1 < argc)
			max_size = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--loop") && i + 1 < argc)
			loop_s = atof(argv[++i]);
		else if (!strcmp(argv[i], "--corrupt"))
			corrupt = 1;
		else
			die("usage: mpi_check [--max-size BYTES] [--iters N] "
			    "[--loop SECONDS] [--corrupt]");
	}
	if (iters < 1)
		iters = 1;
	t0 = MPI_Wtime();
	if (rank == 0) {
		char host[MPI_MAX_PROCESSOR_NAME];
		int hl = 0;
		char ver[MPI_MAX_LIBRARY_VERSION_STRING];
		int vl = 0;
		MPI_Get_processor_name(host, &hl);
		MPI_Get_library_version(ver, &vl);
		ver[strcspn(ver, "\n")] = 0;
		printf("mpi_check: %d ranks, messages up to %zu bytes, %d rounds; %s\n",
		       nranks, max_size, iters, ver);
		fflush(stdout);
	}

	begin("p2p blocking");
	p2p_blocking();
	done();
	begin("p2p nonblocking");
	p2p_nonblocking();
	done();
	begin("p2p any source");
	p2p_any_source();
	done();
	begin("bcast");
	coll_bcast();
	done();
	begin("reduce");
	coll_reduce();
	done();
	begin("allreduce");
	coll_allreduce();
	done();
	begin("alltoall");
	coll_alltoall();
	done();
	begin("barrier");
	coll_barrier();
	done();
	begin("one-sided put/get/acc");
	rma();
	done();

	if (rank == 0) {
		printf("mpi_check: all checks passed (%.2f s)\n", MPI_Wtime() - t0);
		fflush(stdout);
	}
	if (loop_s > 0)
		rc = loop(loop_s);
	if (rc == 0)
		MPI_Finalize();
	return rc;
}

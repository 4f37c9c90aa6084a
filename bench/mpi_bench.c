// SPDX-License-Identifier: MIT
/*
 * make bench's MPI figures (bench/middleware.sh runs it across two network
 * namespaces, issue 20):
 *   mpi_bench pingpong [--iters-small N] [--iters-large N]
 *       2 ranks: 8-byte ping-pong (one-way latency, half the round trip)
 *       and 1 MiB ping-pong (bandwidth: bytes moved one way per second of
 *       half round trips), MPI_Send/MPI_Recv, after a warm-up;
 *   mpi_bench allreduce [--iters-small N] [--iters-large N]
 *       every rank: MPI_Allreduce (SUM, doubles) of 8 B and of 1 MiB, time
 *       per call (the slowest rank's average), after a warm-up.
 * One line per figure on rank 0's stdout:
 *   mpi_bench: pingpong size=8 iters=N lat_us=X
 *   mpi_bench: pingpong size=1048576 iters=N lat_us=X bw_MBps=Y
 *   mpi_bench: allreduce size=8 ranks=R iters=N us=X
 * Results are checked (the last message's bytes, the sums): a wrong one
 * prints "mpi_bench: rank R: ..." and aborts the job. Timings are reported,
 * never asserted.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL 8
#define LARGE (1 << 20)

static int rank, nranks;

static void die(const char *what)
{
	fprintf(stderr, "mpi_bench: rank %d: %s\n", rank, what);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

static void check(int rc, const char *call)
{
	char msg[MPI_MAX_ERROR_STRING + 64];
	char err[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (rc == MPI_SUCCESS)
		return;
	MPI_Error_string(rc, err, &len);
	snprintf(msg, sizeof(msg), "%s: %s", call, err);
	die(msg);
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 31u + seed);
}

/* n round trips of size bytes between ranks 0 and 1; seconds taken */
static double pingpong_run(unsigned char *buf, int size, long n, int tag)
{
	int peer = rank == 0 ? 1 : 0;
	double t0;

	check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
	t0 = MPI_Wtime();
	for (long i = 0; i < n; i++) {
		if (rank == 0) {
			check(MPI_Send(buf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD), "MPI_Send");
			check(MPI_Recv(buf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD,
				       MPI_STATUS_IGNORE), "MPI_Recv");
		} else {
			check(MPI_Recv(buf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD,
				       MPI_STATUS_IGNORE), "MPI_Recv");
			check(MPI_Send(buf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD), "MPI_Send");
		}
	}
	return MPI_Wtime() - t0;
}

static void pingpong(long iters_small, long iters_large)
{
	unsigned char *buf = malloc(LARGE), *want = malloc(LARGE);
	const int sizes[2] = { SMALL, LARGE };
	const long iters[2] = { iters_small, iters_large };

	if (!buf || !want)
		die("out of memory");
	if (nranks != 2)
		die("pingpong needs exactly 2 ranks");
	for (int k = 0; k < 2; k++) {
		int size = sizes[k];
		long warm = iters[k] / 10 + 1;
		double t;

		fill(buf, (size_t)size, (unsigned)k);
		fill(want, (size_t)size, (unsigned)k);
		pingpong_run(buf, size, warm, 10 + k);
		t = pingpong_run(buf, size, iters[k], 20 + k);
		/* the bytes went there and back unchanged */
		if (memcmp(buf, want, (size_t)size) != 0)
			die("pingpong: the message came back changed");
		if (rank == 0) {
			double lat_us = t / (double)iters[k] / 2 * 1e6;

			if (size == LARGE)
				printf("mpi_bench: pingpong size=%d iters=%ld lat_us=%.3f bw_MBps=%.1f\n",
				       size, iters[k], lat_us, size / lat_us);
			else
				printf("mpi_bench: pingpong size=%d iters=%ld lat_us=%.3f\n",
				       size, iters[k], lat_us);
			fflush(stdout);
		}
	}
	free(buf);
	free(want);
}

static void allreduce(long iters_small, long iters_large)
{
	const int counts[2] = { SMALL / (int)sizeof(double), LARGE / (int)sizeof(double) };
	const long iters[2] = { iters_small, iters_large };
	double *in = malloc(LARGE), *out = malloc(LARGE);

	if (!in || !out)
		die("out of memory");
	for (int k = 0; k < 2; k++) {
		int n = counts[k];
		long warm = iters[k] / 10 + 1;
		double t, tmax;

		/* small integers: the sums are exact whatever the order */
		for (int i = 0; i < n; i++)
			in[i] = (double)((rank + 1) * (i % 97 + 1));
		for (long i = 0; i < warm; i++)
			check(MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
			      "MPI_Allreduce");
		check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
		t = MPI_Wtime();
		for (long i = 0; i < iters[k]; i++)
			check(MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
			      "MPI_Allreduce");
		t = MPI_Wtime() - t;
		for (int i = 0; i < n; i++) {
			double want = (double)nranks * (nranks + 1) / 2 * (i % 97 + 1);

			if (out[i] != want)
				die("allreduce: a wrong sum");
		}
		check(MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD),
		      "MPI_Reduce");
		if (rank == 0) {
			printf("mpi_bench: allreduce size=%zu ranks=%d iters=%ld us=%.3f\n",
			       (size_t)n * sizeof(double), nranks, iters[k],
			       tmax / (double)iters[k] * 1e6);
			fflush(stdout);
		}
	}
	free(in);
	free(out);
}

static long arg_long(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < 1)
		die("bad iteration count");
	return v;
}

int main(int argc, char **argv)
{
	long iters_small = 10000, iters_large = 200;
	const char *what;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (argc < 2)
		die("usage: mpi_bench pingpong|allreduce [--iters-small N] [--iters-large N]");
	what = argv[1];
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--iters-small") == 0 && i + 1 < argc)
			iters_small = arg_long(argv[++i]);
		else if (strcmp(argv[i], "--iters-large") == 0 && i + 1 < argc)
			iters_large = arg_long(argv[++i]);
		else
			die("unknown option");
	}
	if (strcmp(what, "pingpong") == 0)
		pingpong(iters_small, iters_large);
	else if (strcmp(what, "allreduce") == 0)
		allreduce(iters_small, iters_large);
	else
		die("unknown benchmark (pingpong, allreduce)");
	MPI_Finalize();
	return 0;
}

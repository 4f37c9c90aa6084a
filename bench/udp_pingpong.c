// SPDX-License-Identifier: MIT
/*
 * The kernel's floor under RoCEv2 latency: a 2-byte UDP ping-pong over the
 * same veth the daemons use, each side one thread, no verbs. A round trip
 * of ib_send_lat crosses this path at least once each way, plus the
 * daemons' own threads; so the floor is what one UDP round trip costs when
 * both ends sleep in recv (the daemons' wire threads sleep in poll) and
 * when both spin (the least any design could reach here). bench/netns.sh
 * runs it beside ib_send_lat (issue 22, "the wake-up latency of this
 * kernel").
 *   udp_pingpong server|client ADDR PORT ITERS block|spin
 * The server answers ITERS and a warm-up, then ends; the client prints
 * "P50 P99" of the round trip in microseconds. Both ends of a run take the
 * same mode.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 200

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One datagram into buf, spinning (MSG_DONTWAIT) or sleeping; -1 when the
 * 10 s receive timeout passed (a lost datagram ends the run). */
static ssize_t get(int s, char *buf, size_t len, int spin,
		   struct sockaddr_in *from, socklen_t *flen)
{
	double end = now_us() + 10e6;
	ssize_t r;

	for (;;) {
		r = recvfrom(s, buf, len, spin ? MSG_DONTWAIT : 0,
			     (struct sockaddr *)from, flen);
		if (r >= 0)
			return r;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		if (!spin || now_us() > end)
			return -1;
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET }, from;
	struct timeval tmo = { .tv_sec = 10 };
	socklen_t flen = sizeof(from);
	int s, iters, spin = 0;
	double *t;
	char buf[64] = "pp";

	if (argc != 6 || inet_pton(AF_INET, argv[2], &a.sin_addr) != 1 ||
	    (strcmp(argv[5], "block") && strcmp(argv[5], "spin"))) {
		fprintf(stderr, "usage: udp_pingpong server|client ADDR PORT "
			"ITERS block|spin\n");
		return 2;
	}
	spin = !strcmp(argv[5], "spin");
	a.sin_port = htons((uint16_t)atoi(argv[3]));
	iters = atoi(argv[4]);
	if (iters < 1 || iters > 10000000)
		return 2;
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo)))
		return perror("socket"), 1;
	if (!strcmp(argv[1], "server")) {
		if (bind(s, (struct sockaddr *)&a, sizeof(a)))
			return perror("bind"), 1;
		for (int i = 0; i < iters + WARMUP; i++) {
			ssize_t r = get(s, buf, sizeof(buf), spin, &from, &flen);

			if (r < 0 || sendto(s, buf, (size_t)r, 0,
					    (struct sockaddr *)&from, flen) != r)
				return fprintf(stderr, "server: lost at %d\n", i), 1;
		}
		return 0;
	}
	t = malloc(sizeof(*t) * (size_t)iters);
	if (!t || connect(s, (struct sockaddr *)&a, sizeof(a)))
		return perror("connect"), 1;
	for (int i = 0; i < iters + WARMUP; i++) {
		double t0 = now_us();

		if (send(s, buf, 2, 0) != 2 ||
		    get(s, buf, sizeof(buf), spin, &from, &flen) < 0)
			return fprintf(stderr, "client: lost at %d\n", i), 1;
		if (i >= WARMUP)
			t[i - WARMUP] = now_us() - t0;
	}
	qsort(t, (size_t)iters, sizeof(*t), cmp);
	printf("%.2f %.2f\n", t[iters / 2], t[(size_t)iters * 99 / 100]);
	free(t);
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the device view's names (src/abi/sv_view.c): what
 * the preload library asks of every path a program opens, stats or reads
 * (is it the view's, where does it lie, is it /dev/infiniband/uverbsN, is
 * it a port counter), and the daemon's socket sibling names
 * (src/abi/sv_sock.c) the view's root is made from. The daemon's side of
 * the view writes files from its own state and reads no input.
 *
 * Input: byte 0 picks the device name (sv0, a long one, an empty one),
 * the rest is a path (cut at its first NUL). Properties: a mapped path is
 * exactly the root, then the path; uverbsN names exactly the N it gives;
 * a counter path is exactly the one its index names, and the index is in
 * the table.
 *
 * fuzz_view_replay --gen DIR writes the seed corpus: the view's paths as
 * the daemon writes them (uverbs, counters, the classes) and a few that
 * are almost them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/sv_sock.h"
#include "abi/sv_view.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { \
		if (!(cond)) { \
			fprintf(stderr, "fuzz_view: %s:%d: %s\n", __FILE__, \
				__LINE__, #cond); \
			abort(); \
		} \
	} while (0)

static const char *const devs[4] = { "sv0", "sv1", "",
				     "a-device-name-of-thirty-one-chr" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char root[] = "/run/user/1000/softverbs/view";
	char out[256], buf[320];
	const char *dev;
	char *path;
	int ret, n;

	if (size < 1)
		return 0;
	dev = devs[data[0] & 3];
	/* a C string of exactly its bytes: a read past it is seen */
	path = malloc(size);
	CHECK(path != NULL);
	memcpy(path, data + 1, size - 1);
	path[size - 1] = 0;

	ret = sv_view_map(root, path, out, sizeof(out));
	CHECK(ret == 0 || ret == 1 || ret == -ENAMETOOLONG);
	if (ret == 1) {
		CHECK(path[0] == '/');
		CHECK(!strncmp(out, root, sizeof(root) - 1));
		CHECK(!strcmp(out + sizeof(root) - 1, path));
	}

	n = sv_view_uverbs(path);
	CHECK(n >= -1 && n < SV_UVERBS_MAX);
	if (n >= 0) {
		snprintf(buf, sizeof(buf), "/dev/infiniband/uverbs%d", n);
		CHECK(!strcmp(buf, path));
		CHECK(sv_view_map(root, path, out, sizeof(out)) == 1);
	}

	n = sv_view_counter_of(path, dev);
	CHECK(n >= -1 && n < (int)sv_view_ncounters);
	if (n >= 0) {
		snprintf(buf, sizeof(buf), "/sys/class/infiniband/%s/ports/1/%s/%s",
			 dev, sv_view_counters[n].dir, sv_view_counters[n].name);
		CHECK(!strcmp(buf, path));
		(void)sv_view_counter_value((unsigned int)n,
					    &(struct sv_rsp_stat_wire){ 0 });
	}

	/* the path as a socket: its view root and rdma_cm sibling */
	ret = sv_view_root(path, out, sizeof(out));
	if (ret == 0) {
		CHECK(strlen(out) < sizeof(out));
		CHECK(strstr(out, SV_VIEW_NAME) != NULL);
	}
	free(path);
	return 0;
}

int fz_gen_seeds(const char *dir);
int fz_gen_seeds(const char *dir)
{
	static const char *const paths[] = {
		"/dev/infiniband/uverbs0", "/dev/infiniband/uverbs31",
		"/dev/infiniband/uverbs32", "/dev/infiniband/uverbs01",
		"/dev/infiniband/rdma_cm", "/dev/infiniband",
		"/sys/class/infiniband/sv0/node_guid",
		"/sys/class/infiniband/sv0/ports/1/gids/0",
		"/sys/class/infiniband/sv0/ports/1/gid_attrs/types/0",
		"/sys/class/infiniband_verbs/uverbs0/ibdev",
		"/sys/class/infiniband_verbs/abi_version",
		"/sys/class/infiniband_mad/abi_version",
		"/sys/class/misc/rdma_cm/dev",
		"/sys/class/infiniband_x", "/dev/infinibandx",
		"/tmp/softverbs/control", "control", "/",
	};
	char path[4096];
	unsigned int k = 0;
	int ret = 0;

	for (unsigned int i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/path-%02u", dir, k++);
		f = fopen(path, "wb");
		if (!f)
			return -1;
		fputc(0, f);
		fputs(paths[i], f);
		ret |= fclose(f);
	}
	for (unsigned int i = 0; i < sv_view_ncounters; i += 4) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/counter-%02u", dir, i);
		f = fopen(path, "wb");
		if (!f)
			return -1;
		fputc(0, f);
		fprintf(f, "/sys/class/infiniband/sv0/ports/1/%s/%s",
			sv_view_counters[i].dir, sv_view_counters[i].name);
		ret |= fclose(f);
	}
	return ret;
}

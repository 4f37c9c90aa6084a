// SPDX-License-Identifier: MIT
/*
 * The device view's names: which paths it shows, where they lie, and its
 * counters. Pure functions, no allocation: the preload library calls them
 * inside any libc call of any program.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "abi/sv_sock.h"
#include "abi/sv_view.h"

static const char *const prefixes[] = {
	"/dev/infiniband",
	"/sys/class/infiniband",
	"/sys/class/infiniband_verbs",
	"/sys/class/infiniband_mad",
	"/sys/class/misc/rdma_cm",
};

int sv_view_root(const char *sock_path, char *buf, size_t len)
{
	return sv_sock_sibling(sock_path, SV_VIEW_NAME, buf, len);
}

/* Does path start with the folder p (p itself, or p/...)? The rest. */
static const char *under(const char *path, const char *p)
{
	size_t n = strlen(p);

	if (strncmp(path, p, n) || (path[n] && path[n] != '/'))
		return NULL;
	return path + n;
}

int sv_view_map(const char *root, const char *path, char *out, size_t len)
{
	size_t rn, pn;
	bool hit = false;

	if (!path || path[0] != '/')
		return 0;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (under(path, prefixes[i]))
			hit = true;
	if (!hit)
		return 0;
	rn = strlen(root);
	pn = strlen(path);
	if (rn + pn + 1 > len)
		return -ENAMETOOLONG;
	memcpy(out, root, rn);
	memcpy(out + rn, path, pn + 1);
	return 1;
}

int sv_view_normalize(const char *path, char *out, size_t len)
{
	size_t n = 0;

	if (len < 2)
		return -ENAMETOOLONG;
	while (*path) {
		const char *e;
		size_t cl;

		while (*path == '/')
			path++;
		e = strchrnul(path, '/');
		cl = (size_t)(e - path);
		if (cl == 1 && path[0] == '.') {
			/* nothing */
		} else if (cl == 2 && path[0] == '.' && path[1] == '.') {
			while (n > 0 && out[n - 1] != '/')
				n--;
			if (n > 0)
				n--;   /* the '/' before it */
		} else if (cl) {
			if (n + 1 + cl + 1 > len)
				return -ENAMETOOLONG;
			out[n++] = '/';
			memcpy(out + n, path, cl);
			n += cl;
		}
		path = e;
	}
	if (!n)
		out[n++] = '/';
	out[n] = 0;
	return 0;
}

/* A decimal number of at most 2 digits with no leading zero, ending s. */
static int small_number(const char *s)
{
	int n = 0;

	if (!*s || (s[0] == '0' && s[1]) || strlen(s) > 2)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		n = n * 10 + (*s - '0');
	}
	return n;
}

int sv_view_uverbs(const char *path)
{
	static const char p[] = "/dev/infiniband/uverbs";
	int n;

	if (!path || strncmp(path, p, sizeof(p) - 1))
		return -1;
	n = small_number(path + sizeof(p) - 1);
	return n < SV_UVERBS_MAX ? n : -1;
}

#define SV_CTR_NAME(d, n, v) { #d, #n },
const struct sv_view_counter sv_view_counters[] = {
	SV_VIEW_COUNTERS(SV_CTR_NAME)
};
#undef SV_CTR_NAME
const unsigned int sv_view_ncounters =
	sizeof(sv_view_counters) / sizeof(sv_view_counters[0]);

int sv_view_counter_of(const char *path, const char *dev)
{
	static const char cls[] = "/sys/class/infiniband/";
	static const char port[] = "/ports/1/";
	size_t dn = strlen(dev);
	const char *s;

	if (!path || !dn || strncmp(path, cls, sizeof(cls) - 1))
		return -1;
	s = path + sizeof(cls) - 1;
	if (strncmp(s, dev, dn) || strncmp(s + dn, port, sizeof(port) - 1))
		return -1;
	s += dn + sizeof(port) - 1;
	for (unsigned int i = 0; i < sv_view_ncounters; i++) {
		size_t n = strlen(sv_view_counters[i].dir);

		if (!strncmp(s, sv_view_counters[i].dir, n) && s[n] == '/' &&
		    !strcmp(s + n + 1, sv_view_counters[i].name))
			return (int)i;
	}
	return -1;
}

uint64_t sv_view_counter_value(unsigned int i, const struct sv_rsp_stat_wire *w)
{
	const uint64_t v[] = {
#define SV_CTR_VALUE(d, n, val) (val),
		SV_VIEW_COUNTERS(SV_CTR_VALUE)
#undef SV_CTR_VALUE
	};

	return i < sizeof(v) / sizeof(v[0]) ? v[i] : 0;
}

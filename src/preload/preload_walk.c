// SPDX-License-Identifier: MIT
/*
 * The preload's walkers: glob and nftw/ftw read directories through
 * glibc's internal calls, which no preload can reach, so each is wrapped
 * whole (issue 40; docs/DESIGN.md, "The device view").
 *  - glob: the pattern is matched twice, as the program wrote it (the real
 *    tree) and inside the view (the view's root before it); the view's
 *    matches come back without the root, merged with the real ones (a name
 *    in both once), sorted unless GLOB_NOSORT. So "/sys/class/infiniband/x"
 *    with x a star finds sv0, and "/sys/class/x" finds infiniband beside
 *    the real classes.
 *  - nftw, ftw: a walk that starts in the view walks the view's tree; the
 *    program's callback sees each path as the program named it (the root
 *    taken off, FTW's base moved to match).
 * The view is looked at only for patterns and walks that can reach it
 * (they start with /dev or /sys, or a wildcard that could be either).
 */
#define _GNU_SOURCE
#include "preload/preload.h"

#include <errno.h>
#include <ftw.h>
#include <glob.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Could the pattern reach /dev/infiniband or /sys/class/infiniband*? Its
 * literal start must be a start of one of them, or of a path below. */
static bool may_reach(const char *pat)
{
	static const char *const roots[] = {
		"/dev/infiniband", "/sys/class/infiniband",
		"/sys/class/misc/rdma_cm",
	};
	size_t lit = strcspn(pat, "*?[\\");

	if (pat[0] != '/')
		return false;
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		size_t rn = strlen(roots[i]);
		size_t n = lit < rn ? lit : rn;

		if (!strncmp(pat, roots[i], n))
			return true;
	}
	return false;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The view's root, with no slash at its end, and its length: 0 when the
 * view is off. */
static size_t view_root(char *out, size_t len)
{
	static const char dev[] = "/dev/infiniband";
	char buf[SVP_PATH_MAX];
	const char *q = svp_map(dev, buf);
	size_t n;

	if (q != buf)
		return 0;
	n = strlen(buf) - strlen("/dev/infiniband");
	if (n + 1 > len)
		return 0;
	memcpy(out, buf, n);
	out[n] = 0;
	return n;
}

typedef int (*glob_fn)(const char *, int, int (*)(const char *, int), glob_t *);
typedef void (*globfree_fn)(glob_t *);

/* g (as glob left it, with flags) and the view's matches of pat merged;
 * 0 or GLOB_NOSPACE. */
static int merge(glob_t *g, int flags, size_t before, const char *root,
		 size_t rn, const glob_t *w)
{
	size_t offs = (flags & GLOB_DOOFFS) ? g->gl_offs : 0;
	size_t have = g->gl_pathv ? g->gl_pathc : 0, add = 0, i, j;
	char **v;

	v = realloc(g->gl_pathv, (offs + have + w->gl_pathc + 1) * sizeof(*v));
	if (!v)
		return GLOB_NOSPACE;
	if (!g->gl_pathv)
		for (i = 0; i < offs; i++)
			v[i] = NULL;
	g->gl_pathv = v;
	for (i = 0; i < w->gl_pathc; i++) {
		const char *p = w->gl_pathv[i];
		bool dup = false;

		if (strncmp(p, root, rn) || p[rn] != '/')
			continue;
		p += rn;
		for (j = 0; j < have && !dup; j++)
			dup = !strcmp(v[offs + j], p);
		if (dup)
			continue;
		v[offs + have + add] = strdup(p);
		if (!v[offs + have + add])
			return GLOB_NOSPACE;
		add++;
	}
	/* the program's earlier matches (GLOB_APPEND) keep their order:
	 * only this call's are sorted, as glob sorts them */
	if (!(flags & GLOB_NOSORT) && add && have + add > before)
		qsort(v + offs + before, have + add - before, sizeof(*v), cmp_path);
	g->gl_pathc = have + add;
	v[offs + g->gl_pathc] = NULL;
	return 0;
}

static int glob_body(glob_fn real, globfree_fn gfree, const char *pat,
		     int flags, int (*errf)(const char *, int), glob_t *g)
{
	char root[SVP_PATH_MAX], wpat[SVP_PATH_MAX * 2];
	size_t rn;
	glob_t w = { 0 };
	size_t before;
	int ret, wret;

	if (svp_null(pat) || !may_reach(pat) || (flags & GLOB_ALTDIRFUNC) ||
	    !(rn = view_root(root, sizeof(root))) ||
	    rn + strlen(pat) + 1 > sizeof(wpat))
		return real(pat, flags, errf, g);
	memcpy(wpat, root, rn);
	memcpy(wpat + rn, pat, strlen(pat) + 1);
	before = (flags & GLOB_APPEND) && g->gl_pathv ? g->gl_pathc : 0;
	ret = real(pat, flags, errf, g);
	if (ret && ret != GLOB_NOMATCH)
		return ret;
	/* the view's matches, plain (no offsets, no append, no check) */
	wret = real(wpat, (flags & (GLOB_MARK | GLOB_NOESCAPE | GLOB_PERIOD |
				    GLOB_BRACE | GLOB_ONLYDIR | GLOB_TILDE)) |
			  GLOB_NOSORT, NULL, &w);
	if (wret == GLOB_NOSPACE) {
		if (!ret)
			gfree(g);
		return GLOB_NOSPACE;
	}
	if (wret || !w.gl_pathc) {
		if (!wret)
			gfree(&w);
		return ret;
	}
	if (ret == GLOB_NOMATCH && !(flags & GLOB_APPEND)) {
		/* glob left g as it was */
		g->gl_pathc = 0;
		g->gl_pathv = NULL;
	}
	if (!ret && (flags & GLOB_NOCHECK) && g->gl_pathc == before + 1 &&
	    !strcmp(g->gl_pathv[((flags & GLOB_DOOFFS) ? g->gl_offs : 0) + before],
		    pat)) {
		/* GLOB_NOCHECK gave the pattern for no real match: the view
		 * has some, they replace it */
		size_t at = ((flags & GLOB_DOOFFS) ? g->gl_offs : 0) + before;

		free(g->gl_pathv[at]);
		g->gl_pathv[at] = NULL;
		g->gl_pathc = before;
	}
	ret = merge(g, flags, before, root, rn, &w);
	gfree(&w);
	return ret;
}

SVP_EXPORT int glob(const char *pat, int flags, int (*errf)(const char *, int),
		    glob_t *g)
{
	SVP_REAL(glob);
	SVP_REAL(globfree);

	return glob_body(real_glob, real_globfree, pat, flags, errf, g);
}

SVP_EXPORT int glob64(const char *pat, int flags,
		      int (*errf)(const char *, int), glob64_t *g)
{
	SVP_REAL(glob64);
	SVP_REAL(globfree64);

	/* glob64_t is glob_t's layout on 64-bit systems */
	return glob_body((glob_fn)real_glob64, (globfree_fn)real_globfree64,
			 pat, flags, errf, (glob_t *)g);
}

/* ---- nftw, ftw ---- */

typedef int (*nftw_cb)(const char *, const struct stat *, int, struct FTW *);
typedef int (*ftw_cb)(const char *, const struct stat *, int);

static __thread struct {
	nftw_cb ncb;
	ftw_cb cb;
	size_t rn;                 /* the root's length, taken off each path */
} walk;

static int nftw_shim(const char *p, const struct stat *st, int type,
		     struct FTW *f)
{
	struct FTW g = *f;

	g.base -= (int)walk.rn;
	return walk.ncb(p + walk.rn, st, type, &g);
}

static int ftw_shim(const char *p, const struct stat *st, int type)
{
	return walk.cb(p + walk.rn, st, type);
}

/* The walk's start in the view (into buf), or NULL for the real one. */
static const char *walk_start(const char *dir, char *buf, size_t *rn)
{
	char root[SVP_PATH_MAX];
	const char *q;

	if (svp_null(dir) || !may_reach(dir))
		return NULL;
	q = svp_map(dir, buf);
	if (!q || q == dir)
		return NULL;
	*rn = view_root(root, sizeof(root));
	return *rn ? q : NULL;
}

SVP_EXPORT int nftw(const char *dir, nftw_cb fn, int fds, int flags)
{
	SVP_REAL(nftw);
	char buf[SVP_PATH_MAX];
	size_t rn = 0;
	const char *q = walk_start(dir, buf, &rn);
	int ret;

	if (!q || walk.ncb)        /* (a walk inside a callback: as is) */
		return real_nftw(dir, fn, fds, flags);
	walk.ncb = fn;
	walk.rn = rn;
	ret = real_nftw(q, nftw_shim, fds, flags);
	walk.ncb = NULL;
	return ret;
}

/* struct stat64 is struct stat's layout on 64-bit systems */
_Static_assert(sizeof(struct stat64) == sizeof(struct stat), "stat64");

SVP_EXPORT int nftw64(const char *dir,
		      int (*fn)(const char *, const struct stat64 *, int, struct FTW *),
		      int fds, int flags)
{
	return nftw(dir, (nftw_cb)fn, fds, flags);
}

SVP_EXPORT int ftw(const char *dir, ftw_cb fn, int fds)
{
	SVP_REAL(ftw);
	char buf[SVP_PATH_MAX];
	size_t rn = 0;
	const char *q = walk_start(dir, buf, &rn);
	int ret;

	if (!q || walk.cb)
		return real_ftw(dir, fn, fds);
	walk.cb = fn;
	walk.rn = rn;
	ret = real_ftw(q, ftw_shim, fds);
	walk.cb = NULL;
	return ret;
}

SVP_EXPORT int ftw64(const char *dir,
		     int (*fn)(const char *, const struct stat64 *, int), int fds)
{
	return ftw(dir, (ftw_cb)fn, fds);
}

// SPDX-License-Identifier: MIT
/*
 * What the preload's view reaches beyond open and stat (issue 40, Deliver
 * 3), as a program under `softverbs run` uses it (view.sh gaps runs this):
 *  - glob and glob64 find sv0 in /sys/class/infiniband and its ports'
 *    state files, merged with the real tree's matches, sorted; GLOB_APPEND
 *    and GLOB_DOOFFS keep what was there;
 *  - nftw and ftw walk /sys/class/infiniband and call back with the paths
 *    as the program named them;
 *  - paths with "//", "." and ".." that read into the view reach it;
 *  - fstat, fstatat(AT_EMPTY_PATH) and statx of an open uverbs descriptor
 *    say character device 231:192+N, as stat of its path does;
 *  - the rdma_cm descriptor: read() is EINVAL as the kernel's file; a
 *    duplicate (dup, dup2 over another descriptor, fcntl F_DUPFD_CLOEXEC)
 *    is the same file and takes commands after the original is closed;
 *    after fork the child uses the inherited descriptor;
 *  - a NETLINK_RDMA socket's duplicate answers as the socket.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <linux/netlink.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <rdma/rdma_netlink.h>
#include <rdma/rdma_user_cm.h>

/* The preload's glob (see test_glob), found in the library `softverbs
 * run` loaded. */
static int preload_glob(const char *pat, int flags,
			int (*errf)(const char *, int), glob_t *g)
{
	static int (*fn)(const char *, int, int (*)(const char *, int), glob_t *);

	if (!fn) {
		void *h = dlopen("libsoftverbs_preload.so", RTLD_NOW | RTLD_NOLOAD);

		assert_non_null(h);
		*(void **)&fn = dlsym(h, "glob");
		assert_non_null(fn);
	}
	return fn(pat, flags, errf, g);
}

static void test_glob(void **st)
{
	glob_t g;
	bool found = false;

	(void)st;
	assert_int_equal(glob("/sys/class/infiniband/*", 0, NULL, &g), 0);
	for (size_t i = 0; i < g.gl_pathc; i++)
		found |= !strcmp(g.gl_pathv[i], "/sys/class/infiniband/sv0");
	assert_true(found);
	globfree(&g);

	assert_int_equal(glob("/sys/class/infiniband/*/ports/*/state", 0, NULL, &g), 0);
	assert_int_equal(g.gl_pathc, 1);
	assert_string_equal(g.gl_pathv[0], "/sys/class/infiniband/sv0/ports/1/state");
	globfree(&g);

	/* beside the real classes, sorted: net (every Linux has it) and ours */
	assert_int_equal(glob("/sys/class/*", 0, NULL, &g), 0);
	{
		bool net = false, ib = false, verbs = false;

		for (size_t i = 0; i < g.gl_pathc; i++) {
			net |= !strcmp(g.gl_pathv[i], "/sys/class/net");
			ib |= !strcmp(g.gl_pathv[i], "/sys/class/infiniband");
			verbs |= !strcmp(g.gl_pathv[i], "/sys/class/infiniband_verbs");
			if (i)
				assert_true(strcmp(g.gl_pathv[i - 1], g.gl_pathv[i]) < 0);
		}
		assert_true(net && ib && verbs);
	}
	globfree(&g);

	/* GLOB_DOOFFS and GLOB_APPEND keep their places. Called on the
	 * preload's glob itself: GCC 12's AddressSanitizer, in the sanitized
	 * build of this test, reads a GLOB_DOOFFS result from its first slot
	 * (a NULL offset) and faults, with or without the preload */
	memset(&g, 0, sizeof(g));
	g.gl_offs = 2;
	assert_int_equal(preload_glob("/dev/null", GLOB_DOOFFS, NULL, &g), 0);
	assert_int_equal(preload_glob("/dev/infiniband/uverbs*",
				      GLOB_DOOFFS | GLOB_APPEND, NULL, &g), 0);
	assert_null(g.gl_pathv[0]);
	assert_null(g.gl_pathv[1]);
	assert_int_equal(g.gl_pathc, 2);
	assert_string_equal(g.gl_pathv[2], "/dev/null");
	assert_string_equal(g.gl_pathv[3], "/dev/infiniband/uverbs0");
	assert_null(g.gl_pathv[4]);
	globfree(&g);

	/* no match anywhere: as glob says */
	assert_int_equal(glob("/sys/class/infiniband/nosuch*", 0, NULL, &g),
			 GLOB_NOMATCH);
	assert_int_equal(glob("/sys/class/infiniband/nosuch*", GLOB_NOCHECK, NULL, &g), 0);
	assert_int_equal(g.gl_pathc, 1);
	globfree(&g);
	{
		glob64_t g64;

		assert_int_equal(glob64("/sys/class/infiniband/sv0/ports/*", 0, NULL,
					&g64), 0);
		assert_int_equal(g64.gl_pathc, 1);
		assert_string_equal(g64.gl_pathv[0], "/sys/class/infiniband/sv0/ports/1");
		globfree64(&g64);
	}
}

static int seen_state, seen_bad;

static int nftw_cb(const char *p, const struct stat *sb, int type, struct FTW *f)
{
	(void)sb;
	(void)type;
	if (strncmp(p, "/sys/class/infiniband", 21))
		seen_bad++;
	if (!strcmp(p, "/sys/class/infiniband/sv0/ports/1/state") &&
	    !strcmp(p + f->base, "state"))
		seen_state++;
	return 0;
}

static int ftw_cb(const char *p, const struct stat *sb, int type)
{
	(void)sb;
	(void)type;
	if (strncmp(p, "/sys/class/infiniband", 21))
		seen_bad++;
	if (!strcmp(p, "/sys/class/infiniband/sv0/ports/1/state"))
		seen_state++;
	return 0;
}

static void test_walk(void **st)
{
	(void)st;
	seen_state = seen_bad = 0;
	assert_int_equal(nftw("/sys/class/infiniband", nftw_cb, 8, FTW_PHYS), 0);
	assert_int_equal(seen_state, 1);
	assert_int_equal(seen_bad, 0);
	seen_state = 0;
	assert_int_equal(ftw("/sys/class/infiniband/", ftw_cb, 8), 0);
	assert_int_equal(seen_state, 1);
	assert_int_equal(seen_bad, 0);
}

static void read_state(const char *path)
{
	char buf[64] = { 0 };
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_true(read(fd, buf, sizeof(buf) - 1) > 0);
	assert_non_null(strstr(buf, "ACTIVE"));
	close(fd);
}

static void test_paths(void **st)
{
	struct stat sb;

	(void)st;
	read_state("//sys/class/infiniband/sv0/ports/1/state");
	read_state("/sys/class/./infiniband/sv0/ports/1/./state");
	read_state("/sys/class/net/../infiniband/sv0/ports/1/state");
	read_state("/dev/../sys/class/infiniband/sv0/ports/1/../1/state");
	assert_int_equal(stat("/dev//infiniband/uverbs0", &sb), 0);
	assert_true(S_ISCHR(sb.st_mode));
	assert_int_equal(major(sb.st_rdev), 231);
	/* a path the lexical walk does not bring into the view stays the
	 * kernel's */
	assert_int_equal(stat("/sys/./class//net/../net", &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
}

static void test_fstat(void **st)
{
	struct stat sb, path_sb;
	struct statx sx;
	int fd;

	(void)st;
	assert_int_equal(stat("/dev/infiniband/uverbs0", &path_sb), 0);
	fd = open("/dev/infiniband/uverbs0", O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	assert_true(S_ISCHR(sb.st_mode));
	assert_int_equal(sb.st_rdev, path_sb.st_rdev);
	assert_int_equal(major(sb.st_rdev), 231);
	assert_int_equal(minor(sb.st_rdev), 192);
	assert_int_equal(fstatat(fd, "", &sb, AT_EMPTY_PATH), 0);
	assert_true(S_ISCHR(sb.st_mode));
	assert_int_equal(statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx), 0);
	assert_true(S_ISCHR(sx.stx_mode));
	assert_int_equal(sx.stx_rdev_major, 231);
	close(fd);
	/* any other file is as it is */
	fd = open("/dev/null", O_RDONLY);
	assert_int_equal(fstat(fd, &sb), 0);
	assert_int_equal(major(sb.st_rdev), 1);
	close(fd);
}

/* CREATE_ID on an rdma_cm descriptor: the new id, or -1. */
static int create_id(int fd)
{
	struct {
		struct rdma_ucm_cmd_hdr hdr;
		struct rdma_ucm_create_id c;
	} q;
	struct rdma_ucm_create_id_resp r;

	memset(&q, 0, sizeof(q));
	q.hdr.cmd = RDMA_USER_CM_CMD_CREATE_ID;
	q.hdr.in = sizeof(q.c);
	q.hdr.out = sizeof(r);
	q.c.response = (uintptr_t)&r;
	q.c.ps = RDMA_PS_TCP;
	q.c.qp_type = 2;   /* IB_QPT_RC */
	if (write(fd, &q, sizeof(q)) != sizeof(q))
		return -1;
	return (int)r.id;
}

static void test_ucma_fd(void **st)
{
	int fd, d, d2, d3, other, status;
	char b[8];
	pid_t pid;

	(void)st;
	fd = open("/dev/infiniband/rdma_cm", O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_true(create_id(fd) >= 0);
	/* the kernel's file has no read */
	assert_int_equal(read(fd, b, sizeof(b)), -1);
	assert_int_equal(errno, EINVAL);
	/* duplicates are the same file */
	d = dup(fd);
	assert_true(d >= 0);
	assert_true(create_id(d) >= 0);
	other = open("/dev/null", O_RDONLY);
	assert_int_equal(dup2(fd, other), other);
	assert_true(create_id(other) >= 0);
	d2 = fcntl(fd, F_DUPFD_CLOEXEC, 100);
	assert_true(d2 >= 100);
	close(fd);
	assert_true(create_id(d2) >= 0);
	/* dup2 over an rdma_cm descriptor: it is closed, the new one is
	 * /dev/null's */
	d3 = open("/dev/null", O_RDONLY);
	assert_int_equal(dup2(d3, d), d);
	assert_int_equal(write(d, "x", 1), -1);   /* /dev/null read-only */
	assert_int_equal(errno, EBADF);
	/* the inherited descriptor after fork */
	pid = fork();
	assert_true(pid >= 0);
	if (!pid)
		_exit(create_id(d2) >= 0 && create_id(other) >= 0 ? 0 : 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(create_id(d2) >= 0);
	close(d);
	close(d2);
	close(d3);
	close(other);
}

static void test_nl_dup(void **st)
{
	struct sockaddr_nl a = { .nl_family = AF_NETLINK };
	union {
		struct nlmsghdr h;
		uint32_t w[1024];
	} buf;
	struct nlmsghdr q = { .nlmsg_len = NLMSG_HDRLEN,
			      .nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV,
							     RDMA_NLDEV_CMD_SYS_GET),
			      .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 7 };
	int s, d;

	(void)st;
	s = socket(AF_NETLINK, SOCK_RAW, NETLINK_RDMA);
	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	d = dup(s);
	close(s);
	assert_int_equal(send(d, &q, sizeof(q), 0), sizeof(q));
	assert_true(recv(d, &buf, sizeof(buf), MSG_DONTWAIT) > 0);
	assert_int_equal(buf.h.nlmsg_seq, 7);
	close(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_glob),
		cmocka_unit_test(test_walk),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_fstat),
		cmocka_unit_test(test_ucma_fd),
		cmocka_unit_test(test_nl_dup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

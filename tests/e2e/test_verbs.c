// SPDX-License-Identifier: MIT
/*
 * End-to-end tests of the verbs control path: everything an application can
 * do with sv0 today, through the standard API (<infiniband/verbs.h>) only,
 * against a daemon of its own (run under tests/e2e/isolated.sh).
 *
 * One context (g_ctx) stays open for the whole run so that the daemon
 * (--idle-exit 1 under isolated.sh) serves every test; the last test kills
 * that daemon and checks how the library reports and survives it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <infiniband/verbs.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define MR_KEY_INDEX(k)    ((uint32_t)(k) >> 8)
#define MR_KEY_CONSUMER(k) ((uint32_t)(k) & 0xff)

#define MANY_MRS 1000

static struct ibv_device **g_list;
static struct ibv_device *g_dev;
static struct ibv_context *g_ctx;
static size_t g_page;

/* ---- helpers ---- */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Open descriptors of a process ("self" or a pid). */
static int count_fds(const char *proc)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%s/fd", proc);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static ssize_t read_file(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, size);
	close(fd);
	return n;
}

/*
 * The pid of the daemon serving this test (isolated.sh's $SV_TEST_DIR holds
 * its lock file, which names it), or -1. Only a process whose command line
 * names our private socket counts: never signal anything else.
 */
static pid_t daemon_pid(void)
{
	const char *dir = getenv("SV_TEST_DIR");
	const char *sock = getenv("SOFTVERBS_SOCKET");
	char path[512], buf[4096];
	ssize_t n;
	long pid;

	if (!dir || !*dir || !sock || !*sock)
		return -1;
	snprintf(path, sizeof(path), "%s/control.lock", dir);
	n = read_file(path, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	pid = strtol(buf, NULL, 10);
	if (pid <= 1 || pid == getpid())
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
	n = read_file(path, buf, sizeof(buf));
	if (n <= 0 || !memmem(buf, (size_t)n, sock, strlen(sock)) ||
	    !memmem(buf, (size_t)n, "softverbsd", strlen("softverbsd")))
		return -1;
	return (pid_t)pid;
}

/* Has a process that is not our child gone (or become a zombie)? */
static bool proc_gone(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;

	if (kill(pid, 0) && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	n = read_file(path, buf, sizeof(buf) - 1);
	if (n <= 0)
		return true;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the command name may hold anything */
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static void *map_pages(size_t npages, int prot)
{
	void *p = mmap(NULL, npages * g_page, prot,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

/* Registration must fail with exactly this errno. */
static void reg_refused(struct ibv_pd *pd, void *addr, size_t len, int access,
			int err)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr(pd, addr, len, access);
	if (mr)
		ibv_dereg_mr(mr);
	assert_null(mr);
	assert_int_equal(errno, err);
}

/* Registration must succeed; the MR is deregistered again. */
static void reg_ok(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, access);

	assert_non_null(mr);
	assert_ptr_equal(mr->addr, addr);
	assert_int_equal(mr->length, len);
	assert_int_equal(ibv_dereg_mr(mr), 0);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* ---- fixtures ---- */

/*
 * A verb that hangs (or spins) inside the library must fail the run, not
 * stall it: each test gets WATCHDOG_S seconds.
 */
#define WATCHDOG_S 20

static void watchdog_fired(int sig)
{
	static const char msg[] =
		"test_verbs: watchdog: a test did not finish in time "
		"(a verb hung)\n";

	(void)sig;
	fflush(stdout); /* the [ RUN ] line names the test */
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(1);
}

static int watchdog_arm(void **state)
{
	(void)state;
	alarm(WATCHDOG_S);
	return 0;
}

static int watchdog_disarm(void **state)
{
	(void)state;
	alarm(0);
	return 0;
}

static int group_setup(void **state)
{
	int n = 0;

	(void)state;
	signal(SIGALRM, watchdog_fired);
	alarm(WATCHDOG_S);
	g_page = (size_t)sysconf(_SC_PAGESIZE);
	g_list = ibv_get_device_list(&n);
	if (!g_list || n < 1) {
		fprintf(stderr, "no verbs device (is SOFTVERBS_SOCKET set?)\n");
		return -1;
	}
	g_dev = g_list[0];
	g_ctx = ibv_open_device(g_dev);
	if (!g_ctx) {
		fprintf(stderr, "ibv_open_device: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	/* closing a context of a dead device works too */
	if (g_ctx && ibv_close_device(g_ctx))
		return -1;
	g_ctx = NULL;
	ibv_free_device_list(g_list);
	g_list = NULL;
	return 0;
}

/* ---- discovery ---- */

static void test_device_list(void **state)
{
	struct ibv_device_attr attr;
	struct ibv_device **list;
	struct ibv_context *ctx;
	int n = -1;

	(void)state;
	list = ibv_get_device_list(&n);
	assert_non_null(list);
	assert_int_equal(n, 1);
	assert_non_null(list[0]);
	assert_null(list[1]);
	assert_string_equal(ibv_get_device_name(list[0]), "sv0");
	assert_string_equal(list[0]->name, "sv0");
	assert_int_equal(ibv_get_device_index(list[0]), 0);
	assert_int_equal(list[0]->node_type, IBV_NODE_CA);
	assert_true(ibv_get_device_guid(list[0]) != 0);

	ctx = ibv_open_device(list[0]);
	assert_non_null(ctx);
	assert_ptr_equal(ctx->device, list[0]);
	memset(&attr, 0, sizeof(attr));
	assert_int_equal(ibv_query_device(ctx, &attr), 0);
	assert_true(attr.node_guid == ibv_get_device_guid(list[0]));
	assert_int_equal(ibv_close_device(ctx), 0);

	/* the same device again, and a NULL count is allowed */
	ibv_free_device_list(list);
	list = ibv_get_device_list(NULL);
	assert_non_null(list);
	assert_non_null(list[0]);
	assert_null(list[1]);
	assert_string_equal(ibv_get_device_name(list[0]), "sv0");
	assert_true(ibv_get_device_guid(list[0]) == attr.node_guid);
	ibv_free_device_list(list);
}

static void test_open_close_repeat(void **state)
{
	pid_t dpid = daemon_pid();
	char dproc[32];
	int fds, dfds = -1, i;

	(void)state;
	snprintf(dproc, sizeof(dproc), "%d", (int)dpid);
	if (dpid > 0)
		dfds = count_fds(dproc);
	fds = count_fds("self");
	assert_true(fds > 0);

	for (i = 0; i < 50; i++) {
		struct ibv_context *ctx = ibv_open_device(g_dev);
		struct ibv_pd *pd;

		assert_non_null(ctx);
		assert_true(ctx->async_fd >= 0);
		assert_true(ctx->cmd_fd >= 0);
		/* a round trip to the daemon on each */
		pd = ibv_alloc_pd(ctx);
		assert_non_null(pd);
		assert_int_equal(ibv_dealloc_pd(pd), 0);
		assert_int_equal(ibv_close_device(ctx), 0);
	}
	/* nothing left open here ... */
	assert_int_equal(count_fds("self"), fds);

	/*
	 * ... nor in the daemon, once it has seen the hang-ups (at most as
	 * many as before: earlier tests' connections may still have been
	 * closing then; a leak would leave 50 times its size)
	 */
	if (dfds > 0) {
		int now = -1;

		for (i = 0; i < 200; i++) {
			now = count_fds(dproc);
			if (now >= 0 && now <= dfds)
				break;
			sleep_ms(10);
		}
		assert_in_range(now, 0, dfds);
	}
}

/* ---- queries ---- */

#define SAME_FIELD(a, b, f) assert_true((a).f == (b).f)

static void test_query_device(void **state)
{
	struct ibv_device_attr attr;
	struct ibv_device_attr_ex ex;

	(void)state;
	memset(&attr, 0, sizeof(attr));
	assert_int_equal(ibv_query_device(g_ctx, &attr), 0);
	assert_true(attr.node_guid != 0);
	assert_true(attr.sys_image_guid != 0);
	assert_true(attr.fw_ver[0] != 0);
	assert_int_equal(attr.phys_port_cnt, 1);
	assert_true(attr.max_cqe >= 65535);
	assert_true(attr.max_cq >= 16);
	assert_true(attr.max_pd >= 16);
	assert_true(attr.max_mr > MANY_MRS);
	assert_true(attr.max_mr_size >= (1ull << 30));
	assert_true(attr.page_size_cap & g_page);
	assert_true(attr.max_qp > 0);
	assert_true(attr.max_qp_wr > 0);
	assert_true(attr.max_sge > 0);
	assert_true(attr.max_pkeys >= 1);
	assert_true(g_ctx->num_comp_vectors >= 1);

	memset(&ex, 0xa5, sizeof(ex));
	assert_int_equal(ibv_query_device_ex(g_ctx, NULL, &ex), 0);
	assert_string_equal(ex.orig_attr.fw_ver, attr.fw_ver);
	SAME_FIELD(ex.orig_attr, attr, node_guid);
	SAME_FIELD(ex.orig_attr, attr, sys_image_guid);
	SAME_FIELD(ex.orig_attr, attr, max_mr_size);
	SAME_FIELD(ex.orig_attr, attr, page_size_cap);
	SAME_FIELD(ex.orig_attr, attr, vendor_id);
	SAME_FIELD(ex.orig_attr, attr, vendor_part_id);
	SAME_FIELD(ex.orig_attr, attr, hw_ver);
	SAME_FIELD(ex.orig_attr, attr, max_qp);
	SAME_FIELD(ex.orig_attr, attr, max_qp_wr);
	SAME_FIELD(ex.orig_attr, attr, device_cap_flags);
	SAME_FIELD(ex.orig_attr, attr, max_sge);
	SAME_FIELD(ex.orig_attr, attr, max_sge_rd);
	SAME_FIELD(ex.orig_attr, attr, max_cq);
	SAME_FIELD(ex.orig_attr, attr, max_cqe);
	SAME_FIELD(ex.orig_attr, attr, max_mr);
	SAME_FIELD(ex.orig_attr, attr, max_pd);
	SAME_FIELD(ex.orig_attr, attr, max_qp_rd_atom);
	SAME_FIELD(ex.orig_attr, attr, max_ee_rd_atom);
	SAME_FIELD(ex.orig_attr, attr, max_res_rd_atom);
	SAME_FIELD(ex.orig_attr, attr, max_qp_init_rd_atom);
	SAME_FIELD(ex.orig_attr, attr, max_ee_init_rd_atom);
	SAME_FIELD(ex.orig_attr, attr, atomic_cap);
	SAME_FIELD(ex.orig_attr, attr, max_ee);
	SAME_FIELD(ex.orig_attr, attr, max_rdd);
	SAME_FIELD(ex.orig_attr, attr, max_mw);
	SAME_FIELD(ex.orig_attr, attr, max_raw_ipv6_qp);
	SAME_FIELD(ex.orig_attr, attr, max_raw_ethy_qp);
	SAME_FIELD(ex.orig_attr, attr, max_mcast_grp);
	SAME_FIELD(ex.orig_attr, attr, max_mcast_qp_attach);
	SAME_FIELD(ex.orig_attr, attr, max_total_mcast_qp_attach);
	SAME_FIELD(ex.orig_attr, attr, max_ah);
	SAME_FIELD(ex.orig_attr, attr, max_fmr);
	SAME_FIELD(ex.orig_attr, attr, max_map_per_fmr);
	SAME_FIELD(ex.orig_attr, attr, max_srq);
	SAME_FIELD(ex.orig_attr, attr, max_srq_wr);
	SAME_FIELD(ex.orig_attr, attr, max_srq_sge);
	SAME_FIELD(ex.orig_attr, attr, max_pkeys);
	SAME_FIELD(ex.orig_attr, attr, local_ca_ack_delay);
	SAME_FIELD(ex.orig_attr, attr, phys_port_cnt);
	assert_int_equal(ex.phys_port_cnt_ex, 1);
	/* the extended flags include the legacy ones */
	assert_true((ex.device_cap_flags_ex & attr.device_cap_flags) ==
		    attr.device_cap_flags);
	/* what the device leaves out is zero, not stack garbage */
	assert_int_equal(ex.odp_caps.general_caps,
			 IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT);
	/* device memory (issue 23) */
	assert_int_equal(ex.max_dm_size, 64ull << 20);
}

static void test_query_port(void **state)
{
	struct ibv_port_attr port;
	uint16_t canary;

	(void)state;
	memset(&port, 0, sizeof(port));
	assert_int_equal(ibv_query_port(g_ctx, 1, &port), 0);
	assert_int_equal(port.state, IBV_PORT_ACTIVE);
	assert_int_equal(port.phys_state, 5); /* LinkUp */
	assert_int_equal(port.link_layer, IBV_LINK_LAYER_ETHERNET);
	assert_true(port.gid_tbl_len > 0);
	assert_true(port.pkey_tbl_len >= 1);
	assert_true(port.max_msg_sz > 0);
	assert_true(port.max_mtu >= IBV_MTU_256 &&
		    port.max_mtu <= IBV_MTU_4096);
	assert_true(port.active_mtu >= IBV_MTU_256);
	assert_true(port.active_mtu <= port.max_mtu);

	/* there is one port, numbered 1 */
	assert_int_not_equal(ibv_query_port(g_ctx, 0, &port), 0);
	assert_int_not_equal(ibv_query_port(g_ctx, 2, &port), 0);
	assert_int_not_equal(ibv_query_port(g_ctx, 255, &port), 0);

	/*
	 * The exported symbol keeps rdma-core's old, shorter struct (it ends
	 * at flags): an old binary's buffer must not be written past it.
	 */
	memset(&port, 0xa5, sizeof(port));
	memset(&canary, 0xa5, sizeof(canary));
	assert_int_equal((ibv_query_port)(g_ctx, 1,
			 (struct _compat_ibv_port_attr *)&port), 0);
	assert_int_equal(port.state, IBV_PORT_ACTIVE);
	assert_int_equal(port.link_layer, IBV_LINK_LAYER_ETHERNET);
	assert_int_equal(port.port_cap_flags2, canary);
}

static void test_query_gid(void **state)
{
	static const uint8_t v4mapped[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
	};
	struct ibv_gid_entry entry, *table;
	struct ibv_port_attr port;
	union ibv_gid gid, zero;
	int i, valid = 0, empty = 0;
	ssize_t n;

	(void)state;
	assert_int_equal(ibv_query_port(g_ctx, 1, &port), 0);
	memset(&zero, 0, sizeof(zero));

	memset(&gid, 0, sizeof(gid));
	assert_int_equal(ibv_query_gid(g_ctx, 1, 0, &gid), 0);
	assert_memory_not_equal(gid.raw, zero.raw, sizeof(gid.raw));
	/* ::ffff:a.b.c.d with a.b.c.d not 0.0.0.0 */
	assert_memory_equal(gid.raw, v4mapped, sizeof(v4mapped));
	assert_memory_not_equal(gid.raw + 12, zero.raw + 12, 4);

	/* out of range: no port 2, no index past the table */
	assert_int_equal(ibv_query_gid(g_ctx, 2, 0, &gid), -1);
	assert_int_equal(ibv_query_gid(g_ctx, 1, port.gid_tbl_len, &gid), -1);
	assert_int_equal(ibv_query_gid(g_ctx, 1, -1, &gid), -1);

	memset(&entry, 0xa5, sizeof(entry));
	assert_int_equal(ibv_query_gid_ex(g_ctx, 1, 0, &entry, 0), 0);
	assert_int_equal(entry.gid_type, IBV_GID_TYPE_ROCE_V2);
	assert_int_equal(entry.gid_index, 0);
	assert_int_equal(entry.port_num, 1);
	assert_true(entry.ndev_ifindex != 0);
	assert_int_equal(ibv_query_gid(g_ctx, 1, 0, &gid), 0);
	assert_memory_equal(entry.gid.raw, gid.raw, sizeof(gid.raw));
	assert_int_not_equal(ibv_query_gid_ex(g_ctx, 2, 0, &entry, 0), 0);
	assert_int_not_equal(ibv_query_gid_ex(g_ctx, 1, 0, &entry, 1), 0);

	/* every index either holds a GID or is empty (ENODATA) */
	for (i = 0; i < port.gid_tbl_len; i++) {
		int ret = ibv_query_gid_ex(g_ctx, 1, (uint32_t)i, &entry, 0);

		if (ret == 0) {
			valid++;
			assert_int_equal(entry.gid_index, i);
		} else {
			assert_int_equal(ret, ENODATA);
			empty++;
		}
	}
	assert_true(valid >= 1);
	assert_true(empty >= 1);

	table = calloc((size_t)port.gid_tbl_len, sizeof(*table));
	assert_non_null(table);
	n = ibv_query_gid_table(g_ctx, table, (size_t)port.gid_tbl_len, 0);
	assert_true(n >= 1);
	assert_int_equal(n, valid);
	assert_int_equal(table[0].gid_index, 0);
	assert_int_equal(table[0].port_num, 1);
	assert_int_equal(table[0].gid_type, IBV_GID_TYPE_ROCE_V2);
	assert_memory_equal(table[0].gid.raw, gid.raw, sizeof(gid.raw));
	free(table);
}

static void test_query_pkey(void **state)
{
	__be16 pkey = 0;

	(void)state;
	assert_int_equal(ibv_query_pkey(g_ctx, 1, 0, &pkey), 0);
	assert_int_equal(be16toh(pkey), 0xffff);
	assert_int_equal(ibv_get_pkey_index(g_ctx, 1, htobe16(0xffff)), 0);
	/* one entry, one port */
	assert_int_equal(ibv_query_pkey(g_ctx, 1, 1, &pkey), -1);
	assert_int_equal(ibv_query_pkey(g_ctx, 2, 0, &pkey), -1);
	assert_true(ibv_get_pkey_index(g_ctx, 1, htobe16(0x1234)) < 0);
}

/* ---- protection domains ---- */

static void test_pd(void **state)
{
	struct ibv_pd *pd, *pd2;
	struct ibv_mr *mr;
	char *buf;

	(void)state;
	pd = ibv_alloc_pd(g_ctx);
	assert_non_null(pd);
	assert_ptr_equal(pd->context, g_ctx);
	pd2 = ibv_alloc_pd(g_ctx);
	assert_non_null(pd2);
	assert_ptr_not_equal(pd, pd2);
	assert_int_equal(ibv_dealloc_pd(pd2), 0);

	buf = malloc(4096);
	assert_non_null(buf);
	mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(mr);
	/* an MR holds its PD */
	assert_int_equal(ibv_dealloc_pd(pd), EBUSY);
	assert_int_equal(ibv_dealloc_pd(pd), EBUSY);
	/* the refused dealloc left both usable */
	assert_ptr_equal(mr->pd, pd);
	reg_ok(pd, buf, 64, 0);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
	free(buf);
}

/* ---- memory regions ---- */

static void test_mr_basic(void **state)
{
	struct ibv_mr *mr, *mr2;
	struct ibv_pd *pd;
	uint32_t key;
	char *buf;

	(void)state;
	pd = ibv_alloc_pd(g_ctx);
	assert_non_null(pd);
	buf = malloc(3 * 4096 + 123);
	assert_non_null(buf);

	mr = ibv_reg_mr(pd, buf + 7, 3 * 4096, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	assert_non_null(mr);
	assert_ptr_equal(mr->context, g_ctx);
	assert_ptr_equal(mr->pd, pd);
	assert_ptr_equal(mr->addr, buf + 7);
	assert_int_equal(mr->length, 3 * 4096);
	assert_int_equal(mr->lkey, mr->rkey);
	assert_int_not_equal(mr->lkey, 0);
	/* key = index:24 | consumer key:8, index 0 never used */
	assert_int_not_equal(MR_KEY_INDEX(mr->lkey), 0);

	/* a second MR over the same memory is another region */
	mr2 = ibv_reg_mr(pd, buf, 100, 0);
	assert_non_null(mr2);
	assert_int_equal(mr2->lkey, mr2->rkey);
	assert_int_not_equal(mr2->lkey, mr->lkey);
	assert_int_not_equal(MR_KEY_INDEX(mr2->lkey), MR_KEY_INDEX(mr->lkey));
	assert_int_equal(ibv_dereg_mr(mr2), 0);

	/* a freed key does not come straight back */
	key = mr->lkey;
	assert_int_equal(ibv_dereg_mr(mr), 0);
	mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(mr);
	assert_int_not_equal(mr->lkey, key);
	assert_int_equal(ibv_dereg_mr(mr), 0);

	/* optional access bits are ignored by a device without them */
	mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_RELAXED_ORDERING);
	assert_non_null(mr);
	assert_int_equal(ibv_dereg_mr(mr), 0);

	free(buf);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

/* "refused registrations": each with its control that does register */
static void test_mr_refused(void **state)
{
	struct ibv_pd *pd;
	char *p, *ro, *none, *buf;
	int bad_bit;

	(void)state;
	pd = ibv_alloc_pd(g_ctx);
	assert_non_null(pd);

	/* nothing mapped there: a page that was unmapped, and page 1 */
	p = map_pages(4, PROT_READ | PROT_WRITE);
	reg_ok(pd, p, 4 * g_page, IBV_ACCESS_LOCAL_WRITE);
	assert_int_equal(munmap(p, 4 * g_page), 0);
	reg_refused(pd, p, 4 * g_page, IBV_ACCESS_LOCAL_WRITE, EFAULT);
	reg_refused(pd, p, 4 * g_page, 0, EFAULT);
	reg_refused(pd, (void *)0x1000, 4096, 0, EFAULT);
	reg_refused(pd, (void *)0x1000, 1, IBV_ACCESS_LOCAL_WRITE, EFAULT);

	/* a zero-length region is refused, mapped or not (as ib_umem_get) */
	reg_refused(pd, (void *)0xdead000, 0, IBV_ACCESS_LOCAL_WRITE, EINVAL);
	reg_refused(pd, NULL, 0, 0, EINVAL);

	/* a range with a hole in the middle; each side alone is fine */
	p = map_pages(3, PROT_READ | PROT_WRITE);
	assert_int_equal(munmap(p + g_page, g_page), 0);
	reg_refused(pd, p, 3 * g_page, IBV_ACCESS_LOCAL_WRITE, EFAULT);
	reg_refused(pd, p, 3 * g_page, 0, EFAULT);
	reg_refused(pd, p + g_page - 1, 2, 0, EFAULT);
	reg_ok(pd, p, g_page, IBV_ACCESS_LOCAL_WRITE);
	reg_ok(pd, p + 2 * g_page, g_page, IBV_ACCESS_LOCAL_WRITE);
	munmap(p, g_page);
	munmap(p + 2 * g_page, g_page);

	/* read-only memory: no write access of any kind */
	ro = map_pages(2, PROT_READ);
	reg_refused(pd, ro, 2 * g_page, IBV_ACCESS_LOCAL_WRITE, EFAULT);
	reg_refused(pd, ro + 10, 100, IBV_ACCESS_LOCAL_WRITE |
		    IBV_ACCESS_REMOTE_WRITE, EFAULT);
	reg_refused(pd, ro, g_page, IBV_ACCESS_LOCAL_WRITE |
		    IBV_ACCESS_REMOTE_ATOMIC, EFAULT);
	reg_ok(pd, ro, 2 * g_page, 0);
	reg_ok(pd, ro, 2 * g_page, IBV_ACCESS_REMOTE_READ);

	/* read-only followed by writable: write access refused */
	p = mmap(ro + 2 * g_page, g_page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == ro + 2 * g_page) {
		reg_refused(pd, ro + g_page, 2 * g_page,
			    IBV_ACCESS_LOCAL_WRITE, EFAULT);
		reg_ok(pd, ro + g_page, 2 * g_page, 0);
		reg_ok(pd, p, g_page, IBV_ACCESS_LOCAL_WRITE);
		munmap(p, g_page);
	} else if (p != MAP_FAILED) {
		munmap(p, g_page); /* an old kernel ignored the hint */
	}
	munmap(ro, 2 * g_page);

	/* no access at all */
	none = map_pages(1, PROT_NONE);
	reg_refused(pd, none, g_page, 0, EFAULT);
	reg_refused(pd, none, g_page, IBV_ACCESS_REMOTE_READ, EFAULT);
	reg_refused(pd, none, g_page, IBV_ACCESS_LOCAL_WRITE, EFAULT);
	munmap(none, g_page);

	buf = malloc(4096);
	assert_non_null(buf);

	/* access flags the device does not know */
	reg_refused(pd, buf, 4096, 1 << 14, EINVAL);
	reg_refused(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | (1 << 15),
		    EINVAL);
	bad_bit = 1 << 30;
	reg_refused(pd, buf, 4096, bad_bit, EINVAL);

	/* IBTA: remote write and atomic need local write */
	reg_refused(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE, EINVAL);
	reg_refused(pd, buf, 4096, IBV_ACCESS_REMOTE_ATOMIC, EINVAL);
	reg_refused(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE |
		    IBV_ACCESS_REMOTE_READ, EINVAL);
	reg_ok(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
	       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);

	/* address + length past the end of the address space */
	reg_refused(pd, (void *)(UINTPTR_MAX & ~(uintptr_t)0xfff), 0x2000, 0,
		    EINVAL);
	reg_refused(pd, buf, SIZE_MAX, 0, EINVAL);

	free(buf);
	/* none of the refusals left an MR behind on the PD */
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

/* Registration pins nothing and touches nothing: 1 GiB never faulted in. */
static void test_mr_large(void **state)
{
	const size_t len = 1ull << 30;
	unsigned char *vec;
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	size_t i, resident = 0;
	void *p;

	(void)state;
	pd = ibv_alloc_pd(g_ctx);
	assert_non_null(pd);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	assert_true(p != MAP_FAILED);

	mr = ibv_reg_mr(pd, p, len, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	assert_non_null(mr);
	assert_int_equal(mr->length, len);

	vec = malloc(len / g_page);
	assert_non_null(vec);
	assert_int_equal(mincore(p, len, vec), 0);
	for (i = 0; i < len / g_page; i++)
		resident += vec[i] & 1;
	free(vec);
	assert_int_equal(resident, 0);

	assert_int_equal(ibv_dereg_mr(mr), 0);
	munmap(p, len);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

static void test_mr_iova(void **state)
{
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	char *p;

	(void)state;
	pd = ibv_alloc_pd(g_ctx);
	assert_non_null(pd);
	p = map_pages(2, PROT_READ | PROT_WRITE); /* page-aligned, as iova 0 */

	mr = ibv_reg_mr_iova(pd, p, 2 * g_page, 0, IBV_ACCESS_LOCAL_WRITE |
			     IBV_ACCESS_REMOTE_READ);
	assert_non_null(mr);
	assert_ptr_equal(mr->addr, p);
	assert_int_equal(mr->length, 2 * g_page);
	assert_int_equal(mr->lkey, mr->rkey);
	assert_int_equal(ibv_dereg_mr(mr), 0);

	mr = ibv_reg_mr_iova2(pd, p, 2 * g_page, 0x100000000ull,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	assert_non_null(mr);
	assert_ptr_equal(mr->addr, p);
	assert_int_equal(mr->lkey, mr->rkey);
	assert_int_equal(ibv_dereg_mr(mr), 0);

	/* the iova variants refuse what ibv_reg_mr refuses */
	errno = 0;
	assert_null(ibv_reg_mr_iova2(pd, (void *)0x1000, 4096, 0, 0));
	assert_int_equal(errno, EFAULT);
	errno = 0;
	assert_null(ibv_reg_mr_iova2(pd, p, g_page, 0,
				     IBV_ACCESS_REMOTE_WRITE));
	assert_int_equal(errno, EINVAL);

	munmap(p, 2 * g_page);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

static void test_rereg_translation(void **state)
{
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	uint32_t old;
	char *a, *b;

	(void)state;
	pd = ibv_alloc_pd(g_ctx);
	assert_non_null(pd);
	a = malloc(4096);
	b = malloc(8192);
	assert_non_null(a);
	assert_non_null(b);

	mr = ibv_reg_mr(pd, a, 4096, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(mr);
	old = mr->lkey;
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION,
				      NULL, b, 8192, 0), 0);
	assert_ptr_equal(mr->addr, b);
	assert_int_equal(mr->length, 8192);
	assert_ptr_equal(mr->pd, pd);
	/* the keys stay (as rxe's and mlx5's): work requests posted with
	 * them keep working (e2e_test_semantics) */
	assert_int_equal(mr->lkey, old);
	assert_int_equal(mr->lkey, mr->rkey);

	/* write access is checked against the new range */
	errno = 0;
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION,
				      NULL, (void *)0x1000, 4096, 0),
			 IBV_REREG_MR_ERR_CMD);
	assert_int_equal(errno, EFAULT);

	assert_int_equal(ibv_dereg_mr(mr), 0);
	free(a);
	free(b);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

static void test_rereg_access(void **state)
{
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	uint32_t old;
	char *ro, *buf;

	(void)state;
	pd = ibv_alloc_pd(g_ctx);
	assert_non_null(pd);

	/* read-only memory registered read-only cannot become writable */
	ro = map_pages(1, PROT_READ);
	mr = ibv_reg_mr(pd, ro, g_page, 0);
	assert_non_null(mr);
	errno = 0;
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL,
				      NULL, 0, IBV_ACCESS_LOCAL_WRITE),
			 IBV_REREG_MR_ERR_CMD);
	assert_int_equal(errno, EFAULT);
	/* but remote read is fine */
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL,
				      NULL, 0, IBV_ACCESS_REMOTE_READ), 0);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	munmap(ro, g_page);

	/* writable memory: access can grow; the keys stay */
	buf = malloc(4096);
	assert_non_null(buf);
	mr = ibv_reg_mr(pd, buf, 4096, 0);
	assert_non_null(mr);
	old = mr->lkey;
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL,
				      NULL, 0, IBV_ACCESS_LOCAL_WRITE |
				      IBV_ACCESS_REMOTE_WRITE), 0);
	assert_int_equal(mr->lkey, old);
	assert_int_equal(mr->lkey, mr->rkey);
	assert_ptr_equal(mr->addr, buf);
	assert_int_equal(mr->length, 4096);
	/* and the same rules as at registration hold */
	errno = 0;
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL,
				      NULL, 0, IBV_ACCESS_REMOTE_WRITE),
			 IBV_REREG_MR_ERR_CMD);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	free(buf);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

static void test_rereg_pd(void **state)
{
	struct ibv_pd *pd1, *pd2;
	struct ibv_mr *mr;
	char *buf;

	(void)state;
	pd1 = ibv_alloc_pd(g_ctx);
	pd2 = ibv_alloc_pd(g_ctx);
	assert_non_null(pd1);
	assert_non_null(pd2);
	buf = malloc(4096);
	assert_non_null(buf);

	mr = ibv_reg_mr(pd1, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(mr);
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL,
				      0, 0), 0);
	assert_ptr_equal(mr->pd, pd2);
	assert_ptr_equal(mr->addr, buf);
	assert_int_equal(mr->length, 4096);
	/* the MR now holds pd2, not pd1 */
	assert_int_equal(ibv_dealloc_pd(pd2), EBUSY);
	assert_int_equal(ibv_dealloc_pd(pd1), 0);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_dealloc_pd(pd2), 0);
	free(buf);
}

static void test_rereg_input(void **state)
{
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	uint32_t key;
	char *buf;

	(void)state;
	pd = ibv_alloc_pd(g_ctx);
	assert_non_null(pd);
	buf = malloc(4096);
	assert_non_null(buf);
	mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(mr);
	key = mr->lkey;

	assert_int_equal(ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0),
			 IBV_REREG_MR_ERR_INPUT);
	assert_int_equal(ibv_rereg_mr(mr, 1 << 3, NULL, NULL, 0, 0),
			 IBV_REREG_MR_ERR_INPUT);
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL,
				      0, 0), IBV_REREG_MR_ERR_INPUT);
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION,
				      NULL, NULL, 4096, 0),
			 IBV_REREG_MR_ERR_INPUT);
	/* bad input leaves the MR as it was */
	assert_int_equal(mr->lkey, key);
	assert_ptr_equal(mr->addr, buf);
	assert_ptr_equal(mr->pd, pd);

	assert_int_equal(ibv_dereg_mr(mr), 0);
	free(buf);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

static void test_many_mrs(void **state)
{
	static struct ibv_mr *mrs[MANY_MRS];
	static uint32_t keys[MANY_MRS];
	struct ibv_pd *pd;
	char *buf;
	int i;

	(void)state;
	pd = ibv_alloc_pd(g_ctx);
	assert_non_null(pd);
	buf = malloc(MANY_MRS * 64);
	assert_non_null(buf);

	for (i = 0; i < MANY_MRS; i++) {
		mrs[i] = ibv_reg_mr(pd, buf + i * 64, 64,
				    IBV_ACCESS_LOCAL_WRITE |
				    IBV_ACCESS_REMOTE_READ);
		assert_non_null(mrs[i]);
		assert_int_equal(mrs[i]->lkey, mrs[i]->rkey);
		keys[i] = mrs[i]->lkey;
	}
	/* all keys distinct, and so are their indexes */
	qsort(keys, MANY_MRS, sizeof(keys[0]), cmp_u32);
	for (i = 1; i < MANY_MRS; i++)
		assert_int_not_equal(keys[i - 1], keys[i]);
	for (i = 0; i < MANY_MRS; i++)
		keys[i] = MR_KEY_INDEX(keys[i]);
	qsort(keys, MANY_MRS, sizeof(keys[0]), cmp_u32);
	assert_int_not_equal(keys[0], 0);
	for (i = 1; i < MANY_MRS; i++)
		assert_int_not_equal(keys[i - 1], keys[i]);

	assert_int_equal(ibv_dealloc_pd(pd), EBUSY);
	for (i = 0; i < MANY_MRS; i++)
		assert_int_equal(ibv_dereg_mr(mrs[i]), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
	free(buf);
}

/* ---- completion queues ---- */

static void test_cq_create(void **state)
{
	static const int sizes[] = { 1, 2, 100, 4096, 65535 };
	struct ibv_device_attr attr;
	struct ibv_wc wc[8];
	struct ibv_cq *cq;
	int marker;
	size_t i;

	(void)state;
	assert_int_equal(ibv_query_device(g_ctx, &attr), 0);

	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		cq = ibv_create_cq(g_ctx, sizes[i], &marker, NULL, 0);
		assert_non_null(cq);
		assert_true(cq->cqe >= sizes[i]);
		assert_ptr_equal(cq->context, g_ctx);
		assert_ptr_equal(cq->cq_context, &marker);
		assert_null(cq->channel);
		assert_int_equal(ibv_poll_cq(cq, 8, wc), 0);
		assert_int_equal(ibv_poll_cq(cq, 1, wc), 0);
		assert_int_equal(ibv_req_notify_cq(cq, 0), 0);
		assert_int_equal(ibv_req_notify_cq(cq, 1), 0);
		assert_int_equal(ibv_poll_cq(cq, 8, wc), 0);
		assert_int_equal(ibv_destroy_cq(cq), 0);
	}

	/* the device's own limit is accepted, one more is not */
	cq = ibv_create_cq(g_ctx, attr.max_cqe, NULL, NULL, 0);
	assert_non_null(cq);
	assert_true(cq->cqe >= attr.max_cqe);
	assert_int_equal(ibv_destroy_cq(cq), 0);

	errno = 0;
	assert_null(ibv_create_cq(g_ctx, attr.max_cqe + 1, NULL, NULL, 0));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(ibv_create_cq(g_ctx, 0, NULL, NULL, 0));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(ibv_create_cq(g_ctx, -1, NULL, NULL, 0));
	assert_int_equal(errno, EINVAL);
	/* completion vectors are numbered 0 .. num_comp_vectors - 1 */
	errno = 0;
	assert_null(ibv_create_cq(g_ctx, 10, NULL, NULL,
				  g_ctx->num_comp_vectors));
	assert_int_equal(errno, EINVAL);
	cq = ibv_create_cq(g_ctx, 10, NULL, NULL,
			   g_ctx->num_comp_vectors - 1);
	assert_non_null(cq);
	assert_int_equal(ibv_destroy_cq(cq), 0);
}

/* One more CQE than the device takes. */
static int too_many_cqe(void)
{
	struct ibv_device_attr attr;

	assert_int_equal(ibv_query_device(g_ctx, &attr), 0);
	return attr.max_cqe + 1;
}

static void test_cq_resize(void **state)
{
	struct ibv_wc wc[4];
	struct ibv_cq *cq;
	int grown;

	(void)state;
	cq = ibv_create_cq(g_ctx, 100, NULL, NULL, 0);
	assert_non_null(cq);
	assert_true(cq->cqe >= 100);

	assert_int_equal(ibv_resize_cq(cq, 5000), 0);
	assert_true(cq->cqe >= 5000);
	grown = cq->cqe;
	assert_int_equal(ibv_poll_cq(cq, 4, wc), 0);
	assert_int_equal(ibv_req_notify_cq(cq, 0), 0);

	assert_int_equal(ibv_resize_cq(cq, 10), 0);
	assert_true(cq->cqe >= 10);
	assert_true(cq->cqe < grown);
	assert_int_equal(ibv_poll_cq(cq, 4, wc), 0);
	assert_int_equal(ibv_req_notify_cq(cq, 0), 0);

	/* refused sizes leave the CQ as it was */
	grown = cq->cqe;
	assert_int_equal(ibv_resize_cq(cq, 0), EINVAL);
	assert_int_equal(ibv_resize_cq(cq, too_many_cqe()), EINVAL);
	assert_int_equal(cq->cqe, grown);
	assert_int_equal(ibv_poll_cq(cq, 4, wc), 0);

	assert_int_equal(ibv_resize_cq(cq, 65535), 0);
	assert_true(cq->cqe >= 65535);
	assert_int_equal(ibv_destroy_cq(cq), 0);
}

static void test_cq_ex(void **state)
{
	struct ibv_cq_init_attr_ex attr;
	struct ibv_poll_cq_attr pattr;
	struct ibv_cq_ex *cq;
	struct ibv_wc wc[2];
	int marker;

	(void)state;
	memset(&attr, 0, sizeof(attr));
	attr.cqe = 64;
	attr.cq_context = &marker;
	attr.wc_flags = IBV_WC_STANDARD_FLAGS;
	cq = ibv_create_cq_ex(g_ctx, &attr);
	assert_non_null(cq);
	assert_true(ibv_cq_ex_to_cq(cq)->cqe >= 64);
	assert_ptr_equal(ibv_cq_ex_to_cq(cq)->context, g_ctx);
	assert_ptr_equal(ibv_cq_ex_to_cq(cq)->cq_context, &marker);
	memset(&pattr, 0, sizeof(pattr));
	/* empty: ENOENT, and then no end_poll */
	assert_int_equal(ibv_start_poll(cq, &pattr), ENOENT);
	assert_int_equal(ibv_start_poll(cq, &pattr), ENOENT);
	/* the old API works on it too */
	assert_int_equal(ibv_poll_cq(ibv_cq_ex_to_cq(cq), 2, wc), 0);
	assert_int_equal(ibv_req_notify_cq(ibv_cq_ex_to_cq(cq), 0), 0);
	assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);

	/* single-threaded, with timestamps */
	memset(&attr, 0, sizeof(attr));
	attr.cqe = 1;
	attr.wc_flags = IBV_WC_STANDARD_FLAGS |
			IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	attr.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
	cq = ibv_create_cq_ex(g_ctx, &attr);
	assert_non_null(cq);
	assert_true(ibv_cq_ex_to_cq(cq)->cqe >= 1);
	assert_int_equal(ibv_start_poll(cq, &pattr), ENOENT);
	assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);

	/* tag-matching completions carry their TMH's tag (e2e_test_tm) */
	memset(&attr, 0, sizeof(attr));
	attr.cqe = 64;
	attr.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_TM_INFO;
	cq = ibv_create_cq_ex(g_ctx, &attr);
	assert_non_null(cq);
	assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);

	/* a completion field the device cannot fill */
	attr.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_FLOW_TAG;
	errno = 0;
	cq = ibv_create_cq_ex(g_ctx, &attr);
	assert_null(cq);
	assert_int_equal(errno, EOPNOTSUPP);

	/* and the sizes are checked as for ibv_create_cq */
	memset(&attr, 0, sizeof(attr));
	attr.cqe = (uint32_t)too_many_cqe();
	errno = 0;
	assert_null(ibv_create_cq_ex(g_ctx, &attr));
	assert_int_equal(errno, EINVAL);
}

static void test_comp_channel(void **state)
{
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *cq2;
	struct pollfd pfd;
	int fds;

	(void)state;
	fds = count_fds("self");
	ch = ibv_create_comp_channel(g_ctx);
	assert_non_null(ch);
	assert_ptr_equal(ch->context, g_ctx);
	assert_true(ch->fd >= 0);
	assert_true(fcntl(ch->fd, F_GETFD) >= 0);

	cq = ibv_create_cq(g_ctx, 16, NULL, ch, 0);
	assert_non_null(cq);
	assert_ptr_equal(cq->channel, ch);
	assert_int_equal(ibv_req_notify_cq(cq, 0), 0);

	/* pollable, and nothing to read: no completion, no event */
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	pfd.revents = 0;
	assert_int_equal(poll(&pfd, 1, 0), 0);
	pfd.fd = g_ctx->async_fd;
	assert_int_equal(poll(&pfd, 1, 0), 0);

	/* the CQ holds the channel */
	assert_int_equal(ibv_destroy_comp_channel(ch), EBUSY);
	pfd.fd = ch->fd;
	assert_int_equal(poll(&pfd, 1, 0), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_destroy_comp_channel(ch), 0);
	assert_int_equal(count_fds("self"), fds);

	/* two CQs on one channel */
	ch = ibv_create_comp_channel(g_ctx);
	assert_non_null(ch);
	cq = ibv_create_cq(g_ctx, 16, NULL, ch, 0);
	assert_non_null(cq);
	cq2 = ibv_create_cq(g_ctx, 16, NULL, ch, 0);
	assert_non_null(cq2);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_destroy_comp_channel(ch), EBUSY);
	assert_int_equal(ibv_destroy_cq(cq2), 0);
	assert_int_equal(ibv_destroy_comp_channel(ch), 0);
	assert_int_equal(count_fds("self"), fds);
}

/* ---- what is not there yet ---- */

static void test_unsupported(void **state)
{
	struct ibv_modify_cq_attr mca = {
		.attr_mask = IBV_CQ_ATTR_MODERATE,
		.moderate = { .cq_count = 1, .cq_period = 1 },
	};
	struct ibv_qp_init_attr qpa;
	struct ibv_srq_init_attr srqa;
	struct ibv_td_init_attr tda;
	struct ibv_ah_attr aha;
	struct ibv_cq *cq;
	struct ibv_pd *pd;

	(void)state;
	pd = ibv_alloc_pd(g_ctx);
	assert_non_null(pd);
	cq = ibv_create_cq(g_ctx, 16, NULL, NULL, 0);
	assert_non_null(cq);

	memset(&qpa, 0, sizeof(qpa));
	qpa.send_cq = cq;
	qpa.recv_cq = cq;
	qpa.qp_type = IBV_QPT_RAW_PACKET;
	qpa.cap.max_send_wr = 1;
	qpa.cap.max_recv_wr = 1;
	qpa.cap.max_send_sge = 1;
	qpa.cap.max_recv_sge = 1;
	errno = 0;
	assert_null(ibv_create_qp(pd, &qpa));
	assert_int_equal(errno, EOPNOTSUPP);

	/* a window type the device has not */
	errno = 0;
	assert_null(ibv_alloc_mw(pd, (enum ibv_mw_type)7));
	assert_int_equal(errno, EINVAL);

	/* an SRQ grows no larger than the device's max_srq_wr */
	memset(&srqa, 0, sizeof(srqa));
	srqa.attr.max_wr = 1;
	srqa.attr.max_sge = 1;
	{
		struct ibv_srq *srq = ibv_create_srq(pd, &srqa);
		struct ibv_srq_attr sa = { .max_wr = 1u << 30 };

		assert_non_null(srq);
		assert_int_equal(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR),
				 EINVAL);
		assert_int_equal(ibv_destroy_srq(srq), 0);
	}

	/* RoCE: an address vector without a GRH names no one */
	memset(&aha, 0, sizeof(aha));
	aha.port_num = 1;
	assert_null(ibv_create_ah(pd, &aha));

	/* a thread domain with an unknown comp_mask bit */
	memset(&tda, 0, sizeof(tda));
	tda.comp_mask = 1;
	errno = 0;
	assert_null(ibv_alloc_td(g_ctx, &tda));
	assert_int_equal(errno, EINVAL);

	assert_int_not_equal(ibv_modify_cq(cq, &mca), 0);

	/* and the context is none the worse for it */
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
	pd = ibv_alloc_pd(g_ctx);
	assert_non_null(pd);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

/* ---- helpers of the library ---- */

static void test_strings(void **state)
{
	const char *s[4];
	size_t i, j;

	(void)state;
	s[0] = ibv_wc_status_str(IBV_WC_SUCCESS);
	s[1] = ibv_port_state_str(IBV_PORT_ACTIVE);
	s[2] = ibv_node_type_str(IBV_NODE_CA);
	s[3] = ibv_event_type_str(IBV_EVENT_DEVICE_FATAL);
	for (i = 0; i < ARRAY_SIZE(s); i++) {
		assert_non_null(s[i]);
		assert_true(s[i][0] != 0);
		for (j = 0; j < i; j++)
			assert_string_not_equal(s[i], s[j]);
	}
	assert_string_not_equal(ibv_wc_status_str(IBV_WC_SUCCESS),
				ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR));
	assert_string_not_equal(ibv_port_state_str(IBV_PORT_ACTIVE),
				ibv_port_state_str(IBV_PORT_DOWN));

	/* out of range, either way: a string all the same */
	assert_non_null(ibv_wc_status_str((enum ibv_wc_status)1000));
	assert_non_null(ibv_wc_status_str((enum ibv_wc_status)-1));
	assert_non_null(ibv_port_state_str((enum ibv_port_state)1000));
	assert_non_null(ibv_port_state_str((enum ibv_port_state)-1));
	assert_non_null(ibv_node_type_str((enum ibv_node_type)1000));
	assert_non_null(ibv_node_type_str((enum ibv_node_type)-2));
	assert_non_null(ibv_event_type_str((enum ibv_event_type)1000));
	assert_non_null(ibv_event_type_str((enum ibv_event_type)-1));
}

static void test_fork(void **state)
{
	(void)state;
	assert_int_equal(ibv_fork_init(), 0);
	assert_int_equal(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
}

/* ---- the device dies (last: it takes the daemon with it) ---- */

static void test_daemon_death(void **state)
{
	struct ibv_async_event ev;
	struct ibv_comp_channel *ch;
	struct ibv_context *ctx;
	struct ibv_cq *cq, *cq_ch, *ev_cq;
	struct ibv_port_attr port;
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	struct pollfd pfd;
	void *ev_ctx;
	char *buf;
	pid_t pid;
	int i;

	(void)state;
	if (daemon_pid() <= 0) {
		fprintf(stderr,
			"not under isolated.sh: the daemon is not ours\n");
		skip();
	}

	ctx = ibv_open_device(g_dev);
	assert_non_null(ctx);
	pd = ibv_alloc_pd(ctx);
	assert_non_null(pd);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	assert_non_null(cq);
	buf = malloc(4096);
	assert_non_null(buf);
	mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(mr);
	ch = ibv_create_comp_channel(ctx);
	assert_non_null(ch);
	cq_ch = ibv_create_cq(ctx, 16, NULL, ch, 0);
	assert_non_null(cq_ch);
	assert_int_equal(ibv_req_notify_cq(cq_ch, 0), 0);

	/* the daemon that serves ctx now */
	pid = daemon_pid();
	assert_true(pid > 0);
	assert_int_equal(kill(pid, SIGKILL), 0);

	/* reported as a fatal device error, once */
	pfd.fd = ctx->async_fd;
	pfd.events = POLLIN;
	pfd.revents = 0;
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	memset(&ev, 0, sizeof(ev));
	assert_int_equal(ibv_get_async_event(ctx, &ev), 0);
	assert_int_equal(ev.event_type, IBV_EVENT_DEVICE_FATAL);
	ibv_ack_async_event(&ev);
	/* nothing more will come, and asking does not block */
	assert_int_equal(poll(&pfd, 1, 0), 1);
	assert_int_equal(ibv_get_async_event(ctx, &ev), -1);

	/* the completion channel sees the end too, and does not block */
	pfd.fd = ch->fd;
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	assert_int_equal(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);

	/* new work fails at once, it does not hang */
	errno = 0;
	assert_null(ibv_alloc_pd(ctx));
	assert_int_equal(errno, EIO);
	errno = 0;
	assert_null(ibv_reg_mr(pd, buf, 4096, 0));
	assert_int_equal(errno, EIO);
	errno = 0;
	assert_null(ibv_create_cq(ctx, 16, NULL, NULL, 0));
	assert_int_equal(errno, EIO);
	assert_null(ibv_create_comp_channel(ctx));
	assert_int_not_equal(ibv_query_port(ctx, 1, &port), 0);

	/* cleanup after a dead device works */
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_destroy_cq(cq_ch), 0);
	assert_int_equal(ibv_destroy_comp_channel(ch), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_close_device(ctx), 0);
	free(buf);

	/* the long-lived context learns it too */
	pfd.fd = g_ctx->async_fd;
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	assert_int_equal(ibv_get_async_event(g_ctx, &ev), 0);
	assert_int_equal(ev.event_type, IBV_EVENT_DEVICE_FATAL);
	ibv_ack_async_event(&ev);

	/* the daemon is not our child: wait until it has gone */
	for (i = 0; i < 1000 && !proc_gone(pid); i++)
		sleep_ms(10);
	assert_true(proc_gone(pid));
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, watchdog_arm, watchdog_disarm)
	const struct CMUnitTest tests[] = {
		T(test_device_list),
		T(test_open_close_repeat),
		T(test_query_device),
		T(test_query_port),
		T(test_query_gid),
		T(test_query_pkey),
		T(test_pd),
		T(test_mr_basic),
		T(test_mr_refused),
		T(test_mr_large),
		T(test_mr_iova),
		T(test_rereg_translation),
		T(test_rereg_access),
		T(test_rereg_pd),
		T(test_rereg_input),
		T(test_many_mrs),
		T(test_cq_create),
		T(test_cq_resize),
		T(test_cq_ex),
		T(test_comp_channel),
		T(test_unsupported),
		T(test_strings),
		T(test_fork),
		/* must stay last: it kills the device */
		T(test_daemon_death),
	};

#undef T

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

// SPDX-License-Identifier: MIT
/*
 * The device view (docs/DESIGN.md, "The device view"): the files a kernel
 * RDMA device shows, written as a real tree beside the socket:
 *   view/dev/infiniband/uverbsN          (a plain file: mknod needs privileges)
 *   view/sys/class/infiniband/sv0/...     (what rxe shows)
 *   view/sys/class/infiniband_verbs/...   view/sys/class/infiniband_mad/...
 * The preload library shows it at the usual paths. It is built under a
 * temporary name and renamed into place, so a reader never sees half of
 * it; it goes when the daemon does. Entries of a real kernel view (rxe, a
 * NIC) appear in it as links to the real ones, and uverbsN takes the first
 * number the kernel does not use.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "abi/sv_ucma.h"
#include "abi/sv_view.h"
#include "device/sv_dev.h"

static char view_root[300];

static int mkdirs(const char *base, const char *rel)
{
	char p[600];

	if (snprintf(p, sizeof(p), "%s/%s", base, rel) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0755) && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

/* base/rel holds the printf'd text (its folder must exist). */
static __attribute__((format(printf, 4, 5)))
int put(const char *base, const char *rel, mode_t mode, const char *fmt, ...)
{
	char p[600], text[256];
	va_list ap;
	int fd, n;

	va_start(ap, fmt);
	n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(text) ||
	    snprintf(p, sizeof(p), "%s/%s", base, rel) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	/* each file once, into the new tree: never through a link */
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	/* the mode as given, whatever the umask (uverbsN is 0666) */
	if (fchmod(fd, mode) || write(fd, text, (size_t)n) != n) {
		close(fd);
		return -EIO;
	}
	close(fd);
	return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	(void)(flag == FTW_DP ? rmdir(p) : unlink(p));
	return 0;
}

/* Remove a tree, never following a link out of it. */
static void rm_tree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static bool exists(const char *p)
{
	struct stat st;

	return lstat(p, &st) == 0;
}

/* The first uverbs number the kernel does not use. */
static unsigned int pick_uverbs(void)
{
	char a[64], b[64];

	for (unsigned int n = 0; n < SV_UVERBS_MAX; n++) {
		snprintf(a, sizeof(a), "/dev/infiniband/uverbs%u", n);
		snprintf(b, sizeof(b), "/sys/class/infiniband_verbs/uverbs%u", n);
		if (!exists(a) && !exists(b))
			return n;
	}
	return SV_UVERBS_MAX - 1;
}

/* The real entries of folder real, as links in base/real (ours win). */
static void link_real(const char *base, const char *real)
{
	char from[600], to[300];
	DIR *d = opendir(real);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (snprintf(to, sizeof(to), "%s/%s", real, e->d_name) >= (int)sizeof(to) ||
		    snprintf(from, sizeof(from), "%s%s/%s", base, real, e->d_name) >=
		    (int)sizeof(from))
			continue;
		if (symlink(to, from) && errno != EEXIST)
			sv_log(SV_LOG_WARN, "view: cannot link %s: %s", to,
			       strerror(errno));
	}
	closedir(d);
}

static const char *const port_states[] = {
	"0: NOP", "1: DOWN", "2: INIT", "3: ARMED", "4: ACTIVE", "5: ACTIVE_DEFER",
};
static const char *const phys_states[] = {
	"0: <unknown>", "1: Sleep", "2: Polling", "3: Disabled",
	"4: PortConfigurationTraining", "5: LinkUp", "6: LinkErrorRecovery",
	"7: Phy Test",
};

/* ports/1/rate as the kernel writes it: "100 Gb/sec (4X EDR)". */
static void rate_text(const struct sv_port_attr *p, char *buf, size_t len)
{
	static const struct { uint8_t speed; unsigned int tenths; const char *name; }
	speeds[] = {
		{ 1, 25, "SDR" }, { 2, 50, "DDR" }, { 4, 100, "QDR" },
		{ 8, 100, "FDR10" }, { 16, 140, "FDR" }, { 32, 250, "EDR" },
		{ 64, 500, "HDR" }, { 128, 1000, "NDR" },
	};
	unsigned int width = p->active_width == 1 ? 1 : p->active_width == 2 ? 4 :
			     p->active_width == 4 ? 8 : p->active_width == 8 ? 12 : 1;
	unsigned int tenths = 25, total;
	const char *name = "SDR";

	for (size_t i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++)
		if (speeds[i].speed == p->active_speed) {
			tenths = speeds[i].tenths;
			name = speeds[i].name;
		}
	total = tenths * width;
	snprintf(buf, len, "%u%s Gb/sec (%uX %s)", total / 10,
		 total % 10 ? ".5" : "", width, name);
}

static void guid_text(uint64_t be, char *buf, size_t len)
{
	uint64_t g = be64toh(be);

	snprintf(buf, len, "%04x:%04x:%04x:%04x", (unsigned int)(g >> 48) & 0xffff,
		 (unsigned int)(g >> 32) & 0xffff, (unsigned int)(g >> 16) & 0xffff,
		 (unsigned int)g & 0xffff);
}

/* device/local_cpus: the online CPUs as the kernel's comma-separated
 * 32-bit hex words, most significant first. */
static void cpumask_text(char *buf, size_t len)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	int words, off = 0;

	if (ncpu < 1)
		ncpu = 1;
	if (ncpu > 1024)
		ncpu = 1024;
	words = (int)((ncpu + 31) / 32);
	for (int w = words - 1; w >= 0 && off < (int)len; w--) {
		long bits = ncpu - w * 32L;
		uint32_t m = bits >= 32 ? 0xffffffffu : (1u << bits) - 1;

		off += snprintf(buf + off, len - (size_t)off, "%s%08x",
				w == words - 1 ? "" : ",", m);
	}
}

static int write_ibdev(const char *v, const char *dev)
{
	const struct sv_dev_attr *a = &sv_dev.attr;
	const struct sv_port_attr *p = &sv_dev.port;
	char d[64], rel[128], text[128];
	int ret = 0;

	snprintf(d, sizeof(d), "sys/class/infiniband/%s", dev);
	guid_text(a->node_guid, text, sizeof(text));
#define PUT(name, ...) do { \
		snprintf(rel, sizeof(rel), "%s/" name, d); \
		ret = ret ? ret : put(v, rel, 0444, __VA_ARGS__); \
	} while (0)
	ret = mkdirs(v, d);
	PUT("node_type", "1: CA\n");
	PUT("node_guid", "%s\n", text);
	guid_text(a->sys_image_guid, text, sizeof(text));
	PUT("sys_image_guid", "%s\n", text);
	PUT("fw_ver", "%s\n", a->fw_ver);
	PUT("hw_rev", "0x%x\n", a->hw_ver);
	PUT("hca_type", "softverbs\n");
	PUT("board_id", "SOFTVERBS_SV%u\n", 0u);
	PUT("node_desc", "softverbs %s\n", dev);

	snprintf(d, sizeof(d), "sys/class/infiniband/%s/ports/1", dev);
	ret = ret ? ret : mkdirs(v, d);
	PUT("state", "%s\n", port_states[p->state < 6 ? p->state : 0]);
	PUT("phys_state", "%s\n", phys_states[p->phys_state < 8 ? p->phys_state : 0]);
	rate_text(p, text, sizeof(text));
	PUT("rate", "%s\n", text);
	PUT("link_layer", "%s\n", p->link_layer == IBV_LINK_LAYER_ETHERNET ?
	    "Ethernet" : "InfiniBand");
	PUT("lid", "0x%x\n", p->lid);
	PUT("sm_lid", "0x%x\n", p->sm_lid);
	PUT("sm_sl", "%u\n", p->sm_sl);
	PUT("lid_mask_count", "%u\n", p->lmc);
	PUT("cap_mask", "0x%08x\n", p->port_cap_flags);
	return ret;
#undef PUT
}

static int write_tables(const char *v, const char *dev)
{
	const struct sv_port_attr *p = &sv_dev.port;
	char d[80], rel[160], ifname[IF_NAMESIZE];
	int ret = 0;

	snprintf(d, sizeof(d), "sys/class/infiniband/%s/ports/1", dev);
	for (const char *sub = "gids\0gid_attrs/types\0gid_attrs/ndevs\0pkeys\0"
			       "counters\0hw_counters\0"; *sub; sub += strlen(sub) + 1) {
		snprintf(rel, sizeof(rel), "%s/%s", d, sub);
		ret = ret ? ret : mkdirs(v, rel);
	}
	for (unsigned int i = 0; i < p->gid_tbl_len && i < SV_GID_TBL_LEN && !ret; i++) {
		const struct sv_rsp_gid *g = &sv_dev.gid[i];
		const uint8_t *b = g->gid;

		snprintf(rel, sizeof(rel), "%s/gids/%u", d, i);
		ret = put(v, rel, 0444, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:"
			  "%02x%02x:%02x%02x:%02x%02x:%02x%02x\n", b[0], b[1],
			  b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
			  b[11], b[12], b[13], b[14], b[15]);
		/* the kernel fails to read the type and netdev of an empty
		 * entry; here they are absent */
		if (ret || !g->valid)
			continue;
		snprintf(rel, sizeof(rel), "%s/gid_attrs/types/%u", d, i);
		ret = put(v, rel, 0444, "%s\n", g->gid_type == IBV_GID_TYPE_ROCE_V2 ?
			  "RoCE v2" : "IB/RoCE v1");
		if (!ret && g->ndev_ifindex && if_indextoname(g->ndev_ifindex, ifname)) {
			snprintf(rel, sizeof(rel), "%s/gid_attrs/ndevs/%u", d, i);
			ret = put(v, rel, 0444, "%s\n", ifname);
		}
	}
	for (unsigned int i = 0; i < p->pkey_tbl_len && !ret; i++) {
		snprintf(rel, sizeof(rel), "%s/pkeys/%u", d, i);
		ret = put(v, rel, 0444, "0x%04x\n", i == 0 ? SV_PKEY_DEFAULT : 0u);
	}
	/* what a reader without the preload sees; through it, each open
	 * renders the live value */
	for (unsigned int i = 0; i < sv_view_ncounters && !ret; i++) {
		snprintf(rel, sizeof(rel), "%s/%s/%s", d, sv_view_counters[i].dir,
			 sv_view_counters[i].name);
		ret = put(v, rel, 0444, "0\n");
	}
	return ret;
}

/* The PCI function behind interface ifname, as the kernel's sysfs has it:
 * the nearest folder above /sys/class/net/IF/device whose name is a PCI
 * address (DDDD:BB:DD.F). Its path into out, or false (a virtual
 * interface: veth, a bridge, loopback). */
static bool pci_of(const char *ifname, char *out, size_t len)
{
	char path[PATH_MAX], *real, *slash;

	snprintf(path, sizeof(path), "/sys/class/net/%s/device", ifname);
	real = realpath(path, NULL);
	while (real && (slash = strrchr(real, '/')) && slash != real) {
		unsigned int a, b, c, f;
		char end;

		if (sscanf(slash + 1, "%x:%x:%x.%x%c", &a, &b, &c, &f, &end) == 4 &&
		    strlen(real) < len) {
			strcpy(out, real);
			free(real);
			return true;
		}
		*slash = 0;
	}
	free(real);
	return false;
}

/* A line of a sysfs file (its newline dropped), or false. */
static bool read_line(const char *dir, const char *name, char *buf, size_t len)
{
	char path[PATH_MAX + 64];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f)
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = 0;
	return ok;
}

/* The interface behind the port's GIDs (the first that names one). */
static bool port_netdev(char *ifname)
{
	for (unsigned int i = 0; i < SV_GID_TBL_LEN; i++)
		if (sv_dev.gid[i].valid && sv_dev.gid[i].ndev_ifindex &&
		    if_indextoname(sv_dev.gid[i].ndev_ifindex, ifname))
			return true;
	return false;
}

/*
 * device/: the NUMA node, the CPUs, the interfaces behind the GIDs. Where
 * the port's interface sits on a PCI function, as a NIC's does, device/
 * says what that function's sysfs folder says (its NUMA node and CPUs, its
 * vendor, device, subsystem and class ids, its link speed and width), as
 * rxe's device/ is the interface's parent: what NCCL, torchcomms and UCX
 * read to place the device; otherwise node -1 and every CPU.
 */
static int write_parent(const char *v, const char *dev)
{
	static const char *const ids[] = {
		"vendor", "device", "subsystem_vendor", "subsystem_device",
		"class", "max_link_speed", "max_link_width",
		"current_link_speed", "current_link_width",
	};
	char d[80], rel[160], to[64], ifname[IF_NAMESIZE], text[300];
	char pci[PATH_MAX], line[128];
	bool on_pci = port_netdev(ifname) && pci_of(ifname, pci, sizeof(pci));
	int ret;

	snprintf(d, sizeof(d), "sys/class/infiniband/%s/device", dev);
	snprintf(rel, sizeof(rel), "%s/net", d);
	ret = mkdirs(v, rel);
	snprintf(rel, sizeof(rel), "%s/numa_node", d);
	ret = ret ? ret : put(v, rel, 0444, "%s\n",
			      on_pci && read_line(pci, "numa_node", line, sizeof(line)) ?
			      line : "-1");
	cpumask_text(text, sizeof(text));
	snprintf(rel, sizeof(rel), "%s/local_cpus", d);
	ret = ret ? ret : put(v, rel, 0444, "%s\n",
			      on_pci && read_line(pci, "local_cpus", line, sizeof(line)) ?
			      line : text);
	snprintf(text, sizeof(text), "0-%ld", sysconf(_SC_NPROCESSORS_CONF) - 1);
	snprintf(rel, sizeof(rel), "%s/local_cpulist", d);
	ret = ret ? ret : put(v, rel, 0444, "%s\n",
			      on_pci && read_line(pci, "local_cpulist", line, sizeof(line)) ?
			      line : text);
	for (size_t i = 0; on_pci && i < sizeof(ids) / sizeof(ids[0]) && !ret; i++) {
		if (!read_line(pci, ids[i], line, sizeof(line)))
			continue;
		snprintf(rel, sizeof(rel), "%s/%s", d, ids[i]);
		ret = put(v, rel, 0444, "%s\n", line);
	}
	for (unsigned int i = 0; i < SV_GID_TBL_LEN && !ret; i++) {
		char from[600];

		if (!sv_dev.gid[i].valid || !sv_dev.gid[i].ndev_ifindex ||
		    !if_indextoname(sv_dev.gid[i].ndev_ifindex, ifname))
			continue;
		snprintf(to, sizeof(to), "/sys/class/net/%s", ifname);
		snprintf(from, sizeof(from), "%s/%s/net/%s", v, d, ifname);
		if (symlink(to, from) && errno != EEXIST)
			ret = -errno;
	}
	return ret;
}

static int write_classes(const char *v, const char *dev, unsigned int n)
{
	char d[80], rel[160];
	int ret;

	snprintf(d, sizeof(d), "sys/class/infiniband_verbs/uverbs%u", n);
	ret = mkdirs(v, d);
	ret = ret ? ret : mkdirs(v, "sys/class/infiniband_mad");
	ret = ret ? ret : mkdirs(v, "dev/infiniband");
	ret = ret ? ret : put(v, "sys/class/infiniband_verbs/abi_version", 0444,
			      "%d\n", SV_VERBS_CLASS_ABI);
	ret = ret ? ret : put(v, "sys/class/infiniband_mad/abi_version", 0444,
			      "%d\n", SV_MAD_CLASS_ABI);
	snprintf(rel, sizeof(rel), "%s/ibdev", d);
	ret = ret ? ret : put(v, rel, 0444, "%s\n", dev);
	snprintf(rel, sizeof(rel), "%s/abi_version", d);
	ret = ret ? ret : put(v, rel, 0444, "%d\n", SV_UVERBS_ABI);
	snprintf(rel, sizeof(rel), "%s/dev", d);
	ret = ret ? ret : put(v, rel, 0444, "%d:%u\n", SV_UVERBS_MAJOR,
			      SV_UVERBS_MINOR_BASE + n);
	/* the character device, as a plain file the preload reports as one */
	snprintf(rel, sizeof(rel), "dev/infiniband/uverbs%u", n);
	ret = ret ? ret : put(v, rel, 0666, "%s", "");
	/* the rdma_cm device (a misc device, as the kernel's ucma) */
	ret = ret ? ret : mkdirs(v, "sys/class/misc/rdma_cm");
	ret = ret ? ret : put(v, "sys/class/misc/rdma_cm/abi_version", 0444, "%d\n",
			      SV_UCMA_ABI);
	ret = ret ? ret : put(v, "sys/class/misc/rdma_cm/dev", 0444, "%d:%d\n",
			      SV_UCMA_MAJOR, SV_UCMA_MINOR);
	ret = ret ? ret : put(v, "dev/infiniband/rdma_cm", 0666, "%s", "");
	return ret;
}

int sv_view_publish(const char *sock_path)
{
	static const char *const real[] = {
		"/dev/infiniband", "/sys/class/infiniband",
		"/sys/class/infiniband_verbs", "/sys/class/infiniband_mad",
	};
	char tmp[320];
	int ret;

	ret = sv_view_root(sock_path, view_root, sizeof(view_root));
	if (ret || snprintf(tmp, sizeof(tmp), "%s.tmp", view_root) >= (int)sizeof(tmp)) {
		view_root[0] = 0;
		return -ENAMETOOLONG;
	}
	/* a daemon that died left its view: we hold the lock, it is stale */
	rm_tree(view_root);
	rm_tree(tmp);
	sv_dev.uverbs = pick_uverbs();
	ret = mkdirs(tmp, "sys/class");
	ret = ret ? ret : write_classes(tmp, sv_dev.name, sv_dev.uverbs);
	ret = ret ? ret : write_ibdev(tmp, sv_dev.name);
	ret = ret ? ret : write_tables(tmp, sv_dev.name);
	ret = ret ? ret : write_parent(tmp, sv_dev.name);
	if (!ret) {
		for (size_t i = 0; i < sizeof(real) / sizeof(real[0]); i++)
			link_real(tmp, real[i]);
		if (rename(tmp, view_root))
			ret = -errno;
	}
	if (ret) {
		rm_tree(tmp);
		view_root[0] = 0;
		sv_log(SV_LOG_WARN, "no device view: %s", strerror(-ret));
		return ret;
	}
	sv_log(SV_LOG_INFO, "device view in %s (uverbs%u)", view_root,
	       sv_dev.uverbs);
	return 0;
}

void sv_view_unpublish(void)
{
	if (view_root[0])
		rm_tree(view_root);
	view_root[0] = 0;
}

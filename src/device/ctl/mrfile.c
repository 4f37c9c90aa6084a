// SPDX-License-Identifier: MIT
/*
 * MRs over memory both sides can map (issue 22, Deliver 3; docs/DESIGN.md
 * "The direct path"): when a registration lies in one shared mapping of a
 * memfd sealed against shrinking, the daemon keeps a descriptor of that
 * memfd with the MR, and hands it to a process of this host that asks
 * (MR_FILE) so that its direct path copies with plain loads and stores
 * through a mapping of its own, with no system call and no fault to fear:
 * the file cannot shrink under it, and the process's own mapping cannot
 * be unmapped by the MR's owner.
 *
 * The file is found the way a debugger would: the maps line of the range
 * names its device and inode, and one of the owner's descriptors
 * (/proc/PID/fd, readable by a process of the same uid) names the same
 * file; the daemon opens it through that link. Anything else (anonymous or
 * private memory, a regular file, a memfd without F_SEAL_SHRINK, a file
 * the owner holds no descriptor of) keeps the MR as it was: the direct
 * path copies with process_vm_writev, the daemon path as ever.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "device/sv_dev.h"

/* The fields of a maps line: start-end perms offset major:minor inode. */
static int parse_vma(const char *l, uint64_t *start, uint64_t *end,
		     uint64_t *off, dev_t *dev, uint64_t *ino)
{
	unsigned long long s, e, o, i;
	unsigned int maj, min;
	char perms[8];

	if (sscanf(l, "%llx-%llx %7s %llx %x:%x %llu", &s, &e, perms, &o, &maj,
		   &min, &i) != 7)
		return -EINVAL;
	if (strlen(perms) != 4 || perms[3] != 's' || !i)
		return -ENOENT;
	*start = s;
	*end = e;
	*off = o;
	*dev = makedev(maj, min);
	*ino = i;
	return 0;
}

/* A descriptor of c's that names (dev, ino), reopened here read-write:
 * the descriptor, or -ENOENT. */
static int open_owner_fd(const struct sv_client *c, dev_t dev, uint64_t ino)
{
	char path[64], fdp[64 + sizeof(((struct dirent *)0)->d_name)];
	struct dirent *de;
	struct stat st;
	int fd = -ENOENT;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)c->pid);
	d = opendir(path);
	if (!d)
		return -ENOENT;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(fdp, sizeof(fdp), "%s/%s", path, de->d_name);
		if (stat(fdp, &st) || st.st_dev != dev ||
		    (uint64_t)st.st_ino != ino || !S_ISREG(st.st_mode))
			continue;
		fd = open(fdp, O_RDWR | O_CLOEXEC);
		if (fd >= 0)
			break;
		fd = -ENOENT;
	}
	closedir(d);
	return fd;
}

bool sv_vma_is_file(const char *vma, int fd)
{
	uint64_t start, end, off, ino;
	struct stat st;
	dev_t dev;

	return vma[0] && !parse_vma(vma, &start, &end, &off, &dev, &ino) &&
	       !fstat(fd, &st) && st.st_dev == dev &&
	       (uint64_t)st.st_ino == ino;
}

int sv_mr_file_open(const struct sv_client *c, const char *vma, uint64_t addr,
		    uint64_t len, uint64_t *file_off)
{
	uint64_t start, end, off, ino;
	struct stat st;
	dev_t dev;
	int fd, seals;

	if (!vma[0] || parse_vma(vma, &start, &end, &off, &dev, &ino) ||
	    addr < start || len > end - addr)
		return -ENOENT;
	fd = open_owner_fd(c, dev, ino);
	if (fd < 0)
		return fd;
	/* the same file still, sealed against shrinking (a mapping of it can
	 * then never fault), and long enough */
	seals = fcntl(fd, F_GET_SEALS);
	if (fstat(fd, &st) || st.st_dev != dev || (uint64_t)st.st_ino != ino ||
	    seals < 0 || !(seals & F_SEAL_SHRINK) ||
	    (uint64_t)st.st_size < off + (addr - start) + len) {
		close(fd);
		return -ENOENT;
	}
	*file_off = off + (addr - start);
	return fd;
}

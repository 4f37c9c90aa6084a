// SPDX-License-Identifier: MIT
/*
 * Memory regions and page lists. Registration pins nothing: the daemon
 * records the range (or the list of blocks) and checks, against the client's
 * /proc/PID/maps, that every byte of it is mapped with the rights the access
 * flags need. The cost does not depend on the length of the range.
 *
 * Fast-register MRs (ALLOC_MR) get their block array here, once; the work
 * requests that fill it and invalidate it are in exec/mm.c. Page lists are
 * shared memory the client writes and the daemon only reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "device/ctl/direct.h"
#include "device/sv_dev.h"

#define SV_ACCESS_WRITES                                                     \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                  \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* Parse one maps line: "start-end perms ...". */
static int parse_maps_line(const char *l, uint64_t *s, uint64_t *e,
			   char perms[5])
{
	char *end;

	*s = strtoull(l, &end, 16);
	if (*end != '-')
		return -1;
	*e = strtoull(end + 1, &end, 16);
	if (*end != ' ' || strlen(end) < 5)
		return -1;
	memcpy(perms, end + 1, 4);
	perms[4] = 0;
	return 0;
}

/* The bytes of a NUL-terminated line, its NUL included. */
static size_t ll_end(const char *l)
{
	return strlen(l) + 1;
}

/* A range of client memory to check. */
struct mem_range {
	uint64_t addr;
	uint64_t len;
};

/*
 * The maps file's query of one mapping (Linux 6.11: PROCMAP_QUERY on an
 * open /proc/PID/maps; the layout of struct procmap_query in the kernel's
 * uapi <linux/fs.h>, which Debian 12's headers predate): the mapping that
 * covers an address, in O(log mappings), where the text costs a line per
 * mapping of the process, every registration.
 */
struct maps_query {
	uint64_t size;             /* in: sizeof */
	uint64_t query_flags;      /* in: 0, the mapping covering query_addr */
	uint64_t query_addr;
	uint64_t vma_start;        /* out */
	uint64_t vma_end;
	uint64_t vma_flags;        /* MQ_* */
	uint64_t vma_page_size;
	uint64_t vma_offset;       /* of the file, as the text's offset */
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;    /* in/out: 0, no name asked */
	uint32_t build_id_size;    /* in/out: 0 */
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};

_Static_assert(sizeof(struct maps_query) == 104, "procmap_query");

#define MAPS_QUERY _IOWR('f', 17, struct maps_query)
#define MQ_READ    0x01u
#define MQ_WRITE   0x02u
#define MQ_EXEC    0x04u
#define MQ_SHARED  0x08u

/* Does this kernel answer MAPS_QUERY? Unknown until the first try. */
static enum { MQ_UNKNOWN, MQ_YES, MQ_NO } maps_query_ok;

/*
 * check_ranges by MAPS_QUERY on the open maps file fd: 0, -EFAULT with
 * *why, or 1 when the kernel has no such query (then the text is read).
 */
static int query_ranges(int fd, const struct mem_range *r, size_t n,
			bool write, const char **why, char shared_vma[512])
{
	for (size_t k = 0; k < n; k++) {
		uint64_t cur = r[k].addr, end = r[k].addr + r[k].len;

		while (cur < end) {
			struct maps_query q = { .size = sizeof(q),
						.query_addr = cur };

			if (ioctl(fd, MAPS_QUERY, &q)) {
				if (maps_query_ok == MQ_UNKNOWN &&
				    (errno == ENOTTY || errno == EINVAL ||
				     errno == EOPNOTSUPP)) {
					maps_query_ok = MQ_NO;
					return 1;
				}
				/* ENOENT: a hole; ESRCH: the process is gone */
				*why = "range not mapped";
				return -EFAULT;
			}
			maps_query_ok = MQ_YES;
			if (q.vma_start > cur || q.vma_end <= cur) {
				*why = "range not mapped";
				return -EFAULT;
			}
			if (!(q.vma_flags & MQ_READ)) {
				*why = "range not readable";
				return -EFAULT;
			}
			if (write && !(q.vma_flags & MQ_WRITE)) {
				*why = "write access asked on read-only memory";
				return -EFAULT;
			}
			/* one range in one shared mapping: its line, as the
			 * text has it, for mrfile.c */
			if (shared_vma && n == 1 && cur == r[0].addr &&
			    q.vma_end >= end && (q.vma_flags & MQ_SHARED))
				snprintf(shared_vma, 512,
					 "%08llx-%08llx %c%c%cs %08llx "
					 "%02x:%02x %llu",
					 (unsigned long long)q.vma_start,
					 (unsigned long long)q.vma_end,
					 q.vma_flags & MQ_READ ? 'r' : '-',
					 q.vma_flags & MQ_WRITE ? 'w' : '-',
					 q.vma_flags & MQ_EXEC ? 'x' : '-',
					 (unsigned long long)q.vma_offset,
					 q.dev_major, q.dev_minor,
					 (unsigned long long)q.inode);
			cur = q.vma_end;
		}
	}
	return 0;
}

/*
 * Walk the client's mappings (ascending, possibly adjacent) and check that
 * every range of r[0 .. n) (ascending, disjoint, none empty) is covered
 * without a hole, readable, and writable when write is set. Asks the maps
 * file for the mappings of the ranges where the kernel can (query_ranges),
 * else reads it once, in fixed chunks: no allocation either way.
 */
static int check_ranges(struct sv_client *c, const struct mem_range *r,
			size_t n, bool write, const char **why,
			char shared_vma[512])
{
	char path[64], buf[8192], line[512];
	uint64_t cur, end;
	size_t ll = 0, k = 0;
	ssize_t got;
	int fd, ret = -EFAULT;

	*why = "range not mapped";
	if (!n)
		return 0;
	cur = r[0].addr;
	end = r[0].addr + r[0].len;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)c->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*why = "cannot read the client's memory map";
		return -EFAULT;
	}
	if (maps_query_ok != MQ_NO && !sv_dev.maps_text) {
		ret = query_ranges(fd, r, n, write, why, shared_vma);
		if (ret <= 0)
			goto out;
		ret = -EFAULT;
	}
	while (ret == -EFAULT && (got = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < got; i++) {
			uint64_t s, e;
			char perms[5];

			if (buf[i] != '\n') {
				if (ll < sizeof(line) - 1)
					line[ll++] = buf[i];
				continue;
			}
			line[ll] = 0;
			ll = 0;
			if (parse_maps_line(line, &s, &e, perms))
				continue;
			/* this mapping may hold the rest of several ranges */
			while (e > cur) {
				if (s > cur)
					goto out; /* a hole */
				if (perms[0] != 'r') {
					*why = "range not readable";
					goto out;
				}
				if (write && perms[1] != 'w') {
					*why = "write access asked on read-only memory";
					goto out;
				}
				if (e < end) {
					cur = e;
					break;
				}
				/* one range in one shared mapping: it may be a
				 * file both sides can map (mrfile.c) */
				if (shared_vma && n == 1 && s <= r[0].addr &&
				    perms[3] == 's')
					memcpy(shared_vma, line, ll_end(line));
				if (++k == n) {
					ret = 0;
					goto out;
				}
				cur = r[k].addr;
				end = r[k].addr + r[k].len;
			}
		}
	}
out:
	close(fd);
	/* the pid is ours only while the process lives (pidfd: see client.c) */
	return ret;
}

int sv_mem_check_range(struct sv_client *c, uint64_t addr, uint64_t len,
		       bool write, const char **why)
{
	struct mem_range r = { addr, len };

	return check_ranges(c, &r, len ? 1 : 0, write, why, NULL);
}

static int range_cmp(const void *a, const void *b)
{
	const struct mem_range *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/*
 * The bytes of a block-list MR: the part of each run that holds [fbo, fbo +
 * length). Runs may overlap and come in any order: sorted and merged, they
 * are checked in one pass over the maps.
 */
static int check_blocks(struct sv_client *c, const struct sv_mr *mr,
			bool write, const char **why)
{
	const struct sv_mr_block *b = mr->blocks;
	uint64_t first = mr->fbo, last = mr->fbo + mr->length;
	struct mem_range *r = malloc(mr->nblocks * sizeof(*r));
	size_t n = 0, m = 0;
	int ret;

	if (!r) {
		*why = "out of memory";
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < mr->nblocks; i++) {
		uint64_t s = b[i].start, e = b[i + 1].start;

		if (e <= first || s >= last)
			continue;
		if (s < first)
			s = first;
		if (e > last)
			e = last;
		r[n].addr = b[i].addr + (s - b[i].start);
		r[n].len = e - s;
		n++;
	}
	qsort(r, n, sizeof(*r), range_cmp);
	for (size_t i = 0; i < n; i++) {
		uint64_t e = r[i].addr + r[i].len;   /* no wrap: see exec/mm.c */

		if (m && r[i].addr <= r[m - 1].addr + r[m - 1].len) {
			if (e > r[m - 1].addr + r[m - 1].len)
				r[m - 1].len = e - r[m - 1].addr;
			continue;
		}
		r[m++] = r[i];
	}
	ret = check_ranges(c, r, m, write, why, NULL);
	free(r);
	return ret;
}

/* Is every byte of mr mapped with the rights access needs? */
static int check_mapping(struct sv_client *c, const struct sv_mr *mr,
			 uint32_t access, const char **why)
{
	bool write = access & SV_ACCESS_WRITES;

	if (mr->nblocks)
		return check_blocks(c, mr, write, why);
	return sv_mem_check_range(c, mr->addr, mr->length, write, why);
}

/* The range [addr, addr + len) of a new translation: mapped with the
 * rights access needs, and, when it lies in one shared mapping, that
 * mapping's maps line in vma (else vma[0] is 0). */
static int check_translation(struct sv_client *c, uint64_t addr, uint64_t len,
			     uint32_t access, const char **why,
			     char vma[512])
{
	struct mem_range r = { addr, len };

	if (len == 0) {
		*why = "zero length";
		return -EINVAL;
	}
	vma[0] = 0;
	/* on demand: pages may come and go; each access is checked when it
	 * happens. Implicit: address 0, length SIZE_MAX, the whole space. */
	if ((access & IBV_ACCESS_ON_DEMAND) && addr == 0 && len == UINT64_MAX)
		return 0;
	if (len > SV_MAX_MR_SIZE) {
		*why = "length above max_mr_size";
		return -EINVAL;
	}
	if (addr + len < addr) {
		*why = "range wraps";
		return -EINVAL;
	}
	if (access & IBV_ACCESS_ON_DEMAND)
		return 0;
	return check_ranges(c, &r, 1, access & SV_ACCESS_WRITES, why, vma);
}

/* A DM MR's range (SV_REG_MR_DM): zero-based, and, unless empty, mapped
 * in one shared mapping of the DM's own file. */
static int check_dm_translation(struct sv_req *r,
				const struct sv_cmd_reg_mr *a, char vma[512])
{
	const struct sv_dm *dm = sv_req_obj(r, a->dm, SV_OBJ_DM);
	int ret;

	if (!dm)
		return -EINVAL;
	if (!(a->access & IBV_ACCESS_ZERO_BASED)) {
		r->why = "a DM MR is zero-based";
		return -EINVAL;
	}
	vma[0] = 0;
	if (!a->length)
		return 0;
	if (a->length > dm->length) {
		r->why = "longer than the DM";
		return -EINVAL;
	}
	ret = check_translation(r->client, a->addr, a->length, a->access,
				&r->why, vma);
	if (!ret && !sv_vma_is_file(vma, dm->fd)) {
		r->why = "not in a mapping of the DM";
		ret = -EINVAL;
	}
	return ret;
}

/* A new MR of the requesting client on pd, with a block array of nblocks
 * runs (0: contiguous); NULL and *err when the device has no room. */
static struct sv_mr *mr_new(struct sv_req *r, struct sv_pd *pd,
			    uint32_t nblocks, int *err)
{
	struct sv_mr *mr;

	*err = -ENOMEM;
	if (sv_dev.total[SV_OBJ_MR] >= SV_MAX_MR) {
		r->why = "max_mr reached";
		return NULL;
	}
	if (nblocks && sv_dev.mr_blocks + nblocks + 1 > SV_MAX_MR_BLOCKS) {
		r->why = "no room for more list entries on the device";
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return NULL;
	if (nblocks) {
		mr->blocks = calloc((size_t)nblocks + 1, sizeof(*mr->blocks));
		if (!mr->blocks) {
			free(mr);
			return NULL;
		}
	}
	mr->owner = r->client;
	mr->pd = pd;
	mr->max_blocks = nblocks;
	mr->file_fd = -1;
	*err = 0;
	return mr;
}

static void mr_file_drop(struct sv_mr *mr)
{
	if (mr->has_file)
		close(mr->file_fd);
	mr->has_file = false;
	mr->file_fd = -1;
}

/* Keep the sealed memfd the range lies in, if it does (mrfile.c). */
static void mr_file_take(struct sv_client *c, struct sv_mr *mr,
			 const char *vma)
{
	static uint64_t gen;       /* the files' numbers (file_gen) */
	uint64_t off;
	int fd = sv_mr_file_open(c, vma, mr->addr, mr->length, &off);

	if (fd < 0)
		return;
	mr->has_file = true;
	mr->file_fd = fd;
	mr->file_off = off;
	mr->file_gen = ++gen;
}

static void mr_free(struct sv_mr *mr)
{
	mr_file_drop(mr);
	free(mr->blocks);
	free(mr);
}

static uint64_t mr_block_entries(const struct sv_mr *mr)
{
	return mr->blocks ? (uint64_t)mr->max_blocks + 1 : 0;
}

/* Give mr its key and handle and answer with them; frees it on failure. */
static int mr_publish(struct sv_req *r, struct sv_mr *mr)
{
	int ret = sv_keytab_alloc(&sv_dev.keys, mr, &mr->key);

	if (ret) {
		r->why = "no free key";
		goto err_free;
	}
	mr->id = sv_next_id(&sv_dev.next_mr_id);
	ret = sv_client_add_obj(r, SV_OBJ_MR, mr, &mr->handle);
	if (ret)
		goto err_key;
	mr->pd->refs++;
	sv_dev.mr_blocks += mr_block_entries(mr);
	sv_direct_mr(mr);
	r->rsp->u.mr.handle = mr->handle;
	r->rsp->u.mr.lkey = mr->key;
	r->rsp->u.mr.rkey = mr->key;
	return 0;

err_key:
	sv_keytab_free(&sv_dev.keys, mr->key);
err_free:
	mr_free(mr);
	return ret;
}

int sv_cmd_reg_mr(struct sv_req *r)
{
	const struct sv_cmd_reg_mr *a = &r->cmd->u.reg_mr;
	struct sv_pd *pd;
	struct sv_mr *mr;
	char vma[512];
	int ret;

	pd = sv_req_obj(r, a->pd, SV_OBJ_PD);
	if (!pd)
		return -EINVAL;
	if (a->flags & ~SV_REG_MR_DM) {
		r->why = "unknown flags";
		return -EINVAL;
	}
	ret = sv_mr_access_check(a->access, &r->why);
	if (ret)
		return ret;
	if ((a->access & IBV_ACCESS_ON_DEMAND) && !a->addr &&
	    a->length == UINT64_MAX && a->iova) {
		r->why = "an implicit on-demand MR starts at iova 0";
		return -EINVAL;
	}
	if (a->flags & SV_REG_MR_DM)
		ret = check_dm_translation(r, a, vma);
	else
		ret = check_translation(r->client, a->addr, a->length,
					a->access, &r->why, vma);
	if (ret)
		return ret;
	mr = mr_new(r, pd, 0, &ret);
	if (!mr)
		return ret;
	mr->addr = a->addr;
	mr->length = a->length;
	mr->iova = (a->access & IBV_ACCESS_ZERO_BASED) ? 0 : a->iova;
	mr->access = a->access;
	mr_file_take(r->client, mr, vma);
	return mr_publish(r, mr);
}

int sv_cmd_alloc_mr(struct sv_req *r)
{
	const struct sv_cmd_alloc_mr *a = &r->cmd->u.alloc_mr;
	struct sv_pd *pd;
	struct sv_mr *mr;
	int ret;

	pd = sv_req_obj(r, a->pd, SV_OBJ_PD);
	if (!pd)
		return -EINVAL;
	if (!a->max_entries || a->max_entries > SV_MAX_PAGE_LIST) {
		r->why = "max_entries out of range";
		return -EINVAL;
	}
	if (a->rsvd) {
		r->why = "reserved field set";
		return -EINVAL;
	}
	mr = mr_new(r, pd, a->max_entries, &ret);
	if (!mr)
		return ret;
	mr->kind = SV_MR_FAST_REG;
	mr->invalid = true;
	return mr_publish(r, mr);
}

int sv_cmd_reg_mr_list(struct sv_req *r)
{
	const struct sv_cmd_reg_mr_list *a = &r->cmd->u.reg_mr_list;
	struct sv_page_list *pl;
	struct sv_pd *pd;
	struct sv_mr *mr;
	int ret;

	pd = sv_req_obj(r, a->pd, SV_OBJ_PD);
	if (!pd)
		return -EINVAL;
	pl = sv_req_obj(r, a->list, SV_OBJ_PAGE_LIST);
	if (!pl)
		return -EINVAL;
	if (a->rsvd) {
		r->why = "reserved field set";
		return -EINVAL;
	}
	if (!a->nentries || a->nentries > pl->max_entries) {
		r->why = "nentries out of range";
		return -EINVAL;
	}
	ret = sv_mr_access_check(a->access, &r->why);
	if (ret)
		return ret;
	if (!(a->access & IBV_ACCESS_ZERO_BASED) &&
	    a->length > UINT64_MAX - a->iova) {
		r->why = "iova range wraps";
		return -EINVAL;
	}
	mr = mr_new(r, pd, a->nentries, &ret);
	if (!mr)
		return ret;
	ret = sv_mr_load_list(mr, pl, a->nentries, a->fbo, a->length,
			      a->page_shift, a->flags, &r->why);
	if (ret)
		goto err;
	mr->addr = mr->blocks[0].addr;
	mr->length = a->length;
	mr->iova = (a->access & IBV_ACCESS_ZERO_BASED) ? 0 : a->iova;
	mr->access = a->access;
	ret = check_mapping(r->client, mr, a->access, &r->why);
	if (ret)
		goto err;
	return mr_publish(r, mr);

err:
	mr_free(mr);
	return ret;
}

int sv_cmd_rereg_mr(struct sv_req *r)
{
	const struct sv_cmd_rereg_mr *a = &r->cmd->u.rereg_mr;
	struct sv_client *c = r->client;
	struct sv_mr_block *old_blocks = NULL;
	struct sv_mr *mr;
	struct sv_pd *pd;
	uint32_t access;
	char vma[512];
	int ret;

	mr = sv_req_obj(r, a->mr, SV_OBJ_MR);
	if (!mr)
		return -EINVAL;
	if (!a->flags || a->flags & ~(uint32_t)(IBV_REREG_MR_CHANGE_TRANSLATION |
						 IBV_REREG_MR_CHANGE_PD |
						 IBV_REREG_MR_CHANGE_ACCESS)) {
		r->why = "bad rereg flags";
		return -EINVAL;
	}
	if (mr->kind == SV_MR_FAST_REG) {
		r->why = "a fast-register MR is changed by work requests";
		return -EINVAL;
	}
	if (mr->mw_bound) {
		r->why = "memory windows are bound to the MR";
		return -EBUSY;
	}
	pd = mr->pd;
	if (a->flags & IBV_REREG_MR_CHANGE_PD) {
		pd = sv_req_obj(r, a->pd, SV_OBJ_PD);
		if (!pd)
			return -EINVAL;
	}
	access = (a->flags & IBV_REREG_MR_CHANGE_ACCESS) ? a->access : mr->access;
	ret = sv_mr_access_check(access, &r->why);
	if (ret)
		return ret;
	if (a->flags & IBV_REREG_MR_CHANGE_TRANSLATION)
		ret = check_translation(c, a->addr, a->length, access, &r->why,
					vma);
	else if ((access & ~mr->access & SV_ACCESS_WRITES) &&
		 !(access & IBV_ACCESS_ON_DEMAND))
		ret = check_mapping(c, mr, access, &r->why);
	if (ret)
		return ret;
	/*
	 * The MR keeps its key, as rxe's and mlx5's do: work requests posted
	 * with it before the rereg (a receive waiting for the next message)
	 * and the peer's copy of the rkey go on working, under the new
	 * access, PD and translation (each checked at every access). A new
	 * key here made the next message hit a posted receive with a dead
	 * lkey and put the QP in error.
	 */
	if (a->flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		/* a block-list MR becomes contiguous */
		sv_dev.mr_blocks -= mr_block_entries(mr);
		old_blocks = mr->blocks;
		mr->blocks = NULL;
		mr->nblocks = 0;
		mr->max_blocks = 0;
		mr->fbo = 0;
		mr->addr = a->addr;
		mr->length = a->length;
		mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : a->iova;
	}
	mr->access = access;
	/* the old memory's file goes once no direct copy uses it: the
	 * entry says nothing of it after sv_direct_mr below; a process that
	 * mapped it keeps its own mapping, which the entry no longer names */
	if (a->flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr_file_drop(mr);
		mr_file_take(c, mr, vma);
	}
	/* a copy under the old key and translation ends before the reply:
	 * nothing is written through the old grant afterwards */
	sv_engine_quiesce();
	free(old_blocks);
	if (pd != mr->pd) {
		mr->pd->refs--;
		pd->refs++;
		mr->pd = pd;
	}
	/* and no direct copy (docs/DESIGN.md "The direct path") */
	sv_direct_mr(mr);
	sv_direct_revoke();
	r->rsp->u.mr.handle = mr->handle;
	r->rsp->u.mr.lkey = mr->key;
	r->rsp->u.mr.rkey = mr->key;
	return 0;
}

void sv_mr_destroy(struct sv_mr *mr)
{
	sv_direct_key_clear(mr->key);
	sv_keytab_free(&sv_dev.keys, mr->key);
	/* nor a direct copy through it */
	sv_direct_revoke();
	/* as a NIC finishes its DMA before deregistration returns: a copy that
	 * resolved this MR ends before the region is given back */
	sv_engine_quiesce();
	mr->pd->refs--;
	sv_dev.mr_blocks -= mr_block_entries(mr);
	mr_free(mr);
}

int sv_cmd_dereg_mr(struct sv_req *r)
{
	struct sv_client *c = r->client;
	uint64_t h = r->cmd->u.handle.handle;
	struct sv_mr *mr = sv_req_obj(r, h, SV_OBJ_MR);

	if (!mr)
		return -EINVAL;
	if (mr->mw_bound) {
		r->why = "memory windows are bound to the MR";
		return -EBUSY;
	}
	sv_client_del_obj(c, SV_OBJ_MR, h);
	sv_mr_destroy(mr);
	return 0;
}

/* ---- on-demand MRs ---- */

int sv_cmd_advise_mr(struct sv_req *r)
{
	const struct sv_cmd_advise_mr *a = &r->cmd->u.advise_mr;
	const struct sv_pd *pd = sv_req_obj(r, a->pd, SV_OBJ_PD);
	unsigned int kind;
	const struct sv_mr *mr;

	if (!pd)
		return -EINVAL;
	mr = sv_keytab_find(&sv_dev.keys, a->lkey, &kind);
	if (!mr || kind != SV_KEY_MR || mr->invalid || mr->owner != r->client ||
	    mr->pd != pd || mr->nblocks || !(mr->access & IBV_ACCESS_ON_DEMAND)) {
		r->why = "lkey names no on-demand MR of the PD";
		return -ENOENT;
	}
	if (a->addr < mr->iova || a->length > mr->length ||
	    a->addr - mr->iova > mr->length - a->length) {
		r->why = "range outside the MR";
		return -EFAULT;
	}
	r->rsp->u.advise.va = mr->addr + (a->addr - mr->iova);
	return 0;
}

/* ---- page lists ---- */

int sv_cmd_alloc_page_list(struct sv_req *r)
{
	const struct sv_cmd_alloc_page_list *a = &r->cmd->u.alloc_page_list;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), bytes;
	struct sv_page_list *pl;
	void *map = NULL;
	int fd = -1, ret;

	if (!a->max_entries || a->max_entries > SV_MAX_PAGE_LIST) {
		r->why = "max_entries out of range";
		return -EINVAL;
	}
	if (a->rsvd) {
		r->why = "reserved field set";
		return -EINVAL;
	}
	if (sv_dev.total[SV_OBJ_PAGE_LIST] >= SV_MAX_PAGE_LISTS) {
		r->why = "too many page lists";
		return -ENOMEM;
	}
	bytes = ((size_t)a->max_entries * sizeof(struct sv_mem_block) + pg - 1) &
		~(pg - 1);
	pl = calloc(1, sizeof(*pl));
	if (!pl)
		return -ENOMEM;
	ret = sv_req_charge(r, bytes);
	if (ret) {
		free(pl);
		return ret;
	}
	/* sealed against shrinking: the daemon's reads never fault */
	ret = sv_ring_alloc("softverbs-page-list", bytes, &fd, &map);
	if (ret) {
		sv_client_uncharge(r->client, bytes);
		r->why = "cannot allocate the list's memory";
		free(pl);
		return ret;
	}
	/* the daemon only reads it */
	mprotect(map, bytes, PROT_READ);
	pl->owner = r->client;
	pl->map = map;
	pl->bytes = bytes;
	pl->max_entries = a->max_entries;
	ret = sv_client_add_obj(r, SV_OBJ_PAGE_LIST, pl, &pl->handle);
	if (ret) {
		sv_client_uncharge(r->client, bytes);
		munmap(map, bytes);
		close(fd);
		free(pl);
		return ret;
	}
	/* the client's copy; the daemon keeps only the mapping */
	r->fd_out = fd;
	r->rsp->u.page_list.handle = pl->handle;
	r->rsp->u.page_list.bytes = bytes;
	r->rsp->u.page_list.max_entries = pl->max_entries;
	return 0;
}

void sv_page_list_destroy(struct sv_page_list *pl)
{
	/* work requests read the list under sv_dev.lock, which we hold */
	sv_client_uncharge(pl->owner, pl->bytes);
	munmap((void *)pl->map, pl->bytes);
	free(pl);
}

int sv_cmd_free_page_list(struct sv_req *r)
{
	uint64_t h = r->cmd->u.handle.handle;
	struct sv_page_list *pl = sv_req_obj(r, h, SV_OBJ_PAGE_LIST);

	if (!pl)
		return -EINVAL;
	sv_client_del_obj(r->client, SV_OBJ_PAGE_LIST, h);
	sv_page_list_destroy(pl);
	return 0;
}

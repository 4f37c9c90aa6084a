// SPDX-License-Identifier: MIT
/*
 * Memory regions. Registration pins nothing: the daemon records the range and
 * checks, against the client's /proc/PID/maps, that every byte of it is
 * mapped with the rights the access flags need. The cost does not depend on
 * the length of the range.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "device/sv_dev.h"

#define SV_ACCESS_SUPPORTED                                                  \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                  \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                 \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND | \
	 IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING)

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

/*
 * Walk the client's mappings (ascending, possibly adjacent) and check that
 * [addr, addr + len) is covered without a hole, readable, and writable when
 * write is set. Reads the maps file in fixed chunks: no allocation.
 */
int sv_mem_check_range(struct sv_client *c, uint64_t addr, uint64_t len,
		       bool write, const char **why)
{
	char path[64], buf[8192], line[512];
	uint64_t cur = addr, end = addr + len;
	size_t ll = 0;
	ssize_t n;
	int fd, ret = -EFAULT;

	*why = "range not mapped";
	if (len == 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)c->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*why = "cannot read the client's memory map";
		return -EFAULT;
	}
	while (ret == -EFAULT && (n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
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
			if (e <= cur)
				continue;
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
			cur = e;
			if (cur >= end) {
				ret = 0;
				goto out;
			}
		}
	}
out:
	close(fd);
	/* the pid is ours only while the process lives (pidfd: see client.c) */
	return ret;
}

static int check_access(uint32_t access, const char **why)
{
	if (access & ~SV_ACCESS_SUPPORTED) {
		*why = "unknown access flags";
		return -EINVAL;
	}
	/* IBTA 10.6.3.1: remote write or atomic needs local write */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE)) {
		*why = "remote write/atomic without local write";
		return -EINVAL;
	}
	return 0;
}

static int check_translation(struct sv_client *c, uint64_t addr, uint64_t len,
			     uint32_t access, const char **why)
{
	if (len == 0) {
		*why = "zero length";
		return -EINVAL;
	}
	if (len > SV_MAX_MR_SIZE) {
		*why = "length above max_mr_size";
		return -EINVAL;
	}
	if (addr + len < addr) {
		*why = "range wraps";
		return -EINVAL;
	}
	return sv_mem_check_range(c, addr, len, access & SV_ACCESS_WRITES, why);
}

int sv_cmd_reg_mr(struct sv_req *r)
{
	const struct sv_cmd_reg_mr *a = &r->cmd->u.reg_mr;
	struct sv_client *c = r->client;
	struct sv_pd *pd;
	struct sv_mr *mr;
	int ret;

	pd = sv_req_obj(r, a->pd, SV_OBJ_PD);
	if (!pd)
		return -EINVAL;
	ret = check_access(a->access, &r->why);
	if (ret)
		return ret;
	ret = check_translation(c, a->addr, a->length, a->access, &r->why);
	if (ret)
		return ret;
	if (sv_dev.total[SV_OBJ_MR] >= SV_MAX_MR) {
		r->why = "max_mr reached";
		return -ENOMEM;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->owner = c;
	mr->pd = pd;
	mr->addr = a->addr;
	mr->length = a->length;
	mr->iova = (a->access & IBV_ACCESS_ZERO_BASED) ? 0 : a->iova;
	mr->access = a->access;
	ret = sv_keytab_alloc(&sv_dev.keys, mr, &mr->key);
	if (ret) {
		r->why = "no free key";
		goto err_free;
	}
	ret = sv_client_add_obj(c, SV_OBJ_MR, mr, &mr->handle);
	if (ret)
		goto err_key;
	pd->refs++;
	r->rsp->u.mr.handle = mr->handle;
	r->rsp->u.mr.lkey = mr->key;
	r->rsp->u.mr.rkey = mr->key;
	return 0;

err_key:
	sv_keytab_free(&sv_dev.keys, mr->key);
err_free:
	free(mr);
	return ret;
}

int sv_cmd_rereg_mr(struct sv_req *r)
{
	const struct sv_cmd_rereg_mr *a = &r->cmd->u.rereg_mr;
	struct sv_client *c = r->client;
	struct sv_mr *mr;
	struct sv_pd *pd;
	uint32_t access, key;
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
	pd = mr->pd;
	if (a->flags & IBV_REREG_MR_CHANGE_PD) {
		pd = sv_req_obj(r, a->pd, SV_OBJ_PD);
		if (!pd)
			return -EINVAL;
	}
	access = (a->flags & IBV_REREG_MR_CHANGE_ACCESS) ? a->access : mr->access;
	ret = check_access(access, &r->why);
	if (ret)
		return ret;
	if (a->flags & IBV_REREG_MR_CHANGE_TRANSLATION)
		ret = check_translation(c, a->addr, a->length, access, &r->why);
	else if (access & ~mr->access & SV_ACCESS_WRITES)
		ret = check_translation(c, mr->addr, mr->length, access, &r->why);
	if (ret)
		return ret;
	/* A new consumer key: the old keys no longer name the region. */
	ret = sv_keytab_rekey(&sv_dev.keys, mr->key,
			      (uint8_t)(SV_KEY_CONSUMER(mr->key) + 1), &key);
	if (ret)
		return ret;
	mr->key = key;
	if (a->flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->addr = a->addr;
		mr->length = a->length;
		mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : a->iova;
	}
	mr->access = access;
	/* a copy under the old key and translation ends before the reply:
	 * nothing is written through the old grant afterwards */
	sv_engine_quiesce();
	if (pd != mr->pd) {
		mr->pd->refs--;
		pd->refs++;
		mr->pd = pd;
	}
	r->rsp->u.mr.handle = mr->handle;
	r->rsp->u.mr.lkey = mr->key;
	r->rsp->u.mr.rkey = mr->key;
	return 0;
}

void sv_mr_destroy(struct sv_mr *mr)
{
	sv_keytab_free(&sv_dev.keys, mr->key);
	/* as a NIC finishes its DMA before deregistration returns: a copy that
	 * resolved this MR ends before the region is given back */
	sv_engine_quiesce();
	mr->pd->refs--;
	free(mr);
}

int sv_cmd_dereg_mr(struct sv_req *r)
{
	struct sv_client *c = r->client;
	uint64_t h = r->cmd->u.handle.handle;
	struct sv_mr *mr = sv_req_obj(r, h, SV_OBJ_MR);

	if (!mr)
		return -EINVAL;
	sv_client_del_obj(c, SV_OBJ_MR, h);
	sv_mr_destroy(mr);
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * Clients: one per connection on the control socket. A client's identity is
 * its peer credentials (SO_PEERCRED) held as a pidfd, so that its death is
 * seen even while its socket lives on in a child, and so that the daemon never
 * mistakes a recycled pid for it. When a client goes, every object it created
 * goes with it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "device/ctl/direct.h"
#include "device/sv_dev.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

static int peer_pidfd(int fd, pid_t pid)
{
	socklen_t len = sizeof(int);
	int pidfd = -1;

	/* Linux 6.5+: the kernel pins the very process that connected */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 &&
	    pidfd >= 0)
		return pidfd;
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* ---- what one process holds ---- */

uint32_t sv_proc_max(unsigned int type)
{
	static const uint32_t dev_max[SV_OBJ_TYPE_MAX] = {
		[SV_OBJ_DOMAIN] = SV_MAX_DOMAINS, [SV_OBJ_CHANNEL] = SV_MAX_CHANNEL,
		[SV_OBJ_PAGE_LIST] = SV_MAX_PAGE_LISTS, [SV_OBJ_PD] = SV_MAX_PD,
		[SV_OBJ_DM] = SV_MAX_DMS,
		[SV_OBJ_XRCD] = SV_MAX_PD, [SV_OBJ_CQ] = SV_MAX_CQ,
		[SV_OBJ_MR] = SV_MAX_MR, [SV_OBJ_SRQ] = SV_MAX_SRQ,
		[SV_OBJ_QP] = SV_MAX_QP, [SV_OBJ_MW] = SV_MAX_MW,
		[SV_OBJ_AH] = SV_MAX_AH,
	};

	if (type >= SV_OBJ_TYPE_MAX)
		return 0;
	return dev_max[type] /
	       (type == SV_OBJ_QP ? SV_PROC_QP_SHARE : SV_PROC_SHARE);
}

/* The account of pid, made on its first connection; NULL when the process
 * has SV_PROC_MAX_CONTEXTS connections already (or no memory). */
static struct sv_account *acct_get(pid_t pid)
{
	struct sv_account *a;

	for (a = sv_dev.accounts; a; a = a->next)
		if (a->pid == pid)
			break;
	if (!a) {
		a = calloc(1, sizeof(*a));
		if (!a)
			return NULL;
		a->pid = pid;
		a->next = sv_dev.accounts;
		sv_dev.accounts = a;
	}
	if (a->nclients >= SV_PROC_MAX_CONTEXTS) {
		errno = EMFILE;
		return NULL;
	}
	a->nclients++;
	return a;
}

static void acct_put(struct sv_account *a)
{
	struct sv_account **pp;

	if (!a || --a->nclients)
		return;
	for (pp = &sv_dev.accounts; *pp; pp = &(*pp)->next)
		if (*pp == a) {
			*pp = a->next;
			break;
		}
	free(a);
}

int sv_req_charge(struct sv_req *r, uint64_t bytes)
{
	struct sv_account *a = r->client->acct;
	uint64_t max = sv_dev.proc_ring_max ? sv_dev.proc_ring_max :
		       SV_PROC_MAX_RING_BYTES;

	if (a->ring_bytes + bytes > max) {
		r->why = "the process holds its share of the device's ring memory";
		return -ENOMEM;
	}
	a->ring_bytes += bytes;
	return 0;
}

void sv_client_uncharge(struct sv_client *c, uint64_t bytes)
{
	if (c && c->acct)
		c->acct->ring_bytes -= bytes < c->acct->ring_bytes ?
				       bytes : c->acct->ring_bytes;
}

/* ---- clients ---- */

struct sv_client *sv_client_new(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct sv_client *c;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
		sv_log(SV_LOG_WARN, "refused a connection: no peer credentials");
		return NULL;
	}
	if (cred.uid != geteuid() && cred.uid != 0) {
		sv_log(SV_LOG_WARN, "refused pid %d: uid %u is not the daemon's uid %u",
		       (int)cred.pid, cred.uid, geteuid());
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->acct = acct_get(cred.pid);
	if (!c->acct) {
		int err = errno;

		if (err == EMFILE)
			sv_log(SV_LOG_WARN, "refused pid %d: it has %u "
			       "connections already", (int)cred.pid,
			       SV_PROC_MAX_CONTEXTS);
		free(c);
		errno = err;
		return NULL;
	}
	if (sv_objtab_init(&c->objs, SV_MAX_OBJS_CLIENT)) {
		acct_put(c->acct);
		free(c);
		return NULL;
	}
	c->fd = fd;
	c->pid = cred.pid;
	c->uid = cred.uid;
	c->async_fd = -1;
	c->token_fd = -1;
	c->pidfd = peer_pidfd(fd, cred.pid);
	if (c->pidfd < 0)
		sv_log(SV_LOG_WARN, "pid %d: no pidfd (%s); watching the socket only",
		       (int)c->pid, strerror(errno));
	c->id = ++sv_dev.next_client_id;
	c->ctxn = sv_next_id(&sv_dev.next_ctx_id);
	c->next = &sv_dev.clients;
	c->prev = sv_dev.clients.prev;
	c->prev->next = c;
	sv_dev.clients.prev = c;
	sv_dev.nclients++;
	return c;
}

int sv_client_add_obj(struct sv_req *r, unsigned int type, void *obj,
		      uint64_t *handle)
{
	struct sv_client *c = r->client;
	int ret;

	if (type >= SV_OBJ_TYPE_MAX)
		return -EINVAL;
	if (c->acct->count[type] >= sv_proc_max(type)) {
		r->why = "the process holds its share of the device's objects of this kind";
		return -ENOMEM;
	}
	ret = sv_objtab_insert(&c->objs, type, obj, handle);
	if (ret)
		return ret == -ENOSPC ? -ENOMEM : ret;
	sv_dev.total[type]++;
	c->acct->count[type]++;
	return 0;
}

void *sv_req_obj(struct sv_req *r, uint64_t handle, unsigned int type)
{
	static const char *const why[SV_OBJ_TYPE_MAX] = {
		[SV_OBJ_DOMAIN] = "no such domain",
		[SV_OBJ_CHANNEL] = "no such channel",
		[SV_OBJ_PAGE_LIST] = "no such page list", [SV_OBJ_PD] = "no such pd",
		[SV_OBJ_DM] = "no such dm",
		[SV_OBJ_XRCD] = "no such xrcd", [SV_OBJ_CQ] = "no such cq",
		[SV_OBJ_MR] = "no such mr", [SV_OBJ_SRQ] = "no such srq",
		[SV_OBJ_QP] = "no such qp", [SV_OBJ_MW] = "no such mw",
		[SV_OBJ_AH] = "no such ah",
	};
	void *obj = sv_objtab_lookup(sv_client_tab(r->client, handle), handle,
				     type);

	if (!obj && type < SV_OBJ_TYPE_MAX)
		r->why = why[type];
	return obj;
}

void sv_client_del_obj(struct sv_client *c, unsigned int type, uint64_t handle)
{
	struct sv_objtab *t = sv_client_tab(c, handle);
	/* an imported object is the exporter's, counted in its account */
	struct sv_client *holder = t == &c->objs ? c : c->exporter;

	if (sv_objtab_remove(t, handle, type)) {
		sv_dev.total[type]--;
		holder->acct->count[type]--;
	}
}

static void destroy_obj(void *arg, unsigned int type, void *obj, uint64_t h)
{
	struct sv_client *c = arg;

	(void)h;
	sv_dev.total[type]--;
	c->acct->count[type]--;
	switch (type) {
	case SV_OBJ_MR:
		sv_mr_destroy(obj);
		break;
	case SV_OBJ_MW:
		sv_mw_destroy(obj);     /* before its MR: higher type */
		break;
	case SV_OBJ_PAGE_LIST:
		sv_page_list_destroy(obj);
		break;
	case SV_OBJ_DM:
		sv_dm_destroy(obj);
		break;
	case SV_OBJ_CQ:
		sv_cq_destroy(obj);
		break;
	case SV_OBJ_CHANNEL:
		sv_channel_destroy(obj);
		break;
	case SV_OBJ_QP:
		sv_qp_destroy(obj);
		break;
	case SV_OBJ_SRQ:
		sv_srq_destroy(obj);
		break;
	case SV_OBJ_AH:
		sv_ah_destroy(obj);
		break;
	case SV_OBJ_DOMAIN:
		sv_domain_destroy(obj);
		break;
	case SV_OBJ_XRCD:
		sv_xrcd_destroy(obj);
		break;
	default:
		free(obj);
		break;
	}
}

/* The direct path's entries of c's MRs and QPs go first, all together. */
static void clear_direct(void *arg, unsigned int type, void *obj, uint64_t h)
{
	(void)arg;
	(void)h;
	if (type == SV_OBJ_MR)
		sv_direct_key_clear(((struct sv_mr *)obj)->key);
	else if (type == SV_OBJ_QP)
		sv_direct_qp_clear(obj);
}

/* Free every object in c's own table, leaving it empty. */
void sv_client_free_objs(struct sv_client *c)
{
	uint32_t hflag = c->objs.hflag;

	/* one revocation for all of them (docs/DESIGN.md "The direct
	 * path"): each object's own then finds its entry cleared already
	 * and waits for nothing, so a client of 262144 MRs leaves in
	 * linear time, not one scan of every guard per MR */
	sv_objtab_foreach(&c->objs, clear_direct, NULL);
	sv_direct_revoke();
	/* higher types first: nothing is freed before what depends on it */
	sv_objtab_foreach(&c->objs, destroy_obj, c);
	sv_objtab_fini(&c->objs);
	sv_objtab_init(&c->objs, SV_MAX_OBJS_CLIENT);
	c->objs.hflag = hflag;
}

/* import.c: c's importers lose their objects, which may hold c's */
void sv_import_orphan_all(struct sv_client *c)
{
	struct sv_client *x;

	for (x = sv_dev.clients.next; x != &sv_dev.clients; x = x->next) {
		if (x->exporter != c)
			continue;
		sv_client_free_objs(x);
		x->exporter = NULL;
		x->orphan = true;
		sv_log(SV_LOG_INFO, "client %llu (pid %d): the context it imported "
		       "(client %llu) is gone, and its objects with it",
		       (unsigned long long)x->id, (int)x->pid,
		       (unsigned long long)c->id);
	}
}

void sv_client_teardown(struct sv_client *c)
{
	uint32_t live = c->objs.live;

	/* the objects of those that imported c's context may hold c's */
	sv_import_orphan_all(c);
	sv_client_free_objs(c);
	sv_objtab_fini(&c->objs);
	sv_ring_pools_detach(c);
	if (c->token_fd >= 0)
		close(c->token_fd);
	c->token_fd = -1;
	c->exporter = NULL;
	acct_put(c->acct);
	c->acct = NULL;
	if (live || !c->probe)
		sv_log(SV_LOG_INFO, "client %llu (pid %d) gone: %u objects freed",
		       (unsigned long long)c->id, (int)c->pid, live);
	c->prev->next = c->next;
	c->next->prev = c->prev;
	sv_dev.nclients--;
	if (c->async_fd >= 0)
		close(c->async_fd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	for (uint32_t i = 0; i < c->nchans; i++)
		if (c->chans[i] >= 0)
			close(c->chans[i]);
	c->nchans = 0;
	close(c->fd);
	c->dead = true;
}

/* A channel whose other end no process holds any more: its process (and
 * any it forked since) has gone. */
static bool chan_orphaned(int fd)
{
	struct pollfd p = { .fd = fd, .events = 0 };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR));
}

int sv_client_chan_add(struct sv_client *c, int fd)
{
	uint32_t i;

	for (i = 0; i < c->nchans; i++)
		if (c->chans[i] < 0)
			break;
	if (i == c->nchans && c->nchans == SV_MAX_REPLY_CHANS) {
		for (i = 0; i < c->nchans; i++)
			if (chan_orphaned(c->chans[i]))
				break;
		if (i == c->nchans)
			return -ENOSPC;
		close(c->chans[i]);
	}
	if (i == c->nchans)
		c->nchans++;
	c->chans[i] = fd;
	return (int)i + 1;
}

int sv_client_chan_fd(const struct sv_client *c, uint32_t chan)
{
	return chan && chan <= c->nchans ? c->chans[chan - 1] : -1;
}

void sv_client_chan_drop(struct sv_client *c, uint32_t chan)
{
	if (chan && chan <= c->nchans && c->chans[chan - 1] >= 0) {
		close(c->chans[chan - 1]);
		c->chans[chan - 1] = -1;
	}
}

void sv_client_free(struct sv_client *c)
{
	free(c->ev_sock);
	free(c->ev_pid);
	free(c);
}

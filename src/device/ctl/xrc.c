// SPDX-License-Identifier: MIT
/*
 * XRC: domains, SRQ numbers, opened target QPs (docs/DESIGN.md "XRC").
 *
 * An XRC domain is a device-wide object; clients hold handles on it (struct
 * sv_xrcd). A shared domain is named by a file's (st_dev, st_ino): the
 * client sends the file itself (having it open is the right to share the
 * domain), every client sending the same file gets the same domain, and
 * the domain goes when its last handle closes. SRQs of type XRC
 * and XRC_RECV QPs belong to a domain; an XRC_SEND message names an SRQ by
 * number, and its target QP takes it only for an SRQ of its own domain.
 *
 * SRQ numbers are device-wide and unique: the low SV_SRQN_BITS index a
 * table (slot 0 unused, so 0 never names an SRQ), the upper bits change with
 * each creation, so a number that named a destroyed SRQ names nothing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device/exec/transport.h"
#include "device/sv_dev.h"

#define SV_SRQN_BITS 13
#define SRQN_MASK ((1u << SV_SRQN_BITS) - 1)
_Static_assert(SV_MAX_SRQ <= (1u << SV_SRQN_BITS) - 1, "srqn table");

static struct sv_xrc_dom *doms;
static struct sv_srq *srqn_tab[1u << SV_SRQN_BITS];
static uint32_t srqn_gen, srqn_cursor = 1;

/* ---- SRQ numbers ---- */

int sv_srqn_alloc(struct sv_srq *srq)
{
	for (uint32_t i = 0; i <= SRQN_MASK; i++) {
		uint32_t slot = (srqn_cursor + i) & SRQN_MASK;

		if (!slot || srqn_tab[slot])
			continue;
		srqn_gen++;
		srq->srqn = ((srqn_gen << SV_SRQN_BITS) | slot) & SV_SRQN_MASK;
		srqn_tab[slot] = srq;
		srqn_cursor = slot + 1;
		return 0;
	}
	return -ENOMEM;
}

void sv_srqn_free(struct sv_srq *srq)
{
	uint32_t slot = srq->srqn & SRQN_MASK;

	if (srqn_tab[slot] == srq)
		srqn_tab[slot] = NULL;
	if (srq->type != IBV_SRQT_XRC)
		return;
	/* target QPs that last received into it forget it */
	for (uint32_t n = 0; n < (1u << SV_MAX_QP_BITS); n++) {
		struct sv_qp *t = sv_dev.qpn_tab[n];

		if (!t || t->type != IBV_QPT_XRC_RECV)
			continue;
		(void)sv_transport_of(t)->srq_gone(t, srq);
		if (t->srq == srq) {
			t->srq = NULL;
			t->pd = NULL;
			/* an unlocked copy into the SRQ (msg_copy, loop/resp.c)
			 * sees its responder changed and drops the message
			 * before the SRQ is freed (the caller quiesces) */
			t->state_gen++;
		}
	}
}

struct sv_srq *sv_srq_lookup(uint32_t srqn)
{
	struct sv_srq *srq;

	if (srqn > SV_SRQN_MASK)
		return NULL;
	srq = srqn_tab[srqn & SRQN_MASK];
	return srq && srq->srqn == srqn ? srq : NULL;
}

bool sv_xrc_bind(struct sv_qp *t, uint32_t srqn)
{
	struct sv_srq *srq = sv_srq_lookup(srqn & SV_SRQN_MASK);

	if (!srq || srq->type != IBV_SRQT_XRC || !t->xrcd ||
	    srq->xrcd->dom != t->xrcd->dom)
		return false;
	t->srq = srq;
	t->pd = srq->pd;
	return true;
}

struct sv_qp *sv_qp_resolve(struct sv_qp *qp)
{
	return qp->opened ? qp->target : qp;
}

void sv_qp_open_close(struct sv_qp *op)
{
	struct sv_qp **pp;

	for (pp = &op->target->opens; *pp; pp = &(*pp)->open_next)
		if (*pp == op) {
			*pp = op->open_next;
			break;
		}
	op->xrcd->refs--;
	free(op);
}

bool sv_qp_pass_on(struct sv_qp *t)
{
	struct sv_qp *op = t->opens;

	if (!op)
		return false;
	/* op's handle names t from now on; t takes op's place */
	sv_objtab_replace(sv_client_tab(op->owner, op->handle), op->handle, SV_OBJ_QP, t);
	t->opens = op->open_next;
	for (struct sv_qp *o = t->opens; o; o = o->open_next)
		o->target = t;
	t->xrcd->refs--;           /* the old handle's */
	t->xrcd = op->xrcd;        /* op's reference, kept */
	t->owner = op->owner;
	t->cookie = op->cookie;
	t->handle = op->handle;
	free(op);
	return true;
}

/* ---- XRC domains ---- */

int sv_cmd_open_xrcd(struct sv_req *r)
{
	const struct sv_cmd_open_xrcd *a = &r->cmd->u.open_xrcd;
	struct sv_xrc_dom *d = NULL;
	struct sv_xrcd *x;
	bool created = false;
	struct stat st;
	int ret, fl;

	if (a->rsvd ||
	    (a->flags & ~(SV_XRCD_SHARED | SV_XRCD_CREATE | SV_XRCD_EXCL))) {
		r->why = "reserved fields or unknown flags set";
		return -EINVAL;
	}
	if (!(a->flags & SV_XRCD_SHARED) != (r->fd_in < 0)) {
		r->why = "a shared xrcd comes with its file, a private one with none";
		return -EINVAL;
	}
	if (r->fd_in >= 0) {
		/* the file the client has open: what names the domain */
		fl = fcntl(r->fd_in, F_GETFL);
		if (fl < 0 || (fl & O_PATH) || fstat(r->fd_in, &st)) {
			r->why = "the xrcd's file is not an open file";
			return -EBADF;
		}
	}
	if (sv_dev.total[SV_OBJ_XRCD] >= SV_MAX_PD) {
		r->why = "too many xrcds";
		return -ENOMEM;
	}
	if (a->flags & SV_XRCD_SHARED) {
		for (d = doms; d; d = d->next)
			if (d->shared && d->dev == (uint64_t)st.st_dev &&
			    d->ino == (uint64_t)st.st_ino)
				break;
		if (d && (a->flags & SV_XRCD_EXCL)) {
			r->why = "the file has an XRC domain (O_EXCL)";
			return -EEXIST;
		}
		if (!d && !(a->flags & SV_XRCD_CREATE)) {
			r->why = "no XRC domain for that file (and no O_CREAT)";
			return -ENOENT;
		}
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d) {
			free(x);
			return -ENOMEM;
		}
		d->shared = (a->flags & SV_XRCD_SHARED) != 0;
		d->pin_fd = -1;
		if (d->shared) {
			d->dev = (uint64_t)st.st_dev;
			d->ino = (uint64_t)st.st_ino;
			/* the file stays open while its domain lives, so that
			 * its inode number is not given to another file that
			 * would then name this domain */
			d->pin_fd = fcntl(r->fd_in, F_DUPFD_CLOEXEC, 3);
			if (d->pin_fd < 0) {
				ret = -errno;
				free(d);
				free(x);
				return ret;
			}
		}
		d->next = doms;
		doms = d;
		created = true;
	}
	ret = sv_client_add_obj(r, SV_OBJ_XRCD, x, &x->handle);
	if (ret) {
		if (created) {
			doms = d->next;
			if (d->pin_fd >= 0)
				close(d->pin_fd);
			free(d);
		}
		free(x);
		return ret;
	}
	x->owner = r->client;
	x->dom = d;
	d->opens++;
	r->rsp->u.obj.handle = x->handle;
	return 0;
}

void sv_xrcd_destroy(struct sv_xrcd *x)
{
	struct sv_xrc_dom *d = x->dom, **pp;

	if (!--d->opens) {
		for (pp = &doms; *pp; pp = &(*pp)->next)
			if (*pp == d) {
				*pp = d->next;
				break;
			}
		if (d->pin_fd >= 0)
			close(d->pin_fd);
		free(d);
	}
	free(x);
}

int sv_cmd_close_xrcd(struct sv_req *r)
{
	uint64_t h = r->cmd->u.handle.handle;
	struct sv_xrcd *x = sv_req_obj(r, h, SV_OBJ_XRCD);

	if (!x)
		return -EINVAL;
	if (x->refs) {
		r->why = "xrcd still has SRQs or QPs";
		return -EBUSY;
	}
	sv_client_del_obj(r->client, SV_OBJ_XRCD, h);
	sv_xrcd_destroy(x);
	return 0;
}

/* ---- opened target QPs ---- */

int sv_cmd_open_qp(struct sv_req *r)
{
	const struct sv_cmd_open_qp *a = &r->cmd->u.open_qp;
	struct sv_xrcd *x = sv_req_obj(r, a->xrcd, SV_OBJ_XRCD);
	struct sv_qp *t, *qp;
	int ret;

	if (!x)
		return -EINVAL;
	if (a->qp_type != IBV_QPT_XRC_RECV) {
		r->why = "only XRC_RECV QPs can be opened";
		return -EINVAL;
	}
	t = sv_qp_lookup(a->qpn);
	if (!t || t->dead || t->opened || t->type != IBV_QPT_XRC_RECV ||
	    !t->xrcd || t->xrcd->dom != x->dom) {
		r->why = "no XRC_RECV QP of that number in this XRC domain";
		return -ENOENT;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	ret = sv_client_add_obj(r, SV_OBJ_QP, qp, &qp->handle);
	if (ret) {
		free(qp);
		return ret;
	}
	qp->owner = r->client;
	qp->cookie = a->cookie;
	qp->qpn = t->qpn;
	qp->type = IBV_QPT_XRC_RECV;
	qp->opened = true;
	qp->loc.memfd = -1;
	qp->xrcd = x;
	x->refs++;
	qp->target = t;
	qp->open_next = t->opens;
	t->opens = qp;
	r->rsp->u.qp = (struct sv_rsp_qp){
		.handle = qp->handle,
		.qpn = qp->qpn,
	};
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * UD multicast: the groups of the device and the QPs attached to them.
 *
 * A group is a multicast GID with at least one attached UD QP: a fixed
 * table of SV_MAX_MCAST_GRP slots, each with room for
 * SV_MAX_MCAST_QP_ATTACH QPs, and at most SV_MAX_MCAST_TOTAL attachments
 * on the device (what ibv_query_device reports). Everything runs under
 * sv_dev.lock; nothing here allocates. The first QP attached to a group
 * makes the RoCEv2 port receive the group's datagrams (roce/mcast.c), the
 * last one detached stops that.
 *
 * Sending (loop/resp.c, sv_loop_mcast): a UD send to a multicast GID
 * reaches every QP attached to the group on this daemon, and, with a wire,
 * one datagram goes to the IP group.
 */
#include <errno.h>
#include <string.h>

#include "device/sv_dev.h"
#include "device/roce/roce.h"

static struct sv_mcast_grp grp[SV_MAX_MCAST_GRP];
static uint32_t ngroups;           /* slots in use */
static uint32_t nattach;           /* attachments in all */

bool sv_gid_is_mcast(const uint8_t gid[16])
{
	static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					0xff, 0xff };

	if (gid[0] == 0xff)
		return true;               /* IPv6 ff00::/8 */
	return !memcmp(gid, v4, sizeof(v4)) && (gid[12] & 0xf0) == 0xe0;
}

static struct sv_mcast_grp *find(const uint8_t gid[16])
{
	if (!ngroups)
		return NULL;
	for (unsigned int i = 0; i < SV_MAX_MCAST_GRP; i++)
		if (grp[i].nqp && !memcmp(grp[i].gid, gid, 16))
			return &grp[i];
	return NULL;
}

const struct sv_mcast_grp *sv_mcast_find(const uint8_t gid[16])
{
	return find(gid);
}

/* The QP and GID a command names, checked: 0 or -EINVAL with r->why. */
static int mcast_args(struct sv_req *r, struct sv_qp **qp)
{
	const struct sv_cmd_mcast *a = &r->cmd->u.mcast;

	if (a->rsvd || a->rsvd2) {
		r->why = "reserved fields set";
		return -EINVAL;
	}
	*qp = sv_req_obj(r, a->qp, SV_OBJ_QP);
	if (!*qp)
		return -EINVAL;
	if ((*qp)->type != IBV_QPT_UD) {
		r->why = "multicast needs a UD QP";
		return -EINVAL;
	}
	if (!sv_gid_is_mcast(a->gid)) {
		r->why = "not a multicast GID";
		return -EINVAL;
	}
	return 0;
}

static bool has_qp(const struct sv_mcast_grp *g, const struct sv_qp *qp,
		   uint32_t *at)
{
	for (uint32_t i = 0; i < g->nqp; i++) {
		if (g->qp[i] == qp) {
			*at = i;
			return true;
		}
	}
	return false;
}

/* The command's QP and group (NULL: none yet), checked: 0 or -EINVAL;
 * *attached: the QP is in the group (at index *at). */
static int mcast_cmd(struct sv_req *r, struct sv_qp **qp,
		     struct sv_mcast_grp **g, uint32_t *at, bool *attached)
{
	int ret = mcast_args(r, qp);

	if (ret)
		return ret;
	*g = find(r->cmd->u.mcast.gid);
	*attached = *g && has_qp(*g, *qp, at);
	return 0;
}

int sv_cmd_attach_mcast(struct sv_req *r)
{
	const uint8_t *gid = r->cmd->u.mcast.gid;
	struct sv_mcast_grp *g;
	struct sv_qp *qp;
	uint32_t at;
	bool attached;
	int ret;

	ret = mcast_cmd(r, &qp, &g, &at, &attached);
	if (ret)
		return ret;
	if (attached)
		return 0;                   /* attached already: stays once */
	if (nattach >= SV_MAX_MCAST_TOTAL) {
		r->why = "max_total_mcast_qp_attach reached";
		return -ENOMEM;
	}
	if (g && g->nqp >= SV_MAX_MCAST_QP_ATTACH) {
		r->why = "max_mcast_qp_attach reached";
		return -ENOMEM;
	}
	if (!g) {
		unsigned int i;

		for (i = 0; i < SV_MAX_MCAST_GRP && grp[i].nqp; i++)
			;
		if (i == SV_MAX_MCAST_GRP) {
			r->why = "max_mcast_grp reached";
			return -ENOMEM;
		}
		g = &grp[i];
		/* without the wire, the group still works on this host */
		ret = sv_roce_mcast_join(i, gid);
		if (ret)
			sv_log(SV_LOG_WARN, "mcast: group slot %u: no datagrams "
			       "from the wire: %s", i, strerror(-ret));
		memcpy(g->gid, gid, 16);
		ngroups++;
	}
	g->qp[g->nqp++] = qp;
	qp->mcast_n++;
	nattach++;
	return 0;
}

/* Take qp out of g (at index at); the group goes with its last QP. */
static void detach(struct sv_mcast_grp *g, struct sv_qp *qp, uint32_t at)
{
	g->qp[at] = g->qp[--g->nqp];
	g->qp[g->nqp] = NULL;
	qp->mcast_n--;
	nattach--;
	if (!g->nqp) {
		sv_roce_mcast_leave((unsigned int)(g - grp));
		memset(g->gid, 0, sizeof(g->gid));
		ngroups--;
	}
}

int sv_cmd_detach_mcast(struct sv_req *r)
{
	struct sv_mcast_grp *g;
	struct sv_qp *qp;
	uint32_t at;
	bool attached;
	int ret;

	ret = mcast_cmd(r, &qp, &g, &at, &attached);
	if (ret)
		return ret;
	if (!attached) {
		r->why = "the QP is not attached to that group";
		return -EINVAL;
	}
	detach(g, qp, at);
	return 0;
}

void sv_mcast_qp_destroy(struct sv_qp *qp)
{
	uint32_t at;

	for (unsigned int i = 0; qp->mcast_n && i < SV_MAX_MCAST_GRP; i++)
		if (grp[i].nqp && has_qp(&grp[i], qp, &at))
			detach(&grp[i], qp, at);
}

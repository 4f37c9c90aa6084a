// SPDX-License-Identifier: MIT
/*
 * The RDMA_NL_NLDEV client (device/nl/nl.h): the commands iproute2's `rdma`
 * sends, answered with the attributes the kernel's nldev.c puts, in its
 * order, for sv0 as a RoCE device of one port:
 *  - GET (dev): index, name, ports, capabilities, firmware, GUIDs, node
 *    type, protocol;
 *  - PORT_GET (link): the port's capabilities, state, physical state and
 *    the netdev behind its GIDs;
 *  - SYS_GET (system): the network namespace mode (shared: sv0 is seen in
 *    every namespace of its user) and copy-on-fork;
 *  - RES_GET (resource): the count of each kind of object;
 *  - RES_*_GET (the objects one by one: res.c) and STAT_GET,
 *    STAT_GET_STATUS (the port's counters: stat.c), registered here.
 * Each command checks its attributes as the kernel does: a missing or
 * malformed index is EINVAL, a device or port that is not there EINVAL.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <net/if.h>
#include <string.h>

#include "device/cm/cm.h"
#include "device/nl/nl.h"
#include "device/sv_dev.h"

/* the kernel's enum rdma_node_type */
#define SV_NL_NODE_CA 1

/* sv0 is the only device: index 0 (the library's ibv_get_device_index) */
int sv_nldev_dev_of(struct sv_nl_ctx *ctx)
{
	uint32_t idx;
	int ret = sv_nl_attr_u32(ctx, RDMA_NLDEV_ATTR_DEV_INDEX, &idx);

	if (ret) {
		ctx->why = ret == -ENOENT ? "Device index is missing" :
					    "Device index is malformed";
		return -EINVAL;
	}
	if (idx != 0) {
		ctx->why = "No device of that index";
		return -EINVAL;
	}
	return 0;
}

void sv_nldev_handle(struct sv_nlb *b)
{
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_DEV_INDEX, 0);
	sv_nlb_str(b, RDMA_NLDEV_ATTR_DEV_NAME, sv_dev.name);
}

/* The interface behind the port's GIDs (the first that names one). */
static bool netdev(uint32_t *ifindex, char *name)
{
	for (unsigned int i = 0; i < SV_GID_TBL_LEN; i++) {
		const struct sv_rsp_gid *g = &sv_dev.gid[i];

		if (g->valid && g->ndev_ifindex &&
		    if_indextoname(g->ndev_ifindex, name)) {
			*ifindex = g->ndev_ifindex;
			return true;
		}
	}
	return false;
}

/* ---- GET: the device ---- */

static void fill_dev(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint16_t flags)
{
	const struct sv_dev_attr *a = &sv_dev.attr;
	long at = sv_nlb_msg(b, ctx, RDMA_NLDEV_CMD_GET, flags);

	if (at < 0)
		return;
	sv_nldev_handle(b);
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_PORT_INDEX, a->phys_port_cnt);
	sv_nlb_u64(b, RDMA_NLDEV_ATTR_CAP_FLAGS, a->device_cap_flags);
	if (a->fw_ver[0]) {
		char fw[sizeof(a->fw_ver) + 1];

		memcpy(fw, a->fw_ver, sizeof(a->fw_ver));
		fw[sizeof(a->fw_ver)] = 0;
		sv_nlb_str(b, RDMA_NLDEV_ATTR_FW_VERSION, fw);
	}
	sv_nlb_u64(b, RDMA_NLDEV_ATTR_NODE_GUID, be64toh(a->node_guid));
	sv_nlb_u64(b, RDMA_NLDEV_ATTR_SYS_IMAGE_GUID, be64toh(a->sys_image_guid));
	sv_nlb_u8(b, RDMA_NLDEV_ATTR_DEV_NODE_TYPE, SV_NL_NODE_CA);
	sv_nlb_str(b, RDMA_NLDEV_ATTR_DEV_PROTOCOL, "roce");
	sv_nlb_u8(b, RDMA_NLDEV_ATTR_DEV_DIM, 0);
	sv_nlb_msg_end(b, at);
}

static int get_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b)
{
	int ret = sv_nldev_dev_of(ctx);

	if (!ret)
		fill_dev(ctx, b, 0);
	return ret;
}

/* one device: cursor[0] counts the messages out */
static int get_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor)
{
	size_t keep = b->len;

	if (cursor[0])
		return 0;
	fill_dev(ctx, b, NLM_F_MULTI);
	if (b->full) {
		b->len = keep;
		return 1;
	}
	cursor[0] = 1;
	return 0;
}

/* ---- PORT_GET: the link ---- */

static void fill_port(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint32_t port,
		      uint16_t flags)
{
	const struct sv_port_attr *p = &sv_dev.port;
	long at = sv_nlb_msg(b, ctx, RDMA_NLDEV_CMD_PORT_GET, flags);
	char ifname[IF_NAMESIZE];
	uint32_t ifindex;

	if (at < 0)
		return;
	sv_nldev_handle(b);
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_PORT_INDEX, port);
	sv_nlb_u64(b, RDMA_NLDEV_ATTR_CAP_FLAGS,
		   p->port_cap_flags | (uint64_t)p->port_cap_flags2 << 32);
	/* LIDs and the subnet prefix are InfiniBand's: not on RoCE */
	sv_nlb_u8(b, RDMA_NLDEV_ATTR_PORT_STATE, (uint8_t)p->state);
	sv_nlb_u8(b, RDMA_NLDEV_ATTR_PORT_PHYS_STATE, p->phys_state);
	if (netdev(&ifindex, ifname)) {
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_NDEV_INDEX, ifindex);
		sv_nlb_str(b, RDMA_NLDEV_ATTR_NDEV_NAME, ifname);
	}
	sv_nlb_msg_end(b, at);
}

int sv_nldev_port_of(struct sv_nl_ctx *ctx, uint32_t *port)
{
	int ret = sv_nl_attr_u32(ctx, RDMA_NLDEV_ATTR_PORT_INDEX, port);

	if (ret) {
		ctx->why = ret == -ENOENT ? "Port index is missing" :
					    "Port index is malformed";
		return -EINVAL;
	}
	if (*port < 1 || *port > sv_dev.attr.phys_port_cnt) {
		ctx->why = "No port of that index";
		return -EINVAL;
	}
	return 0;
}

static int port_get_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b)
{
	uint32_t port;
	int ret = sv_nldev_dev_of(ctx);

	if (ret)
		return ret;
	ret = sv_nldev_port_of(ctx, &port);
	if (!ret)
		fill_port(ctx, b, port, 0);
	return ret;
}

/* the ports of the device named: cursor[0], the next port - 1 */
static int port_get_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor)
{
	int ret = sv_nldev_dev_of(ctx);

	if (ret)
		return ret;
	while (cursor[0] < sv_dev.attr.phys_port_cnt) {
		size_t keep = b->len;

		fill_port(ctx, b, (uint32_t)cursor[0] + 1, NLM_F_MULTI);
		if (b->full) {
			b->len = keep;
			return 1;
		}
		cursor[0]++;
	}
	return 0;
}

/* ---- SYS_GET: the system ---- */

static int sys_get_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b)
{
	long at = sv_nlb_msg(b, ctx, RDMA_NLDEV_CMD_SYS_GET, 0);

	if (at < 0)
		return -EMSGSIZE;
	/* shared: the device is seen from every namespace its user's
	 * programs run in (the socket folder is the user's, not the
	 * namespace's) */
	sv_nlb_u8(b, RDMA_NLDEV_SYS_ATTR_NETNS_MODE, 1);
	/* a fork's child sees its parent's registered memory as its own
	 * pages: the library registers copy-on-fork safe (ibv_fork_init
	 * is not needed) */
	sv_nlb_u8(b, RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK, 1);
	sv_nlb_msg_end(b, at);
	return 0;
}

/* ---- RES_GET: the resource summary ---- */

static uint64_t contexts(void)
{
	uint64_t n = 0;

	for (struct sv_client *c = sv_dev.clients.next; c != &sv_dev.clients;
	     c = c->next)
		n += !c->dead && c->async_fd >= 0;
	return n;
}

static void fill_res(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint16_t flags)
{
	const struct {
		const char *name;
		uint64_t curr;
	} kinds[] = {
		{ "pd", sv_dev.total[SV_OBJ_PD] },
		{ "cq", sv_dev.total[SV_OBJ_CQ] },
		{ "qp", sv_dev.total[SV_OBJ_QP] },
		{ "cm_id", sv_cm_stats.live },
		{ "mr", sv_dev.total[SV_OBJ_MR] },
		{ "ctx", contexts() },
		{ "srq", sv_dev.total[SV_OBJ_SRQ] },
	};
	long at = sv_nlb_msg(b, ctx, RDMA_NLDEV_CMD_RES_GET, flags), table;

	if (at < 0)
		return;
	sv_nldev_handle(b);
	table = sv_nlb_nest(b, RDMA_NLDEV_ATTR_RES_SUMMARY);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		long e = sv_nlb_nest(b, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY);

		sv_nlb_str(b, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME, kinds[i].name);
		sv_nlb_u64(b, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR, kinds[i].curr);
		sv_nlb_nest_end(b, e);
	}
	sv_nlb_nest_end(b, table);
	sv_nlb_msg_end(b, at);
}

static int res_get_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b)
{
	int ret = sv_nldev_dev_of(ctx);

	if (!ret)
		fill_res(ctx, b, 0);
	return ret;
}

static int res_get_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor)
{
	size_t keep = b->len;

	if (cursor[0])
		return 0;
	fill_res(ctx, b, NLM_F_MULTI);
	if (b->full) {
		b->len = keep;
		return 1;
	}
	cursor[0] = 1;
	return 0;
}

static const struct sv_nl_op ops[] = {
	[RDMA_NLDEV_CMD_GET] = { get_doit, get_dump },
	[RDMA_NLDEV_CMD_PORT_GET] = { port_get_doit, port_get_dump },
	[RDMA_NLDEV_CMD_SYS_GET] = { sys_get_doit, NULL },
	[RDMA_NLDEV_CMD_RES_GET] = { res_get_doit, res_get_dump },
	[RDMA_NLDEV_CMD_RES_QP_GET] = { sv_nl_res_qp_doit, sv_nl_res_qp_dump },
	[RDMA_NLDEV_CMD_RES_CM_ID_GET] = { sv_nl_res_cm_id_doit,
					   sv_nl_res_cm_id_dump },
	[RDMA_NLDEV_CMD_RES_CQ_GET] = { sv_nl_res_cq_doit, sv_nl_res_cq_dump },
	[RDMA_NLDEV_CMD_RES_MR_GET] = { sv_nl_res_mr_doit, sv_nl_res_mr_dump },
	[RDMA_NLDEV_CMD_RES_PD_GET] = { sv_nl_res_pd_doit, sv_nl_res_pd_dump },
	[RDMA_NLDEV_CMD_RES_CTX_GET] = { sv_nl_res_ctx_doit, sv_nl_res_ctx_dump },
	[RDMA_NLDEV_CMD_RES_SRQ_GET] = { sv_nl_res_srq_doit, sv_nl_res_srq_dump },
	[RDMA_NLDEV_CMD_STAT_GET] = { sv_nl_stat_get_doit, sv_nl_stat_get_dump },
	[RDMA_NLDEV_CMD_STAT_GET_STATUS] = { sv_nl_stat_status_doit, NULL },
};

const struct sv_nl_op *sv_nldev_op(unsigned int cmd)
{
	if (cmd >= sizeof(ops) / sizeof(ops[0]) || (!ops[cmd].doit && !ops[cmd].dump))
		return NULL;
	return &ops[cmd];
}

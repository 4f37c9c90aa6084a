// SPDX-License-Identifier: MIT
/*
 * Who the device is: name, GUID, attributes, port and GID table.
 *
 * The GUID is stable across restarts: derived from /etc/machine-id (or the
 * host name) and the device name. The GID table holds the RoCEv2 GIDs of
 * the addresses the daemon serves (IPv4-mapped, or IPv6): one (--ip), or
 * every address of an interface (--netdev); the port's active MTU follows
 * the interface's MTU, as on a RoCE NIC.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "device/sv_dev.h"

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n--) {
		h ^= *b++;
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t stable_guid(const char *devname)
{
	char id[256] = "";
	uint64_t h = 0xcbf29ce484222325ull;
	FILE *f = fopen("/etc/machine-id", "r");

	if (!f || !fgets(id, sizeof(id), f))
		gethostname(id, sizeof(id) - 1);
	if (f)
		fclose(f);
	h = fnv1a(h, id, strlen(id));
	h = fnv1a(h, devname, strlen(devname));
	/* locally administered EUI-64: clear the group bit, set the local bit */
	h = (h & ~(0x01ull << 56)) | (0x02ull << 56);
	return htobe64(h);
}

static enum ibv_mtu mtu_for_link(unsigned int link_mtu)
{
	/* payload room after IP(20) + UDP(8) + BTH(12) + ext headers + ICRC */
	static const struct { unsigned int need; enum ibv_mtu mtu; } t[] = {
		{ 4096 + 96, IBV_MTU_4096 }, { 2048 + 96, IBV_MTU_2048 },
		{ 1024 + 96, IBV_MTU_1024 }, { 512 + 96, IBV_MTU_512 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (link_mtu >= t[i].need)
			return t[i].mtu;
	return IBV_MTU_256;
}

static unsigned int ifname_mtu(const char *ifname)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	unsigned int mtu = 1500;

	if (s < 0)
		return mtu;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, ifname, strnlen(ifname, sizeof(ifr.ifr_name) - 1));
	if (ioctl(s, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0)
		mtu = (unsigned int)ifr.ifr_mtu;
	close(s);
	return mtu;
}

/* One address the device serves: its GID form and interface. */
struct addr {
	uint8_t gid[16];
	char ifname[IF_NAMESIZE + 1];
	bool v6, linklocal;
};

static void gid_of(const struct sockaddr *sa, struct addr *o)
{
	memset(o->gid, 0, 16);
	if (sa->sa_family == AF_INET) {
		o->gid[10] = o->gid[11] = 0xff;
		memcpy(o->gid + 12,
		       &((const struct sockaddr_in *)sa)->sin_addr.s_addr, 4);
		o->v6 = o->linklocal = false;
	} else {
		memcpy(o->gid, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		o->v6 = true;
		o->linklocal = o->gid[0] == 0xfe && (o->gid[1] & 0xc0) == 0x80;
	}
}

/*
 * The addresses to serve, into out[0..max): the address want (IPv4 or
 * IPv6, on whichever interface has it); every address of interface dev
 * (IPv4 first, then IPv6, link-local last: GID index 0 is the first IPv4
 * address, as the pingpongs' -g 0 expects); or, with neither, the first UP
 * non-loopback IPv4 address, else 127.0.0.1. The count, or -errno.
 */
static int pick_addresses(const char *want, const char *dev, struct addr *out,
			  unsigned int max)
{
	struct ifaddrs *ifa, *i;
	struct addr w;
	unsigned int n = 0;
	union {
		struct sockaddr sa;
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} u;

	memset(&u, 0, sizeof(u));
	if (want) {
		if (inet_pton(AF_INET, want, &u.v4.sin_addr) == 1)
			u.sa.sa_family = AF_INET;
		else if (inet_pton(AF_INET6, want, &u.v6.sin6_addr) == 1)
			u.sa.sa_family = AF_INET6;
		else
			return -EINVAL;
		gid_of(&u.sa, &w);
	}
	if (getifaddrs(&ifa))
		return -errno;
	/* --netdev: three rounds (IPv4, IPv6, link-local IPv6); else two
	 * (not loopback, then loopback) for the first IPv4 one, or one
	 * for want */
	for (int pass = 0; pass < 3 && n < max; pass++) {
		for (i = ifa; i && n < max; i = i->ifa_next) {
			struct addr a;

			if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) ||
			    (i->ifa_addr->sa_family != AF_INET &&
			     i->ifa_addr->sa_family != AF_INET6))
				continue;
			gid_of(i->ifa_addr, &a);
			snprintf(a.ifname, sizeof(a.ifname), "%s", i->ifa_name);
			if (dev) {
				if (strcmp(i->ifa_name, dev) ||
				    pass != (a.v6 ? 1 + a.linklocal : 0))
					continue;
			} else if (want) {
				if (memcmp(a.gid, w.gid, 16) || pass)
					continue;
			} else if (a.v6 || pass == 2 ||
				   (pass == 0) == !!(i->ifa_flags & IFF_LOOPBACK)) {
				continue;
			}
			out[n++] = a;
			if (!dev)
				break;
		}
		if (!dev && n)
			break;
	}
	freeifaddrs(ifa);
	if (n)
		return (int)n;
	if (want || dev)
		return -EADDRNOTAVAIL;
	u.v4.sin_family = AF_INET;
	u.v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	gid_of(&u.sa, &out[0]);
	snprintf(out[0].ifname, sizeof(out[0].ifname), "lo");
	return 1;
}

/* The device's attributes as ibv_query_device_ex reads them; its GUID
 * from its name. */
static void identity_attr(struct sv_dev_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%u", SV_PROTO_VERSION);
	a->node_guid = stable_guid(sv_dev.name);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = SV_MAX_MR_SIZE;
	a->page_size_cap = 0xfffff000ull;  /* 4 KiB .. 2 GiB pages */
	a->vendor_id = SV_VENDOR_ID;        /* no one's OUI or PCI ID */
	a->vendor_part_id = SV_VENDOR_PART_ID;
	a->hw_ver = SV_HW_VER;
	/* what one process may hold (sv_proc_max): the device's limits are
	 * SV_PROC_SHARE times as large, shared by every process */
	a->max_qp = sv_proc_max(SV_OBJ_QP);
	a->max_qp_wr = SV_MAX_QP_WR;
	/* only what it has, each used by a test: no PORT_ACTIVE_EVENT (the
	 * port is up from the start and never changes, so no such event
	 * comes), no N_NOTIFY_CQ (no verb asks for N completions) */
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN |
			      IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_MEM_MGT_EXTENSIONS |
			      IBV_DEVICE_MEM_WINDOW |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2A |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2B |
			      IBV_DEVICE_XRC |
			      IBV_DEVICE_SRQ_RESIZE |
			      /* IBTA 1.5, RC (issue 23): ATOMIC WRITE, and
			       * FLUSH of global visibility at the responder */
			      SV_DEVICE_ATOMIC_WRITE |
			      SV_DEVICE_FLUSH_GLOBAL;
	a->max_sge = SV_MAX_SGE;
	a->max_sge_rd = SV_MAX_SGE;
	a->max_cq = sv_proc_max(SV_OBJ_CQ);
	a->max_cqe = SV_MAX_CQE;
	a->max_mr = sv_proc_max(SV_OBJ_MR);
	a->max_pd = sv_proc_max(SV_OBJ_PD);
	a->max_qp_rd_atom = SV_MAX_RD_ATOM;
	a->max_res_rd_atom = SV_MAX_RD_ATOM * a->max_qp;
	a->max_qp_init_rd_atom = SV_MAX_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_mw = sv_proc_max(SV_OBJ_MW);
	a->max_mcast_grp = SV_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = SV_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = SV_MAX_MCAST_TOTAL;
	a->max_ah = sv_proc_max(SV_OBJ_AH);
	a->max_srq = sv_proc_max(SV_OBJ_SRQ);
	a->max_srq_wr = SV_MAX_SRQ_WR;
	a->max_srq_sge = SV_MAX_SGE;
	a->max_inline_data = SV_MAX_INLINE;
	a->max_resource_domains = SV_MAX_RES_DOMAINS;
	a->max_fast_reg_page_list_len = SV_MAX_PAGE_LIST;
	a->max_dm_size = SV_DM_MAX_BYTES;
	/* on-demand paging: nothing is pinned, every access is checked when
	 * it happens, for every transport and operation */
	a->odp_general = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	a->odp_rc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
		    IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
		    IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	a->odp_uc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
		    IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_SRQ_RECV;
	a->odp_ud = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
		    IBV_ODP_SUPPORT_SRQ_RECV;
	/* XRC: what a test uses (rdma-core's test_odp_xrc_traffic); its
	 * WRITE, READ and atomics would work as RC's do, untested */
	a->odp_xrc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_SRQ_RECV;
	a->exp_cap_flags = SV_EXP_CAP_FAST_REG_USER | SV_EXP_CAP_BLOCK_LIST |
			   SV_EXP_CAP_ZERO_BASED_MR | SV_EXP_CAP_ZERO_BASED_MW |
			   SV_EXP_CAP_READ_WITH_INV | SV_EXP_CAP_SEND_WITH_INV |
			   SV_EXP_CAP_MASKED_ATOMICS;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
	a->max_comp_vectors = 1;
	a->hca_core_clock = 1000000;       /* timestamps in ns: 1 GHz */
	a->completion_timestamp_mask = ~0ull;
}

/* The port as ibv_query_port reads it: up, RoCEv2, its active MTU from
 * ifname's MTU. */
static void identity_port(struct sv_port_attr *p, const char *ifname)
{
	memset(p, 0, sizeof(*p));
	p->state = IBV_PORT_ACTIVE;
	p->max_mtu = IBV_MTU_4096;
	p->active_mtu = mtu_for_link(ifname_mtu(ifname));
	p->gid_tbl_len = SV_GID_TBL_LEN;
	/* a connection manager: rdma_cm between ids of this device, and CM
	 * MADs on QP1 across hosts (docs/DESIGN.md "rdma_cm") */
	p->port_cap_flags = IBV_PORT_CM_SUP;
	p->max_msg_sz = 1u << 31;
	p->pkey_tbl_len = 1;
	/* 4X EDR, 100 Gb/s: what the direct path moves between processes of
	 * this host (12-16 GB/s for 1 MiB). UCX and Open MPI derive their
	 * protocols from the rate: at 4X QDR (40 Gb/s) UCX sent a 64 KiB
	 * message as eight 8 KiB eager SENDs, each a copy on both sides, at
	 * 0.16x what a rendezvous READ of it moves (docs/PERFORMANCE.md) */
	p->active_width = 2;        /* 4X */
	p->active_speed = 32;       /* 25 Gb/s per lane: EDR */
	p->phys_state = 5;          /* LinkUp */
	p->link_layer = IBV_LINK_LAYER_ETHERNET;
	p->max_vl_num = 1;
}

/* The GID table: one RoCEv2 GID of each of the n addresses, each logged
 * (the first with the port's MTU). */
static void identity_gids(const struct addr *addrs, int n,
			  const struct sv_port_attr *p)
{
	char abuf[INET6_ADDRSTRLEN];

	memset(sv_dev.gid, 0, sizeof(sv_dev.gid));
	for (int k = 0; k < n; k++) {
		struct sv_rsp_gid *g = &sv_dev.gid[k];

		memcpy(g->gid, addrs[k].gid, 16);
		g->gid_type = IBV_GID_TYPE_ROCE_V2;
		g->valid = 1;
		g->ndev_ifindex = if_nametoindex(addrs[k].ifname);
		if (addrs[k].v6)
			inet_ntop(AF_INET6, addrs[k].gid, abuf, sizeof(abuf));
		else
			inet_ntop(AF_INET, addrs[k].gid + 12, abuf, sizeof(abuf));
		if (k == 0)
			sv_log(SV_LOG_INFO, "device %s: %s on %s, active mtu %u, "
			       "gid[0] %s%s", sv_dev.name, abuf,
			       addrs[k].ifname, 128u << p->active_mtu,
			       addrs[k].v6 ? "" : "::ffff:", abuf);
		else
			sv_log(SV_LOG_INFO, "device %s: gid[%d] %s%s", sv_dev.name,
			       k, addrs[k].v6 ? "" : "::ffff:", abuf);
	}
}

int sv_identity_init(const char *ip, const char *netdev)
{
	struct sv_dev_attr *a = &sv_dev.attr;
	struct sv_port_attr *p = &sv_dev.port;
	struct addr addrs[SV_GID_TBL_LEN];
	int n;

	if (ip && netdev)
		return -EINVAL;
	n = pick_addresses(ip, netdev, addrs, SV_GID_TBL_LEN);
	if (n < 0)
		return n;

	snprintf(sv_dev.name, sizeof(sv_dev.name), "sv0");
	sv_dev.addrs_given = ip || netdev;
	identity_attr(a);
	identity_port(p, addrs[0].ifname);
	identity_gids(addrs, n, p);
	return 0;
}

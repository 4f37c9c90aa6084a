// SPDX-License-Identifier: MIT
/*
 * Who the device is: name, GUID, attributes, port and GID table.
 *
 * The GUID is stable across restarts: derived from /etc/machine-id (or the
 * host name) and the device name. GID index 0 is the RoCEv2 IPv4-mapped GID
 * of the address the daemon serves; the port's active MTU follows that
 * interface's MTU, as on a RoCE NIC.
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

/* Find the interface serving addr (or, with no addr, the first UP
 * non-loopback IPv4 interface, else loopback). */
static int pick_address(const char *want, struct in_addr *out, char *ifname,
			size_t ifname_len)
{
	struct ifaddrs *ifa, *i;
	struct in_addr w = { 0 };
	int found = 0;

	if (want && inet_pton(AF_INET, want, &w) != 1)
		return -EINVAL;
	if (getifaddrs(&ifa))
		return -errno;
	for (int pass = 0; pass < 2 && !found; pass++) {
		for (i = ifa; i; i = i->ifa_next) {
			struct in_addr a;

			if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
			    !(i->ifa_flags & IFF_UP))
				continue;
			a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
			if (want ? a.s_addr != w.s_addr :
			    (pass == 0) == !!(i->ifa_flags & IFF_LOOPBACK))
				continue;
			*out = a;
			snprintf(ifname, ifname_len, "%s", i->ifa_name);
			found = 1;
			break;
		}
	}
	freeifaddrs(ifa);
	if (found)
		return 0;
	if (want)
		return -EADDRNOTAVAIL;
	out->s_addr = htonl(INADDR_LOOPBACK);
	snprintf(ifname, ifname_len, "lo");
	return 0;
}

int sv_identity_init(const char *ip)
{
	struct sv_dev_attr *a = &sv_dev.attr;
	struct sv_port_attr *p = &sv_dev.port;
	struct sv_rsp_gid *g = &sv_dev.gid[0];
	struct in_addr addr;
	char ifname[IF_NAMESIZE + 1];
	char abuf[INET_ADDRSTRLEN];
	int ret;

	ret = pick_address(ip, &addr, ifname, sizeof(ifname));
	if (ret)
		return ret;

	snprintf(sv_dev.name, sizeof(sv_dev.name), "sv0");
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "softverbs %d", SV_PROTO_VERSION);
	a->node_guid = stable_guid(sv_dev.name);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = SV_MAX_MR_SIZE;
	a->page_size_cap = 0xfffff000ull;  /* 4 KiB .. 2 GiB pages */
	a->vendor_id = 0;                   /* no IEEE OUI of our own */
	a->vendor_part_id = 0;
	a->hw_ver = 1;
	a->max_qp = SV_MAX_QP;
	a->max_qp_wr = SV_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN |
			      IBV_DEVICE_PORT_ACTIVE_EVENT |
			      IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_N_NOTIFY_CQ |
			      IBV_DEVICE_MEM_MGT_EXTENSIONS |
			      IBV_DEVICE_MEM_WINDOW |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2A |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2B;
	a->max_sge = SV_MAX_SGE;
	a->max_sge_rd = SV_MAX_SGE;
	a->max_cq = SV_MAX_CQ;
	a->max_cqe = SV_MAX_CQE;
	a->max_mr = SV_MAX_MR;
	a->max_pd = SV_MAX_PD;
	a->max_qp_rd_atom = SV_MAX_RD_ATOM;
	a->max_res_rd_atom = SV_MAX_RD_ATOM * SV_MAX_QP;
	a->max_qp_init_rd_atom = SV_MAX_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_mw = SV_MAX_MW;
	a->max_mcast_grp = 0;
	a->max_ah = SV_MAX_AH;
	a->max_srq = SV_MAX_SRQ;
	a->max_srq_wr = SV_MAX_SRQ_WR;
	a->max_srq_sge = SV_MAX_SGE;
	a->max_inline_data = SV_MAX_INLINE;
	a->max_resource_domains = SV_MAX_RES_DOMAINS;
	a->max_fast_reg_page_list_len = SV_MAX_PAGE_LIST;
	a->exp_cap_flags = SV_EXP_CAP_FAST_REG_USER | SV_EXP_CAP_BLOCK_LIST |
			   SV_EXP_CAP_ZERO_BASED_MR | SV_EXP_CAP_ZERO_BASED_MW |
			   SV_EXP_CAP_READ_WITH_INV | SV_EXP_CAP_SEND_WITH_INV;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
	a->max_comp_vectors = 1;
	a->hca_core_clock = 1000000;       /* timestamps in ns: 1 GHz */
	a->completion_timestamp_mask = ~0ull;

	memset(p, 0, sizeof(*p));
	p->state = IBV_PORT_ACTIVE;
	p->max_mtu = IBV_MTU_4096;
	p->active_mtu = mtu_for_link(ifname_mtu(ifname));
	p->gid_tbl_len = SV_GID_TBL_LEN;
	p->port_cap_flags = IBV_PORT_CM_SUP;
	p->max_msg_sz = 1u << 31;
	p->pkey_tbl_len = 1;
	p->active_width = 2;        /* 4X */
	p->active_speed = 8;        /* 10 Gb/s per lane: QDR */
	p->phys_state = 5;          /* LinkUp */
	p->link_layer = IBV_LINK_LAYER_ETHERNET;
	p->max_vl_num = 1;

	memset(sv_dev.gid, 0, sizeof(sv_dev.gid));
	g->gid[10] = 0xff;
	g->gid[11] = 0xff;
	memcpy(&g->gid[12], &addr.s_addr, 4);
	g->gid_type = IBV_GID_TYPE_ROCE_V2;
	g->valid = 1;
	g->ndev_ifindex = if_nametoindex(ifname);

	inet_ntop(AF_INET, &addr, abuf, sizeof(abuf));
	sv_log(SV_LOG_INFO, "device %s: %s on %s, active mtu %u, gid[0] ::ffff:%s",
	       sv_dev.name, abuf, ifname, 128u << p->active_mtu, abuf);
	return 0;
}

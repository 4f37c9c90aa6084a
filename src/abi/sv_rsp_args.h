/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's response payloads (daemon to client) (src/abi/sv_cmd.h: the framing, the
 * op codes, and the unions that hold these). Included by sv_cmd.h only.
 */
#ifndef SV_ABI_RSP_ARGS_H
#define SV_ABI_RSP_ARGS_H

#ifndef SV_ABI_CMD_H
#error "include abi/sv_cmd.h"
#endif

/* ---- response payloads (daemon to client) ---- */

struct sv_rsp_hello {
	uint32_t abi;
	uint32_t daemon_pid;
	uint64_t client_id;    /* the daemon's number for this connection */
	char dev_name[SV_DEV_NAME_MAX];
	uint64_t node_guid;    /* big-endian, as ibv_get_device_guid returns */
	uint32_t dev_index;
	uint32_t uverbs;       /* N of /dev/infiniband/uverbsN (the device view) */
	uint32_t owner_uid;    /* the daemon's uid; with status -EACCES: the
				* device is that uid's, the caller is refused */
	uint32_t rsvd;
};

/* The device's attributes, in host byte order except the GUIDs. */
struct sv_dev_attr {
	char fw_ver[64];
	uint64_t node_guid;        /* big-endian */
	uint64_t sys_image_guid;   /* big-endian */
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint64_t device_cap_flags; /* ibv_device_attr_ex.device_cap_flags_ex */
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_sge_rd;
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint32_t max_pd;
	uint32_t max_qp_rd_atom;
	uint32_t max_res_rd_atom;
	uint32_t max_qp_init_rd_atom;
	uint32_t atomic_cap;       /* enum ibv_atomic_cap */
	uint32_t max_mw;
	uint32_t max_mcast_grp;
	uint32_t max_mcast_qp_attach;
	uint32_t max_total_mcast_qp_attach;
	uint32_t max_ah;
	uint32_t max_srq;
	uint32_t max_srq_wr;
	uint32_t max_srq_sge;
	uint32_t max_inline_data;
	uint16_t max_pkeys;
	uint8_t local_ca_ack_delay;
	uint8_t phys_port_cnt;
	uint32_t max_comp_vectors;
	uint64_t hca_core_clock;   /* kHz */
	uint64_t completion_timestamp_mask;
	uint32_t max_resource_domains; /* doorbell pages a domain can own */
	uint32_t max_fast_reg_page_list_len; /* entries of a page / block list */
	uint64_t exp_cap_flags;    /* SV_EXP_CAP_*: what device_cap_flags
				    * has no bit for */
	uint64_t max_dm_size;      /* device memory, bytes (ALLOC_DM) */
	/* on-demand paging: enum ibv_odp_general_caps, and per transport
	 * enum ibv_odp_transport_cap_bits */
	uint32_t odp_general;
	uint32_t odp_rc, odp_uc, odp_ud, odp_xrc;
};

/* sv_dev_attr.exp_cap_flags (the same bits as softverbs.h's
 * IBV_EXP_DEVICE_*) */
#define SV_EXP_CAP_FAST_REG_USER  (1ull << 0) /* fast register from user space */
#define SV_EXP_CAP_BLOCK_LIST     (1ull << 1) /* block-list MRs */
#define SV_EXP_CAP_ZERO_BASED_MR  (1ull << 2) /* zero-based MRs */
#define SV_EXP_CAP_ZERO_BASED_MW  (1ull << 3) /* zero-based windows */
#define SV_EXP_CAP_READ_WITH_INV  (1ull << 4) /* RDMA read with invalidate */
#define SV_EXP_CAP_SEND_WITH_INV  (1ull << 5) /* send with invalidate */
#define SV_EXP_CAP_MASKED_ATOMICS (1ull << 6) /* masked CAS and FAA */

struct sv_port_attr {
	uint32_t state;            /* enum ibv_port_state */
	uint32_t max_mtu;          /* enum ibv_mtu */
	uint32_t active_mtu;
	uint32_t gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
	uint16_t port_cap_flags2;
	uint16_t rsvd;
	uint32_t active_speed_ex;
	uint32_t rsvd2;
};

struct sv_rsp_gid {
	uint8_t gid[16];
	uint32_t gid_type;         /* enum ibv_gid_type (IBV_GID_TYPE_*) */
	uint32_t valid;            /* 0: an empty entry */
	uint32_t ndev_ifindex;
	uint32_t rsvd;
};

struct sv_rsp_obj {
	uint64_t handle;
};

struct sv_rsp_mr {
	uint64_t handle;
	uint32_t lkey;
	uint32_t rkey;
};

/* A CQ's ring memfd comes with this response: the ring is ring_bytes at
 * ring_offset (a multiple of 4096) of it. The memfd is one of the client's
 * ring pools, which holds other rings of the same client's too
 * (docs/DESIGN.md "Memory"). */
struct sv_rsp_cq {
	uint64_t handle;
	uint32_t cqe;              /* usable entries (>= asked) */
	uint32_t ring_entries;     /* slots in the ring, a power of two */
	uint64_t ring_bytes;       /* size of the ring to map */
	uint64_t ring_offset;      /* where it lies in the memfd */
};

/* OPEN_CONTEXT: the doorbell memfd (db_pages pages of SV_DB_PAGE_BYTES, one
 * struct sv_doorbell at the head of each) comes with the response. */
struct sv_rsp_open_context {
	uint32_t db_pages;
	uint32_t rsvd;
	uint64_t db_bytes;
};

/* OPEN_DIRECT (after OPEN_CONTEXT): the part asked for (src/abi/sv_direct.h:
 * the device's tables, or the guards of the caller's uid) comes with the
 * response as a memfd of `bytes`, or
 * the command fails with EOPNOTSUPP where the daemon offers no direct path
 * (softverbsd --no-direct). */
struct sv_rsp_open_direct {
	uint64_t bytes;
};

/* DIRECT_RECV: where the part lies in the memfd that comes with it (a
 * ring header at offset, bytes long with its slots), and, for the receive
 * ring, its geometry (the device's copies) and the peer's pid. */
struct sv_rsp_direct_recv {
	uint64_t offset;
	uint64_t bytes;
	uint32_t entries;
	uint32_t stride;
	uint32_t max_sge;
	int32_t pid;
	uint32_t srqn;             /* the peer's SRQ (its number); 0: none */
	uint32_t srq_tag;          /* part SV_DRECV_SRQ: the tag its word
				    * has while this ring is the SRQ's */
};

/* MR_FILE: the file offset of the MR's byte addr (the key entry's), and
 * the MR's length. */
struct sv_rsp_mr_file {
	uint64_t offset;
	uint64_t length;
};

/* A QP's ring memfd comes with this response: its rings are ring_bytes at
 * ring_offset (a multiple of 4096) of it, the send ring at sq_offset of
 * those, the receive ring at rq_offset (0 entries when the QP uses an
 * SRQ). */
struct sv_rsp_qp {
	uint64_t handle;
	uint32_t qpn;
	uint32_t db_index;         /* the doorbell page of the QP's engine */
	struct sv_wire_qp_cap cap; /* what the QP really holds (>= asked) */
	uint32_t sq_entries;
	uint32_t sq_stride;
	uint32_t rq_entries;
	uint32_t rq_stride;
	uint64_t sq_offset;
	uint64_t rq_offset;
	uint64_t ring_bytes;
	uint64_t ring_offset;      /* of the rings in the memfd */
};

struct sv_rsp_query_qp {
	struct sv_wire_qp_attr attr;
	struct sv_wire_qp_cap cap;
	uint32_t qp_type;
	uint32_t sq_sig_all;
};

/* An SRQ's ring memfd comes with this response: ring_bytes at ring_offset
 * (a multiple of 4096) of it. */
struct sv_rsp_srq {
	uint64_t handle;
	uint32_t srqn;
	uint32_t db_index;
	uint32_t max_wr;           /* usable entries (>= asked) */
	uint32_t max_sge;
	uint32_t entries;
	uint32_t stride;
	uint64_t ring_bytes;       /* the ring header is at its start */
	/* a tag-matching SRQ's ops ring (src/abi/sv_tm.h), in the same
	 * mapping: its header's offset and its slots; 0 for other SRQs */
	uint64_t tm_ops_offset;
	uint32_t tm_ops_entries;
	uint32_t rsvd;
	uint64_t ring_offset;      /* of the mapping in the memfd */
};

struct sv_rsp_domain {
	uint64_t handle;
	uint32_t db_index;         /* its doorbell page */
	uint32_t dedicated;        /* 1: no other domain used the page when it
				    * was created (with SV_DOMAIN_DEDICATED:
				    * none ever will while it lives) */
};

/* A page list's memfd comes with this response. */
struct sv_rsp_page_list {
	uint64_t handle;
	uint64_t bytes;            /* size of the memfd to map */
	uint32_t max_entries;
	uint32_t rsvd;
};

struct sv_rsp_advise {
	uint64_t va;               /* the range's first byte in the client */
};

/* A DM's memfd comes with this response. */
struct sv_rsp_dm {
	uint64_t handle;
	uint64_t bytes;            /* size of the memfd to map */
};

struct sv_rsp_import {
	uint64_t handle;           /* the whole handle */
	uint64_t length;           /* MR, DM: as registered, as allocated */
	uint64_t bytes;            /* DM: the size of the memfd to map */
	uint64_t iova;             /* MR */
	uint32_t lkey, rkey;       /* MR */
	uint32_t access;           /* MR */
	uint32_t rsvd;
};

struct sv_rsp_inject {
	uint64_t done[SV_INJ_KIND_MAX];   /* faults injected, by kind */
	uint32_t armed;                   /* faults still armed */
	uint32_t rsvd;
};

struct sv_rsp_query_srq {
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t srq_limit;
	uint32_t rsvd;
};

struct sv_stat_client {
	uint64_t client_id;
	uint32_t pid;
	uint32_t uid;
	uint32_t count[SV_OBJ_TYPE_MAX];
};

struct sv_rsp_stat {
	uint32_t nclients;         /* clients connected in all */
	uint32_t nlisted;          /* entries filled in this page */
	uint32_t total[SV_OBJ_TYPE_MAX]; /* objects of every client */
	uint32_t keys_live;        /* lkeys/rkeys in the device key table */
	uint32_t daemon_pid;
	uint64_t refused;          /* commands refused since start */
	struct sv_stat_client client[SV_STAT_PAGE];
};

/*
 * Why a received RoCEv2 packet was dropped (docs/ROCE.md "Drops"): one
 * counter each in struct sv_rsp_stat_wire, whose rx_drop is their sum.
 * X(NAME, name, what `softverbs stat` calls it).
 */
#define SV_RX_DROP_REASONS(X)                                                 \
	X(ICRC, icrc, "bad ICRC")                                             \
	X(MALFORMED, malformed, "malformed")                                  \
	X(OPCODE, opcode, "unknown opcode")                                   \
	X(PKEY, pkey, "bad P_Key")                                            \
	X(QPN, qpn, "unknown QPN")                                            \
	X(PEER, peer, "not from the QP's peer")                               \
	X(STATE, state, "QP state or type")                                   \
	X(PSN, psn, "PSN out of window")                                      \
	X(QKEY, qkey, "bad Q_Key")                                            \
	X(NORES, nores, "no resources")

enum sv_rx_drop {
#define SV_RX_DROP_ENUM(N, n, s) SV_RX_DROP_##N,
	SV_RX_DROP_REASONS(SV_RX_DROP_ENUM)
#undef SV_RX_DROP_ENUM
	SV_RX_DROP_MAX
};

/*
 * STAT_QP (struct sv_cmd_stat: first is a QPN table slot to start from):
 * the QPs of every client, SV_STAT_QP_PAGE at a time, in slot order; next
 * is the slot to ask for next, 0 when the table has been walked. Counters
 * count since the QP was made; ring counts are what the device has taken
 * (cons) and what the client says it posted (prod, the client's to write).
 */
#define SV_STAT_QP_PAGE 6         /* 16 + 6 * 72 <= 496 */
struct sv_stat_qp {
	uint64_t client_id;
	uint32_t pid;
	uint32_t qpn;
	uint8_t type;              /* enum ibv_qp_type */
	uint8_t state;             /* enum ibv_qp_state */
	uint8_t wire;              /* 1: its peer is across RoCEv2 */
	uint8_t srq;               /* 1: receives through an SRQ */
	uint32_t dest_qpn;
	uint32_t sq_entries, sq_used;
	uint32_t rq_entries, rq_used;
	uint64_t sends;            /* send WQEs completed (signaled or not) */
	uint64_t recvs;            /* receive completions */
	uint64_t errors;           /* error completions, flushes not counted */
	uint64_t retrans;          /* RoCEv2 packets sent again */
};

struct sv_rsp_stat_qp {
	uint32_t nlisted;
	uint32_t next;
	uint32_t nqps;             /* QPs on the device in all */
	uint32_t rsvd;
	struct sv_stat_qp qp[SV_STAT_QP_PAGE];
};

/*
 * WHY (struct sv_cmd_stat: first is the number of the first record to
 * give; softverbs why): the device's last SV_WHY_RING refusals and error
 * completions, each with the reason the device had, oldest first, three
 * at a time. Records are numbered from the daemon's start; next is the
 * number to ask for next (== total when all are given), oldest the
 * number of the oldest still kept.
 */
#define SV_WHY_RING 256
#define SV_WHY_PAGE 3
#define SV_WHY_LEN 96
enum { SV_WHY_CMD = 1, SV_WHY_CQE = 2 };
struct sv_why_rec {
	uint64_t time_ns;          /* CLOCK_REALTIME */
	uint64_t client_id;
	uint64_t wr_id;            /* CQE */
	uint32_t pid;
	uint32_t qpn;              /* CQE */
	uint32_t kind;             /* SV_WHY_* */
	uint32_t op;               /* CMD: enum sv_cmd_op; CQE: enum ibv_wc_opcode */
	int32_t status;            /* CMD: -errno; CQE: enum ibv_wc_status */
	uint32_t rsvd;
	char why[SV_WHY_LEN];      /* NUL-terminated */
};

struct sv_rsp_why {
	uint64_t total;            /* records made since start */
	uint64_t oldest;
	uint64_t next;
	uint32_t nlisted;
	uint32_t rsvd;
	struct sv_why_rec rec[SV_WHY_PAGE];
};

/* STAT_WIRE (takes struct sv_cmd_stat, all zero): the RoCEv2 port's
 * counters since the daemon started. */
struct sv_rsp_stat_wire {
	uint32_t running;          /* 1: the device has a RoCEv2 port */
	uint32_t port;             /* its UDP port */
	uint64_t tx_pkts, rx_pkts;
	uint64_t rx_drop;          /* every packet dropped: the sum of
				    * rx_drop_why */
	uint64_t rx_bad_icrc;      /* = rx_drop_why[SV_RX_DROP_ICRC] */
	uint64_t retransmits;      /* packets sent again */
	uint64_t timeouts;         /* retransmission timer expiries */
	uint64_t naks_sent, naks_rcvd;
	uint64_t rnr_naks_sent, rnr_naks_rcvd;
	uint64_t dup_reqs;         /* duplicate requests answered again */
	uint64_t retry_exceeded;
	uint64_t tx_drop_full;     /* the socket was full: dropped */
	uint64_t inj_drop, inj_dup, inj_reorder, inj_corrupt; /* injector */
	uint64_t inj_delay;        /* packets held back (wire delay=US) */
	uint32_t gso, gro;         /* 1: UDP GSO / GRO in use */
	uint64_t tx_gso, rx_gro;   /* datagrams of several packets */
	uint64_t tx_bytes, rx_bytes; /* RoCEv2 datagrams' bytes */
	uint64_t lo_msgs, lo_bytes;  /* messages between QPs of this device */
	/* rdma_cm (docs/DESIGN.md "rdma_cm"): open files and ids now, and
	 * since start: ids created, REQs sent, accepts, REJs, DREQs,
	 * connections established */
	uint32_t cm_files, cm_ids;
	uint64_t cm_ids_created, cm_connects, cm_accepts, cm_rejects;
	uint64_t cm_disconnects, cm_established;
	/* CM MADs on QP1 (across hosts): sent, received, sent again,
	 * requests given up after every retry, dropped (malformed, forged,
	 * for no id, or no room) */
	uint64_t cm_mad_sent, cm_mad_rcvd, cm_mad_retries, cm_mad_timeouts;
	uint64_t cm_mad_dropped;
	uint64_t rx_drop_why[SV_RX_DROP_MAX]; /* by enum sv_rx_drop */
	/* of lo_msgs and lo_bytes: those the initiating process ran itself
	 * (the direct path, src/abi/sv_direct.h) */
	uint64_t direct_msgs, direct_bytes;
	uint64_t direct_mapped;    /* of direct_msgs: plain copies between
				    * mapped memfds */
	/* WRs of the direct path's operations sent to the daemon instead,
	 * by reason (enum sv_direct_refusal, src/abi/sv_direct.h) */
	uint64_t direct_refused[6];
};

struct sv_rsp_hdr {
	uint32_t magic;
	uint16_t op;               /* the command's op */
	uint16_t version;
	uint32_t seq;              /* the command's seq */
	int32_t status;            /* 0 or -errno */
};

#endif /* SV_ABI_RSP_ARGS_H */

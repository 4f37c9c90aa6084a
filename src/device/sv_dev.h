/* SPDX-License-Identifier: MIT */
/*
 * softverbsd internals: the device, its clients and their objects.
 */
#ifndef SV_DEVICE_DEV_H
#define SV_DEVICE_DEV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <infiniband/verbs.h>

#include "abi/sv_cmd.h"
#include "abi/sv_direct.h"
#include "abi/sv_ib.h"
#include "abi/sv_qp.h"
#include "abi/sv_ring.h"
#include "abi/sv_tm.h"
#include "device/ctl/keys.h"
#include "device/ctl/objtab.h"

/*
 * Who the device is (docs/DESIGN.md, "Identity"). The vendor ID is the
 * ASCII of "svb": its first octet has the IEEE's local bit (0x02) set, so
 * it is no assigned OUI, and it is wider than a PCI vendor ID, so it is no
 * PCI vendor either (rxe and siw use values of the same kind). Part 1,
 * hardware version 1; the firmware version is the library-daemon protocol
 * (SV_PROTO_VERSION), as the sysfs fw_ver file says.
 */
#define SV_VENDOR_ID        0x737662u
#define SV_VENDOR_PART_ID   1u
#define SV_HW_VER           1u

/* Limits of the device: what it reports and what it enforces. */
#define SV_MAX_CLIENTS      1024
#define SV_MAX_OBJS_CLIENT  (1u << 20)
#define SV_MAX_PD           (1u << 16)
#define SV_MAX_MR           (1u << 20)
#define SV_MAX_CQ           (1u << 14)
#define SV_MAX_CQE          ((1u << 22) - 1)
#define SV_MAX_CHANNEL      (1u << 12)
#define SV_MAX_MR_SIZE      (1ull << 47)   /* the user address space */
#define SV_MAX_QP_BITS      17
#define SV_MAX_QP           ((1u << SV_MAX_QP_BITS) - 2) /* QPN slots 0, 1 reserved */
#define SV_MAX_QP_WR        16384
#define SV_MAX_SGE          32
#define SV_MAX_INLINE       512
#define SV_MAX_SRQ          (1u << 12)
#define SV_MAX_SRQ_WR       16384
#define SV_MAX_AH           (1u << 16)
#define SV_MAX_RD_ATOM      16
#define SV_MAX_MSG_SZ       (1u << 31)
/* Doorbell pages, each with its engine thread: page 0 is the default that
 * objects without a resource domain share; pages 1 .. SV_MAX_RES_DOMAINS can
 * be dedicated to domains (ctl/domain.c). An engine thread starts when its page
 * is first used. */
#define SV_MAX_RES_DOMAINS  8
#define SV_DB_PAGES         (1 + SV_MAX_RES_DOMAINS)
#define SV_MAX_DOMAINS      (1u << 12)  /* domain objects on the device */
/* Memory-management extensions. MRs and MWs share the key table
 * (SV_MAX_MR keys). Block arrays of fast-register and block-list MRs are
 * private memory of the daemon: SV_MAX_MR_BLOCKS entries on the device. */
#define SV_MAX_MW           (1u << 16)
#define SV_MAX_PAGE_LISTS   (1u << 14)  /* page list objects on the device */
#define SV_MAX_DMS          (1u << 12)  /* device memory objects */
#define SV_DM_MAX_BYTES     (64ull << 20) /* device memory, all of it
					   * (max_dm_size) */
#define SV_MAX_MR_BLOCKS    (1ull << 24)
/* UD multicast (ctl/mcast.c): groups on the device, QPs attached to one group,
 * attachments in all. */
#define SV_MAX_MCAST_GRP       256
#define SV_MAX_MCAST_QP_ATTACH 64
#define SV_MAX_MCAST_TOTAL     4096
/* What one process may hold (ctl/client.c, docs/DESIGN.md "Exhaustion"): the
 * device's limits above are shared by every process; a process gets at most
 * 1/SV_PROC_SHARE of each kind of object (and that is what ibv_query_device
 * tells it), SV_PROC_MAX_CONTEXTS connections, and SV_PROC_MAX_RING_BYTES of
 * rings (QPs, SRQs, CQs, page lists: the memory the daemon allocates for
 * it; --max-process-mem), so one process that creates until it fails gets
 * ENOMEM itself and leaves room for every other. */
#define SV_PROC_SHARE          4
/* QPs: a process may take half (a job of many connections is one process
 * per node: UCX and MPI ranks hold a QP or two per peer) */
#define SV_PROC_QP_SHARE       2
#define SV_PROC_MAX_CONTEXTS   256
#define SV_PROC_MAX_RING_BYTES (1ull << 30)

struct sv_client;

struct sv_pd {
	struct sv_client *owner;
	uint64_t handle;
	uint32_t id;               /* device-wide, never 0 (the direct path's
				    * tables name PDs by it) */
	uint32_t refs;             /* MRs (and later QPs, SRQs, AHs, MWs) */
};

/* One run of an MR's bytes: list position start (the MR's byte o is at
 * position fbo + o) lies at addr in the owner's memory; the run ends where
 * the next begins. */
struct sv_mr_block {
	uint64_t addr;
	uint64_t start;
};

enum sv_mr_kind {
	SV_MR_REGULAR = 0,         /* REG_MR, REG_MR_LIST: always valid */
	SV_MR_FAST_REG = 1,        /* ALLOC_MR: valid between FAST_REG_MR and
				    * an invalidate */
};

/*
 * A memory region (ctl/mem.c; translation in exec/keymap.c, state changes
 * in exec/mm.c). A zeroed struct with addr, length, iova, access and key
 * set is a valid contiguous regular MR.
 */
struct sv_mr {
	struct sv_client *owner;
	struct sv_pd *pd;
	uint64_t handle;
	uint64_t addr;             /* in the owner's address space (nblocks 0) */
	uint64_t length;
	uint64_t iova;             /* the address the MR's users name */
	uint32_t access;
	uint32_t key;              /* lkey == rkey */
	uint32_t id;               /* device-wide, never 0 (RDMA netlink's MRN) */
	uint8_t kind;              /* enum sv_mr_kind */
	bool invalid;              /* fast-register MRs: no translation now */
	uint32_t nblocks;          /* 0: contiguous at addr; else blocks[0 ..
				    * nblocks), blocks[nblocks].start = the
				    * list's total bytes */
	uint32_t max_blocks;       /* blocks has max_blocks + 1 entries */
	uint32_t mw_bound;         /* windows bound to it: no dereg, no rereg */
	uint32_t gen;              /* bumped by every fast registration: a
				    * window bound before does not survive it */
	uint64_t fbo;              /* list position of the MR's byte 0 */
	struct sv_mr_block *blocks; /* NULL for contiguous MRs */
	/* a sealed memfd the MR's memory lies in (ctl/mrfile.c), for the direct
	 * path's plain copies: file_fd, file_off of byte addr */
	bool has_file;
	int file_fd;
	uint64_t file_off;
	uint64_t file_gen;         /* device-wide, never 0 */
};

/* A memory window (ctl/mw.c; binds and invalidation in exec/mm.c). */
struct sv_mw {
	struct sv_client *owner;
	struct sv_pd *pd;
	uint64_t handle;
	uint32_t type;             /* enum sv_mw_type */
	uint32_t key;              /* the rkey */
	bool bound;                /* type 1: else unbound; type 2: else free */
	uint32_t access;           /* IBV_ACCESS_REMOTE_*, ZERO_BASED */
	uint32_t qpn;              /* type 2: the QP it is bound to */
	uint32_t mr_gen;           /* mr->gen at bind */
	struct sv_mr *mr;          /* bound: the MR (its mw_bound counts us) */
	uint64_t iova;             /* the window's first address (0: zero-based) */
	uint64_t length;
	uint64_t off;              /* its first byte is byte off of mr */
};

/* A fast-register page list (ctl/mem.c): shared memory the client fills and the
 * daemon reads, through its own read-only mapping, when it executes a work
 * request or command that names the list. */
struct sv_page_list {
	struct sv_client *owner;
	uint64_t handle;
	const void *map;
	size_t bytes;
	uint32_t max_entries;
};

/* Device memory (ctl/dm.c): a sealed memfd the owner maps; the device keeps a
 * descriptor. */
struct sv_dm {
	struct sv_client *owner;
	uint64_t handle;
	int fd;
	uint64_t bytes;            /* the file's size (a page multiple) */
	uint64_t length;           /* as asked */
};

struct sv_channel {
	struct sv_client *owner;
	uint64_t handle;
	int fd;                    /* the daemon's end of the event socket */
	uint32_t refs;             /* CQs */
};

/* Where a ring lies (ctl/ring.c): pages of one of its client's pools (a memfd
 * of many rings), or a memfd of its own (memfd >= 0, offset 0). */
struct sv_ring_pool;
struct sv_ring_loc {
	struct sv_ring_pool *pool;
	int memfd;
	uint64_t offset;           /* in the memfd the client maps */
};

struct sv_cq {
	struct sv_client *owner;
	uint64_t handle;
	uint64_t cookie;
	struct sv_channel *channel;
	struct sv_ring_loc loc;    /* where the ring lies (ctl/ring.c) */
	void *ring;                /* struct sv_cq_ring + slots */
	size_t ring_bytes;
	uint32_t entries;          /* ring slots */
	uint32_t cqe;              /* usable entries reported */
	uint32_t id;               /* device-wide, never 0 (RDMA netlink's CQN) */
	uint32_t flags;
	uint32_t refs;             /* QPs, SRQs */
	uint32_t last_arm_sn;      /* arm_sn when the last event was sent */
	uint32_t prod;             /* private producer counter */
	/* prod when the last event was sent: the CQEs before it were
	 * announced, and an arm never fires again for them (NOTIFY_CQ) */
	uint32_t reported;
};

struct sv_engine;

/* A resource domain (ctl/domain.c): the doorbell page and engine its QPs
 * use. */
struct sv_domain {
	struct sv_client *owner;
	uint64_t handle;
	struct sv_engine *engine;
	uint32_t msg_model;        /* enum sv_msg_model */
	bool dedicated;            /* no other domain shares the page */
	uint32_t refs;             /* QPs */
};

/* The device's private view of one work-queue ring in shared memory. */
struct sv_wq {
	struct sv_wq_ring *hdr;    /* in the mapping; only prod and the mailbox
				    * (mb_seq, mb) are read from it */
	uint32_t entries;          /* private copies: never re-read the ring's */
	uint32_t stride;
	uint32_t max_sge;
	uint32_t max_inline;
	uint32_t cons;             /* private consumer counter */
	/* a receive queue that a same-host sender may take WQEs of too (the
	 * direct path: its QP has a completion side, struct sv_xside): the
	 * side's word, whose xprod counts the WQEs senders took, and xbase,
	 * the ones we took since (plus cons when the side was made): cons is
	 * xbase + xprod (wq_sync_cons); NULL: none */
	const uint64_t *xword;
	uint32_t xbase;
	/* an SRQ's ring that same-host senders take WQEs of too: its word
	 * in the owner's uid's guard table (struct sv_direct_srq), the
	 * consumer counter every taker moves by CAS, and the tag it carries
	 * (ctl/direct.c sv_direct_srq_share; exec/wq.h); NULL: none */
	uint64_t *dsrq;
	uint32_t dsrq_tag;
};

/* An XRC domain (ctl/xrc.c): device-wide; shared ones are named by a file. */
struct sv_xrc_dom {
	struct sv_xrc_dom *next;
	uint64_t dev, ino;         /* the file (shared) */
	int pin_fd;                /* the file, kept open (shared), or -1 */
	bool shared;
	uint32_t opens;            /* XRCD handles on it */
};

/* A client's handle on an XRC domain. */
struct sv_xrcd {
	struct sv_client *owner;
	uint64_t handle;
	struct sv_xrc_dom *dom;
	uint32_t refs;             /* SRQs and XRC_RECV QPs made or opened
				    * through it */
};

/*
 * A tag-matching SRQ's list of tagged buffers (ctl/tm.c): a slot per tag; the
 * posted ones form a list in posting order (first match wins), the free
 * ones a stack. Private to the daemon: the client
 * changes it only through the ops ring (sv_tm.h).
 */
struct sv_tm_tag {
	uint64_t tag, mask;
	uint64_t wr_id;            /* recv_wr_id: its completions' wr_id */
	struct sv_wqe_sge sge;
	uint32_t num_sge;
	uint32_t handle;           /* the library's (TAG_DEL names it) */
	uint32_t phase;            /* unexpected messages when it was added */
	uint32_t prev, next;       /* posting order; free stack (next) */
	bool posted;
	bool busy;                 /* matched, its data being placed: no
				    * other message matches it, no DEL takes
				    * it */
};

#define SV_TM_NONE UINT32_MAX

struct sv_tm {
	uint32_t max_tags;
	uint32_t max_ops;
	uint32_t posted;           /* tags in the list */
	uint32_t head, tail;       /* the list, oldest first */
	uint32_t free;             /* the free stack's top */
	uint32_t unexp;            /* unexpected messages (the device's count) */
	uint32_t synced;           /* the count software acknowledged */
	uint32_t done;             /* TAG_ADDs that hold no place (sv_tm.h) */
	uint32_t *kdone;           /* published here: the ops ring's `done` */
	struct sv_tm_tag tag[];    /* [max_tags] */
};

struct sv_srq {
	struct sv_client *owner;
	uint64_t handle;
	uint64_t cookie;
	struct sv_pd *pd;
	uint32_t srqn;
	uint32_t type;             /* enum ibv_srq_type */
	struct sv_ring_loc loc;
	void *ring;
	size_t ring_bytes;
	struct sv_wq rq;
	uint32_t max_wr;           /* usable entries */
	uint32_t limit;            /* armed limit; 0 = not armed */
	uint32_t refs;             /* QPs */
	bool in_error;             /* a corrupt ring: every receive fails */
	bool rx_busy;              /* a receive WQE is being filled unlocked */
	uint8_t dsrq_gen;          /* its ring's generation in its direct
				    * word's tag (a resize bumps it) */
	/* XRC SRQs (type IBV_SRQT_XRC) */
	struct sv_xrcd *xrcd;      /* the handle it was made through */
	struct sv_cq *cq;          /* its receive completions */
	/* tag-matching SRQs (IBV_SRQT_TM; cq: their completions too): the
	 * tag list, the ops ring, the engine that applies it (its list of
	 * such SRQs through tm_next) */
	struct sv_tm *tm;
	struct sv_wq tm_ops;
	struct sv_engine *tm_engine;
	struct sv_srq *tm_next;
};

struct sv_ah {
	struct sv_client *owner;
	uint64_t handle;
	struct sv_pd *pd;
	struct sv_wire_ah attr;
};

/*
 * A queue pair. The control thread (ctl/qp.c) creates, modifies and destroys
 * it, always holding sv_dev.lock; the engine reads the attributes and owns the
 * "engine" fields, also under sv_dev.lock.
 */
struct sv_qp {
	struct sv_client *owner;
	uint64_t handle;
	uint64_t cookie;
	uint32_t qpn;
	uint32_t type;             /* enum ibv_qp_type */
	uint32_t state;            /* enum ibv_qp_state */
	struct sv_pd *pd;
	struct sv_cq *send_cq;
	struct sv_cq *recv_cq;
	struct sv_srq *srq;        /* NULL: the QP has its own receive ring */
	struct sv_domain *domain;  /* NULL: the default page */
	bool sq_sig_all;
	uint32_t create_flags;
	uint64_t send_ops_flags;
	struct sv_wire_qp_cap cap;

	struct sv_ring_loc loc;
	void *ring;                /* the whole mapping */
	size_t ring_bytes;
	struct sv_wq sq;
	struct sv_wq rq;           /* entries == 0 with an SRQ */

	/* attributes set by MODIFY_QP (host byte order) */
	struct sv_wire_qp_attr attr;

	/* engine state */
	struct sv_engine *engine;
	/* An engine may copy a message's bytes without sv_dev.lock
	 * (loop/resp.c): what it finds changed when it takes the lock back. */
	bool dead;                 /* destroyed: freed once engines are quiet */
	uint32_t state_gen;        /* bumped by every state change */
	bool rx_busy;              /* a receive WQE is being filled unlocked */
	struct sv_qp *eng_next, *eng_prev; /* in the engine's list */
	uint64_t wait_until_ns;    /* CLOCK_MONOTONIC: the head WQE waits (RNR, timeout) */
	uint32_t rnr_left;         /* RNR retries left for the head WQE */
	uint32_t retry_left;       /* transport retries left for the head WQE */
	bool head_started;         /* the retry counters belong to the head WQE */
	bool comm_est_sent;        /* IBV_EVENT_COMM_EST reported */
	bool direct_off;           /* the direct path withdrawn (ctl/direct.c) */
	bool last_wqe_sent;        /* IBV_EVENT_QP_LAST_WQE_REACHED reported */
	bool sq_drained_sent;      /* IBV_EVENT_SQ_DRAINED reported for this SQD */
	bool sqd_armed;            /* in SQD: WQEs before sqd_prod still run */
	uint32_t sqd_prod;         /* the SQ's prod when the QP entered SQD */
	/* the RoCEv2 wire (roce/roce.h): NULL for a peer on this daemon */
	struct sv_roce_qp *roce;
	uint32_t ud_psn;           /* UD: the PSN of the next datagram */
	/* diag/capture.c: the PSN of the next same-host message rendered (from
	 * cap_psn_base, the sq_psn it started at); a responder's MSN */
	uint32_t cap_psn, cap_psn_base, cap_msn;
	bool cap_psn_set;
	/* what STAT_QP reports (softverbs stat, top) */
	uint64_t st_sends, st_recvs, st_errors, st_retrans;
	/* diag/inject.c: the next so many messages answered with a fault */
	uint32_t inj_rnr, inj_access, inj_lose;
	uint32_t mcast_n;          /* multicast groups attached (ctl/mcast.c) */
	/* XRC_RECV: the XRCD handle it was made (or opened) through. Its pd
	 * and srq are those of the message being received (no references:
	 * set by each delivery, cleared when the SRQ goes); it has no CQs. */
	struct sv_xrcd *xrcd;
	/* XRC_RECV handles of OPEN_QP (ctl/xrc.c): a struct of its own with
	 * `opened` set, naming `target` and holding nothing else; the target
	 * lists them (`opens`, linked by open_next) and lives while any of
	 * them does: its creator's handle passes it on to one of them. */
	bool opened;
	struct sv_qp *target;
	struct sv_qp *opens, *open_next;
	/* The direct path's receive side (DIRECT_RECV handed its receive
	 * ring to its peer's process): the epoch bumped when its entry last
	 * took a grant away, before which a guard of that peer may still be
	 * taking a WQE (its receive queue is not flushed meanwhile). */
	bool drecv;
	uint64_t drecv_epoch;
	/* its completion side (struct sv_xside, ctl/direct_recv.c), mapped
	 * here, and the memfd behind it; NULL: none */
	struct sv_xside *xs;
	int xs_fd;
	size_t xs_bytes;
	/* A QP on an SRQ: the WQE a same-host sender claimed for it from
	 * the SRQ and did not fill (struct sv_direct_claim, adopted by
	 * sv_direct_adopt): the next message it takes fills it, its flush
	 * completes it; as rxe's responder holds the WQE it took. */
	struct {
		bool valid;
		uint32_t num_sge;
		uint64_t wr_id;
		struct sv_wqe_sge sge[SV_DCLAIM_SGE];
	} dclaim;
};

/* What one process holds, over all its connections (ctl/client.c). */
struct sv_account {
	struct sv_account *next;
	pid_t pid;
	uint32_t nclients;
	uint32_t count[SV_OBJ_TYPE_MAX];
	uint64_t ring_bytes;
};

struct sv_client {
	struct sv_client *next, *prev;
	struct sv_account *acct;   /* its process's */
	uint64_t id;
	int fd;
	int pidfd;                 /* -1 where pidfds are unavailable */
	int async_fd;              /* -1 until OPEN_CONTEXT */
	pid_t pid;
	uid_t uid;
	bool probe;
	bool dead;
	uint32_t ctxn;             /* device-wide, never 0 (RDMA netlink's CTXN) */
	struct sv_objtab objs;
	void *ev_sock, *ev_pid;    /* epoll tags (struct sv_evtag *) */
	/* ctl/import.c: ibv_import_device. An exporter made a token (its
	 * context's cmd_fd); a client that imported it sees the exporter's
	 * table beside its own (sv_client_tab) until the exporter goes, and
	 * is then orphaned: its objects are gone and its commands refused. */
	int token_fd;              /* -1 until CONTEXT_TOKEN */
	uint64_t token_dev, token_ino;
	struct sv_client *exporter;
	bool orphan;
	struct sv_ring_pool *pools; /* its rings' memfds (ctl/ring.c) */
	/* REPLY_CHANNEL: where the responses of the other processes that
	 * share the connection since a fork go; number i + 1 is chans[i]
	 * (-1: free), of the first nchans slots */
	int chans[SV_MAX_REPLY_CHANS];
	uint32_t nchans;
};

struct sv_device {
	char name[SV_DEV_NAME_MAX];
	bool addrs_given;          /* --ip or --netdev: serves only those */
	struct sv_dev_attr attr;
	struct sv_port_attr port;
	struct sv_rsp_gid gid[SV_GID_TBL_LEN];
	struct sv_keytab keys;
	struct sv_client clients;  /* list head */
	uint32_t nclients;
	uint64_t next_client_id;
	uint32_t total[SV_OBJ_TYPE_MAX];
	struct sv_account *accounts;
	bool maps_text;            /* $SOFTVERBSD_MAPS_TEXT=1: registrations
				    * read the maps text, as before Linux
				    * 6.11's query (ctl/mem.c) */
	uint64_t proc_ring_max;    /* SV_PROC_MAX_RING_BYTES or the option */
	uint64_t refused;
	uint32_t uverbs;           /* N of the view's /dev/infiniband/uverbsN */
	uint32_t next_pd_id;       /* the last PD's id */
	/* the last CQ's, MR's, client's id (RDMA netlink: CQN, MRN, CTXN) */
	uint32_t next_cq_id, next_mr_id, next_ctx_id;
	uint64_t lo_msgs, lo_bytes; /* delivered between QPs of this device
				     * (under lock): the view's counters */

	/* Held by the control thread around every command and teardown, and by
	 * an engine around each step that reads objects: one lock, so no
	 * object changes under a running WQE. The one exception: an engine
	 * copies a large message's bytes without it (loop/resp.c), and whoever
	 * frees an object an engine may hold waits for that copy to end
	 * (sv_engine_quiesce). Take it with sv_dev_lock(). */
	pthread_mutex_t lock;
	uint32_t ctl_wait;         /* the control thread waits for the lock:
				    * an engine steps aside between WQEs */
	uint32_t eng_wait;         /* engines that wait for it: a busy engine
				    * steps aside between passes */
	struct sv_qp *qpn_tab[1u << SV_MAX_QP_BITS]; /* by QPN low bits */
	uint32_t qpn_gen;          /* upper QPN bits: a fresh QPN per reuse */
	uint32_t nqp;
	/* doorbell pages: a memfd of SV_DB_PAGES pages, mapped here and by
	 * every client */
	int db_memfd;
	void *db_map;
	struct sv_engine *engine[SV_DB_PAGES];
	uint32_t ndomains;
	uint64_t mr_blocks;        /* block entries of all MRs (ctl/mem.c) */
	uint64_t wqes;             /* WQEs executed (stat) */
};

extern struct sv_device sv_dev;

/* The next device-wide id of a kind whose last id is *last: never 0. */
static inline uint32_t sv_next_id(uint32_t *last)
{
	return ++*last ? *last : ++*last;
}

/* ctl/identity.c: fill sv_dev's name, attributes, port and GIDs. ip may be NULL
 * (pick the host's first non-loopback IPv4 address). */
int sv_identity_init(const char *ip, const char *netdev);

/* ctl/view.c: write the device view beside the socket (docs/DESIGN.md, "The
 * device view"), and remove it. 0 or -errno (the daemon runs without). */
int sv_view_publish(const char *sock_path);
void sv_view_unpublish(void);

/* A handler's view of one command. */
struct sv_req {
	struct sv_client *client;
	const struct sv_cmd *cmd;
	struct sv_rsp *rsp;
	int fd_in;                 /* owned by the handler when it takes it */
	int fd_out;                /* sent with the response, then closed */
	const char *why;           /* for the log when the command is refused */
};

/* ctl/control.c */
/* What STAT_WIRE answers: the port's counters (the view's, RDMA netlink's). */
void sv_stat_wire_fill(struct sv_rsp_stat_wire *w);
void sv_control_handle(struct sv_client *c, const struct sv_cmd *cmd,
		       ssize_t n, int fd_in, struct sv_rsp *rsp, int *fd_out);

/* diag/why.c: the last refusals and error completions, with their reasons */
int sv_cmd_why(struct sv_req *r);
/* A check failing on the way to an error completion says why (this
 * thread's buffer; the completion takes it). Only on failure paths. */
void sv_why_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sv_why_clear(void);
void sv_why_cmd(const struct sv_client *c, unsigned int op, int err,
		const char *why);
void sv_why_cqe(const struct sv_qp *qp, const struct sv_cqe *e);

/* diag/capture.c: RoCEv2 packets to a reader (softverbs capture) */
int sv_cmd_capture(struct sv_req *r);
/* c is going: a capture it asked for ends with it. */
void sv_capture_client_gone(const struct sv_client *c);

/* diag/inject.c */
int sv_cmd_inject(struct sv_req *r);
/* A command fault is armed (a branch on the command path)... */
bool sv_inject_cmd_armed(void);
/* ...and for op of client c: 0, or the -errno to answer with. */
int sv_inject_cmd(const struct sv_client *c, unsigned int op);
/* A QP came (owner set) or went: with `wire SPEC pid=P`, the wire's
 * faults follow the QPs of process P, those made later too. */
void sv_inject_qp_new(struct sv_qp *qp);
void sv_inject_qp_gone(const struct sv_qp *qp);
/* exec/wq.c: faults the responder injects, counted by kind */
extern uint64_t sv_inj_done[SV_INJ_KIND_MAX];
/* Take one armed fault of t for a message that needs a receive WQE (an
 * RNR NAK) or for an RDMA or atomic request (a remote access error):
 * true when the message gets it. */
bool sv_inject_resp_take(struct sv_qp *t, bool needs_recv);
/* Take one armed "lose" of t (same-host): true when the message is lost. */
bool sv_inject_lose_take(struct sv_qp *t);
/* Faults armed for a process (pid) or the device (pid 0), armed by
 * diag/inject.c, taken in exec/wq.c: the table, and how many entries are
 * armed. */
#define SV_INJ_WIDE 8
struct sv_inj_fault {
	uint32_t what;             /* the kind (SV_INJ_*), or a command's op */
	uint32_t pid;              /* 0: any */
	uint32_t count;            /* 0: a free entry */
	int32_t err;               /* a command's errno */
};
extern struct sv_inj_fault sv_inj_wide_tab[SV_INJ_WIDE];
extern uint32_t sv_inj_wide;
/* Does a fault for process pid (0: the whole device) reach qp? */
static inline bool sv_inj_reaches(uint32_t pid, const struct sv_qp *qp)
{
	return !pid || (qp->owner && qp->owner->pid == (pid_t)pid);
}
static inline bool sv_inject_resp(struct sv_qp *t, bool needs_recv)
{
	return __builtin_expect((t->inj_rnr | t->inj_access |
				 sv_inj_wide) != 0, 0) &&
	       sv_inject_resp_take(t, needs_recv);
}

/* ctl/import.c */
int sv_cmd_context_token(struct sv_req *r);
int sv_cmd_import_context(struct sv_req *r);
int sv_cmd_import_obj(struct sv_req *r);
/* The table handle is in, as client c sees it: the exporter's for an
 * importer's handle without SV_OBJTAB_IMPORT_BIT, else c's own. */
static inline struct sv_objtab *sv_client_tab(struct sv_client *c,
					      uint64_t handle)
{
	if (c->exporter && !(handle & SV_OBJTAB_IMPORT_BIT))
		return &c->exporter->objs;
	return &c->objs;
}
/* ctl/client.c: c is going; every client that imported c's context loses its
 * objects and is orphaned. */
void sv_import_orphan_all(struct sv_client *c);

/* ctl/mem.c */
int sv_mem_check_range(struct sv_client *c, uint64_t addr, uint64_t len,
		       bool write, const char **why);
int sv_cmd_reg_mr(struct sv_req *r);
int sv_cmd_rereg_mr(struct sv_req *r);
int sv_cmd_dereg_mr(struct sv_req *r);
int sv_cmd_alloc_mr(struct sv_req *r);
int sv_cmd_reg_mr_list(struct sv_req *r);
int sv_cmd_alloc_page_list(struct sv_req *r);
int sv_cmd_free_page_list(struct sv_req *r);
void sv_mr_destroy(struct sv_mr *mr);
void sv_page_list_destroy(struct sv_page_list *pl);

/* ctl/mem.c: ADVISE_MR (on-demand MRs) */
int sv_cmd_advise_mr(struct sv_req *r);

/* ctl/dm.c */
int sv_cmd_alloc_dm(struct sv_req *r);
int sv_cmd_free_dm(struct sv_req *r);
void sv_dm_destroy(struct sv_dm *dm);

/* ctl/mrfile.c: does the maps line vma (check_translation's) map fd's file? */
bool sv_vma_is_file(const char *vma, int fd);
/* ctl/mrfile.c: the sealed memfd behind [addr, addr + len) of c, whose maps
 * line is vma (check_translation's), reopened read-write: a descriptor and
 * *file_off (the file offset of addr), or -ENOENT. */
int sv_mr_file_open(const struct sv_client *c, const char *vma, uint64_t addr,
		    uint64_t len, uint64_t *file_off);

/* ctl/mw.c */
int sv_cmd_alloc_mw(struct sv_req *r);
int sv_cmd_dealloc_mw(struct sv_req *r);
void sv_mw_destroy(struct sv_mw *mw);

/* exec/mm.c (with exec/mm.h): what ctl/mem.c shares with the work requests */
/* Access flags an MR may have: 0, or -EINVAL and *why. */
int sv_mr_access_check(uint32_t access, const char **why);
/*
 * Read n entries of pl (pages of 1 << page_shift bytes, or struct
 * sv_mem_block with SV_REG_BLOCKS in flags), each once, into mr->blocks
 * (room for mr->max_blocks + 1), adjacent ones merged, and set
 * mr->nblocks and mr->fbo. The entries must be valid and [fbo, fbo +
 * length) inside them. 0, or -EINVAL and *why (mr->nblocks then 0).
 * Under sv_dev.lock; never allocates.
 */
int sv_mr_load_list(struct sv_mr *mr, const struct sv_page_list *pl,
		    uint32_t n, uint32_t fbo, uint64_t length,
		    uint32_t page_shift, uint32_t flags, const char **why);
/* Unbind a bound window (its MR's mw_bound drops). */
void sv_mw_unbind(struct sv_mw *mw);

/* ctl/cq.c */
/* Is fd a seqpacket socket the daemon can send events on? Makes it
 * non-blocking: the daemon never waits for a client. */
int sv_check_event_socket(int fd, const char **why);
int sv_cmd_create_channel(struct sv_req *r);
int sv_cmd_destroy_channel(struct sv_req *r);
int sv_cmd_create_cq(struct sv_req *r);
int sv_cmd_resize_cq(struct sv_req *r);
int sv_cmd_notify_cq(struct sv_req *r);
int sv_cmd_direct_notify(struct sv_req *r);
int sv_cmd_destroy_cq(struct sv_req *r);
void sv_channel_destroy(struct sv_channel *ch);
void sv_cq_destroy(struct sv_cq *cq);

/* ctl/qp.c: QPs (control), the QPN table */
int sv_cmd_create_qp(struct sv_req *r);
int sv_cmd_modify_qp(struct sv_req *r);
int sv_cmd_query_qp(struct sv_req *r);
int sv_cmd_destroy_qp(struct sv_req *r);
void sv_qp_destroy(struct sv_qp *qp);
/* The live QP with exactly this QPN, else NULL. Under sv_dev.lock. */
struct sv_qp *sv_qp_lookup(uint32_t qpn);
/* ctl/srq.c: SRQs (control) */
int sv_cmd_create_srq(struct sv_req *r);
int sv_cmd_modify_srq(struct sv_req *r);
int sv_cmd_query_srq(struct sv_req *r);
int sv_cmd_destroy_srq(struct sv_req *r);
/* ctl/tm.c: tag-matching SRQs */
struct sv_tm *sv_tm_new(uint32_t max_tags, uint32_t max_ops);
/* What an op did: its completion's opcode and status, and whether
 * software is behind the device's unexpected count. */
struct sv_tm_done {
	uint32_t opcode;           /* enum ibv_wc_opcode */
	uint32_t status;           /* enum ibv_wc_status */
	bool sync_req;
};
/* Apply one op (a private copy of a slot of the ops ring) to a tag list. */
void sv_tm_apply(struct sv_tm *tm, const struct sv_tm_op *o,
		 struct sv_tm_done *d);
/* exec/wq.c: apply what srq's ops ring holds, each op's completion on its CQ:
 * whether there was any. */
bool sv_tm_drain(struct sv_srq *srq);
/* The first tag in posting order that a message's tag matches (and that
 * is in phase), or NULL; sv_tm_take takes it off the list. */
struct sv_tm_tag *sv_tm_match(struct sv_tm *tm, uint64_t tag);
void sv_tm_take(struct sv_tm *tm, struct sv_tm_tag *t);
/* ctl/srq.c */
void sv_srq_destroy(struct sv_srq *srq);
/* ctl/ah.c: address handles (control) */
int sv_cmd_create_ah(struct sv_req *r);
int sv_cmd_destroy_ah(struct sv_req *r);
void sv_ah_destroy(struct sv_ah *ah);
/* ctl/ring.c: zero-filled ring memory of bytes for client c, mapped read-write
 * here at *map, in one of c's pools (or a memfd of its own where large):
 * loc says where, *fd_out is a copy of the memfd to send with the response
 * (the ring at loc->offset). 0 or -errno (EMFILE, ENOMEM ...). */
int sv_ring_get(struct sv_client *c, const char *name, size_t bytes,
		struct sv_ring_loc *loc, void **map, int *fd_out);
/* Give back what sv_ring_get gave (zeroed for the next ring). */
void sv_ring_put(struct sv_ring_loc *loc, void *map, size_t bytes);
/* c is gone: its pools close with their last rings. */
void sv_ring_pools_detach(struct sv_client *c);
/* A read-only descriptor of the memfd a ring of loc lies in (ctl/ring.c):
 * the direct path hands it to a process of the owner's uid. */
int sv_ring_fd_ro(const struct sv_ring_loc *loc);
/* A sealed memfd of bytes, mapped read-write here (ctl/ring.c). */
int sv_ring_alloc(const char *name, size_t bytes, int *memfd, void **map);
/* A zero-filled memfd of bytes sealed against shrinking, growing and new
 * seals (what sv_ring_alloc maps): the descriptor, or -errno. */
int sv_memfd_sealed(const char *name, size_t bytes);

/* ctl/mcast.c: UD multicast groups, under sv_dev.lock. A group exists while
 * a QP is attached to it. */
struct sv_mcast_grp {
	uint8_t gid[16];
	uint32_t nqp;              /* 0: the slot is free */
	struct sv_qp *qp[SV_MAX_MCAST_QP_ATTACH];
};
/* Is gid a RoCEv2 multicast GID (::ffff:224.0.0.0/4 or ff00::/8)? */
bool sv_gid_is_mcast(const uint8_t gid[16]);
/* The group of gid, or NULL (no QP attached). */
const struct sv_mcast_grp *sv_mcast_find(const uint8_t gid[16]);
int sv_cmd_attach_mcast(struct sv_req *r);
int sv_cmd_detach_mcast(struct sv_req *r);
/* Detach qp from every group (before it is destroyed). */
void sv_mcast_qp_destroy(struct sv_qp *qp);

/* exec/engine.c: the engine threads that execute WQEs. All under sv_dev.lock
 * except start/stop. */
int sv_engine_start(void);         /* creates the doorbell memfd, engine 0 */
void sv_engine_stop(void);
/* The engine of a new domain: a page of its own when one is free (its
 * thread started if need be), else the least shared one, or NULL with
 * dedicated_only. *dedicated says which. */
struct sv_engine *sv_engine_claim(uint32_t msg_model, bool dedicated_only,
				  bool *dedicated);
void sv_engine_release(struct sv_engine *e);
/* The doorbell page index of an engine (NULL: 0) */
unsigned int sv_engine_index(const struct sv_engine *e);
/* qp joins engine e (NULL: the default page 0) */
void sv_engine_add_qp(struct sv_qp *qp, struct sv_engine *e);
void sv_engine_remove_qp(struct sv_qp *qp); /* before qp is freed */
/* A tag-matching SRQ's ops ring is applied by the engine of the default
 * page 0, whose doorbell the library rings (none without engines) */
void sv_engine_add_srq(struct sv_srq *srq);
void sv_engine_remove_srq(struct sv_srq *srq); /* before srq is freed */
/* Something changed that the engine must look at (a QP moved to ERR or
 * back to RTS, a QP was destroyed): wake its engine. */
void sv_engine_kick(struct sv_engine *e);
/* The control thread, holding sv_dev.lock, lets the engines run for a
 * moment (the lock dropped meanwhile): round counts the pauses of one wait
 * (0: a yield, then sleeps growing to 1 ms). */
void sv_engine_ctl_pause(unsigned int round);
/* The device lock, for the control thread (ctl) or an engine. */
void sv_dev_lock(bool ctl);
void sv_dev_unlock(void);
/* Under sv_dev.lock, after unlinking an object an engine may be using in an
 * unlocked copy, before freeing it: waits (dropping the lock meanwhile) for
 * every such copy to end. */
void sv_engine_quiesce(void);

/* ctl/xrc.c: XRC domains, SRQ numbers */
int sv_cmd_open_xrcd(struct sv_req *r);
int sv_cmd_close_xrcd(struct sv_req *r);
int sv_cmd_open_qp(struct sv_req *r);
void sv_xrcd_destroy(struct sv_xrcd *x);
/* The live SRQ with exactly this number, else NULL. Under sv_dev.lock. */
struct sv_srq *sv_srq_lookup(uint32_t srqn);
int sv_srqn_alloc(struct sv_srq *srq);
void sv_srqn_free(struct sv_srq *srq);
/* The XRC_RECV QP t takes a message for XRC SRQ srqn: sets t->srq and
 * t->pd to it, or returns false (no such SRQ, another XRC domain). */
bool sv_xrc_bind(struct sv_qp *t, uint32_t srqn);
/* The QP an OPEN_QP handle names, or qp itself. */
struct sv_qp *sv_qp_resolve(struct sv_qp *qp);
/* An OPEN_QP handle goes (its target stays). */
void sv_qp_open_close(struct sv_qp *op);
/* The handle of XRC_RECV QP t goes: if other handles name t, one of them
 * takes it over (true); else false, and t is to be destroyed. */
bool sv_qp_pass_on(struct sv_qp *t);

int sv_cmd_create_domain(struct sv_req *r);
int sv_cmd_destroy_domain(struct sv_req *r);
void sv_domain_destroy(struct sv_domain *d);

/* events (exec/engine.c): an affiliated or unaffiliated async event to a
 * client, and CQE production with completion-channel events (ctl/cq.c). */
void sv_async_event(struct sv_client *c, uint32_t type, uint64_t cookie,
		    uint64_t handle);
/* Write one CQE; -ENOSPC (and the CQ's overflow flag, IBV_EVENT_CQ_ERR) when
 * the ring is full. Sends a completion event if the CQ is armed for it. */
int sv_cq_push(struct sv_cq *cq, const struct sv_cqe *e, bool solicited);
/* ... with held more completions the CQ holds elsewhere (a receive queue's
 * completion ring, the direct path's) */
int sv_cq_push_held(struct sv_cq *cq, const struct sv_cqe *e, bool solicited,
		    uint32_t held);

/* ctl/client.c */
struct sv_client *sv_client_new(int fd);

/* Free every object of c, close its descriptors, unlink it; the struct
 * itself stays (marked dead) until sv_client_free. */
void sv_client_teardown(struct sv_client *c);
/* Free every object in c's own table (ctl/import.c: an orphaned importer's). */
void sv_client_free_objs(struct sv_client *c);
void sv_client_free(struct sv_client *c);
/* A reply channel for c (REPLY_CHANNEL): its number (> 0), or -ENOSPC when
 * all SV_MAX_REPLY_CHANS are held by live processes. Takes fd on success. */
int sv_client_chan_add(struct sv_client *c, int fd);
/* The descriptor of reply channel chan of c, or -1. */
int sv_client_chan_fd(const struct sv_client *c, uint32_t chan);
/* Close reply channel chan of c (a response could not go through). */
void sv_client_chan_drop(struct sv_client *c, uint32_t chan);
/* Give obj a handle in the requesting client's table; -ENOMEM, with r->why,
 * when the process holds its share of that kind of object. */
int sv_client_add_obj(struct sv_req *r, unsigned int type, void *obj,
		      uint64_t *handle);
/* Most objects of type one process may hold (what the device reports). */
uint32_t sv_proc_max(unsigned int type);
/* Charge bytes of rings to the requesting client's process: -ENOMEM, with
 * r->why, beyond its share; every charge is given back with
 * sv_client_uncharge when the ring goes. */
int sv_req_charge(struct sv_req *r, uint64_t bytes);
void sv_client_uncharge(struct sv_client *c, uint64_t bytes);
/* The requesting client's object of type named by handle; NULL, with
 * r->why "no such <type>", when it names none. */
void *sv_req_obj(struct sv_req *r, uint64_t handle, unsigned int type);
void sv_client_del_obj(struct sv_client *c, unsigned int type,
		       uint64_t handle);

/* diag/log.c: rate-limited per kind and overall, first line of each kind always
 * kept, the file capped and rotated (see diag/log.c). */
enum { SV_LOG_ERR, SV_LOG_WARN, SV_LOG_INFO, SV_LOG_DEBUG };
#define SV_LOG_DEFAULT_MAX_BYTES (8ull << 20)
extern int sv_log_level;
extern uint64_t sv_log_max_bytes;   /* a log file's cap (0: none) */
int sv_log_open(const char *path);
/* A line whose kind is its format (fmt must be a string literal). */
void sv_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A line about client c, prefixed "client ID (pid PID): ", limited per
 * client; its kind is fmt and kind (a static string, such as a refusal's
 * reason, or NULL). */
void sv_log_client(const struct sv_client *c, const void *kind, int level,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Write the suppression counts that are due: whether any is still held
 * (call again in about a second). */
bool sv_log_tick(void);
/* Write every suppression count now (at exit). */
void sv_log_flush(void);
/* Lines suppressed since start. */
uint64_t sv_log_suppressed(void);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * libibverbs.so.1 (softverbs) internals: the driver side of the device.
 */
#ifndef SV_VERBS_H
#define SV_VERBS_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "softverbs/softverbs.h"

#include "abi/sv_cmd.h"
#include "abi/sv_qp.h"
#include "abi/sv_ring.h"

/* rdma-core's private prototypes: every definition here must match them. */
#include "verbs/rdma_private.h"

#define SV_SYSFS_PREFIX "/sys/class/infiniband/"

/*
 * One connection to softverbsd: request/response. Processes that share it
 * (a context inherited by fork, as the kernel's uverbs file is) each send on
 * the socket (one message is one send: never interleaved) and each read
 * their own responses: the process that opened it on the socket, any other
 * on a reply channel of its own (REPLY_CHANNEL, made on its first command).
 * So no process ever waits on another, stopped or not (docs/DESIGN.md "A
 * context shared by fork"). The threads of one process take turns.
 */
struct sv_conn {
	int fd;
	bool dead;                 /* the daemon went away, or did not answer */
	int timeout_ms;            /* a command's time limit; -1: none */
	/* called once where a command outlived its limit (the device is
	 * declared dead): the context shuts its event sockets */
	void (*wedged)(struct sv_conn *c);
	pid_t opener;              /* the process that reads replies on fd */
	/* this process's side; pid says whose (after a fork, the first
	 * command of the new process makes them its own) */
	pid_t pid;
	pthread_mutex_t lock;      /* robust: one command at a time */
	uint32_t seq;
	int reply_fd;              /* its reply channel, or -1 (fd) */
	uint32_t chan;             /* that channel's number; 0: fd */
	/* the daemon objects made through it and not destroyed yet
	 * (atomic): a context closed with some left is kept (context.c) */
	uint32_t objs;
};

/* Connect (starting the daemon if none answers and autostart is allowed)
 * and say HELLO. 0 or -errno. */
int sv_conn_open(struct sv_conn *c, uint32_t hello_flags,
		 struct sv_rsp_hello *hello);
void sv_conn_close(struct sv_conn *c);

/* One command, one response. fd_in (>= 0) travels with the command and is
 * not closed; *fd_out (if fd_out) receives a descriptor or -1. Returns the
 * response status (0 or -errno), -EIO when the daemon has gone (then and
 * every time after), or -ETIMEDOUT when no response came within
 * c->timeout_ms (SOFTVERBS_CMD_TIMEOUT): the device is then dead as if the
 * daemon had gone (EIO from then on; c->wedged runs). */
int sv_conn_call(struct sv_conn *c, struct sv_cmd *cmd, int fd_in,
		 struct sv_rsp *rsp, int *fd_out);

/* The one device of this process, filled by ibv_get_device_list. */
struct sv_device {
	struct ibv_device ibdev;
	uint64_t guid;             /* big-endian */
	int index;
};

struct sv_cq;
struct sv_res_domain;
struct sv_direct;
struct sv_dcache;

struct sv_context {
	struct verbs_context vctx; /* ends with struct ibv_context */
	struct sv_conn conn;
	struct sv_dev_attr attr;   /* queried at open */
	pthread_mutex_t lock;      /* cq list */
	struct sv_cq *cqs;         /* live CQs: completion events name them */
	bool fatal_sent;
	/* completion channels, shut where a command timed out (as the
	 * daemon's end closes when it dies); ch_lock, never held across a
	 * command */
	pthread_mutex_t ch_lock;
	struct sv_channel *channels;
	/* doorbell pages of the device's engines (OPEN_CONTEXT) */
	void *db_map;
	size_t db_bytes;
	uint32_t db_pages;
	struct sv_evtarget *evtargets; /* live QPs and SRQs (lock) */
	/* the hidden domains of the index form (resdom.c), by index (lock) */
	struct sv_res_domain *idx_domains;
	/* the direct path's tables (direct.c), or NULL: every WQE goes to
	 * the daemon */
	struct sv_direct *direct;
	struct sv_context *kept_next; /* closed with objects left (context.c) */
};

static inline struct sv_context *to_sv_ctx(struct ibv_context *ctx)
{
	return (struct sv_context *)((char *)ctx -
				     offsetof(struct sv_context, vctx.context));
}

static inline struct sv_conn *sv_conn_of(struct ibv_context *ctx)
{
	return &to_sv_ctx(ctx)->conn;
}

/*
 * A resource domain (resdom.c): the daemon's domain object (a doorbell page
 * and its engine) plus what only the library knows, the thread model. The
 * experimental API hands out ibrd; the index form keeps hidden ones on the
 * context's list, one per index in use, made by the first QP that names the
 * index and destroyed with the last.
 */
struct sv_res_domain {
	struct ibv_exp_res_domain ibrd; /* first: what the application holds */
	uint64_t handle;           /* the daemon's DOMAIN */
	uint32_t db_index;         /* its doorbell page */
	uint32_t dedicated;        /* 1: alone on its page when created */
	enum ibv_exp_thread_model thread_model;
	enum ibv_exp_msg_model msg_model;
	uint32_t refs;             /* CQs and QPs made in it (atomic) */
	/* index form only (under the context's lock) */
	bool hidden;
	uint32_t index;
	struct sv_res_domain *next; /* in sv_context.idx_domains */
};

static inline struct sv_res_domain *to_sv_rd(struct ibv_exp_res_domain *rd)
{
	return (struct sv_res_domain *)rd;
}

/* The daemon's side of a domain (resdom.c): CREATE_DOMAIN with an
 * SV_MSG_* and SV_DOMAIN_* flags, and DESTROY_DOMAIN. 0 or -errno. */
int sv_domain_create(struct sv_context *ctx, uint32_t msg_model,
		     uint32_t flags, struct sv_rsp_domain *out);
int sv_domain_destroy(struct sv_context *ctx, uint64_t handle);
/* CQs and QPs made in a domain hold a reference on it. */
void sv_rd_get(struct sv_res_domain *rd);
/* Drop one: a hidden (index-form) domain goes with its last reference. */
void sv_rd_put(struct sv_context *ctx, struct sv_res_domain *rd);
/* The hidden domain of index idx, made on first use, with one more
 * reference: the domain or NULL with errno set. */
struct sv_res_domain *sv_rd_of_index(struct sv_context *ctx, uint32_t idx);

struct sv_td;

/* A protection domain, or a parent domain (td.c): a parent domain names the
 * daemon's PD of its parent (same handle) and carries a thread domain. */
struct sv_pd {
	struct ibv_pd ibpd;
	uint64_t handle;
	struct sv_pd *parent;      /* parent domains only: the PD they extend */
	struct sv_td *td;          /* parent domains only: NULL or their td */
	uint32_t refs;             /* PDs: parent domains made on them;
				    * parent domains: QPs and CQs made on
				    * them (they may hold the allocator's
				    * memory) */
	void *pd_context;          /* IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT */
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t resource_type);
};

/* A thread domain: objects made with it are used by one thread at a time,
 * so their post and poll take no lock; it is a daemon domain (SV_MSG_DEFAULT)
 * too, so that its QPs get a doorbell page of their own while one is free. */
struct sv_td {
	struct ibv_td ibtd;
	uint32_t refs;             /* parent domains using it */
	uint64_t domain;           /* the daemon's DOMAIN */
};

/* The daemon domain of a QP made on pd: its thread domain's, or 0. */
static inline uint64_t sv_pd_domain(struct ibv_pd *pd)
{
	struct sv_pd *p = (struct sv_pd *)pd;

	return p && p->parent && p->td ? p->td->domain : 0;
}

/* The allocators' resource types (SV_RES_TYPE_QP, SV_RES_TYPE_CQ) are in
 * <softverbs/softverbs.h>. */

/* Where a ring lives: our own mapping of the daemon's memfd, or a block
 * from a parent domain's allocator with that memfd mapped over it. */
struct sv_ring_mem {
	void *map;
	size_t bytes;              /* the ring's size (the mapping's) */
	struct sv_pd *pd;          /* the allocator's parent domain, or NULL */
	void *block;               /* pd's block (== map), or NULL */
	struct sv_pool_map *pool;  /* the shared mapping map lies in (td.c) */
	size_t block_bytes;
	uint64_t res_type;
};

/* Map bytes at offset (a multiple of the page size) of the ring memfd fd
 * into m: in a block of pd's allocator if pd
 * is a parent domain with one that does not answer USE_DEFAULT, else
 * anywhere (the object whose ring it is holds a reference on pd, which
 * outlives the block). 0 or -errno (ENOMEM: the allocator gave NULL; EINVAL: a block not aligned
 * to the page size). */
int sv_ring_map(struct sv_ring_mem *m, struct sv_pd *pd, uint64_t res_type,
		int fd, uint64_t offset, size_t bytes);
/* Undo sv_ring_map: a block gets private anonymous memory back over it and
 * goes to the allocator's free. */
void sv_ring_unmap(struct sv_ring_mem *m);

/* A parent domain's references from the QPs and CQs made on it. */
void sv_pd_get(struct ibv_pd *pd);
void sv_pd_put(struct ibv_pd *pd);

/* Objects made on pd are single-threaded: pd is a parent domain with a
 * thread domain. */
static inline bool sv_pd_single_threaded(struct ibv_pd *pd)
{
	struct sv_pd *p = (struct sv_pd *)pd;

	return p && p->parent && p->td;
}

static inline struct sv_pd *to_sv_pd(struct ibv_pd *pd)
{
	return (struct sv_pd *)pd;
}

struct sv_mr {
	struct ibv_mr ibmr;
	uint64_t handle;
	struct sv_dm *dm;          /* ibv_reg_dm_mr: the DM it lies in */
};

/* Device memory (dm.c): the device's sealed memfd, mapped here; the
 * descriptor stays open (the device finds MRs over it by it). */
struct sv_dm {
	struct ibv_dm ibdm;
	uint64_t handle;
	void *map;
	size_t bytes;              /* the mapping's size */
	uint64_t length;           /* as allocated */
	int fd;
	unsigned int mrs;          /* MRs over it (atomic): busy while > 0 */
};

/* An MR's access as the daemon takes it: the optional bits, which a device
 * that lacks them may ignore, stripped. */
static inline unsigned int sv_mr_access(unsigned int access)
{
	return access & ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE;
}

/* pd_mr.c: the MR that cmd (REG_MR, ALLOC_MR, REG_MR_LIST, on pd) makes,
 * with addr and length as the application sees them; NULL with errno set. */
struct ibv_mr *sv_mr_create(struct ibv_pd *pd, struct sv_cmd *cmd,
			    void *addr, uint64_t length);

/* A memory window (mm.c). */
struct sv_mw {
	struct ibv_mw ibmw;
	uint64_t handle;
};

/* A fast-register page list (mm.c): the daemon's PAGE_LIST and our mapping
 * of its memory, where pl.page_list and pl.blocks point. */
struct sv_page_list {
	struct ibv_exp_fast_reg_page_list pl;
	uint64_t handle;
	size_t bytes;              /* the mapping's size */
};

static inline struct sv_page_list *
to_sv_page_list(const struct ibv_exp_fast_reg_page_list *pl)
{
	return (struct sv_page_list *)pl;
}

struct sv_channel {
	struct ibv_comp_channel ch;
	uint64_t handle;
	struct sv_channel *next;   /* in sv_context.channels */
};

struct sv_cq {
	struct ibv_cq_ex ex;       /* head is a struct ibv_cq */
	uint64_t handle;
	struct sv_cq *next;        /* in sv_context.cqs */
	struct sv_cq_ring *ring;
	size_t ring_bytes;
	struct sv_ring_mem mem;    /* where ring lives */
	struct ibv_pd *parent;     /* the parent domain it was made on, or NULL */
	struct sv_res_domain *rd;  /* its resource domain (a reference), or NULL */
	uint32_t entries;          /* private copy: never trust the ring's */
	uint32_t cons;             /* private copy of the consumer counter */
	uint32_t arm_sn;
	uint32_t ex_flags;         /* wc_flags asked at create_cq_ex */
	const struct sv_cqe *cur;  /* the CQE of an open poll (cq_ex) */
	int lock;                  /* sv_lock.h */
	bool single_threaded;
	uint32_t comp_events;      /* handed out by ibv_get_cq_event */
	uint32_t async_events;     /* handed out by ibv_get_async_event */
	uint32_t dead_arm_sn;      /* the arm a dead channel last answered
				    * (context lock) */
	/* The completions of WQEs the library executed itself (direct.c),
	 * merged with the daemon's ring by their stamps: NULL for a CQ that
	 * never takes them (no direct path). A
	 * poster holds a slot before it runs a WR and fills it after; the
	 * poller (CQ lock) gives slots back. dlock guards dprod's writes,
	 * dheld, the stamps and the post path's look at the daemon's ring. */
	struct sv_cqe *dring;
	/* [dmask + 1]: each dring completion's stamp, the daemon ring's
	 * position past the last daemon completion of its QP when it was
	 * pushed: poll delivers every daemon completion below it first */
	uint32_t *dstamp;
	uint32_t dmask;            /* entries - 1, a power of two */
	uint32_t dprod;            /* written under dlock (release) */
	uint32_t dcons;            /* the poller's (CQ lock; stored atomically:
				    * sv_poll_cq reads it without the lock) */
	/* The QPs whose receive CQ this is and which have a completion
	 * side (struct sv_xside), where senders of this host put the
	 * completions of their SENDs: poll moves those into the private
	 * ring (sv_direct_xdrain). Linked by xnext; CQ lock and dlock. */
	struct sv_qp *xqps;
	/* polls that looked at the sides' slots alone, and whether the last
	 * look at their words found more (xnews, CQ lock) */
	uint32_t xlooks;
	bool xlook;
	uint32_t dheld;            /* slots held or filled, not polled */
	/* dprod when an event last announced the private ring's completions
	 * (a channel's CQ: those after it fire the next arm) */
	uint32_t dannounced;
	/* A completion ring's completions that did not fit in the private
	 * ring (xdrain): the smallest stamp among them, below which alone
	 * the daemon's may be taken meanwhile (CQ lock) */
	uint32_t xcap;
	bool xcapped;
	int dlock;                 /* sv_lock.h */
	bool cur_direct;           /* cur is in dring (cq_ex polling) */
};

/* A private completion's stamp, never past the daemon ring's producer
 * prod (one from before ibv_resize_cq renumbered the ring, or moved up by
 * sv_cq_clean, would hold the completion back for a CQE that never
 * comes). */
static inline uint32_t sv_stamp_clamp(uint32_t stamp, uint32_t prod)
{
	return (int32_t)(prod - stamp) < 0 ? prod : stamp;
}

static inline struct sv_cq *to_sv_cq(struct ibv_cq *cq)
{
	return (struct sv_cq *)cq;
}

/*
 * An object that affiliated async events name (a QP or an SRQ), on its
 * context's list while it lives. An event is counted as handed out while the
 * object is on the list (under the context's lock); destroy unlinks it under
 * the same lock, then waits until every event handed out is acked, so it
 * never misses one (events.c).
 */
enum sv_evtarget_kind { SV_EVT_QP, SV_EVT_SRQ };

struct sv_evtarget {
	struct sv_evtarget *next;
	enum sv_evtarget_kind kind;
	void *obj;                 /* the ibv_qp / ibv_srq: the events' cookie */
	pthread_mutex_t *mutex;    /* the object's mutex, cond and */
	pthread_cond_t *cond;      /* events_completed (ibv_ack_async_event) */
	uint32_t *completed;
	uint32_t handed;           /* handed out by ibv_get_async_event */
};

void sv_ctx_add_evtarget(struct sv_context *ctx, struct sv_evtarget *t,
			 enum sv_evtarget_kind kind, void *obj,
			 pthread_mutex_t *mutex, pthread_cond_t *cond,
			 uint32_t *completed);
void sv_ctx_del_evtarget(struct sv_context *ctx, struct sv_evtarget *t);
/* The live object of that kind named by cookie, with one more event counted
 * as handed out; NULL when it has been destroyed since. */
void *sv_ctx_take_event(struct sv_context *ctx, enum sv_evtarget_kind kind,
			uint64_t cookie);

/* The library's side of one work-queue ring (struct sv_wq_ring). */
struct sv_wq {
	struct sv_wq_ring *hdr;    /* in the mapping */
	uint32_t entries;          /* private copies */
	uint32_t stride;
	uint32_t max_sge;
	uint32_t max_inline;
	uint32_t prod;             /* private producer counter */
};

/* The end of rdma-core 44's struct ibv_qp_ex (Debian 12's), whose last
 * member is wr_atomic_write, whichever verbs.h this is built against. */
#define SV_QP_EX_44_END                                                      \
	(offsetof(struct ibv_qp_ex, wr_atomic_write) +                       \
	 sizeof(((struct ibv_qp_ex *)0)->wr_atomic_write))

struct sv_qp {
	union {
		struct ibv_qp_ex ex;       /* head is a struct ibv_qp */
		struct {
			char ex44[SV_QP_EX_44_END];
			/* the member rdma-core 56's struct ibv_qp_ex has
			 * past Debian 12's: ibv_wr_flush() of a program
			 * built against 56 or later calls it
			 * (verbs/rdma_private.h, "since 56"). Built
			 * against 56's verbs.h (Debian 13), this is ex's
			 * own wr_flush; against 44's, the word past ex. */
			void (*wr_flush)(struct ibv_qp_ex *qp, uint32_t rkey,
					 uint64_t remote_addr, size_t len,
					 uint8_t type, uint8_t level);
		};
	};
	uint64_t handle;
	/* the parent domain it holds a reference on, or NULL: kept here, not
	 * read from ibqp->pd at destroy (an imported PD may be unimported,
	 * its struct freed, before the QPs made on it are destroyed) */
	struct ibv_pd *pdom;
	struct sv_evtarget ev;     /* on sv_context.evtargets */
	void *ring;                /* the QP's memfd mapping */
	size_t ring_bytes;
	struct sv_ring_mem mem;    /* where ring lives */
	struct sv_res_domain *rd;  /* its resource domain (a reference), or NULL */
	struct sv_wq sq;
	struct sv_wq rq;           /* entries == 0 with an SRQ */
	struct sv_doorbell *db;    /* the page of the QP's engine */
	int sq_lock;               /* sv_lock.h */
	int rq_lock;
	bool single_threaded;      /* no locks on post */
	bool mailbox;              /* LOW_LATENCY domain: single WQEs are also
				    * copied into the send ring's mailbox
				    * (src/abi/sv_qp.h) */
	/* ibv_post_send of one WR (post.c; set by sv_qp_init_post): the
	 * mailbox variant or not, chosen once so that other QPs pay nothing */
	int (*post_one)(struct sv_qp *qp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad_wr);
	uint32_t fast_ops;         /* 1 << op: the opcodes post_one takes on
				    * this QP's type (sv_send_opcode_fast) */
	uint32_t fast_inline;      /* the inline bytes post_one takes:
				    * max_inline, at most 16 */
	uint32_t direct_ops;       /* 1 << op: those the direct path may run
				    * (direct.c), 0 without one */
	struct sv_dcache *dcache;  /* memfds it mapped (direct.c), or NULL */
	uint32_t est_asked;        /* the peer QPN DIRECT_EST was asked for
				    * (direct.c), 0: none */
	uint32_t dwait_gave_up;    /* 1 + the send ring's done when a wait
				    * for the engine ran out (direct.c), or 0 */
	/* The receive side of the direct path (src/abi/sv_qp.h struct
	 * sv_rq_xpub, struct sv_xside): the completion side of this
	 * connection, which the device made at RTR and senders of this host
	 * write SENDs' completions to (NULL: none), mapped xs_len bytes; its
	 * ring, xmask + 1 slots; its consumer counter (the receive CQ's
	 * lock); the receive CQ's list. */
	struct sv_xside *xs;
	size_t xs_len;
	struct sv_cqe *xring;
	uint32_t xmask;
	uint32_t xcons;
	struct sv_qp *xnext;
	/* the header that holds that side's counters: the receive ring's,
	 * or, on an SRQ, the send ring's (sxpub); its xpub there; NULL: the
	 * QP takes no direct SENDs */
	struct sv_wq_ring *xhdr;
	struct sv_rq_xpub *xpub;
	/* The send side: the peer's receive ring and CQ ring it maps to
	 * send to it directly (direct.c), or NULL */
	struct sv_dpeer *dpeer;
	uint8_t dsl;               /* the SL of its address (MODIFY_QP) */
	bool has_ex;               /* created by create_qp_ex: ibv_qp_to_qp_ex */
	uint32_t sq_sig_all;
	uint64_t send_ops_flags;
	uint32_t max_send_wr;      /* what the caller may have outstanding */
	uint32_t max_recv_wr;
	/* ibv_wr_* session (wr.c): between wr_start and wr_complete */
	uint32_t wr_start_prod;    /* sq.prod at wr_start */
	void *wr_cur;              /* the slot being built, NULL when none */
	int wr_err;                /* first error in this session */
};

static inline struct sv_qp *to_sv_qp(struct ibv_qp *qp)
{
	return (struct sv_qp *)qp;
}

struct sv_srq {
	struct ibv_srq ibsrq;
	uint64_t handle;
	struct sv_evtarget ev;     /* on sv_context.evtargets */
	void *ring;
	size_t ring_bytes;
	struct sv_ring_mem mem;    /* where ring lives */
	struct sv_wq rq;
	struct sv_doorbell *db;
	uint32_t srqn;
	uint32_t max_wr;
	int lock;                  /* sv_lock.h */
	/* a tag-matching SRQ: its ops ring (src/abi/sv_tm.h; hdr NULL for
	 * others), the tags its list holds, the TAG_ADDs posted, the last
	 * handle given */
	struct sv_wq tm_ops;
	uint32_t tm_max_tags;
	uint32_t tm_adds;
	uint32_t tm_handle;
};

static inline struct sv_srq *to_sv_srq(struct ibv_srq *srq)
{
	return (struct sv_srq *)srq;
}

struct sv_xrcd {
	struct ibv_xrcd ibxrcd;
	uint64_t handle;
};

static inline struct sv_xrcd *to_sv_xrcd(struct ibv_xrcd *x)
{
	return (struct sv_xrcd *)x;
}

struct sv_ah {
	struct ibv_ah ibah;
	uint64_t handle;
};

/* An address vector as the daemon takes it (qp.c; also CREATE_AH). */
void sv_ah_to_wire(const struct ibv_ah_attr *a, struct sv_wire_ah *w);

/* post.c: pick qp->post_one after qp->mailbox is set (create_qp), and the
 * opcodes it takes on a QP of type. */
void sv_qp_init_post(struct sv_qp *qp, enum ibv_qp_type type);

/* Wake the engine behind a doorbell page if it sleeps: the only system call
 * on the post path. Call after publishing a producer counter. */
void sv_doorbell_ring(struct sv_doorbell *db);

/* ---- the direct path (direct.c; docs/DESIGN.md "The direct path") ---- */

/* Map the device's tables after OPEN_CONTEXT (ctx->direct stays NULL where
 * the daemon offers none or SOFTVERBS_DIRECT=0); unmap them at close. */
void sv_direct_open(struct sv_context *ctx);
void sv_direct_close(struct sv_context *ctx);
/* The opcodes the direct path may run on a QP of type (its direct_ops). */
uint32_t sv_direct_ops(struct sv_context *ctx, enum ibv_qp_type type);
/* A QP's cache of mapped memfds (after direct_ops is set): 0 or -ENOMEM;
 * and its end (unmapping them). */
int sv_direct_qp_init(struct sv_qp *qp);
void sv_direct_qp_fini(struct sv_qp *qp);
/* A new RC or UC QP with a receive queue of its own takes direct SENDs:
 * its completion ring, published in its receive ring (ibqp filled in). */
void sv_direct_rq_init(struct sv_qp *qp);
/* srq's ring looks full by its cons: has it room for one more by its word
 * (the WQEs senders of this host claimed, src/abi/sv_direct.h)? */
bool sv_direct_srq_room(struct sv_srq *srq, uint32_t max);
/* ... and off its receive CQ's list (destroy, after the device's). */
void sv_direct_rq_fini(struct sv_qp *qp);
/* The completions senders put in the completion rings of cq's QPs, into
 * its private ring (CQ lock held). */
void sv_direct_xdrain(struct sv_cq *cq);
/* cq's ring moved (ibv_resize_cq): its QPs' senders map it again (CQ
 * lock held). */
void sv_direct_cq_moved(struct sv_cq *cq);
/* Drop what the completion ring of qp holds (RESET, destroy). */
void sv_direct_rq_clean(struct sv_qp *qp);
/* MODIFY_QP into RTR gave qp a completion side (its memfd, fd, which this
 * closes). */
void sv_direct_xside_set(struct sv_qp *qp, int fd);
/* A receive queue of qp's own looks full by its cons: has it room for one
 * more by its completion side (the WQEs senders of this host took)? */
bool sv_direct_rq_room(const struct sv_qp *qp, uint32_t max);
/* Has a sender published a completion in one of cq's QPs' sides that
 * its slot does not show yet (a look at the words; CQ lock held)? Sets
 * cq->xlook. */
bool sv_direct_xwords(struct sv_cq *cq);
/* How many completions of qp's side from its xcons on poll may take: by
 * their slots' numbers, and by the side's word when look (CQ lock). */
uint32_t sv_direct_xavail(const struct sv_qp *qp, bool look);
/* Poll took qp's side's completions up to c: its slots go back. */
void sv_direct_xtaken(struct sv_qp *qp, uint32_t c);
/* qp joins or leaves cq's list of QPs with a completion ring (cq.c) */
void sv_cq_xadd(struct sv_cq *cq, struct sv_qp *qp);
void sv_cq_xdel(struct sv_cq *cq, struct sv_qp *qp);
/* The private completion ring of a new CQ: 0 or
 * -ENOMEM; and its end. */
int sv_direct_cq_init(struct sv_context *ctx, struct sv_cq *cq);
void sv_direct_cq_fini(struct sv_cq *cq);
/*
 * Run one checked WR (opcode op, flags as posted: a bit of qp->direct_ops)
 * in this process, with the checks the daemon would make: 0 when it ran and
 * its completion (if signaled) is in its CQ's private ring; -1 when it must
 * go to the daemon instead (nothing moved, or only what the daemon path
 * moves again). Under the SQ lock.
 */
int sv_direct_post(struct sv_qp *qp, const struct ibv_send_wr *wr,
		   uint32_t op, unsigned int flags);
/* The same for a list's WRs wrs[0 .. n) in order (each checked, each an
 * opcode of qp->direct_ops): how many ran here, a prefix (the rest go to
 * the ring). WRITEs that need the kernel share one process_vm_writev. */
#define SV_DIRECT_LIST 64
unsigned int sv_direct_post_many(struct sv_qp *qp,
				 struct ibv_send_wr *const *wrs,
				 unsigned int n);

/* device.c */
extern struct sv_device sv_device0;
/* IMPORT_OBJ (pd_mr.c): 0 or -errno; *fd (if fd) the DM's memfd. */
int sv_import_obj(struct ibv_context *context, unsigned int type,
		  uint32_t handle, uint64_t pd, struct sv_rsp *rsp, int *fd);
/* Fill sv_device0 from the daemon if not yet done: 0 or -errno. */
int sv_device_probe(void);

/* events.c: is cookie a live CQ of ctx? (the CQ, else NULL) */
struct sv_cq *sv_ctx_find_cq(struct sv_context *ctx, uint64_t cookie);

/* context.c */
void sv_context_set_ops(struct sv_context *ctx);
/* The DESTROY/DEALLOC/DEREG command op for handle: 0 or a positive errno,
 * as the verbs return it. On a dead device it succeeds: the device took the
 * object with it. */
int sv_destroy_obj(struct ibv_context *context, unsigned int op,
		   uint64_t handle);

/* pd_mr.c: ibv_advise_mr (on-demand MRs) */
int sv_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		 uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge);

/* dm.c: device memory (the context ops) */
struct ibv_dm *sv_alloc_dm(struct ibv_context *context,
			   struct ibv_alloc_dm_attr *attr);
int sv_free_dm(struct ibv_dm *dm);
struct ibv_mr *sv_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm,
			    uint64_t dm_offset, size_t length,
			    unsigned int access);

/* mm.c: memory windows (the context ops) */
struct ibv_mw *sv_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int sv_dealloc_mw(struct ibv_mw *mw);
int sv_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
	       struct ibv_mw_bind *mw_bind);

/* td.c: thread and parent domains */
struct ibv_td *sv_alloc_td(struct ibv_context *context,
			   struct ibv_td_init_attr *attr);
int sv_dealloc_td(struct ibv_td *td);
struct ibv_pd *sv_alloc_parent_domain(struct ibv_context *context,
				      struct ibv_parent_domain_init_attr *attr);
/* ibv_dealloc_pd of a parent domain; -EBUSY for a PD that has some. */
int sv_dealloc_parent_domain(struct sv_pd *pd);

/* unsupported.c: typed EOPNOTSUPP stubs behind every op we lack */
void sv_fill_unsupported_ops(struct verbs_context *vctx);

/* query.c */
int sv_query_port(struct ibv_context *context, uint8_t port_num,
		  struct ibv_port_attr *attr, size_t attr_len);
int sv_query_device_ex(struct ibv_context *context,
		       const struct ibv_query_device_ex_input *input,
		       struct ibv_device_attr_ex *attr, size_t attr_size);

/* cq_ctl.c */
struct ibv_cq_ex *sv_create_cq_ex(struct ibv_context *context,
				  struct ibv_cq_init_attr_ex *attr);
/* The create path of both APIs: attr as create_cq_ex's; rd (NULL or a
 * domain the CQ takes a reference on) makes it single-threaded unless its
 * thread model is SAFE. */
struct ibv_cq_ex *sv_create_cq_in(struct ibv_context *context,
				  struct ibv_cq_init_attr_ex *attr,
				  struct sv_res_domain *rd);

/* qp.c: what the create path of every API is given besides the attributes */
struct sv_qp_dom {
	uint64_t domain;           /* the daemon's DOMAIN, 0 for none */
	bool single_threaded;      /* no locks on post */
	struct sv_res_domain *rd;  /* its reference goes to the QP on success */
	struct sv_pd *alloc_pd;    /* parent domain whose allocator makes the
				    * ring's memory, or NULL */
};
/* cq.c */
int sv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int sv_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);
uint32_t sv_cq_clean(struct ibv_cq *cq, uint32_t qp_num);
/* A dead device's channel read EOF: a CQ of ctx on channel, armed since it
 * last answered so, that holds completions or has flushes due (cq.c); NULL
 * when none. */
struct sv_cq *sv_cq_dead_event(struct sv_context *ctx,
			       struct ibv_comp_channel *channel);

/* Has the device died (the daemon is gone)? One relaxed load: the post
 * path refuses with EIO, an empty poll completes the WQEs left with
 * IBV_WC_WR_FLUSH_ERR. Set once by whoever first finds out. */
static inline bool sv_ctx_dead(struct ibv_context *context)
{
	return __atomic_load_n(&to_sv_ctx(context)->conn.dead,
			       __ATOMIC_RELAXED);
}

static inline void sv_ctx_mark_dead(struct sv_context *ctx)
{
	__atomic_store_n(&ctx->conn.dead, true, __ATOMIC_RELEASE);
}

/* Errors: internal functions return -errno; verbs set errno themselves. */
static inline void *sv_err_ptr(int neg)
{
	errno = -neg;
	return NULL;
}

#define SV_EXPORT __attribute__((visibility("default")))

#endif

/* SPDX-License-Identifier: MIT */
/*
 * softverbsd's engine (private to the daemon): the threads that execute
 * WQEs (engine.c) and the execution itself (exec.c).
 *
 * The execution has four layers, from the bottom:
 *   - pure helpers with no device state (timer tables, range checks, the
 *     GRH builder, the scatter/gather walker; memio.c): unit-tested
 *     directly;
 *   - memory access (sv_mem_copy, memio.c): moves bytes between iovec lists
 *     in any two processes through a bounce buffer; it knows nothing of the
 *     daemon (a later phase may run it in the initiating process);
 *   - the memory of a side of a copy (span.c, exec_int.h): SGEs and remote
 *     ranges resolved through their keys (keymap.c) into iovecs, copied a
 *     window at a time;
 *   - WQE execution against the device objects (exec.c: the dispatcher;
 *     wq.c: the work-queue plumbing; loop/req.c, loop/resp.c: the same-host
 *     requester and responder; the RoCEv2 wire in roce/), under sv_dev.lock.
 */
#ifndef SV_DEVICE_ENGINE_H
#define SV_DEVICE_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "device/sv_dev.h"

/* A doorbell page and the work of its QPs; an engine thread (engine.c)
 * runs the work of one or more pages. */
struct sv_engine {
	unsigned int index;        /* its doorbell page in sv_dev.db_map */
	bool started;              /* a thread serves it */
	struct sv_doorbell *db;
	/* odd while the engine copies bytes without sv_dev.lock (loop/resp.c),
	 * or waits without it in a fence (then `fencing` is set too, under the
	 * lock); written by the engine, read by sv_engine_quiesce and by other
	 * engines' fences */
	uint32_t copy_seq;
	bool fencing;
	/* the domains on this page (pages 1..: 0 = free) and the policy of
	 * the first of them (enum sv_msg_model), under sv_dev.lock */
	uint32_t domains;
	bool exclusive;            /* held by a dedicated-only domain: no
				    * other domain joins it */
	uint32_t msg_model;
	uint64_t spin_ns;          /* spin this long idle before sleeping */
	uint32_t batch;            /* WQEs of one QP per pass, at most */
	/* the QPs it serves: a circular list through eng_next/eng_prev,
	 * under sv_dev.lock */
	struct sv_qp *qps;
	struct sv_qp *cursor;      /* the next QP a pass visits */
	uint32_t nqp;
	/* the tag-matching SRQs whose ops rings it applies (through
	 * sv_srq.tm_next), under sv_dev.lock */
	struct sv_srq *tm_srqs;
	void *bounce;              /* allocated once, at start */
	size_t bounce_bytes;
};


/* ---- exec.c: pure helpers ---- */

/* min_rnr_timer (IBA encoding 0..31) in ns; 0 is the longest, 655.36 ms. */
uint64_t sv_rnr_timer_ns(uint8_t code);
/* Local ACK timeout 4.096 us * 2^timeout in ns; 0 = infinite (UINT64_MAX). */
uint64_t sv_ack_timeout_ns(uint8_t timeout);
/* enum ibv_mtu to bytes (0 for an unknown value). */
uint32_t sv_mtu_bytes(uint32_t mtu);
/* Is [addr, addr + len) inside [base, base + size)? Never overflows. */
bool sv_range_ok(uint64_t base, uint64_t size, uint64_t addr, uint64_t len);
/* Internet checksum of len bytes (one's complement of the one's complement
 * sum of big-endian 16-bit words). */
uint16_t sv_ip_csum(const void *p, size_t len);
/* Is gid an IPv4-mapped IPv6 address (::ffff:a.b.c.d)? */
bool sv_gid_is_v4(const uint8_t gid[16]);

#define SV_GRH_BYTES 40u
/* Build the 40 bytes a UD receive buffer starts with. sgid is the sender's
 * GID: IPv4-mapped gives a RoCEv2 IPv4 form (20 zero bytes, then an IPv4
 * header), anything else an IPv6/GRH form. payload: the message bytes;
 * imm: the message carried immediate data. */
void sv_grh_build(uint8_t out[SV_GRH_BYTES], const uint8_t sgid[16],
		  const uint8_t dgid[16], uint8_t traffic_class,
		  uint32_t flow_label, uint8_t hop_limit, uint32_t payload,
		  bool imm);
/*
 * The sl of a UD receive completion on the RoCEv2 port: the network header
 * type of the datagram, as RoCE NICs report it there (IBTA Annex A17.4.5.1:
 * a RoCEv2 UD CQE tells IPv4 from IPv6; verbs have no field but sl, and
 * mlx5 puts it there: bit 3 "UDP (RoCEv2)", bits 2:0 the L3 type, 1 IPv6,
 * 2 IPv4). Consumers read it to find the destination address in the first
 * 40 bytes (UCX's ud_verbs: sl & 7 == 2 means the last 4 bytes are the
 * IPv4 destination, else the last 16 the IPv6 one). sgid: the sender's GID,
 * which picks the form as in sv_grh_build. RoCE carries no SL on the wire.
 */
#define SV_WC_SL_ROCEV2_IPV6 0x9u
#define SV_WC_SL_ROCEV2_IPV4 0xau
uint8_t sv_grh_wc_sl(const uint8_t sgid[16]);

/* A position in an iovec list. */
struct sv_iov_cur {
	unsigned int idx;
	size_t off;
};
/* Move the cursor off bytes forward; false if the list is shorter. */
bool sv_iov_seek(const struct iovec *iov, unsigned int n,
		 struct sv_iov_cur *cur, uint64_t off);
/* Describe, in out[0..*nout), the next bytes at cur: at most max bytes in at
 * most outmax pieces (zero-length entries are skipped). Advances cur;
 * returns the byte count. */
size_t sv_iov_take(const struct iovec *iov, unsigned int n,
		   struct sv_iov_cur *cur, size_t max, struct iovec *out,
		   unsigned int outmax, unsigned int *nout);

/* ---- exec.c: memory access ---- */

/* Memory of one process as an iovec list; pid 0 is this process. */
/* iovecs per process_vm_readv/writev call, and per span window (exec.c) */
#define SV_IOV_WINDOW 64

struct sv_mem {
	pid_t pid;
	const struct iovec *iov;
	unsigned int niov;
};

enum {
	SV_COPY_OK = 0,
	SV_COPY_SRC_FAULT = 1,     /* the source side could not be read */
	SV_COPY_DST_FAULT = 2,     /* the destination could not be written */
};

/* Copy len bytes from src (from byte src_off of its list) to dst (from
 * dst_off) through bounce, chunk by chunk; when exactly one side is this
 * process (pid 0), directly, one process_vm_readv/_writev per window of
 * iovecs. Both lists must be long enough (a short one is a fault of that
 * side). No allocation. */
int sv_mem_copy(const struct sv_mem *dst, uint64_t dst_off,
		const struct sv_mem *src, uint64_t src_off, uint64_t len,
		void *bounce, size_t bounce_bytes);

/* Has process pid exited, or is it exiting (its memory gone, its teardown
 * not run yet)? A poll of its pidfd (or kill 0 without one), then one
 * probe of its memory: after a copy failed, never on the way of one. */
bool sv_proc_gone(pid_t pid, int pidfd);

/* Wait until *seq is no longer seen (another thread's copy_seq moves on by
 * itself: the end of a copy between two processes). */
void sv_seq_wait(const uint32_t *seq, uint32_t seen);

/* ---- exec.c: WQE execution (under sv_dev.lock) ---- */

struct sv_exec {
	void *bounce;
	size_t bounce_bytes;
	uint64_t now;              /* CLOCK_MONOTONIC ns, of this pass */
	/* the engine's copy_seq: messages of SV_UNLOCKED_COPY bytes or more
	 * are copied without sv_dev.lock. NULL (unit tests): never unlock. */
	uint32_t *copy_seq;
	/* the engine's `fencing`: an operation that ends a grant waits,
	 * without the lock, for the other engines' unlocked copies (the
	 * engines of sv_dev.engine). NULL (unit tests): never waits. */
	bool *fencing;
};

/* Copies this large or larger run without the device lock, so that engines
 * of other domains (and commands) go on meanwhile. */
#define SV_UNLOCKED_COPY (16u * 1024u)

uint64_t sv_now_ns(void);

/* Does qp have something to do at time now? If it only waits on a timer,
 * *timer (when timer is not NULL: a spin's look) is lowered to that
 * deadline. */
bool sv_exec_ready(const struct sv_qp *qp, uint64_t now, uint64_t *timer);

/* DESTROY_QP and DESTROY_AH (ctl/qp.c, ah.c): are WQEs of qp's send queue numbered
 * below upto still to run, and would the engine run the head now? false
 * in a state that runs nothing (ERR flushes, RESET drops), once upto is
 * reached, and while the head waits on the network (an RNR NAK, a
 * transport timeout; on the wire also packets all sent). */
bool sv_exec_sq_owes(const struct sv_qp *qp, uint32_t upto, uint64_t now);

/* qp enters SQD (ctl/qp.c, on the modify): the WQEs posted so far still run,
 * later ones wait for the return to RTS. Without this call SQD starts no
 * WQE at all. */
void sv_exec_enter_sqd(struct sv_qp *qp);

/* Do one step of qp's work (execute or flush one WQE, or send one pending
 * event). true if something was done. */
bool sv_exec_step(struct sv_exec *x, struct sv_qp *qp);

#endif

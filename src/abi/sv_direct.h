/* SPDX-License-Identifier: MIT */
/*
 * The direct path's published tables (docs/DESIGN.md "The direct path"):
 * one memfd per device, made by the daemon, that every context maps. One
 * definition for the library and the daemon.
 *
 *   [0, 4 KiB)             struct sv_direct_hdr          read-only to clients
 *   [qp_off, +qps)         struct sv_direct_qp[qp_slots] read-only to clients
 *   [key_off, +keys)       struct sv_direct_key[key_slots] read-only
 *
 * and one more memfd per uid, read-write to the clients of that uid alone
 * (OPEN_DIRECT with SV_DIRECT_PART_GUARDS): the guards of that uid's QPs
 * and the remote iovecs of their copies. A process may go direct only to a
 * peer of its own uid (the kernel's ptrace rule), so only processes that
 * can already write each other's memory share a guard table.
 *
 *   [0, +guards)           struct sv_direct_guard[qp_slots]
 *   [riov_off, +riovs)     struct sv_direct_riov[qp_slots]
 *   [claim_off, +claims)   struct sv_direct_claim[qp_slots]
 *   [srq_off, +srqs)       struct sv_direct_srq[SV_DIRECT_SRQ_SLOTS]
 *
 * The daemon alone writes the header and the tables, always under its device
 * lock, each entry under a seqlock: `seq` odd while it is being written. A
 * reader copies an entry word by word and uses the copy only if `seq` was
 * even and unchanged across the copy (sv_direct_read).
 *
 * Entries grant nothing by themselves: they say what the daemon's own checks
 * would find (key, PD, access, bounds, QP state), so that a process may
 * execute a WQE to a peer of its own uid on this host with one
 * process_vm_writev/readv, with every check the daemon would make, and fall
 * back to the daemon path for anything else.
 *
 * Revocation (an entry made less permissive: dereg, rereg, a QP leaving its
 * state): the daemon rewrites the entry, increments `epoch`, then waits until
 * each guard is 0 or at least the new epoch before it completes the
 * command. An initiator stores its thread id and the epoch it read into its
 * QP's guard, then a full fence, then reads the entries. Either the
 * daemon's scan sees the guard (and waits for that copy), or the initiator
 * sees the rewritten entry (and refuses).
 *
 * The fence a stopped initiator cannot pass: an initiator puts the remote
 * iovecs of each system call in its slot's sv_direct_riov (and says
 * SV_DGUARD_MAPPED before a plain copy), then a full fence, then checks
 * that `epoch` is still the one in its guard, and only then calls the
 * kernel, which reads the iovecs from this shared memory. A revocation that
 * finds a guard held (a writer stopped, frozen or starved between its
 * checks and its copy) zeroes every iov_len of the slot, then looks at the
 * thread: stopped, or anywhere but inside process_vm_writev/readv, its
 * copy either moves nothing (the kernel reads the zeroed lengths, or the
 * initiator sees the new epoch and refuses) or is over; running, or inside
 * the call, it is waited for, as a NIC waits for its DMA. A plain copy
 * (memcpy through mappings, SV_DGUARD_MAPPED) cannot be fenced and is
 * always waited for. docs/DESIGN.md "The direct path" has the proof.
 */
#ifndef SV_ABI_DIRECT_H
#define SV_ABI_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "abi/sv_keyperm.h"
#include "abi/sv_ring.h" /* SV_CACHELINE */

/* seq is the low half of an entry's first word */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian");

#define SV_DIRECT_MAGIC   0x73766472u  /* "svdr" */
#define SV_DIRECT_VERSION 3u

struct sv_direct_hdr {
	uint32_t magic;            /* SV_DIRECT_MAGIC */
	uint32_t version;          /* SV_DIRECT_VERSION */
	uint32_t qp_slots;         /* QP entries and guards: a power of two */
	uint32_t key_slots;        /* key entries (slot 0 unused) */
	uint64_t guard_bytes;      /* the size of a uid's guard memfd */
	uint64_t riov_off;         /* in it, the iovecs (page aligned) */
	uint64_t claim_off;        /* in it, the SRQ claims (page aligned) */
	uint64_t srq_off;          /* in it, the SRQ words (page aligned) */
	uint64_t qp_off;           /* byte offsets in the memfd, page aligned */
	uint64_t key_off;
	uint64_t bytes;            /* the memfd's size */
	struct sv_keyperm perm;    /* key index <-> slot (ctl/keys.c) */
	/* bumped by every revocation (seq_cst); never 0 */
	uint64_t epoch;
	uint8_t pad1[SV_CACHELINE - 8];
};

_Static_assert(offsetof(struct sv_direct_hdr, epoch) == 2 * SV_CACHELINE &&
	       72 + sizeof(struct sv_keyperm) == 2 * SV_CACHELINE,
	       "epoch line");
_Static_assert(sizeof(struct sv_direct_hdr) <= 4096, "direct hdr");

/* The initiator's side of a QP (slot qpn & (qp_slots - 1) of its owner's
 * uid's guard table): its guard, and what it ran directly (the daemon's
 * counters add them up). Written by the QP's poster alone (under its SQ
 * lock); the daemon reads them, clears the slot when the QP comes and goes,
 * and zeroes the slot's iovec lengths to fence a copy (above). */
struct sv_direct_guard {
	uint64_t epoch;            /* 0, or the epoch of the copy under way */
	uint64_t msgs;             /* WQEs run directly */
	uint64_t bytes;            /* their bytes */
	uint64_t mapped;           /* of msgs: copied through mappings of
				    * both sides' memfds (SV_DKEY_FILE) */
	int32_t tid;               /* the thread that holds it (the
				    * kernel's thread id) */
	uint32_t flags;            /* SV_DGUARD_* */
	/* WRs the direct path could have run and sent to the daemon
	 * instead, by reason (SV_DREF_*); the poster's, as msgs */
	uint32_t refused[6];
};

_Static_assert(sizeof(struct sv_direct_guard) == 64, "direct guard");

/* Why a WR of an operation the direct path runs went to the daemon
 * (sv_direct_guard.refused) */
enum sv_direct_refusal {
	SV_DREF_BUSY,      /* WRs of its QP were still at the daemon */
	SV_DREF_CQ,        /* its CQ had no room for one more completion */
	SV_DREF_CHANNEL,   /* its CQ has no private ring (none could be made) */
	SV_DREF_PEER,      /* the peer is not on this host, not connected to
			    * it, withdrawn (softverbs inject), or cannot
			    * take it (state, access) */
	SV_DREF_CHECK,     /* a key, range or size check failed: the daemon
			    * finds the same and says it in the completion */
	SV_DREF_FENCE,     /* a revocation began, or the copy fell short */
	SV_DREF_MAX
};

/* The reason's name in softverbs stat (text and --json) */
static inline const char *sv_direct_refusal_name(unsigned int r)
{
	switch (r) {
	case SV_DREF_BUSY: return "busy";
	case SV_DREF_CQ: return "cq_full";
	case SV_DREF_CHANNEL: return "no_cq_ring";
	case SV_DREF_PEER: return "peer";
	case SV_DREF_CHECK: return "check";
	case SV_DREF_FENCE: return "fence";
	default: return "?";
	}
}

/* sv_direct_guard.flags */
#define SV_DGUARD_MAPPED 1u  /* a plain copy (memcpy) may be under way */

/* The remote iovecs of a guard's system call, where the daemon can zero
 * them (one batch: at most SV_DIRECT_RIOV WRs). The kernel's struct iovec,
 * read by process_vm_writev/readv from here. */
#define SV_DIRECT_RIOV 64u

struct sv_direct_riov {
	struct {
		uint64_t base;
		uint64_t len;
	} iov[SV_DIRECT_RIOV];
};

_Static_assert(sizeof(struct sv_direct_riov) == 16 * SV_DIRECT_RIOV,
	       "direct riov");

/*
 * A WQE a QP's poster claimed from its peer's SRQ (slot qpn & (qp_slots -
 * 1), as its guard): a copy of it, made before the claim's compare-and-
 * swap, armed (qpn set, release) right after it, cleared (qpn 0) once the
 * copy that fills it landed. A claim still armed when the poster has let
 * its guard go is one whose copy did not land (a revocation fenced it, the
 * peer's memory faulted): the device adopts it for the receiving QP qpn
 * (its WR comes to the device after it, and is delivered into that WQE,
 * or the QP's flush completes it), unless that QP's completion side says
 * it landed after all (its producer reached xprod: a poster killed
 * between its copy and the clear). Any process of the uid can write a
 * record: the device believes one only where any of them could write
 * into the receiving QP's owner anyway (no Yama restriction, the owner
 * dumpable), and drops it elsewhere. docs/DESIGN.md "The direct path".
 */
#define SV_DCLAIM_SGE 8u

struct sv_direct_claim {
	uint32_t qpn;              /* the receiving QP; 0: none */
	uint32_t xprod;            /* its side's xprod once the copy landed
				    * (struct sv_xside) */
	uint32_t srqn;             /* the SRQ it was taken from */
	uint32_t num_sge;
	uint64_t wr_id;
	struct {
		uint64_t addr;
		uint32_t length;
		uint32_t lkey;
	} sge[SV_DCLAIM_SGE];
	uint8_t pad[SV_CACHELINE - 24];
};

_Static_assert(sizeof(struct sv_direct_claim) % SV_CACHELINE == 0,
	       "direct claim");

/*
 * The consumer word of an SRQ that senders of this host take WQEs of (slot
 * srqn & (SV_DIRECT_SRQ_SLOTS - 1) of its owner's uid's guard table): the
 * SRQ's cons in the low half, its tag in the high half (SV_DSRQ_*: the
 * SRQN, the ring's generation, SV_DSRQ_HELD). A sender reads the word,
 * copies and checks the WQE at its cons, then moves it from {c, tag} to
 * {c + 1, tag} by compare-and-swap (one that loses read a WQE another
 * taker had); the device instead holds the head ({c, tag | HELD}) while it
 * fills it and stores {c + 1, tag} when done, so that no sender takes a
 * WQE it fills, and a head it peeked and left stays posted. A tag that is
 * not the one a taker expects (the SRQ gone, its ring replaced by a
 * resize) fails the CAS. The device writes it first when DIRECT_RECV hands out
 * the SRQ's ring; until then, and for an SRQ no sender takes, the ring's
 * cons is the only consumer counter. The SRQ's owner reads it when the
 * ring's cons says the ring is full: WQEs taken here free their slots
 * before the device's cons says so.
 */
#define SV_DIRECT_SRQ_SLOTS (1u << 13)

struct sv_direct_srq {
	uint64_t word;             /* cons | tag << 32 */
	uint8_t pad[SV_CACHELINE - 8];
};

#define SV_DSRQ_SRQN   0x00ffffffu   /* the SRQ's number */
#define SV_DSRQ_GEN    0x7f000000u   /* its ring's generation */
#define SV_DSRQ_HELD   0x80000000u   /* the device fills the head WQE */

static inline uint32_t sv_dsrq_cons(uint64_t w)
{
	return (uint32_t)w;
}

static inline uint32_t sv_dsrq_tag(uint64_t w)
{
	return (uint32_t)(w >> 32);
}

static inline uint64_t sv_dsrq_word(uint32_t cons, uint32_t tag)
{
	return (uint64_t)tag << 32 | cons;
}

/* OPEN_DIRECT's parts */
#define SV_DIRECT_PART_TABLES 0u  /* the header, QP and key tables */
#define SV_DIRECT_PART_GUARDS 1u  /* the caller's uid's guards and iovecs */

/* sv_direct_qp.flags */
#define SV_DQP_LOCAL    1u  /* its peer is on this daemon (no wire) */
#define SV_DQP_EST      2u  /* established: a message to it raises no
			     * COMM_EST (RTS, or one came in RTR) */
#define SV_DQP_NODIRECT 4u  /* the daemon withdrew the direct path from it
			     * (a fault is armed for it: softverbs inject) */

/* A QP (qpn_tab's slot qpn & (qp_slots - 1)); qpn 0: none. */
struct sv_direct_qp {
	uint32_t seq;
	uint32_t qpn;
	uint8_t state;             /* enum ibv_qp_state */
	uint8_t type;              /* enum ibv_qp_type */
	uint8_t flags;             /* SV_DQP_* */
	uint8_t rsvd0;
	uint32_t access;           /* qp_access_flags */
	uint32_t pd;               /* the device-wide id of its PD */
	int32_t pid;               /* its owner's */
	uint32_t dest_qpn;
	uint32_t rsvd1;
};

_Static_assert(sizeof(struct sv_direct_qp) == 32, "direct qp");

/* How the table holds it: read and written a word at a time (the seqlock). */
union sv_direct_qp_u {
	struct sv_direct_qp e;
	uint64_t w[sizeof(struct sv_direct_qp) / 8];
};

/* A key (key table slot perm^-1(key >> 8)); key 0: nothing usable through
 * the direct path (no key, or one only the daemon path takes: memory
 * windows, fast-register and list MRs). */
/* sv_direct_key.flags */
#define SV_DKEY_FILE 1u  /* the memory lies in a sealed memfd the daemon
			  * hands out (MR_FILE): map it, copy with plain
			  * loads and stores */

struct sv_direct_key {
	uint32_t seq;
	uint32_t key;              /* the full key (lkey == rkey) */
	uint32_t access;           /* enum ibv_access_flags */
	uint32_t pd;               /* the device-wide id of its PD */
	int32_t pid;               /* its owner's */
	uint32_t flags;            /* SV_DKEY_* */
	uint64_t addr;             /* where byte iova lies in the owner */
	uint64_t iova;             /* the first address its users name */
	uint64_t length;
	uint64_t file_gen;         /* SV_DKEY_FILE: which memfd (a new
				    * translation gets a new number) */
	uint64_t rsvd1;
};

_Static_assert(sizeof(struct sv_direct_key) == 64, "direct key");

union sv_direct_key_u {
	struct sv_direct_key e;
	uint64_t w[sizeof(struct sv_direct_key) / 8];
};

/*
 * Copy the n words of a published entry (src: its words in the table; seq
 * is the low half of word 0) into dst under its seqlock: 1 when the copy is
 * consistent, 0 when the daemon was rewriting it. Relaxed atomic loads: the
 * daemon may write the words meanwhile.
 */
static inline int sv_direct_read(const uint64_t *src, uint64_t *dst,
				 unsigned int n)
{
	uint64_t w0;

	/* acquire: pairs with the daemon's release store of an even seq
	 * after the entry's words */
	w0 = __atomic_load_n(&src[0], __ATOMIC_ACQUIRE);
	if (w0 & 1)
		return 0;
	dst[0] = w0;
	for (unsigned int i = 1; i < n; i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	/* the words are read before seq is read again */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return (uint32_t)__atomic_load_n(&src[0], __ATOMIC_RELAXED) ==
	       (uint32_t)w0;
}

/*
 * The daemon's side: rewrite an entry's words (n, seq excluded: the low
 * half of word 0 is the sequence) with those of val. Writers are
 * serialized by the device lock.
 */
static inline void sv_direct_write(uint64_t *dst, const uint64_t *val,
				   unsigned int n)
{
	uint32_t seq = (uint32_t)__atomic_load_n(&dst[0], __ATOMIC_RELAXED);
	uint64_t hi = val[0] & ~(uint64_t)UINT32_MAX;

	/* odd: a reader that starts now retries */
	__atomic_store_n(&dst[0], (dst[0] & ~(uint64_t)UINT32_MAX) |
			 (uint32_t)(seq + 1), __ATOMIC_RELAXED);
	/* the odd seq is seen before any new word (pairs with the reader's
	 * acquire fence) */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (unsigned int i = 1; i < n; i++)
		__atomic_store_n(&dst[i], val[i], __ATOMIC_RELAXED);
	/* release: the words before the even seq (pairs with the reader's
	 * acquire load) */
	__atomic_store_n(&dst[0], hi | (uint32_t)(seq + 2), __ATOMIC_RELEASE);
}

#endif /* SV_ABI_DIRECT_H */

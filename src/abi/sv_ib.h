/* SPDX-License-Identifier: MIT */
/*
 * Numbers of the InfiniBand Architecture that more than one part of
 * softverbs writes down: the widths of the 24-bit fields (QPNs, XRC SRQ
 * numbers, PSNs), the one P_Key the device has, the Q_Key bit that makes a
 * UD send use its QP's own Q_Key, the multicast QPN. Named once, here; the
 * library, the daemon, the RoCEv2 wire (roce/wire.h) and the CM read them.
 */
#ifndef SV_ABI_IB_H
#define SV_ABI_IB_H

/* QPNs are 24 bits (the BTH's DestQP, the DETH's SrcQP). */
#define SV_QPN_MASK         0x00ffffffu
/* XRC SRQ numbers too (the XRCETH). */
#define SV_SRQN_MASK        0x00ffffffu
/* PSNs are 24 bits, and wrap: arithmetic modulo 2^24 (sv_psn_add,
 * sv_psn_diff in roce/). */
#define SV_PSN_MASK         0x00ffffffu
/* The device's one P_Key, at index 0: the default partition, full member
 * (RoCE has no partitions; every packet carries it). */
#define SV_PKEY_DEFAULT     0xffffu
/* A UD work request whose remote Q_Key has the high bit set sends the
 * QP's own Q_Key instead (a controlled Q_Key is never taken from a WR). */
#define SV_QKEY_USE_QP      0x80000000u
/* The destination QPN of a multicast datagram. */
#define SV_MCAST_QPN        0x00ffffffu
/* MR access for RDMA FLUSH (IBTA 1.5; the kernel's IB_UVERBS_ACCESS_FLUSH_*,
 * rdma-core's IBV_ACCESS_FLUSH_* after 44): a FLUSH of global visibility, of
 * persistence. This device has no persistent memory: only the first. */
#define SV_ACCESS_FLUSH_GLOBAL     (1u << 8)
#define SV_ACCESS_FLUSH_PERSISTENT (1u << 9)
/* device_cap_flags_ex bits the kernel has and rdma-core 44 does not name
 * (IB_UVERBS_DEVICE_FLUSH_GLOBAL, _ATOMIC_WRITE) */
#define SV_DEVICE_FLUSH_GLOBAL     (1ull << 38)
#define SV_DEVICE_ATOMIC_WRITE     (1ull << 40)
/* RDMA FLUSH's placement types (bits; rdma-core 56's enum
 * ibv_placement_type, the FETH's PLT) and selectivity levels (enum
 * ibv_selectivity_level, the FETH's SEL) */
#define SV_FLUSH_GLOBAL       1u   /* visible to every later access */
#define SV_FLUSH_PERSISTENT   2u   /* and persistent */
#define SV_FLUSH_SEL_RANGE    0u   /* the range named (RETH) */
#define SV_FLUSH_SEL_MR       1u   /* the whole memory region */

#endif /* SV_ABI_IB_H */

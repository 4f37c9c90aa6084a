/* SPDX-License-Identifier: MIT */
/*
 * The device view: the files a kernel RDMA device shows its consumers
 * (/dev/infiniband/uverbsN, /sys/class/infiniband/..., the verbs and MAD
 * classes), written by the daemon into a tree beside its socket and shown
 * at their usual paths by the preload library. What the daemon, the
 * library and the preload agree on is here.
 */
#ifndef SV_ABI_VIEW_H
#define SV_ABI_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "abi/sv_cmd.h"

#define SV_VIEW_NAME "view"          /* beside the socket */

/* What Linux shows (drivers/infiniband/core): the uverbs character
 * devices' numbers and the classes' ABI versions. */
#define SV_UVERBS_MAJOR      231
#define SV_UVERBS_MINOR_BASE 192
#define SV_UVERBS_MAX        32
#define SV_UVERBS_ABI        1       /* infiniband_verbs/uverbsN/abi_version */
#define SV_VERBS_CLASS_ABI   6       /* infiniband_verbs/abi_version */
#define SV_MAD_CLASS_ABI     5       /* infiniband_mad/abi_version */

/* The view's root for the socket at sock_path: DIR/view. 0 or -errno. */
int sv_view_root(const char *sock_path, char *buf, size_t len);

/*
 * Where a consumer's path lies in the view. When path is one of the shown
 * prefixes (/dev/infiniband, /sys/class/infiniband, /sys/class/infiniband_verbs,
 * /sys/class/infiniband_mad, /sys/class/misc/rdma_cm) or below one, out = root + path and 1 is
 * returned; 0 when it is not (out untouched); -ENAMETOOLONG when out is too
 * small. Only absolute paths spelt this way match.
 */
int sv_view_map(const char *root, const char *path, char *out, size_t len);

/* path, an absolute path, without its empty and "." components and with
 * each ".." taking the component before it (never above /), as a lexical
 * walk reads it: into out (len bytes). 0, or -ENAMETOOLONG. The preload
 * maps "//sys/class/infiniband" or "/dev/../dev/infiniband/x" this way;
 * a path it does not bring into the view is left to the kernel as is. */
int sv_view_normalize(const char *path, char *out, size_t len);

/* N when path is exactly /dev/infiniband/uverbsN (N < SV_UVERBS_MAX), else -1. */
int sv_view_uverbs(const char *path);

/* The port counters of the view: (folder, name, value from STAT_WIRE).
 * counters/ holds the IB port counters, counted as rxe would on the wire;
 * a message between two QPs of this device counts as one packet sent and
 * one received; data is in 4-byte words, as the PMA counts it. */
#define SV_VIEW_COUNTERS(X)                                                   \
	X(counters, port_xmit_packets, w->tx_pkts + w->lo_msgs)               \
	X(counters, port_rcv_packets, w->rx_pkts + w->lo_msgs)                \
	X(counters, port_xmit_data, (w->tx_bytes + w->lo_bytes) / 4)          \
	X(counters, port_rcv_data, (w->rx_bytes + w->lo_bytes) / 4)           \
	X(counters, unicast_xmit_packets, w->tx_pkts + w->lo_msgs)            \
	X(counters, unicast_rcv_packets, w->rx_pkts + w->lo_msgs)             \
	X(counters, multicast_xmit_packets, 0)                                \
	X(counters, multicast_rcv_packets, 0)                                 \
	X(counters, port_rcv_errors, w->rx_drop)                              \
	X(counters, port_xmit_discards, w->tx_drop_full)                      \
	X(counters, symbol_error, 0)                                          \
	X(counters, link_error_recovery, 0)                                   \
	X(counters, link_downed, 0)                                           \
	X(counters, port_rcv_remote_physical_errors, 0)                       \
	X(counters, port_rcv_switch_relay_errors, 0)                          \
	X(counters, port_rcv_constraint_errors, 0)                            \
	X(counters, port_xmit_constraint_errors, 0)                           \
	X(counters, local_link_integrity_errors, 0)                           \
	X(counters, excessive_buffer_overrun_errors, 0)                       \
	X(counters, VL15_dropped, 0)                                          \
	X(counters, port_xmit_wait, 0)                                        \
	X(hw_counters, sent_pkts, w->tx_pkts + w->lo_msgs)                    \
	X(hw_counters, rcvd_pkts, w->rx_pkts + w->lo_msgs)                    \
	X(hw_counters, duplicate_request, w->dup_reqs)                        \
	X(hw_counters, out_of_seq_request, w->naks_sent)                      \
	X(hw_counters, rcvd_rnr_err, w->rnr_naks_rcvd)                        \
	X(hw_counters, send_rnr_err, w->rnr_naks_sent)                        \
	X(hw_counters, rcvd_seg_drop, w->rx_drop)                             \
	X(hw_counters, completer_retry_err, w->retransmits)                   \
	X(hw_counters, retry_exceeded_err, w->retry_exceeded)                 \
	X(hw_counters, rcvd_icrc_err, w->rx_bad_icrc)                         \
	X(hw_counters, out_of_sequence, w->rx_drop_why[SV_RX_DROP_PSN])       \
	X(hw_counters, out_of_buffer, w->rx_drop_why[SV_RX_DROP_NORES])       \
	SV_VIEW_DROP_COUNTERS(X)

/* softverbs' own: a hw_counters/rx_drop_NAME file for each reason a
 * received packet is dropped (enum sv_rx_drop) */
#define SV_VIEW_DROP_COUNTERS(X)                                              \
	X(hw_counters, rx_drop_icrc, w->rx_drop_why[SV_RX_DROP_ICRC])         \
	X(hw_counters, rx_drop_malformed, w->rx_drop_why[SV_RX_DROP_MALFORMED]) \
	X(hw_counters, rx_drop_opcode, w->rx_drop_why[SV_RX_DROP_OPCODE])     \
	X(hw_counters, rx_drop_pkey, w->rx_drop_why[SV_RX_DROP_PKEY])         \
	X(hw_counters, rx_drop_qpn, w->rx_drop_why[SV_RX_DROP_QPN])           \
	X(hw_counters, rx_drop_peer, w->rx_drop_why[SV_RX_DROP_PEER])         \
	X(hw_counters, rx_drop_state, w->rx_drop_why[SV_RX_DROP_STATE])       \
	X(hw_counters, rx_drop_psn, w->rx_drop_why[SV_RX_DROP_PSN])           \
	X(hw_counters, rx_drop_qkey, w->rx_drop_why[SV_RX_DROP_QKEY])         \
	X(hw_counters, rx_drop_nores, w->rx_drop_why[SV_RX_DROP_NORES])

struct sv_view_counter {
	const char *dir;   /* "counters" or "hw_counters" */
	const char *name;
};
extern const struct sv_view_counter sv_view_counters[];
extern const unsigned int sv_view_ncounters;

/* The counter that path names (/sys/class/infiniband/DEV/ports/1/DIR/NAME
 * of device dev), or -1. */
int sv_view_counter_of(const char *path, const char *dev);

/* Counter i's value. */
uint64_t sv_view_counter_value(unsigned int i, const struct sv_rsp_stat_wire *w);

#endif

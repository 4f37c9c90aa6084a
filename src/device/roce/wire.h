/* SPDX-License-Identifier: MIT */
/*
 * RoCEv2 on the wire: the InfiniBand transport headers carried in UDP
 * (destination port 4791) and their invariant CRC. Pure functions, no
 * daemon state: wire.c parses and builds the headers, icrc.c computes and
 * checks the ICRC.
 *
 * A RoCEv2 UDP payload is
 *
 *     BTH (12) | extended headers | payload | pad (0..3) | ICRC (4)
 *
 * where the extended headers follow from the opcode alone (struct
 * sv_roce_opinfo), in the order XRCETH, DETH, RETH, AtomicETH, AETH,
 * AtomicAckETH, ImmDt, IETH. Every multi-byte field is big-endian on the wire except the
 * ICRC, which is appended little-endian. Everything here converts to host
 * order (struct sv_roce_pkt) and back; nothing else in the daemon touches
 * header bytes.
 *
 * BTH layout (byte: bits):
 *   0: opcode              1: SE | MigReq | PadCnt (2) | TVer (4)
 *   2-3: P_Key             4: FECN | BECN | reserved (6)
 *   5-7: destination QP    8: AckReq | reserved (7)
 *   9-11: PSN
 */
#ifndef SV_DEVICE_ROCE_WIRE_H
#define SV_DEVICE_ROCE_WIRE_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "abi/sv_ib.h"

#define SV_ROCE_PORT 4791

/* Header sizes in bytes. */
#define SV_BTH_BYTES    12
#define SV_RETH_BYTES   16 /* VA (8), R_Key (4), DMA length (4) */
#define SV_AETH_BYTES    4 /* syndrome (1), MSN (3) */
#define SV_ATMETH_BYTES 28 /* VA (8), R_Key (4), swap/add (8), compare (8) */
/* softverbs' masked atomics: AtomicETH, then swap mask (8), compare mask
 * (8); see SV_OP_RC_MASKED_CMP_SWAP */
#define SV_MATMETH_BYTES 44
#define SV_ATMACK_BYTES  8 /* original remote data (8) */
#define SV_IMMDT_BYTES   4
#define SV_IETH_BYTES    4 /* R_Key to invalidate */
#define SV_DETH_BYTES    8 /* Q_Key (4), reserved (1), source QP (3) */
#define SV_XRCETH_BYTES  4 /* reserved (1), XRC SRQ number (3) */
#define SV_FETH_BYTES    4 /* FLUSH: selectivity (bits 5-4), placement
			    * type (bits 3-0) */
#define SV_ICRC_BYTES    4
/* The longest BTH + extended headers of any opcode (RDMA WRITE ONLY with
 * immediate: 32, atomics: 40, XRC atomics: 44, masked atomics: 56). */
#define SV_ROCE_MAX_HDR 56

/* AETH syndromes (which outcome sends which: exec/exec_int.h's outcome
 * table) */
#define SV_AETH_ACK         0x1f   /* ACK, no credit count (as rxe) */
#define SV_AETH_RNR(t)      (0x20u | ((t) & 0x1fu))
#define SV_AETH_NAK_SEQ     0x60
#define SV_AETH_NAK_INV     0x61
#define SV_AETH_NAK_ACCESS  0x62
#define SV_AETH_NAK_OP      0x63
#define SV_AETH_KIND(s)     ((s) >> 5)   /* 0 ACK, 1 RNR, 3 NAK */
#define SV_AETH_KIND_NAK    3
/* No response at all (not a syndrome: bit 7 is reserved). */
#define SV_AETH_NONE        0xffu

/*
 * IBTA opcodes: the top 3 bits select the transport (RC 0x00, UC 0x20,
 * RD 0x40, UD 0x60, XRC 0xa0), the low 5 the operation. RD is not known
 * here (sv_roce_op() returns NULL for it). XRC has RC's operations; its
 * requests carry an XRCETH (the responder's XRC SRQ) right after the BTH,
 * its responses are RC's with the XRC prefix.
 */
enum {
	SV_OP_RC_SEND_FIRST       = 0x00,
	SV_OP_RC_SEND_MIDDLE      = 0x01,
	SV_OP_RC_SEND_LAST        = 0x02,
	SV_OP_RC_SEND_LAST_IMM    = 0x03,
	SV_OP_RC_SEND_ONLY        = 0x04,
	SV_OP_RC_SEND_ONLY_IMM    = 0x05,
	SV_OP_RC_WRITE_FIRST      = 0x06,
	SV_OP_RC_WRITE_MIDDLE     = 0x07,
	SV_OP_RC_WRITE_LAST       = 0x08,
	SV_OP_RC_WRITE_LAST_IMM   = 0x09,
	SV_OP_RC_WRITE_ONLY       = 0x0a,
	SV_OP_RC_WRITE_ONLY_IMM   = 0x0b,
	SV_OP_RC_READ_REQ         = 0x0c,
	SV_OP_RC_READ_RESP_FIRST  = 0x0d,
	SV_OP_RC_READ_RESP_MIDDLE = 0x0e,
	SV_OP_RC_READ_RESP_LAST   = 0x0f,
	SV_OP_RC_READ_RESP_ONLY   = 0x10,
	SV_OP_RC_ACK              = 0x11,
	SV_OP_RC_ATOMIC_ACK       = 0x12,
	SV_OP_RC_CMP_SWAP         = 0x13,
	SV_OP_RC_FETCH_ADD        = 0x14,
	/* 0x15 is reserved */
	SV_OP_RC_SEND_LAST_INV    = 0x16,
	SV_OP_RC_SEND_ONLY_INV    = 0x17,
	/* IBTA 1.5 (Linux 6.2+ rxe, RC only): RDMA FLUSH is BTH, FETH, RETH;
	 * ATOMIC WRITE is BTH, RETH and 8 bytes of payload; each is answered
	 * by a zero-length RDMA READ response */
	SV_OP_RC_FLUSH            = 0x1c,
	SV_OP_RC_ATOMIC_WRITE     = 0x1d,

	SV_OP_UC_SEND_FIRST       = 0x20,
	SV_OP_UC_SEND_MIDDLE      = 0x21,
	SV_OP_UC_SEND_LAST        = 0x22,
	SV_OP_UC_SEND_LAST_IMM    = 0x23,
	SV_OP_UC_SEND_ONLY        = 0x24,
	SV_OP_UC_SEND_ONLY_IMM    = 0x25,
	SV_OP_UC_WRITE_FIRST      = 0x26,
	SV_OP_UC_WRITE_MIDDLE     = 0x27,
	SV_OP_UC_WRITE_LAST       = 0x28,
	SV_OP_UC_WRITE_LAST_IMM   = 0x29,
	SV_OP_UC_WRITE_ONLY       = 0x2a,
	SV_OP_UC_WRITE_ONLY_IMM   = 0x2b,

	SV_OP_UD_SEND_ONLY        = 0x64,
	SV_OP_UD_SEND_ONLY_IMM    = 0x65,

	SV_OP_XRC_BASE            = 0xa0,  /* | the RC operation */
	SV_OP_XRC_SEND_FIRST      = 0xa0,
	SV_OP_XRC_SEND_MIDDLE     = 0xa1,
	SV_OP_XRC_SEND_LAST       = 0xa2,
	SV_OP_XRC_SEND_LAST_IMM   = 0xa3,
	SV_OP_XRC_SEND_ONLY       = 0xa4,
	SV_OP_XRC_SEND_ONLY_IMM   = 0xa5,
	SV_OP_XRC_WRITE_FIRST     = 0xa6,
	SV_OP_XRC_WRITE_MIDDLE    = 0xa7,
	SV_OP_XRC_WRITE_LAST      = 0xa8,
	SV_OP_XRC_WRITE_LAST_IMM  = 0xa9,
	SV_OP_XRC_WRITE_ONLY      = 0xaa,
	SV_OP_XRC_WRITE_ONLY_IMM  = 0xab,
	SV_OP_XRC_READ_REQ        = 0xac,
	SV_OP_XRC_READ_RESP_FIRST = 0xad,
	SV_OP_XRC_READ_RESP_MIDDLE = 0xae,
	SV_OP_XRC_READ_RESP_LAST  = 0xaf,
	SV_OP_XRC_READ_RESP_ONLY  = 0xb0,
	SV_OP_XRC_ACK             = 0xb1,
	SV_OP_XRC_ATOMIC_ACK      = 0xb2,
	SV_OP_XRC_CMP_SWAP        = 0xb3,
	SV_OP_XRC_FETCH_ADD       = 0xb4,
	SV_OP_XRC_SEND_LAST_INV   = 0xb6,
	SV_OP_XRC_SEND_ONLY_INV   = 0xb7,
	/*
	 * softverbs' masked atomics, on RC QPs, in the manufacturer-specific
	 * opcode space (0xC0..0xFF). BTH, then the 44-byte MaskedAtomicETH:
	 *   VA (8) | R_Key (4) | swap or add data (8) |
	 *   compare data or field boundaries (8) | swap mask (8) |
	 *   compare mask (8)
	 * (the first 28 bytes are an AtomicETH; a FETCH_ADD's masks are 0).
	 * One PSN each, ordered and answered like the IBTA atomics: an
	 * ATOMIC_ACKNOWLEDGE (0x12) carries the original value. A responder
	 * that does not know them answers with a NAK invalid request.
	 */
	SV_OP_RC_MASKED_CMP_SWAP  = 0xc0,
	SV_OP_RC_MASKED_FETCH_ADD = 0xc1,
};

/* What an opcode's packet carries and means (struct sv_roce_opinfo.flags). */
enum {
	SV_RF_RETH    = 1 << 0,
	SV_RF_AETH    = 1 << 1,
	SV_RF_ATMETH  = 1 << 2,
	SV_RF_ATMACK  = 1 << 3,
	SV_RF_IMMDT   = 1 << 4,
	SV_RF_IETH    = 1 << 5,
	SV_RF_DETH    = 1 << 6,
	SV_RF_PAYLOAD = 1 << 7,  /* may carry payload bytes */
	SV_RF_REQ     = 1 << 8,  /* requester -> responder */
	SV_RF_RESP    = 1 << 9,  /* ACK, READ response, atomic ACK */
	/* The packet's place in its message. A packet that is a whole message
	 * (SEND/WRITE ONLY, a READ request, an atomic, an ACK) is ONLY. */
	SV_RF_FIRST   = 1 << 10,
	SV_RF_MIDDLE  = 1 << 11,
	SV_RF_LAST    = 1 << 12,
	SV_RF_ONLY    = SV_RF_FIRST | SV_RF_LAST,
	SV_RF_SEND    = 1 << 13,
	SV_RF_WRITE   = 1 << 14,
	SV_RF_READ    = 1 << 15, /* READ request and READ responses */
	SV_RF_ATOMIC  = 1 << 16, /* atomic requests and the atomic ACK */
	SV_RF_RC      = 1 << 17,
	SV_RF_UC      = 1 << 18,
	SV_RF_UD      = 1 << 19,
	SV_RF_MASKED  = 1 << 20, /* AtomicETH + two masks (MaskedAtomicETH) */
	SV_RF_XRC     = 1 << 21,
	SV_RF_XRCETH  = 1 << 22,
	SV_RF_FETH    = 1 << 23,
	SV_RF_FLUSH   = 1 << 24, /* RDMA FLUSH */
	SV_RF_AWRITE  = 1 << 25, /* ATOMIC WRITE */
};

/* FETH fields (FLUSH): the placement types (bits) and selectivity */
#define SV_FETH_PLT(f)        ((f) & 0xfu)
#define SV_FETH_SEL(f)        (((f) >> 4) & 3u)
#define SV_FETH(plt, sel)     (((uint32_t)(sel) & 3u) << 4 | \
			       ((uint32_t)(plt) & 0xfu))
/* SV_FLUSH_*: abi/sv_ib.h */

struct sv_roce_opinfo {
	uint32_t flags;            /* SV_RF_* */
	uint8_t hdr_bytes;         /* BTH + extended headers */
	const char *name;          /* "RC_SEND_FIRST", ... */
};

/* The opcode's description; NULL: not an opcode we know. */
const struct sv_roce_opinfo *sv_roce_op(uint8_t opcode);

/* A parsed (or to-be-built) packet, host byte order. */
struct sv_roce_pkt {
	/* BTH */
	uint8_t opcode;
	bool se, migreq, ackreq, fecn, becn;
	uint8_t pad, tver;
	uint16_t pkey;
	uint32_t dqpn;             /* 24 bits */
	uint32_t psn;              /* 24 bits */
	uint32_t flags;            /* sv_roce_op(opcode)->flags */
	/* RETH, or AtomicETH's va/rkey */
	uint64_t va;
	uint32_t rkey, dmalen;
	/* AETH */
	uint8_t syndrome;
	uint32_t msn;              /* 24 bits */
	/* AtomicETH (and MaskedAtomicETH's masks) */
	uint64_t swap_add, compare;
	uint64_t swap_mask, compare_mask;
	/* AtomicAckETH */
	uint64_t orig;
	uint32_t imm;              /* ImmDt: the 4 bytes as they are on the
				    * wire (memcpy, no swap) */
	uint32_t ieth_rkey;        /* IETH, host order */
	/* DETH */
	uint32_t qkey, sqpn;       /* sqpn 24 bits */
	/* XRCETH */
	uint32_t xrcsrq;           /* 24 bits */
	/* FETH */
	uint32_t feth;
	/* parse: the payload, without pad and ICRC (inside the parsed buffer;
	 * points just past the headers, also when paylen is 0) */
	const uint8_t *payload;
	uint32_t paylen;
};

/*
 * Parse a UDP payload (BTH .. ICRC). Validates every field before use: len
 * covers headers, pad and ICRC; tver 0; opcode known; payload only where the
 * opcode has one (else paylen 0 and pad 0); reserved bits ignored. Returns
 * 0, or -EINVAL (malformed) / -EOPNOTSUPP (unknown opcode: the BTH fields
 * of *p are filled, flags is 0, so that a responder can refuse it); *p is
 * otherwise unspecified on error. Does NOT check the ICRC.
 */
int sv_roce_parse(const uint8_t *buf, size_t len, struct sv_roce_pkt *p);

/*
 * Write BTH + the extended headers of p->opcode at buf (room >= 64);
 * pad/ackreq etc. from p (pad is recomputed by sv_roce_finish); reserved
 * bits zero. Returns the header bytes (sv_roce_op()->hdr_bytes), or 0 (and
 * writes nothing) for an unknown opcode.
 */
size_t sv_roce_build_hdr(uint8_t *buf, const struct sv_roce_pkt *p);

/* The RC opcode of a packet of a SEND (send) or RDMA WRITE message, by its
 * place in the message (first, last) and what the last one carries (imm,
 * inv: SEND only). UC and XRC add their base (0x20, SV_OP_XRC_BASE). */
uint8_t sv_roce_data_opcode(bool send, bool imm, bool inv, bool first,
			    bool last);

/* What the ICRC covers of the IP and UDP headers. */
/* The General Services Interface: QP1 and its well-known Q_Key (IBTA
 * 13.5; the CM's MADs travel there). */
#define SV_GSI_QPN   1u
#define SV_GSI_QKEY  0x80010000u

struct sv_roce_ip {
	uint8_t src[16], dst[16];  /* as GIDs: IPv4 as ::ffff:a.b.c.d
				    * (src decides between IPv4 and IPv6) */
	uint16_t sport, dport;     /* host order */
	uint16_t ip_id;            /* IPv4 identification (host order) */
	bool df;                   /* IPv4 don't-fragment */
};

/*
 * After the payload was placed at buf + hdr: zero pad to 4 bytes, set the
 * BTH pad count, append the ICRC (little-endian) for ip. Returns the UDP
 * payload length (hdr + payload + pad + 4).
 */
size_t sv_roce_finish(uint8_t *buf, size_t hdr_plus_payload,
		      const struct sv_roce_ip *ip);

/* ICRC (as a value) of the UDP payload bth[0..len) (without the ICRC) sent
 * with ip. len >= SV_BTH_BYTES. */
uint32_t sv_roce_icrc(const struct sv_roce_ip *ip, const uint8_t *bth,
		      size_t len);

/*
 * Does the ICRC at the end of buf[0..len) verify? IPv6: exactly. IPv4: a UDP
 * socket sees neither the IP identification nor DF, so this is true if SOME
 * ip_id with DF set (RoCEv2 senders set it) makes it verify, found in O(1)
 * from the CRC difference (sv_roce_icrc_solve_v4); ip->ip_id/df are
 * ignored. That leaves 16 of the ICRC's 32 bits to catch corruption on
 * IPv4: a random error passes with probability 2^-16 (no single-bit error
 * of a packet of 1040 to 4128 bytes passes; the UDP checksum, when the
 * sender sets one, and the Ethernet FCS are the other lines of defence).
 */
bool sv_roce_icrc_ok(const struct sv_roce_ip *ip, const uint8_t *buf,
		     size_t len);

/*
 * IPv4 only: the IP identification and DF with which the ICRC at the end of
 * buf[0..len) verifies; ip->ip_id/df are ignored. true and *ip_id, *df set
 * if there is one (DF set is preferred should both verify, with different
 * ids); false if none, for an IPv6 ip, or a len the ICRC cannot cover.
 */
bool sv_roce_icrc_solve_v4(const struct sv_roce_ip *ip, const uint8_t *buf,
			   size_t len, uint16_t *ip_id, bool *df);

/* The UDP source port of a QP: 0xc000 | 14-bit hash of (src qpn, dst qpn)
 * (the flow-label hash that Linux rxe uses; symmetric in the two QPNs). */
uint16_t sv_roce_sport(uint32_t src_qpn, uint32_t dst_qpn);

/* PSN arithmetic (24 bits): a - b as a signed 24-bit distance. */
static inline int32_t sv_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

/* ---- big-endian field access (header bytes are never aligned) ---- */

static inline uint16_t sv_get_be16(const uint8_t *b)
{
	return (uint16_t)(b[0] << 8 | b[1]);
}

static inline uint32_t sv_get_be24(const uint8_t *b)
{
	return (uint32_t)b[0] << 16 | (uint32_t)b[1] << 8 | b[2];
}

static inline uint32_t sv_get_be32(const uint8_t *b)
{
	uint32_t v;

	memcpy(&v, b, 4);
	return be32toh(v);
}

static inline uint64_t sv_get_be64(const uint8_t *b)
{
	uint64_t v;

	memcpy(&v, b, 8);
	return be64toh(v);
}

static inline void sv_put_be16(uint8_t *b, uint16_t v)
{
	b[0] = (uint8_t)(v >> 8);
	b[1] = (uint8_t)v;
}

static inline void sv_put_be24(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 16);
	b[1] = (uint8_t)(v >> 8);
	b[2] = (uint8_t)v;
}

static inline void sv_put_be32(uint8_t *b, uint32_t v)
{
	v = htobe32(v);
	memcpy(b, &v, 4);
}

static inline void sv_put_be64(uint8_t *b, uint64_t v)
{
	v = htobe64(v);
	memcpy(b, &v, 8);
}

/* ---- BTH fields straight from the bytes (len >= SV_BTH_BYTES), for
 * looking a packet up before parsing it ---- */

static inline uint8_t sv_bth_opcode(const uint8_t *bth)
{
	return bth[0];
}

static inline uint32_t sv_bth_dqpn(const uint8_t *bth)
{
	return sv_get_be24(bth + 5);
}

static inline uint32_t sv_bth_psn(const uint8_t *bth)
{
	return sv_get_be24(bth + 9);
}

#endif /* SV_DEVICE_ROCE_WIRE_H */

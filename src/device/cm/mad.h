/* SPDX-License-Identifier: MIT */
/*
 * The Communication Manager on the wire: CM MADs as the IBTA defines them
 * (Vol. 1, chapter 12.6, "Communication management messages") and as
 * Linux's kernel CM puts them there (drivers/infiniband/core/cm.c, the
 * layouts in include/rdma/ibta_vol1_c12.h), the RDMA CM's private-data
 * header (drivers/infiniband/core/cma.c, struct cma_hdr) and the datagram
 * that carries a MAD to QP1 over RoCEv2. Pure functions, no daemon state;
 * docs/ROCE.md "Connection management on the wire" has the whole format.
 *
 * A MAD is 256 bytes: the 24-byte common header (IBTA 13.4.2), then 232
 * bytes of attribute data. Every CM message fills the 232 bytes; its
 * private data runs to the end. Everything here is big-endian on the wire
 * and host order in the structs; fields are bit-packed as the IBTA's
 * tables say (Byte[Bit], bit 0 the most significant), and only the field
 * tables of mad.c know where.
 */
#ifndef SV_DEVICE_CM_MAD_H
#define SV_DEVICE_CM_MAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/roce/wire.h"

#define SV_MAD_BYTES       256
#define SV_MAD_HDR_BYTES    24
#define SV_CM_DATA_BYTES   (SV_MAD_BYTES - SV_MAD_HDR_BYTES)   /* 232 */

#define SV_MAD_BASE_VERSION  1
#define SV_MAD_CLASS_CM      0x07
#define SV_CM_CLASS_VERSION  2

/* MAD methods (IBTA 13.4.5); the CM's messages are all Send. */
enum {
	SV_MAD_METHOD_GET      = 0x01,
	SV_MAD_METHOD_SET      = 0x02,
	SV_MAD_METHOD_SEND     = 0x03,
	SV_MAD_METHOD_GET_RESP = 0x81,
};

/* The General Services Interface, QP1 and its Q_Key: SV_GSI_QPN and
 * SV_GSI_QKEY of roce/wire.h. */

/*
 * The CM's attributes (IBTA 12.6, Table 104): enum name, attribute ID,
 * member of struct sv_cm_mad. LAP and APR are parsed and named; a device
 * without alternate paths answers them with REJ or ignores them.
 */
#define SV_CM_ATTRS(X) \
	X(CLASS_PORT_INFO, 0x0001, cpi) \
	X(REQ,             0x0010, req) \
	X(MRA,             0x0011, mra) \
	X(REJ,             0x0012, rej) \
	X(REP,             0x0013, rep) \
	X(RTU,             0x0014, rtu) \
	X(DREQ,            0x0015, dreq) \
	X(DREP,            0x0016, drep) \
	X(SIDR_REQ,        0x0017, sidr_req) \
	X(SIDR_REP,        0x0018, sidr_rep) \
	X(LAP,             0x0019, lap) \
	X(APR,             0x001a, apr)

enum sv_cm_attr_id {
#define X(name, id, member) SV_CM_ATTR_##name = id,
	SV_CM_ATTRS(X)
#undef X
};

/* Private data and other byte strings, in bytes (each runs to byte 232). */
enum {
	SV_CM_REQ_PRIV      = 92,
	SV_CM_MRA_PRIV      = 222,
	SV_CM_REJ_ARI       = 72,
	SV_CM_REJ_PRIV      = 148,
	SV_CM_REP_PRIV      = 196,
	SV_CM_RTU_PRIV      = 224,
	SV_CM_DREQ_PRIV     = 220,
	SV_CM_DREP_PRIV     = 224,
	SV_CM_SIDR_REQ_PRIV = 216,
	SV_CM_SIDR_REP_INFO = 72,
	SV_CM_SIDR_REP_PRIV = 136,
	SV_CM_LAP_PRIV      = 168,
	SV_CM_APR_INFO      = 72,
	SV_CM_APR_PRIV      = 148,
};

/*
 * REJ reasons (IBTA 12.6.7.2, Table 109; the kernel's enum
 * ib_cm_rej_reason): X(name, code).
 */
#define SV_CM_REJ_REASONS(X) \
	X(NO_QP,                       1) \
	X(NO_EEC,                      2) \
	X(NO_RESOURCES,                3) \
	X(TIMEOUT,                     4) \
	X(UNSUPPORTED,                 5) \
	X(INVALID_COMM_ID,             6) \
	X(INVALID_COMM_INSTANCE,       7) \
	X(INVALID_SERVICE_ID,          8) \
	X(INVALID_TRANSPORT_TYPE,      9) \
	X(STALE_CONN,                 10) \
	X(RDC_NOT_EXIST,              11) \
	X(INVALID_GID,                12) \
	X(INVALID_LID,                13) \
	X(INVALID_SL,                 14) \
	X(INVALID_TRAFFIC_CLASS,      15) \
	X(INVALID_HOP_LIMIT,          16) \
	X(INVALID_PACKET_RATE,        17) \
	X(INVALID_ALT_GID,            18) \
	X(INVALID_ALT_LID,            19) \
	X(INVALID_ALT_SL,             20) \
	X(INVALID_ALT_TRAFFIC_CLASS,  21) \
	X(INVALID_ALT_HOP_LIMIT,      22) \
	X(INVALID_ALT_PACKET_RATE,    23) \
	X(PORT_CM_REDIRECT,           24) \
	X(PORT_REDIRECT,              25) \
	X(INVALID_MTU,                26) \
	X(INSUFFICIENT_RESP_RESOURCES, 27) \
	X(CONSUMER_DEFINED,           28) \
	X(INVALID_RNR_RETRY,          29) \
	X(DUPLICATE_LOCAL_COMM_ID,    30) \
	X(INVALID_CLASS_VERSION,      31) \
	X(INVALID_FLOW_LABEL,         32) \
	X(INVALID_ALT_FLOW_LABEL,     33) \
	X(VENDOR_OPTION_NOT_SUPPORTED, 35)

enum sv_cm_rej_reason {
#define X(name, code) SV_CM_REJ_##name = code,
	SV_CM_REJ_REASONS(X)
#undef X
};

/* "INVALID_SERVICE_ID", ...; NULL for a code the table does not name. */
const char *sv_cm_rej_reason_name(uint16_t reason);

/* What an MRA or a REJ answers (MRA "message MRAed", REJ "message
 * rejected"; 2 bits). */
enum {
	SV_CM_MSG_REQ   = 0,
	SV_CM_MSG_REP   = 1,
	SV_CM_MSG_OTHER = 2,     /* MRA: LAP; REJ: other */
};

/* SIDR_REP status (IBTA 12.11.2, Table 120; the kernel's enum
 * ib_cm_sidr_status). */
enum {
	SV_CM_SIDR_SUCCESS             = 0,
	SV_CM_SIDR_UNSUPPORTED         = 1,  /* no such service ID */
	SV_CM_SIDR_REJECT              = 2,
	SV_CM_SIDR_NO_QP               = 3,
	SV_CM_SIDR_REDIRECT            = 4,
	SV_CM_SIDR_UNSUPPORTED_VERSION = 5,
};

/* REQ transport service type (2 bits) and extended transport type (3
 * bits): XRC is type 3 with extended type 1, as the kernel sends it. */
enum {
	SV_CM_TRANSPORT_RC  = 0,
	SV_CM_TRANSPORT_UC  = 1,
	SV_CM_TRANSPORT_RD  = 2,
	SV_CM_TRANSPORT_EXT = 3,
	SV_CM_EXT_TRANSPORT_XRC = 1,
};

/* Path MTU codes (4 bits), as enum ibv_mtu. */
enum {
	SV_CM_MTU_256 = 1, SV_CM_MTU_512, SV_CM_MTU_1024, SV_CM_MTU_2048,
	SV_CM_MTU_4096,
};

/* A path of a REQ (primary and alternate) or a LAP (alternate). On
 * RoCEv2 the LIDs are 0xffff (permissive) or 0, the GIDs the RoCE GIDs. */
struct sv_cm_path {
	uint16_t local_lid, remote_lid;
	uint8_t local_gid[16], remote_gid[16];
	uint32_t flow_label;           /* 20 bits */
	uint8_t packet_rate;           /* 6 bits */
	uint8_t traffic_class;
	uint8_t hop_limit;
	uint8_t sl;                    /* 4 bits */
	bool subnet_local;
	uint8_t local_ack_timeout;     /* 5 bits: 4.096 us * 2^t */
};

/* Timeouts (CM response timeouts, service timeout, ACK timeouts, target
 * ACK delay) are 5-bit exponents: 4.096 us * 2^t. */

struct sv_cm_req {                     /* IBTA 12.6.5, Table 106 */
	uint32_t local_comm_id;
	uint32_t vendor_id;            /* 24 bits: ECE (kernel 5.9+) */
	uint64_t service_id;
	uint64_t local_ca_guid;
	uint32_t local_qkey;
	uint32_t local_qpn;            /* 24 bits */
	uint8_t responder_resources;
	uint32_t local_eecn;           /* 24 bits */
	uint8_t initiator_depth;
	uint32_t remote_eecn;          /* 24 bits */
	uint8_t remote_cm_response_timeout; /* 5 bits */
	uint8_t transport_service_type;     /* 2 bits: SV_CM_TRANSPORT_* */
	bool end_to_end_flow_control;
	uint32_t starting_psn;         /* 24 bits */
	uint8_t local_cm_response_timeout;  /* 5 bits */
	uint8_t retry_count;           /* 3 bits */
	uint16_t pkey;
	uint8_t path_mtu;              /* 4 bits: SV_CM_MTU_* */
	bool rdc_exists;
	uint8_t rnr_retry_count;       /* 3 bits */
	uint8_t max_cm_retries;        /* 4 bits */
	bool srq;
	uint8_t extended_transport_type; /* 3 bits */
	struct sv_cm_path primary, alternate;
	bool sap_supported;
	uint8_t private_data[SV_CM_REQ_PRIV];
};

struct sv_cm_mra {                     /* IBTA 12.6.6, Table 107 */
	uint32_t local_comm_id, remote_comm_id;
	uint8_t message_mraed;         /* 2 bits: SV_CM_MSG_* */
	uint8_t service_timeout;       /* 5 bits */
	uint8_t private_data[SV_CM_MRA_PRIV];
};

struct sv_cm_rej {                     /* IBTA 12.6.7, Table 108 */
	uint32_t local_comm_id, remote_comm_id;
	uint8_t message_rejected;      /* 2 bits: SV_CM_MSG_* */
	uint8_t reject_info_length;    /* 7 bits, <= SV_CM_REJ_ARI */
	uint16_t reason;               /* enum sv_cm_rej_reason */
	uint8_t ari[SV_CM_REJ_ARI];
	uint8_t private_data[SV_CM_REJ_PRIV];
};

struct sv_cm_rep {                     /* IBTA 12.6.8, Table 110 */
	uint32_t local_comm_id, remote_comm_id;
	uint32_t local_qkey;
	uint32_t local_qpn;            /* 24 bits */
	uint32_t vendor_id;            /* 24 bits: ECE, bytes 15, 19, 23 */
	uint32_t local_eecn;           /* 24 bits */
	uint32_t starting_psn;         /* 24 bits */
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t target_ack_delay;      /* 5 bits */
	uint8_t failover_accepted;     /* 2 bits */
	bool end_to_end_flow_control;
	uint8_t rnr_retry_count;       /* 3 bits */
	bool srq;
	uint64_t local_ca_guid;
	uint8_t private_data[SV_CM_REP_PRIV];
};

struct sv_cm_rtu {                     /* IBTA 12.6.9, Table 111 */
	uint32_t local_comm_id, remote_comm_id;
	uint8_t private_data[SV_CM_RTU_PRIV];
};

struct sv_cm_dreq {                    /* IBTA 12.6.10, Table 112 */
	uint32_t local_comm_id, remote_comm_id;
	uint32_t remote_qpn_eecn;      /* 24 bits */
	uint8_t private_data[SV_CM_DREQ_PRIV];
};

struct sv_cm_drep {                    /* IBTA 12.6.11, Table 113 */
	uint32_t local_comm_id, remote_comm_id;
	uint8_t private_data[SV_CM_DREP_PRIV];
};

struct sv_cm_lap {                     /* IBTA 12.8.1, Table 115 */
	uint32_t local_comm_id, remote_comm_id;
	uint32_t remote_qpn_eecn;      /* 24 bits */
	uint8_t remote_cm_response_timeout; /* 5 bits */
	struct sv_cm_path alternate;
	uint8_t private_data[SV_CM_LAP_PRIV];
};

struct sv_cm_apr {                     /* IBTA 12.8.2, Table 116 */
	uint32_t local_comm_id, remote_comm_id;
	uint8_t additional_info_length; /* <= SV_CM_APR_INFO */
	uint8_t ap_status;
	uint8_t additional_info[SV_CM_APR_INFO];
	uint8_t private_data[SV_CM_APR_PRIV];
};

struct sv_cm_sidr_req {                /* IBTA 12.11.1, Table 119 */
	uint32_t request_id;
	uint16_t pkey;
	uint64_t service_id;
	uint8_t private_data[SV_CM_SIDR_REQ_PRIV];
};

struct sv_cm_sidr_rep {                /* IBTA 12.11.2, Table 120 */
	uint32_t request_id;
	uint8_t status;                /* SV_CM_SIDR_* */
	uint8_t additional_info_length; /* <= SV_CM_SIDR_REP_INFO */
	uint32_t vendor_id;            /* 24 bits: ECE, bytes 6-7 and 11 */
	uint32_t qpn;                  /* 24 bits */
	uint64_t service_id;
	uint32_t qkey;
	uint8_t additional_info[SV_CM_SIDR_REP_INFO];
	uint8_t private_data[SV_CM_SIDR_REP_PRIV];
};

struct sv_cm_cpi {                     /* ClassPortInfo, IBTA 13.4.8.1 */
	uint8_t base_version, class_version;
	uint16_t capability_mask;
	uint32_t capability_mask2;     /* 27 bits */
	uint8_t resp_time_value;       /* 5 bits */
	uint8_t redirect_gid[16];
	uint8_t redirect_tc;
	uint8_t redirect_sl;           /* 4 bits */
	uint32_t redirect_fl;          /* 20 bits */
	uint16_t redirect_lid, redirect_pkey;
	uint32_t redirect_qp;          /* 24 bits */
	uint32_t redirect_qkey;
	uint8_t trap_gid[16];
	uint8_t trap_tc;
	uint8_t trap_sl;               /* 4 bits */
	uint32_t trap_fl;              /* 20 bits */
	uint16_t trap_lid, trap_pkey;
	uint8_t trap_hop_limit;
	uint32_t trap_qp;              /* 24 bits */
	uint32_t trap_qkey;
};

/*
 * One CM MAD, decoded. The common header's constant fields (base version
 * 1, class 0x07, class version 2) are not stored: encode writes them,
 * decode checks them. attr_id says which member of the union is valid.
 */
struct sv_cm_mad {
	uint8_t method;                /* SV_MAD_METHOD_*; Send for messages */
	uint16_t status;
	uint16_t class_specific;
	uint64_t tid;                  /* transaction ID */
	uint16_t attr_id;              /* enum sv_cm_attr_id */
	uint32_t attr_mod;             /* the kernel puts ECE's attr_mod here */
	union {
#define X(name, id, member) struct sv_cm_##member member;
		SV_CM_ATTRS(X)
#undef X
	};
};

/* Why a MAD was refused: decode and encode return 0 or -SV_CM_E_*. */
#define SV_CM_ERRORS(X) \
	X(SHORT,         "shorter than a MAD (256 bytes)") \
	X(LONG,          "longer than a MAD (256 bytes)") \
	X(BASE_VERSION,  "MAD base version is not 1") \
	X(CLASS,         "management class is not CM (0x07)") \
	X(CLASS_VERSION, "CM class version is not 2") \
	X(METHOD,        "method not allowed for the attribute") \
	X(ATTR,          "unknown CM attribute ID") \
	X(FIELD,         "field value out of range") \
	X(RESERVED,      "reserved bits set")

enum sv_cm_err {
	SV_CM_OK = 0,
#define X(name, text) SV_CM_E_##name,
	SV_CM_ERRORS(X)
#undef X
	SV_CM_E_COUNT
};

/* The text of an error (err or -err); "unknown error" otherwise. */
const char *sv_cm_strerror(int err);

/* Decode flags. */
enum {
	/*
	 * Refuse nonzero reserved bits (SV_CM_E_RESERVED). Off by default:
	 * the IBTA has senders write reserved fields as zero and receivers
	 * ignore them, and later versions of the spec give reserved bits
	 * meaning (the kernel's ECE vendor ID lives in bits that were
	 * reserved). With it, a MAD decodes only if encode gives back the
	 * very same 256 bytes.
	 */
	SV_CM_DECODE_STRICT = 1 << 0,
};

/*
 * Decode buf[0..len) into *m (zeroed first). Checks, in order: len is
 * exactly 256, base version 1, class CM, class version 2, the attribute
 * is known, the method is allowed for it (Send for the messages; Get,
 * Set, GetResp or Send for ClassPortInfo), lengths inside the message
 * (REJ's ARI, APR's and SIDR_REP's additional information) are within
 * their fields, then (STRICT) the reserved bits. Reads no byte outside
 * buf[0..len). Returns 0 or -SV_CM_E_*; *m is unspecified on error.
 */
int sv_cm_decode(const uint8_t *buf, size_t len, unsigned int flags,
		 struct sv_cm_mad *m);

/*
 * Encode *m into out[0..256): the header (base version, class, class
 * version from the constants above), the attribute's fields, zero in
 * every reserved bit. Refuses (writing nothing) an unknown attribute, a
 * method not allowed for it, or a value wider than its field
 * (-SV_CM_E_ATTR, _METHOD, _FIELD).
 */
int sv_cm_encode(const struct sv_cm_mad *m, uint8_t out[SV_MAD_BYTES]);

/* Zero *m and set the header of a CM message: method Send, attr, tid. */
void sv_cm_mad_init(struct sv_cm_mad *m, uint16_t attr_id, uint64_t tid);

/* ---- the attribute table ---- */

/*
 * One field of an attribute's layout. off/bit/width are the IBTA's
 * Byte[Bit] and length (bit 0 the most significant of the byte), off
 * counted from the start of the attribute data (the MAD's byte 24).
 * Integers (ssize 1, 2, 4 or 8) span at most 64 bits; byte strings
 * (ssize 0) are whole bytes.
 */
struct sv_cm_field {
	const char *name;              /* "service_id", "primary.flow_label" */
	uint16_t off;
	uint8_t bit;
	uint16_t width;                /* bits */
	uint16_t soff;                 /* offset in struct sv_cm_mad */
	uint8_t ssize;                 /* bytes of the integer; 0: string */
	uint8_t max;                   /* nonzero: the largest valid value */
	/* An integer split over several places (the ECE vendor ID of REP
	 * and SIDR_REP): this part holds its bits shift.. shift+width-1;
	 * the parts below the top one (low) are not range-checked. */
	uint8_t shift;
	bool low;
};

struct sv_cm_attrinfo {
	uint16_t id;
	const char *name;              /* "REQ", "ClassPortInfo", ... */
	uint8_t methods;               /* SV_CM_MB_* */
	uint8_t nfields;
	const struct sv_cm_field *fields;
};

/* The methods an attribute takes (struct sv_cm_attrinfo.methods). */
enum {
	SV_CM_MB_GET      = 1 << 0,
	SV_CM_MB_SET      = 1 << 1,
	SV_CM_MB_SEND     = 1 << 2,
	SV_CM_MB_GET_RESP = 1 << 3,
};

/* The attribute's description; NULL: not a CM attribute. */
const struct sv_cm_attrinfo *sv_cm_attr(uint16_t attr_id);

/* "REQ", ...; "unknown" for an attribute not in the table. */
const char *sv_cm_attr_name(uint16_t attr_id);

/* ---- the RDMA CM: port spaces and service IDs ---- */

/*
 * RDMA CM port spaces (rdma-core's enum rdma_port_space, the kernel's
 * enum rdma_ucm_port_space). The service ID of an RDMA CM id bound to a
 * port is ps << 16 | port: RDMA_IB_IP_PS_TCP 0x0000000001060000 | port
 * for RDMA_PS_TCP, and so on.
 */
enum {
	SV_RDMA_PS_IPOIB = 0x0002,
	SV_RDMA_PS_IB    = 0x013f,
	SV_RDMA_PS_TCP   = 0x0106,
	SV_RDMA_PS_UDP   = 0x0111,
};

#define SV_RDMA_SID_PS_MASK 0xffffffffffff0000ull

/* The Q_Key the RDMA CM gives UD (RDMA_PS_UDP, RDMA_PS_IB) QPs. */
#define SV_RDMA_UDP_QKEY 0x01234567u

static inline uint64_t sv_cm_service_id(uint16_t ps, uint16_t port)
{
	return (uint64_t)ps << 16 | port;
}

/* Split an RDMA CM service ID: true, with *ps and *port, when sid is
 * ps << 16 | port for RDMA_PS_TCP, _UDP or _IB; false otherwise. */
bool sv_cm_service_id_split(uint64_t sid, uint16_t *ps, uint16_t *port);

/* ---- the RDMA CM's header in REQ and SIDR_REQ private data ---- */

/*
 * An RDMA CM connection over IP addresses starts its REQ (and SIDR_REQ)
 * private data with this header; the consumer's private data follows
 * (REQ: at most 92 - 36 = 56 bytes, SIDR_REQ 180). On the wire:
 *
 *   0: version (0)   1: IP version (4 bits: 4 or 6) | reserved (4 bits)
 *   2-3: source port of the active side (the destination port is in the
 *        service ID)
 *   4-19: source IP address   20-35: destination IP address
 *
 * An IPv6 address fills its 16 bytes; an IPv4 address is the last 4
 * (bytes 16-19 and 32-35), the 12 before it zero (the kernel writes only
 * those 4 bytes of a zeroed buffer, and reads only them). The struct
 * holds the addresses as GIDs: an IPv4 address as ::ffff:a.b.c.d.
 */
#define SV_CMA_HDR_BYTES 36
#define SV_CMA_VERSION   0x00

struct sv_cma_hdr {
	uint8_t version;
	uint8_t ip_version;            /* 4 or 6 */
	uint16_t src_port;             /* host order */
	uint8_t src[16], dst[16];      /* IPv4 as ::ffff:a.b.c.d */
};

/* Parse the header at the start of priv[0..len): -EINVAL when len is
 * short, the version is not 0 or the IP version neither 4 nor 6. */
int sv_cma_hdr_parse(const uint8_t *priv, size_t len, struct sv_cma_hdr *h);

/* Write the 36 bytes at priv (room >= 36); -EINVAL for an IP version
 * neither 4 nor 6, or an IPv4 header whose addresses are not
 * IPv4-mapped. */
int sv_cma_hdr_build(uint8_t *priv, const struct sv_cma_hdr *h);

/* ---- a MAD on RoCEv2: the UD datagram to QP1 ---- */

/*
 * The UDP payload that carries a MAD to QP1 (IBTA Annex A17, RoCEv2):
 *
 *   BTH (opcode UD SEND_ONLY 0x64, P_Key, destination QP 1, PSN)
 *   DETH (Q_Key 0x80010000, source QP 1) | the 256-byte MAD | ICRC
 *
 * 280 bytes; the MAD is a multiple of 4, so there is no pad.
 */
#define SV_CM_DGRAM_BYTES \
	(SV_BTH_BYTES + SV_DETH_BYTES + SV_MAD_BYTES + SV_ICRC_BYTES)

/* Build the datagram for mad at buf (room >= SV_CM_DGRAM_BYTES), with
 * the ICRC for ip. Returns its length (SV_CM_DGRAM_BYTES). */
size_t sv_cm_dgram_build(uint8_t *buf, const uint8_t mad[SV_MAD_BYTES],
			 uint16_t pkey, uint32_t psn,
			 const struct sv_roce_ip *ip);

/*
 * Parse a UDP payload as a MAD to QP1: a valid RoCEv2 packet (wire.c),
 * UD SEND_ONLY, destination QP 1, Q_Key 0x80010000, a 256-byte payload,
 * and (when ip is not NULL) a good ICRC. *mad points into buf; *p is the
 * parsed packet (source QP, P_Key, PSN). Returns 0, -EINVAL (not such a
 * datagram) or -EBADMSG (bad ICRC).
 */
int sv_cm_dgram_parse(const uint8_t *buf, size_t len,
		      const struct sv_roce_ip *ip, struct sv_roce_pkt *p,
		      const uint8_t **mad);

#endif /* SV_DEVICE_CM_MAD_H */

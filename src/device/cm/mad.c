// SPDX-License-Identifier: MIT
/*
 * CM MADs (mad.h): the attribute table, one field table per attribute,
 * and the one decoder and encoder that walk them. Pure functions, no
 * daemon state. Every MAD handed to sv_cm_decode comes from the network:
 * its length is checked before any byte past the header is read, and a
 * field table never reaches past byte 232 of the attribute data (the unit
 * test walks every table to hold that).
 *
 * The layouts are the IBTA's (Vol. 1 chapter 12.6 and 12.8, 12.11; the
 * ClassPortInfo of 13.4.8.1), as Linux's kernel CM lays them out
 * (include/rdma/ibta_vol1_c12.h): a field is Byte[Bit] and a width in
 * bits, bit 0 the most significant bit of the byte.
 */
#include <errno.h>
#include <string.h>

#include "device/cm/mad.h"

/* ================= fields ================= */

/* An integer member: msg.member at Byte[Bit] off[bit], width bits. */
#define F(msg, member, o, b, w) \
	{ .name = #member, .off = (o), .bit = (b), .width = (w), \
	  .soff = offsetof(struct sv_cm_mad, msg.member), \
	  .ssize = sizeof(((struct sv_cm_mad *)0)->msg.member) }
/* ... whose value may not exceed mx (a length of a byte string) */
#define FMAX(msg, member, o, b, w, mx) \
	{ .name = #member, .off = (o), .bit = (b), .width = (w), \
	  .soff = offsetof(struct sv_cm_mad, msg.member), \
	  .ssize = sizeof(((struct sv_cm_mad *)0)->msg.member), .max = (mx) }
/* ... one part of an integer split over several places: its bits
 * sh..sh+w-1 (low: not the top part) */
#define FPART(msg, member, o, b, w, sh, lo) \
	{ .name = #member, .off = (o), .bit = (b), .width = (w), \
	  .soff = offsetof(struct sv_cm_mad, msg.member), \
	  .ssize = sizeof(((struct sv_cm_mad *)0)->msg.member), \
	  .shift = (sh), .low = (lo) }
/* A byte string member (GID, private data) at byte o, all of it. */
#define S(msg, member, o) \
	{ .name = #member, .off = (o), \
	  .width = 8 * sizeof(((struct sv_cm_mad *)0)->msg.member), \
	  .soff = offsetof(struct sv_cm_mad, msg.member) }

/* Local and remote communication IDs: bytes 0 and 4 of most messages. */
#define COMM_IDS(msg) \
	F(msg, local_comm_id, 0, 0, 32), \
	F(msg, remote_comm_id, 4, 0, 32)

/* A REQ's path (primary at 52, alternate at 96; Table 106). */
#define REQ_PATH(p, o) \
	F(req, p.local_lid,         (o) + 0, 0, 16), \
	F(req, p.remote_lid,        (o) + 2, 0, 16), \
	S(req, p.local_gid,         (o) + 4), \
	S(req, p.remote_gid,        (o) + 20), \
	F(req, p.flow_label,        (o) + 36, 0, 20), \
	F(req, p.packet_rate,       (o) + 39, 2, 6), \
	F(req, p.traffic_class,     (o) + 40, 0, 8), \
	F(req, p.hop_limit,         (o) + 41, 0, 8), \
	F(req, p.sl,                (o) + 42, 0, 4), \
	F(req, p.subnet_local,      (o) + 42, 4, 1), \
	F(req, p.local_ack_timeout, (o) + 43, 0, 5)

static const struct sv_cm_field req_fields[] = {         /* Table 106 */
	F(req, local_comm_id,              0, 0, 32),
	F(req, vendor_id,                  5, 0, 24),
	F(req, service_id,                 8, 0, 64),
	F(req, local_ca_guid,             16, 0, 64),
	F(req, local_qkey,                28, 0, 32),
	F(req, local_qpn,                 32, 0, 24),
	F(req, responder_resources,       35, 0, 8),
	F(req, local_eecn,                36, 0, 24),
	F(req, initiator_depth,           39, 0, 8),
	F(req, remote_eecn,               40, 0, 24),
	F(req, remote_cm_response_timeout, 43, 0, 5),
	F(req, transport_service_type,    43, 5, 2),
	F(req, end_to_end_flow_control,   43, 7, 1),
	F(req, starting_psn,              44, 0, 24),
	F(req, local_cm_response_timeout, 47, 0, 5),
	F(req, retry_count,               47, 5, 3),
	F(req, pkey,                      48, 0, 16),
	F(req, path_mtu,                  50, 0, 4),
	F(req, rdc_exists,                50, 4, 1),
	F(req, rnr_retry_count,           50, 5, 3),
	F(req, max_cm_retries,            51, 0, 4),
	F(req, srq,                       51, 4, 1),
	F(req, extended_transport_type,   51, 5, 3),
	REQ_PATH(primary, 52),
	REQ_PATH(alternate, 96),
	F(req, sap_supported,            139, 5, 1),
	S(req, private_data,             140),
};

static const struct sv_cm_field mra_fields[] = {         /* Table 107 */
	COMM_IDS(mra),
	F(mra, message_mraed,    8, 0, 2),
	F(mra, service_timeout,  9, 0, 5),
	S(mra, private_data,    10),
};

static const struct sv_cm_field rej_fields[] = {         /* Table 108 */
	COMM_IDS(rej),
	F(rej, message_rejected,      8, 0, 2),
	FMAX(rej, reject_info_length, 9, 0, 7, SV_CM_REJ_ARI),
	F(rej, reason,               10, 0, 16),
	S(rej, ari,                  12),
	S(rej, private_data,         84),
};

static const struct sv_cm_field rep_fields[] = {         /* Table 110 */
	COMM_IDS(rep),
	F(rep, local_qkey,               8, 0, 32),
	F(rep, local_qpn,               12, 0, 24),
	FPART(rep, vendor_id,           15, 0, 8, 16, false),
	F(rep, local_eecn,              16, 0, 24),
	FPART(rep, vendor_id,           19, 0, 8, 8, true),
	F(rep, starting_psn,            20, 0, 24),
	FPART(rep, vendor_id,           23, 0, 8, 0, true),
	F(rep, responder_resources,     24, 0, 8),
	F(rep, initiator_depth,         25, 0, 8),
	F(rep, target_ack_delay,        26, 0, 5),
	F(rep, failover_accepted,       26, 5, 2),
	F(rep, end_to_end_flow_control, 26, 7, 1),
	F(rep, rnr_retry_count,         27, 0, 3),
	F(rep, srq,                     27, 3, 1),
	F(rep, local_ca_guid,           28, 0, 64),
	S(rep, private_data,            36),
};

static const struct sv_cm_field rtu_fields[] = {         /* Table 111 */
	COMM_IDS(rtu),
	S(rtu, private_data, 8),
};

static const struct sv_cm_field dreq_fields[] = {        /* Table 112 */
	COMM_IDS(dreq),
	F(dreq, remote_qpn_eecn, 8, 0, 24),
	S(dreq, private_data,   12),
};

static const struct sv_cm_field drep_fields[] = {        /* Table 113 */
	COMM_IDS(drep),
	S(drep, private_data, 8),
};

static const struct sv_cm_field lap_fields[] = {         /* Table 115 */
	COMM_IDS(lap),
	F(lap, remote_qpn_eecn,              12, 0, 24),
	F(lap, remote_cm_response_timeout,   15, 0, 5),
	F(lap, alternate.local_lid,          20, 0, 16),
	F(lap, alternate.remote_lid,         22, 0, 16),
	S(lap, alternate.local_gid,          24),
	S(lap, alternate.remote_gid,         40),
	F(lap, alternate.flow_label,         56, 0, 20),
	F(lap, alternate.traffic_class,      59, 0, 8),
	F(lap, alternate.hop_limit,          60, 0, 8),
	F(lap, alternate.packet_rate,        61, 2, 6),
	F(lap, alternate.sl,                 62, 0, 4),
	F(lap, alternate.subnet_local,       62, 4, 1),
	F(lap, alternate.local_ack_timeout,  63, 0, 5),
	S(lap, private_data,                 64),
};

static const struct sv_cm_field apr_fields[] = {         /* Table 116 */
	COMM_IDS(apr),
	FMAX(apr, additional_info_length, 8, 0, 8, SV_CM_APR_INFO),
	F(apr, ap_status,                 9, 0, 8),
	S(apr, additional_info,          12),
	S(apr, private_data,             84),
};

static const struct sv_cm_field sidr_req_fields[] = {    /* Table 119 */
	F(sidr_req, request_id,  0, 0, 32),
	F(sidr_req, pkey,        4, 0, 16),
	F(sidr_req, service_id,  8, 0, 64),
	S(sidr_req, private_data, 16),
};

static const struct sv_cm_field sidr_rep_fields[] = {    /* Table 120 */
	F(sidr_rep, request_id,                0, 0, 32),
	F(sidr_rep, status,                    4, 0, 8),
	FMAX(sidr_rep, additional_info_length, 5, 0, 8, SV_CM_SIDR_REP_INFO),
	FPART(sidr_rep, vendor_id,             6, 0, 16, 8, false),
	F(sidr_rep, qpn,                       8, 0, 24),
	FPART(sidr_rep, vendor_id,            11, 0, 8, 0, true),
	F(sidr_rep, service_id,               12, 0, 64),
	F(sidr_rep, qkey,                     20, 0, 32),
	S(sidr_rep, additional_info,          24),
	S(sidr_rep, private_data,             96),
};

static const struct sv_cm_field cpi_fields[] = {         /* 13.4.8.1 */
	F(cpi, base_version,       0, 0, 8),
	F(cpi, class_version,      1, 0, 8),
	F(cpi, capability_mask,    2, 0, 16),
	F(cpi, capability_mask2,   4, 0, 27),
	F(cpi, resp_time_value,    7, 3, 5),
	S(cpi, redirect_gid,       8),
	F(cpi, redirect_tc,       24, 0, 8),
	F(cpi, redirect_sl,       25, 0, 4),
	F(cpi, redirect_fl,       25, 4, 20),
	F(cpi, redirect_lid,      28, 0, 16),
	F(cpi, redirect_pkey,     30, 0, 16),
	F(cpi, redirect_qp,       33, 0, 24),
	F(cpi, redirect_qkey,     36, 0, 32),
	S(cpi, trap_gid,          40),
	F(cpi, trap_tc,           56, 0, 8),
	F(cpi, trap_sl,           57, 0, 4),
	F(cpi, trap_fl,           57, 4, 20),
	F(cpi, trap_lid,          60, 0, 16),
	F(cpi, trap_pkey,         62, 0, 16),
	F(cpi, trap_hop_limit,    64, 0, 8),
	F(cpi, trap_qp,           65, 0, 24),
	F(cpi, trap_qkey,         68, 0, 32),
};

#undef F
#undef FMAX
#undef FPART
#undef S
#undef COMM_IDS
#undef REQ_PATH

/* The private data runs to the end of the 232 bytes in every message. */
#define PRIV_ENDS(msg, member, o) \
	_Static_assert((o) + sizeof(((struct sv_cm_mad *)0)->msg.member) == \
		       SV_CM_DATA_BYTES, #msg " private data")
PRIV_ENDS(req, private_data, 140);
PRIV_ENDS(mra, private_data, 10);
PRIV_ENDS(rej, private_data, 84);
PRIV_ENDS(rep, private_data, 36);
PRIV_ENDS(rtu, private_data, 8);
PRIV_ENDS(dreq, private_data, 12);
PRIV_ENDS(drep, private_data, 8);
PRIV_ENDS(lap, private_data, 64);
PRIV_ENDS(apr, private_data, 84);
PRIV_ENDS(sidr_req, private_data, 16);
PRIV_ENDS(sidr_rep, private_data, 96);
#undef PRIV_ENDS
_Static_assert(12 + SV_CM_REJ_ARI == 84, "REJ ARI");
_Static_assert(24 + SV_CM_SIDR_REP_INFO == 96, "SIDR_REP info");

/* ================= the attribute table ================= */

#define MSG_METHODS SV_CM_MB_SEND
#define CPI_METHODS (SV_CM_MB_GET | SV_CM_MB_SET | SV_CM_MB_SEND | \
		     SV_CM_MB_GET_RESP)

#define ATTR(n, nm, meth, fl) \
	[SV_CM_ATTR_##n] = { .id = SV_CM_ATTR_##n, .name = nm, \
			     .methods = (meth), \
			     .nfields = sizeof(fl) / sizeof((fl)[0]), \
			     .fields = fl }

static const struct sv_cm_attrinfo sv_cm_attrs[SV_CM_ATTR_APR + 1] = {
	ATTR(CLASS_PORT_INFO, "ClassPortInfo", CPI_METHODS, cpi_fields),
	ATTR(REQ,      "REQ",      MSG_METHODS, req_fields),
	ATTR(MRA,      "MRA",      MSG_METHODS, mra_fields),
	ATTR(REJ,      "REJ",      MSG_METHODS, rej_fields),
	ATTR(REP,      "REP",      MSG_METHODS, rep_fields),
	ATTR(RTU,      "RTU",      MSG_METHODS, rtu_fields),
	ATTR(DREQ,     "DREQ",     MSG_METHODS, dreq_fields),
	ATTR(DREP,     "DREP",     MSG_METHODS, drep_fields),
	ATTR(SIDR_REQ, "SIDR_REQ", MSG_METHODS, sidr_req_fields),
	ATTR(SIDR_REP, "SIDR_REP", MSG_METHODS, sidr_rep_fields),
	ATTR(LAP,      "LAP",      MSG_METHODS, lap_fields),
	ATTR(APR,      "APR",      MSG_METHODS, apr_fields),
};

#undef ATTR

const struct sv_cm_attrinfo *sv_cm_attr(uint16_t attr_id)
{
	const struct sv_cm_attrinfo *a;

	if (attr_id >= sizeof(sv_cm_attrs) / sizeof(sv_cm_attrs[0]))
		return NULL;
	a = &sv_cm_attrs[attr_id];
	return a->name ? a : NULL;
}

const char *sv_cm_attr_name(uint16_t attr_id)
{
	const struct sv_cm_attrinfo *a = sv_cm_attr(attr_id);

	return a ? a->name : "unknown";
}

static uint8_t method_bit(uint8_t method)
{
	switch (method) {
	case SV_MAD_METHOD_GET:      return SV_CM_MB_GET;
	case SV_MAD_METHOD_SET:      return SV_CM_MB_SET;
	case SV_MAD_METHOD_SEND:     return SV_CM_MB_SEND;
	case SV_MAD_METHOD_GET_RESP: return SV_CM_MB_GET_RESP;
	default:                     return 0;
	}
}

/* ================= names ================= */

static const char *const rej_names[] = {
#define X(name, code) [code] = #name,
	SV_CM_REJ_REASONS(X)
#undef X
};

const char *sv_cm_rej_reason_name(uint16_t reason)
{
	if (reason >= sizeof(rej_names) / sizeof(rej_names[0]))
		return NULL;
	return rej_names[reason];
}

static const char *const err_text[SV_CM_E_COUNT] = {
	[SV_CM_OK] = "ok",
#define X(name, text) [SV_CM_E_##name] = text,
	SV_CM_ERRORS(X)
#undef X
};

const char *sv_cm_strerror(int err)
{
	if (err < 0)
		err = -err;
	if (err >= SV_CM_E_COUNT)
		return "unknown error";
	return err_text[err];
}

/* ================= bits ================= */

static uint64_t width_mask(unsigned int width)
{
	return width >= 64 ? ~0ull : (1ull << width) - 1;
}

/* The big-endian bit string d[off] bit `bit` .. + width (bit 0 the most
 * significant of its byte; at most 8 bytes spanned). */
static uint64_t get_bits(const uint8_t *d, unsigned int off,
			 unsigned int bit, unsigned int width)
{
	unsigned int first = off * 8 + bit, end = first + width;
	unsigned int b1 = (end + 7) / 8;
	uint64_t v = 0;

	for (unsigned int i = first / 8; i < b1; i++)
		v = v << 8 | d[i];
	return v >> (b1 * 8 - end) & width_mask(width);
}

/* OR v (already within width) into that bit string; d is zeroed. */
static void put_bits(uint8_t *d, unsigned int off, unsigned int bit,
		     unsigned int width, uint64_t v)
{
	unsigned int first = off * 8 + bit, end = first + width;
	unsigned int b1 = (end + 7) / 8;
	uint64_t x = v << (b1 * 8 - end);

	for (unsigned int i = b1; i-- > first / 8; x >>= 8)
		d[i] |= (uint8_t)x;
}

static uint64_t load_int(const struct sv_cm_mad *m, const struct sv_cm_field *f)
{
	const uint8_t *p = (const uint8_t *)m + f->soff;
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (f->ssize) {
	case 1: memcpy(&u8, p, 1); return u8;
	case 2: memcpy(&u16, p, 2); return u16;
	case 4: memcpy(&u32, p, 4); return u32;
	default: memcpy(&u64, p, 8); return u64;
	}
}

static void store_int(struct sv_cm_mad *m, const struct sv_cm_field *f,
		      uint64_t v)
{
	uint8_t *p = (uint8_t *)m + f->soff;
	uint8_t u8 = (uint8_t)v;
	uint16_t u16 = (uint16_t)v;
	uint32_t u32 = (uint32_t)v;

	switch (f->ssize) {
	case 1: memcpy(p, &u8, 1); break;
	case 2: memcpy(p, &u16, 2); break;
	case 4: memcpy(p, &u32, 4); break;
	default: memcpy(p, &v, 8); break;
	}
}

/* ================= decode and encode ================= */

int sv_cm_decode(const uint8_t *buf, size_t len, unsigned int flags,
		 struct sv_cm_mad *m)
{
	const struct sv_cm_attrinfo *a;
	const uint8_t *d;

	if (len < SV_MAD_BYTES)
		return -SV_CM_E_SHORT;
	if (len > SV_MAD_BYTES)
		return -SV_CM_E_LONG;
	if (buf[0] != SV_MAD_BASE_VERSION)
		return -SV_CM_E_BASE_VERSION;
	if (buf[1] != SV_MAD_CLASS_CM)
		return -SV_CM_E_CLASS;
	if (buf[2] != SV_CM_CLASS_VERSION)
		return -SV_CM_E_CLASS_VERSION;

	memset(m, 0, sizeof(*m));
	m->method = buf[3];
	m->status = sv_get_be16(buf + 4);
	m->class_specific = sv_get_be16(buf + 6);
	m->tid = sv_get_be64(buf + 8);
	m->attr_id = sv_get_be16(buf + 16);
	/* buf[18..19] reserved */
	m->attr_mod = sv_get_be32(buf + 20);

	a = sv_cm_attr(m->attr_id);
	if (!a)
		return -SV_CM_E_ATTR;
	if (!(a->methods & method_bit(m->method)))
		return -SV_CM_E_METHOD;

	d = buf + SV_MAD_HDR_BYTES;
	for (unsigned int i = 0; i < a->nfields; i++) {
		const struct sv_cm_field *f = &a->fields[i];
		uint64_t v;

		if (!f->ssize) {
			memcpy((uint8_t *)m + f->soff, d + f->off,
			       f->width / 8u);
			continue;
		}
		v = get_bits(d, f->off, f->bit, f->width);
		if (f->max && v > f->max)
			return -SV_CM_E_FIELD;
		/* a split integer's parts each add their bits */
		store_int(m, f, load_int(m, f) | v << f->shift);
	}

	if (flags & SV_CM_DECODE_STRICT) {
		uint8_t again[SV_MAD_BYTES];

		/* every bit that is not a field's is reserved, and encode
		 * writes those as zero: the same bytes or a reserved bit */
		if (sv_cm_encode(m, again) != 0 ||
		    memcmp(again, buf, SV_MAD_BYTES) != 0)
			return -SV_CM_E_RESERVED;
	}
	return 0;
}

int sv_cm_encode(const struct sv_cm_mad *m, uint8_t out[SV_MAD_BYTES])
{
	const struct sv_cm_attrinfo *a = sv_cm_attr(m->attr_id);
	uint8_t mad[SV_MAD_BYTES] = { 0 };
	uint8_t *d = mad + SV_MAD_HDR_BYTES;

	if (!a)
		return -SV_CM_E_ATTR;
	if (!(a->methods & method_bit(m->method)))
		return -SV_CM_E_METHOD;

	mad[0] = SV_MAD_BASE_VERSION;
	mad[1] = SV_MAD_CLASS_CM;
	mad[2] = SV_CM_CLASS_VERSION;
	mad[3] = m->method;
	sv_put_be16(mad + 4, m->status);
	sv_put_be16(mad + 6, m->class_specific);
	sv_put_be64(mad + 8, m->tid);
	sv_put_be16(mad + 16, m->attr_id);
	sv_put_be32(mad + 20, m->attr_mod);

	for (unsigned int i = 0; i < a->nfields; i++) {
		const struct sv_cm_field *f = &a->fields[i];
		uint64_t v, part;

		if (!f->ssize) {
			memcpy(d + f->off, (const uint8_t *)m + f->soff,
			       f->width / 8u);
			continue;
		}
		v = load_int(m, f);
		part = v >> f->shift;
		if (!f->low && part > width_mask(f->width))
			return -SV_CM_E_FIELD;
		if (f->max && v > f->max)
			return -SV_CM_E_FIELD;
		put_bits(d, f->off, f->bit, f->width,
			 part & width_mask(f->width));
	}
	memcpy(out, mad, SV_MAD_BYTES);
	return 0;
}

void sv_cm_mad_init(struct sv_cm_mad *m, uint16_t attr_id, uint64_t tid)
{
	memset(m, 0, sizeof(*m));
	m->method = SV_MAD_METHOD_SEND;
	m->attr_id = attr_id;
	m->tid = tid;
}

/* ================= the RDMA CM ================= */

bool sv_cm_service_id_split(uint64_t sid, uint16_t *ps, uint16_t *port)
{
	uint64_t p = sid >> 16;

	if (p != SV_RDMA_PS_TCP && p != SV_RDMA_PS_UDP && p != SV_RDMA_PS_IB)
		return false;
	*ps = (uint16_t)p;
	*port = (uint16_t)sid;
	return true;
}

static const uint8_t v4mapped_prefix[12] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
};

/* A CMA header address: the 16 bytes (IPv6), or the IPv4 address in the
 * last 4 (the first 12 zero on the wire, ::ffff: in the struct). */
static void cma_addr_get(uint8_t gid[16], const uint8_t *w, bool v4)
{
	if (v4) {
		memcpy(gid, v4mapped_prefix, 12);
		memcpy(gid + 12, w + 12, 4);
	} else {
		memcpy(gid, w, 16);
	}
}

static void cma_addr_put(uint8_t *w, const uint8_t gid[16], bool v4)
{
	if (v4) {
		memset(w, 0, 12);
		memcpy(w + 12, gid + 12, 4);
	} else {
		memcpy(w, gid, 16);
	}
}

int sv_cma_hdr_parse(const uint8_t *priv, size_t len, struct sv_cma_hdr *h)
{
	if (len < SV_CMA_HDR_BYTES)
		return -EINVAL;
	h->version = priv[0];
	h->ip_version = priv[1] >> 4;      /* the low nibble is reserved */
	if (h->version != SV_CMA_VERSION ||
	    (h->ip_version != 4 && h->ip_version != 6))
		return -EINVAL;
	h->src_port = sv_get_be16(priv + 2);
	cma_addr_get(h->src, priv + 4, h->ip_version == 4);
	cma_addr_get(h->dst, priv + 20, h->ip_version == 4);
	return 0;
}

int sv_cma_hdr_build(uint8_t *priv, const struct sv_cma_hdr *h)
{
	bool v4 = h->ip_version == 4;

	if (!v4 && h->ip_version != 6)
		return -EINVAL;
	if (v4 && (memcmp(h->src, v4mapped_prefix, 12) != 0 ||
		   memcmp(h->dst, v4mapped_prefix, 12) != 0))
		return -EINVAL;
	priv[0] = h->version;
	priv[1] = (uint8_t)(h->ip_version << 4);
	sv_put_be16(priv + 2, h->src_port);
	cma_addr_put(priv + 4, h->src, v4);
	cma_addr_put(priv + 20, h->dst, v4);
	return 0;
}

/* ================= the datagram to QP1 ================= */

size_t sv_cm_dgram_build(uint8_t *buf, const uint8_t mad[SV_MAD_BYTES],
			 uint16_t pkey, uint32_t psn,
			 const struct sv_roce_ip *ip)
{
	struct sv_roce_pkt p = {
		.opcode = SV_OP_UD_SEND_ONLY,
		.pkey = pkey,
		.dqpn = SV_GSI_QPN,
		.psn = psn & SV_PSN_MASK,
		.qkey = SV_GSI_QKEY,
		.sqpn = SV_GSI_QPN,
	};
	size_t hdr = sv_roce_build_hdr(buf, &p);

	memcpy(buf + hdr, mad, SV_MAD_BYTES);
	return sv_roce_finish(buf, hdr + SV_MAD_BYTES, ip);
}

int sv_cm_dgram_parse(const uint8_t *buf, size_t len,
		      const struct sv_roce_ip *ip, struct sv_roce_pkt *p,
		      const uint8_t **mad)
{
	if (sv_roce_parse(buf, len, p) != 0)
		return -EINVAL;
	if (p->opcode != SV_OP_UD_SEND_ONLY || p->dqpn != SV_GSI_QPN ||
	    p->qkey != SV_GSI_QKEY || p->paylen != SV_MAD_BYTES)
		return -EINVAL;
	if (ip && !sv_roce_icrc_ok(ip, buf, len))
		return -EBADMSG;
	*mad = p->payload;
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * Unit tests of the RoCEv2 wire format (src/device/roce/wire.c, icrc.c).
 *
 * The reference is tests/data/rxe-rc-pingpong.pcap: 50 packets of Linux
 * rxe's ibv_rc_pingpong (SEND_FIRST, SEND_LAST and ACKs, both ways, IPv4
 * with DF and nonzero IP identifications), read here with a small pcap
 * reader of our own (global header, record headers, Ethernet, IPv4, UDP).
 * Every packet must decode, and its ICRC must verify both with the real IP
 * identification and DF (sv_roce_icrc) and without them (sv_roce_icrc_ok,
 * which recovers them). Then: flipped bits, random identifications, a
 * build -> parse round trip for every opcode, malformed and random
 * packets, the UDP source port, PSN arithmetic, and (printed, never
 * asserted) the time an ICRC takes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "device/roce/wire.h"

#define PCAP_PATH SV_TEST_DATA "/rxe-rc-pingpong.pcap"
#define PCAP_PACKETS 50

/* One RoCEv2 packet from the pcap: its UDP payload in a buffer of exactly
 * its size (so that ASan sees any read past it) and its IP/UDP facts. */
struct ref_pkt {
	uint8_t *buf;
	size_t len;
	struct sv_roce_ip ip;      /* with the real ip_id and df */
};

/* the reference pcap's, or (--pcap) a capture's */
static struct ref_pkt ref[8192];
static unsigned int nref;
static const char *pcap_path = PCAP_PATH;

/* ================= helpers ================= */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static uint32_t le32_at(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}

static void v4_gid(uint8_t gid[16], const uint8_t addr[4])
{
	memset(gid, 0, 10);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, addr, 4);
}

static uint8_t *dup_buf(const uint8_t *b, size_t len)
{
	uint8_t *d = malloc(len ? len : 1);

	assert_non_null(d);
	memcpy(d, b, len);
	return d;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ================= the pcap reader ================= */

static uint32_t pcap_u32(const uint8_t *b, bool swap)
{
	uint32_t v = le32_at(b);

	return swap ? __builtin_bswap32(v) : v;
}

/* Read the pcap file and keep its UDP port 4791 payloads in ref[]. */
static int load_pcap(void **state)
{
	FILE *f = fopen(pcap_path, "rb");
	uint8_t *d;
	long size;
	size_t off;
	bool swap;
	uint32_t magic;

	(void)state;
	if (!f) {
		fprintf(stderr, "cannot open %s\n", pcap_path);
		return -1;
	}
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	d = malloc((size_t)size);
	if (!d || fread(d, 1, (size_t)size, f) != (size_t)size || size < 24) {
		fclose(f);
		free(d);
		return -1;
	}
	fclose(f);

	/* global header: magic (microsecond or nanosecond timestamps, either
	 * byte order), version, zone, sigfigs, snaplen, link type */
	magic = le32_at(d);
	if (magic == 0xa1b2c3d4 || magic == 0xa1b23c4d)
		swap = false;
	else if (magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1)
		swap = true;
	else
		goto bad;
	if (pcap_u32(d + 20, swap) != 1)           /* LINKTYPE_ETHERNET */
		goto bad;

	for (off = 24; off + 16 <= (size_t)size;) {
		/* record header: seconds, fraction, captured, original length */
		uint32_t cap = pcap_u32(d + off + 8, swap);
		const uint8_t *fr = d + off + 16, *ip, *udp;
		uint16_t ethertype;
		size_t l2 = 14, ihl, ulen;

		if (cap > (size_t)size - off - 16)
			goto bad;
		off += 16 + cap;
		if (cap < 14)
			continue;
		ethertype = sv_get_be16(fr + 12);
		if (ethertype == 0x8100 && cap >= 18) {     /* one VLAN tag */
			ethertype = sv_get_be16(fr + 16);
			l2 = 18;
		}
		if (ethertype != 0x0800 || cap < l2 + 20)
			continue;
		ip = fr + l2;
		ihl = (ip[0] & 0xf) * 4u;
		if (ip[0] >> 4 != 4 || ihl < 20 || ip[9] != 17 ||
		    cap < l2 + ihl + 8)
			continue;
		udp = ip + ihl;
		ulen = sv_get_be16(udp + 4);
		if (sv_get_be16(udp + 2) != SV_ROCE_PORT || ulen < 8 ||
		    cap < l2 + ihl + ulen)
			continue;
		if (nref == sizeof(ref) / sizeof(ref[0]))
			goto bad;

		struct ref_pkt *r = &ref[nref++];

		r->len = ulen - 8;
		r->buf = dup_buf(udp + 8, r->len);
		v4_gid(r->ip.src, ip + 12);
		v4_gid(r->ip.dst, ip + 16);
		r->ip.sport = sv_get_be16(udp);
		r->ip.dport = sv_get_be16(udp + 2);
		r->ip.ip_id = sv_get_be16(ip + 4);
		r->ip.df = ip[6] & 0x40;
	}
	free(d);
	return 0;
bad:
	fprintf(stderr, "%s: not a pcap file we read\n", pcap_path);
	free(d);
	return -1;
}

static int free_pcap(void **state)
{
	(void)state;
	while (nref)
		free(ref[--nref].buf);
	return 0;
}

/* ================= the opcode table ================= */

static const uint8_t known_ops[] = {
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a,
	0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x16,
	0x17,
	0x1c, 0x1d,    /* IBTA 1.5: FLUSH, ATOMIC WRITE (RC, as rxe) */
	0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a,
	0x2b,
	0x64, 0x65,
	0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa,
	0xab, 0xac, 0xad, 0xae, 0xaf, 0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb6,
	0xb7,
	0xc0, 0xc1,    /* softverbs' masked atomics (RC) */
};

static bool is_known(unsigned int opcode)
{
	for (size_t i = 0; i < sizeof(known_ops); i++)
		if (known_ops[i] == opcode)
			return true;
	return false;
}

static void test_opcode_table(void **state)
{
	unsigned int op;

	(void)state;
	for (op = 0; op < 256; op++) {
		const struct sv_roce_opinfo *o = sv_roce_op((uint8_t)op);
		uint32_t f, transports, kind;
		unsigned int hdr = SV_BTH_BYTES;

		if (!is_known(op)) {
			assert_null(o);
			continue;
		}
		assert_non_null(o);
		assert_non_null(o->name);
		f = o->flags;
		/* the header size follows from the header flags */
		hdr += f & SV_RF_RETH ? SV_RETH_BYTES : 0;
		hdr += f & SV_RF_AETH ? SV_AETH_BYTES : 0;
		hdr += f & SV_RF_ATMETH ? SV_ATMETH_BYTES : 0;
		hdr += f & SV_RF_MASKED ? SV_MATMETH_BYTES - SV_ATMETH_BYTES : 0;
		assert_true(!(f & SV_RF_MASKED) || (f & SV_RF_ATMETH));
		hdr += f & SV_RF_ATMACK ? SV_ATMACK_BYTES : 0;
		hdr += f & SV_RF_IMMDT ? SV_IMMDT_BYTES : 0;
		hdr += f & SV_RF_IETH ? SV_IETH_BYTES : 0;
		hdr += f & SV_RF_DETH ? SV_DETH_BYTES : 0;
		hdr += f & SV_RF_XRCETH ? SV_XRCETH_BYTES : 0;
		hdr += f & SV_RF_FETH ? SV_FETH_BYTES : 0;
		assert_int_equal(o->hdr_bytes, hdr);
		/* XRC: RC's operation; an XRCETH on every request */
		if (op >= SV_OP_XRC_BASE && op < SV_OP_RC_MASKED_CMP_SWAP) {
			const struct sv_roce_opinfo *rc = sv_roce_op(op & 0x1f);

			assert_non_null(rc);
			assert_int_equal(f & ~(uint32_t)(SV_RF_XRC |
							 SV_RF_XRCETH),
					 rc->flags & ~(uint32_t)SV_RF_RC);
			assert_int_equal(!!(f & SV_RF_XRCETH),
					 !!(f & SV_RF_REQ));
			assert_string_equal(o->name + 1, rc->name);
		}
		assert_true(o->hdr_bytes <= SV_ROCE_MAX_HDR);
		/* one transport, the one the opcode's top bits name (the
		 * manufacturer's opcodes are softverbs' RC ones) */
		transports = f & (SV_RF_RC | SV_RF_UC | SV_RF_UD | SV_RF_XRC);
		assert_int_equal(__builtin_popcount(transports), 1);
		assert_int_equal(transports, op < 0x20 ? SV_RF_RC :
					     op < 0x40 ? SV_RF_UC :
					     op < 0xa0 ? SV_RF_UD :
					     op < 0xc0 ? SV_RF_XRC : SV_RF_RC);
		assert_int_equal(!!(f & SV_RF_REQ) + !!(f & SV_RF_RESP), 1);
		kind = f & (SV_RF_SEND | SV_RF_WRITE | SV_RF_READ |
			    SV_RF_ATOMIC | SV_RF_FLUSH | SV_RF_AWRITE);
		assert_int_equal(__builtin_popcount(kind) <= 1, 1);
		assert_true(kind || op == SV_OP_RC_ACK || op == SV_OP_XRC_ACK);
		assert_true(f & (SV_RF_FIRST | SV_RF_MIDDLE | SV_RF_LAST));
		assert_false((f & SV_RF_MIDDLE) && (f & SV_RF_ONLY));
	}
	/* a few by name */
	assert_string_equal(sv_roce_op(SV_OP_RC_SEND_FIRST)->name,
			    "RC_SEND_FIRST");
	assert_string_equal(sv_roce_op(SV_OP_UD_SEND_ONLY_IMM)->name,
			    "UD_SEND_ONLY_IMM");
	assert_int_equal(sv_roce_op(SV_OP_RC_WRITE_ONLY_IMM)->hdr_bytes, 32);
	assert_int_equal(sv_roce_op(SV_OP_RC_FETCH_ADD)->hdr_bytes, 40);
	assert_int_equal(sv_roce_op(SV_OP_RC_MASKED_CMP_SWAP)->hdr_bytes, 56);
	assert_int_equal(sv_roce_op(SV_OP_RC_MASKED_FETCH_ADD)->hdr_bytes, 56);
	assert_int_equal(sv_roce_op(SV_OP_RC_ATOMIC_ACK)->hdr_bytes, 24);
	assert_int_equal(sv_roce_op(SV_OP_UD_SEND_ONLY)->hdr_bytes, 20);
	assert_int_equal(sv_roce_op(SV_OP_RC_READ_RESP_MIDDLE)->hdr_bytes, 12);
	assert_int_equal(sv_roce_op(SV_OP_RC_READ_RESP_MIDDLE)->flags &
			 SV_RF_AETH, 0);
	assert_string_equal(sv_roce_op(SV_OP_RC_FLUSH)->name, "RC_FLUSH");
	assert_int_equal(sv_roce_op(SV_OP_RC_FLUSH)->hdr_bytes, 32);
	assert_int_equal(sv_roce_op(SV_OP_RC_ATOMIC_WRITE)->hdr_bytes, 28);
	assert_true(sv_roce_op(SV_OP_RC_ATOMIC_WRITE)->flags & SV_RF_PAYLOAD);
	assert_false(sv_roce_op(SV_OP_RC_FLUSH)->flags & SV_RF_PAYLOAD);
}

/* FLUSH as Linux rxe lays it out: BTH, then the FETH, then the RETH; and
 * ATOMIC WRITE: BTH, RETH, 8 bytes. Built, then parsed back. */
static void test_flush_awrite_layout(void **state)
{
	struct sv_roce_pkt p = { .opcode = SV_OP_RC_FLUSH, .psn = 7,
				 .dqpn = 0x12, .pkey = 0xffff,
				 .va = 0x1122334455667788ull,
				 .rkey = 0xaabbccdd, .dmalen = 64,
				 .feth = SV_FLUSH_SEL_MR << 4 | SV_FLUSH_GLOBAL },
			   q;
	uint8_t b[128] = { 0 };
	size_t n;

	(void)state;
	n = sv_roce_build_hdr(b, &p);
	assert_int_equal(n, 32);
	assert_int_equal(b[15], 0x11);          /* FETH: sel 1, plt 1 */
	assert_int_equal(b[12] | b[13] | b[14], 0);
	assert_int_equal(b[16], 0x11);          /* RETH: the VA's first byte */
	assert_int_equal(b[24], 0xaa);          /* its R_Key */
	assert_int_equal(b[31], 64);            /* its length */
	assert_int_equal(sv_roce_parse(b, n + SV_ICRC_BYTES, &q), 0);
	assert_int_equal(q.feth, p.feth);
	assert_int_equal(q.va, p.va);
	assert_int_equal(q.rkey, p.rkey);
	assert_int_equal(q.dmalen, 64);
	assert_int_equal(q.paylen, 0);
	/* a payload on a FLUSH is malformed */
	assert_int_equal(sv_roce_parse(b, n + 4 + SV_ICRC_BYTES, &q), -EINVAL);

	memset(b, 0, sizeof(b));
	p = (struct sv_roce_pkt){ .opcode = SV_OP_RC_ATOMIC_WRITE, .psn = 8,
				  .va = 0x1000, .rkey = 5, .dmalen = 8 };
	n = sv_roce_build_hdr(b, &p);
	assert_int_equal(n, 28);
	memcpy(b + n, "8 bytes!", 8);
	assert_int_equal(sv_roce_parse(b, n + 8 + SV_ICRC_BYTES, &q), 0);
	assert_int_equal(q.va, 0x1000);
	assert_int_equal(q.dmalen, 8);
	assert_int_equal(q.paylen, 8);
	assert_memory_equal(q.payload, "8 bytes!", 8);
}

/* ================= the reference packets ================= */

static void test_pcap_decode(void **state)
{
	unsigned int i, firsts = 0, lasts = 0, acks = 0;

	(void)state;
	assert_int_equal(nref, PCAP_PACKETS);
	for (i = 0; i < nref; i++) {
		struct ref_pkt *r = &ref[i];
		struct sv_roce_pkt p;

		assert_int_equal(sv_roce_parse(r->buf, r->len, &p), 0);
		assert_int_equal(p.tver, 0);
		assert_int_equal(p.pkey, 0xffff);
		assert_int_equal(p.dqpn, 0x11);
		assert_false(p.se || p.migreq || p.fecn || p.becn);
		assert_int_equal(p.flags, sv_roce_op(p.opcode)->flags);
		assert_ptr_equal(p.payload,
				 r->buf + sv_roce_op(p.opcode)->hdr_bytes);
		assert_int_equal(sv_bth_opcode(r->buf), p.opcode);
		assert_int_equal(sv_bth_dqpn(r->buf), p.dqpn);
		assert_int_equal(sv_bth_psn(r->buf), p.psn);
		assert_int_equal(r->ip.sport, 0xc121);
		assert_true(r->ip.df);
		assert_int_not_equal(r->ip.ip_id, 0);
		switch (p.opcode) {
		case SV_OP_RC_SEND_FIRST:
			assert_int_equal(p.paylen, 1024);
			assert_int_equal(p.pad, 0);
			assert_false(p.ackreq);
			firsts++;
			break;
		case SV_OP_RC_SEND_LAST:
			assert_int_equal(p.paylen, 476);
			assert_true(p.ackreq);
			lasts++;
			/* the message's other packet precedes it */
			assert_true(i > 0);
			assert_int_equal(ref[i - 1].buf[0],
					 SV_OP_RC_SEND_FIRST);
			assert_int_equal(sv_psn_diff(p.psn,
						     sv_bth_psn(ref[i - 1].buf)),
					 1);
			break;
		case SV_OP_RC_ACK:
			assert_int_equal(p.syndrome, 0x1f);
			assert_int_equal(p.paylen, 0);
			acks++;
			break;
		default:
			fail_msg("unexpected opcode 0x%02x", p.opcode);
		}
	}
	assert_int_equal(firsts, lasts);
	assert_true(firsts > 0 && acks > 0);
	assert_int_equal(firsts + lasts + acks, nref);
}

static void test_pcap_icrc(void **state)
{
	unsigned int i;

	(void)state;
	for (i = 0; i < nref; i++) {
		struct ref_pkt *r = &ref[i];
		struct sv_roce_ip blind = r->ip;
		uint16_t id;
		bool df;

		/* with the real identification and DF */
		assert_int_equal(sv_roce_icrc(&r->ip, r->buf, r->len - 4),
				 le32_at(r->buf + r->len - 4));
		/* without them, as a UDP socket receives it */
		blind.ip_id = 0;
		blind.df = false;
		assert_true(sv_roce_icrc_ok(&blind, r->buf, r->len));
		blind.ip_id = 0x1234;
		blind.df = true;
		assert_true(sv_roce_icrc_ok(&blind, r->buf, r->len));
		assert_true(sv_roce_icrc_solve_v4(&blind, r->buf, r->len,
						  &id, &df));
		assert_int_equal(id, r->ip.ip_id);
		assert_true(df);
	}
}

/*
 * Every single-bit error in a packet: sv_roce_icrc (real identification)
 * catches all of them but those in BTH byte 4, which the ICRC does not
 * cover. sv_roce_icrc_ok has 17 unknown bits to fit, so an error passes it
 * with probability 2^-15; whether one does depends only on its distance
 * from the IP identification, i.e. on its offset in the UDP payload (the
 * same offsets fail in every packet long enough to have them) or, in the
 * ICRC itself, on the packet's length. Count the distinct offsets that
 * pass (deterministic for this data; 1 expected in 2^15) and check that
 * each needed another identification or DF than the real one.
 */
static void test_pcap_bitflip(void **state)
{
	unsigned long flips = 0, uncovered = 0, blind_pass = 0;
	size_t pass_bits[8], npass = 0, longest = 0;
	unsigned int i, k;

	(void)state;
	for (i = 0; i < nref; i++) {
		struct ref_pkt *r = &ref[i];
		uint8_t *b = dup_buf(r->buf, r->len);
		size_t bit;

		if (r->len > longest)
			longest = r->len;
		for (bit = 0; bit < r->len * 8; bit++) {
			size_t byte = bit / 8;
			uint8_t m = (uint8_t)(1u << (bit % 8));
			uint32_t want, got;
			uint16_t id;
			bool df;

			b[byte] ^= m;
			flips++;
			want = le32_at(b + r->len - 4);
			got = sv_roce_icrc(&r->ip, b, r->len - 4);
			if (byte == 4) {
				assert_int_equal(got, want);
				assert_true(sv_roce_icrc_ok(&r->ip, b, r->len));
				uncovered++;
			} else {
				assert_int_not_equal(got, want);
				if (sv_roce_icrc_solve_v4(&r->ip, b, r->len,
							  &id, &df)) {
					assert_true(id != r->ip.ip_id ||
						    df != r->ip.df);
					blind_pass++;
					/* an offset in the ICRC is one per
					 * length: count it as such */
					size_t key = bit;

					if (byte >= r->len - 4)
						key |= (size_t)r->len << 32;
					for (k = 0; k < npass; k++)
						if (pass_bits[k] == key)
							break;
					if (k == npass && npass < 8)
						pass_bits[npass++] = key;
				}
			}
			b[byte] ^= m;
		}
		free(b);
	}
	print_message("bit flips: %lu, in BTH byte 4 (not covered): %lu, "
		      "passing the IPv4 check without the IP id: %lu at %zu "
		      "distinct offsets (expected %.2f)\n", flips, uncovered,
		      blind_pass, npass, longest * 8 / 32768.0);
	for (k = 0; k < npass; k++) {
		size_t bit = pass_bits[k] & 0xffffffff;

		print_message("  passes: a flip of byte %zu bit %zu", bit / 8,
			      bit % 8);
		if (pass_bits[k] >> 32)
			print_message(" (the ICRC of %zu-byte packets)",
				      pass_bits[k] >> 32);
		print_message("\n");
	}
	assert_true(npass <= longest * 8 / 8192 + 1);
}

/* Set the ICRC of a copy of r for another identification and DF. */
static void reicrc(uint8_t *b, size_t len, const struct sv_roce_ip *ip)
{
	uint32_t c = sv_roce_icrc(ip, b, len - 4);

	b[len - 4] = (uint8_t)c;
	b[len - 3] = (uint8_t)(c >> 8);
	b[len - 2] = (uint8_t)(c >> 16);
	b[len - 1] = (uint8_t)(c >> 24);
}

static void check_solves(uint8_t *b, size_t len, struct sv_roce_ip *ip)
{
	struct sv_roce_ip blind = *ip;
	uint16_t id;
	bool df;

	reicrc(b, len, ip);
	blind.ip_id = (uint16_t)rnd();
	blind.df = rnd() & 1;
	/* a packet without DF is no RoCEv2 packet: refused */
	assert_true(sv_roce_icrc_ok(&blind, b, len) == ip->df);
	assert_true(sv_roce_icrc_solve_v4(&blind, b, len, &id, &df));
	/* the solution is unique: id and DF are 17 adjacent bits, and
	 * CRC-32 sees every error burst of up to 32 bits */
	assert_int_equal(id, ip->ip_id);
	assert_int_equal(df, ip->df);
}

static void test_random_ids(void **state)
{
	unsigned int i, k;
	uint32_t id;

	(void)state;
	/* each reference packet with random identifications, both DFs */
	for (i = 0; i < nref; i++) {
		struct sv_roce_ip ip = ref[i].ip;
		uint8_t *b = dup_buf(ref[i].buf, ref[i].len);

		for (k = 0; k < 200; k++) {
			ip.ip_id = (uint16_t)rnd();
			ip.df = k & 1;
			check_solves(b, ref[i].len, &ip);
		}
		free(b);
	}
	/* every identification, both DFs, on an ACK and (every 7th) on a
	 * SEND_FIRST */
	for (i = 0; i < nref && ref[i].buf[0] != SV_OP_RC_ACK; i++)
		;
	assert_true(i < nref);
	for (k = 0; k < 2; k++) {
		struct ref_pkt *r = &ref[k ? 0 : i];
		struct sv_roce_ip ip = r->ip;
		uint8_t *b = dup_buf(r->buf, r->len);

		assert_true(k == 0 || r->buf[0] == SV_OP_RC_SEND_FIRST);
		for (id = 0; id < 0x20000; id += k ? 7 : 1) {
			ip.ip_id = (uint16_t)id;
			ip.df = id >> 16;
			check_solves(b, r->len, &ip);
		}
		free(b);
	}
}

/*
 * Every single-bit error of packets of the lengths the wire carries most
 * (ACKs, full 1024- and 4096-byte payloads with each header set) fails
 * sv_roce_icrc_ok, identification unknown: the offsets that a free 17th
 * bit (DF) would let through are refused with DF required. Random
 * payloads, the bit in BTH byte 4 (not covered) skipped.
 */
static void test_single_bit(void **state)
{
	static const size_t lens[] = { 20, 24, 28, 44, 48, 1040, 1044, 1056,
				       1060, 1064, 4112, 4116, 4128 };
	static uint8_t b[4128];
	struct sv_roce_ip ip;
	unsigned int passed = 0;

	(void)state;
	memset(&ip, 0, sizeof(ip));
	v4_gid(ip.src, (const uint8_t[]){ 10, 0, 0, 1 });
	v4_gid(ip.dst, (const uint8_t[]){ 10, 0, 0, 2 });
	ip.sport = 0xc123;
	ip.dport = SV_ROCE_PORT;
	ip.df = true;
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		size_t len = lens[l];
		uint32_t icrc;

		for (size_t i = 0; i < len; i++)
			b[i] = (uint8_t)rnd();
		b[0] = SV_OP_RC_SEND_MIDDLE;
		ip.ip_id = (uint16_t)rnd();
		icrc = htole32(sv_roce_icrc(&ip, b, len - 4));
		memcpy(b + len - 4, &icrc, 4);
		assert_true(sv_roce_icrc_ok(&ip, b, len));
		for (size_t bit = 0; bit < len * 8; bit++) {
			if (bit / 8 == 4)
				continue;
			b[bit / 8] ^= (uint8_t)(1u << (bit & 7));
			passed += sv_roce_icrc_ok(&ip, b, len);
			b[bit / 8] ^= (uint8_t)(1u << (bit & 7));
		}
	}
	assert_int_equal(passed, 0);
}

/* ================= every length against a bitwise CRC ================= */

/* CRC-32 (IEEE, reflected) one bit at a time: the reference. */
static uint32_t crc_bits(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = crc >> 1 ^ (0xedb88320u & -(crc & 1));
	}
	return crc;
}

/* The ICRC of an IPv4 packet as the RoCEv2 annex defines it, from its
 * parts: 8 bytes of ones, the IP and UDP headers with their variant fields
 * ones, the BTH with byte 4 ones, the rest. */
static uint32_t icrc_reference(const struct sv_roce_ip *ip, const uint8_t *bth,
			       size_t len)
{
	uint8_t h[8 + 20 + 8 + 12];
	size_t udp = len + 4;
	uint32_t crc;

	memset(h, 0xff, 8);
	h[8] = 0x45;
	h[9] = 0xff;
	sv_put_be16(h + 10, (uint16_t)(20 + 8 + udp));
	sv_put_be16(h + 12, ip->ip_id);
	h[14] = ip->df ? 0x40 : 0;
	h[15] = 0;
	h[16] = 0xff;
	h[17] = 17;
	h[18] = h[19] = 0xff;
	memcpy(h + 20, ip->src + 12, 4);
	memcpy(h + 24, ip->dst + 12, 4);
	sv_put_be16(h + 28, ip->sport);
	sv_put_be16(h + 30, ip->dport);
	sv_put_be16(h + 32, (uint16_t)(8 + udp));
	h[34] = h[35] = 0xff;
	memcpy(h + 36, bth, 12);
	h[36 + 4] = 0xff;
	crc = crc_bits(~0u, h, sizeof(h));
	return ~crc_bits(crc, bth + 12, len - 12);
}

/*
 * sv_roce_icrc against the bitwise reference for every length from a bare
 * BTH to a jumbo frame's (each code path: the tables, the 64-byte and the
 * 256-byte folding with every remainder, whichever this run uses; ctest
 * runs it three ways), random bytes at a random alignment.
 */
static void test_icrc_lengths(void **state)
{
	static uint8_t buf[9216 + 64];
	struct sv_roce_ip ip;

	(void)state;
	memset(&ip, 0, sizeof(ip));
	v4_gid(ip.src, (const uint8_t[]){ 10, 1, 2, 3 });
	v4_gid(ip.dst, (const uint8_t[]){ 10, 4, 5, 6 });
	ip.sport = 0xc001;
	ip.dport = SV_ROCE_PORT;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rnd();
	for (size_t len = 12; len <= 9216; len += len < 2200 ? 1 : 61) {
		const uint8_t *b = buf + rnd() % 64;

		ip.ip_id = (uint16_t)rnd();
		ip.df = len & 1;
		if (sv_roce_icrc(&ip, b, len) != icrc_reference(&ip, b, len))
			fail_msg("ICRC of %zu bytes differs from the reference",
				 len);
	}
}

/* ================= build -> parse ================= */

static void random_ip(struct sv_roce_ip *ip, bool v4)
{
	for (int i = 0; i < 16; i++) {
		ip->src[i] = (uint8_t)rnd();
		ip->dst[i] = (uint8_t)rnd();
	}
	if (v4) {
		v4_gid(ip->src, ip->src + 12);
		v4_gid(ip->dst, ip->dst + 12);
	} else {
		ip->src[0] = ip->dst[0] = 0xfe;   /* not v4-mapped */
	}
	ip->sport = (uint16_t)(0xc000 | rnd());
	ip->dport = SV_ROCE_PORT;
	ip->ip_id = (uint16_t)rnd();
	ip->df = rnd() & 1;
}

/* The packet p would parse back to: the fields its headers carry. */
static void expected(struct sv_roce_pkt *e, const struct sv_roce_pkt *p,
		     uint32_t paylen)
{
	uint32_t f = sv_roce_op(p->opcode)->flags;

	*e = (struct sv_roce_pkt){
		.opcode = p->opcode, .se = p->se, .migreq = p->migreq,
		.ackreq = p->ackreq, .fecn = p->fecn, .becn = p->becn,
		.pad = (uint8_t)(-paylen & 3), .pkey = p->pkey,
		.dqpn = p->dqpn, .psn = p->psn, .flags = f,
		.paylen = paylen,
	};
	if (f & (SV_RF_RETH | SV_RF_ATMETH)) {
		e->va = p->va;
		e->rkey = p->rkey;
	}
	if (f & SV_RF_RETH)
		e->dmalen = p->dmalen;
	if (f & SV_RF_ATMETH) {
		e->swap_add = p->swap_add;
		e->compare = p->compare;
	}
	if (f & SV_RF_MASKED) {
		e->swap_mask = p->swap_mask;
		e->compare_mask = p->compare_mask;
	}
	if (f & SV_RF_AETH) {
		e->syndrome = p->syndrome;
		e->msn = p->msn;
	}
	if (f & SV_RF_ATMACK)
		e->orig = p->orig;
	if (f & SV_RF_IMMDT)
		e->imm = p->imm;
	if (f & SV_RF_IETH)
		e->ieth_rkey = p->ieth_rkey;
	if (f & SV_RF_DETH) {
		e->qkey = p->qkey;
		e->sqpn = p->sqpn;
	}
}

static void assert_pkt_equal(const struct sv_roce_pkt *a,
			     const struct sv_roce_pkt *b)
{
	assert_int_equal(a->opcode, b->opcode);
	assert_int_equal(a->se, b->se);
	assert_int_equal(a->migreq, b->migreq);
	assert_int_equal(a->ackreq, b->ackreq);
	assert_int_equal(a->fecn, b->fecn);
	assert_int_equal(a->becn, b->becn);
	assert_int_equal(a->pad, b->pad);
	assert_int_equal(a->tver, b->tver);
	assert_int_equal(a->pkey, b->pkey);
	assert_int_equal(a->dqpn, b->dqpn);
	assert_int_equal(a->psn, b->psn);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->va, b->va);
	assert_int_equal(a->rkey, b->rkey);
	assert_int_equal(a->dmalen, b->dmalen);
	assert_int_equal(a->syndrome, b->syndrome);
	assert_int_equal(a->msn, b->msn);
	assert_int_equal(a->swap_add, b->swap_add);
	assert_int_equal(a->compare, b->compare);
	assert_int_equal(a->swap_mask, b->swap_mask);
	assert_int_equal(a->compare_mask, b->compare_mask);
	assert_int_equal(a->orig, b->orig);
	assert_int_equal(a->imm, b->imm);
	assert_int_equal(a->ieth_rkey, b->ieth_rkey);
	assert_int_equal(a->qkey, b->qkey);
	assert_int_equal(a->sqpn, b->sqpn);
	assert_int_equal(a->paylen, b->paylen);
}

static void test_roundtrip(void **state)
{
	static const uint32_t lens[] = { 0, 1, 2, 3, 4, 5, 7, 8, 255, 1024,
					 4093, 4096 };
	uint8_t buf[SV_ROCE_MAX_HDR + 4096 + 8];
	unsigned int o, l, v;

	(void)state;
	for (o = 0; o < sizeof(known_ops); o++) {
		const struct sv_roce_opinfo *op = sv_roce_op(known_ops[o]);

		for (l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			uint32_t paylen = op->flags & SV_RF_PAYLOAD ? lens[l]
								    : 0;

			for (v = 0; v < 2; v++) {
				struct sv_roce_pkt p = {
					.opcode = known_ops[o],
					.se = rnd() & 1, .migreq = rnd() & 1,
					.ackreq = rnd() & 1,
					.fecn = rnd() & 1, .becn = rnd() & 1,
					.pad = rnd() & 3, /* finish fixes it */
					.pkey = (uint16_t)rnd(),
					.dqpn = rnd() & 0xffffff,
					.psn = rnd() & 0xffffff,
					.va = rnd(), .rkey = (uint32_t)rnd(),
					.dmalen = (uint32_t)rnd(),
					.syndrome = (uint8_t)rnd(),
					.msn = rnd() & 0xffffff,
					.swap_add = rnd(), .compare = rnd(),
					.swap_mask = rnd(),
					.compare_mask = rnd(),
					.orig = rnd(), .imm = (uint32_t)rnd(),
					.ieth_rkey = (uint32_t)rnd(),
					.qkey = (uint32_t)rnd(),
					.sqpn = rnd() & 0xffffff,
				};
				struct sv_roce_pkt e, q;
				struct sv_roce_ip ip;
				size_t hdr, len, i;
				uint8_t *pkt;

				memset(buf, 0xa5, sizeof(buf));
				hdr = sv_roce_build_hdr(buf, &p);
				assert_int_equal(hdr, op->hdr_bytes);
				for (i = 0; i < paylen; i++)
					buf[hdr + i] = (uint8_t)rnd();
				random_ip(&ip, v == 0);
				len = sv_roce_finish(buf, hdr + paylen, &ip);
				assert_int_equal(len, hdr + paylen +
						 (-paylen & 3) + 4);
				assert_int_equal(len % 4, 0);
				for (i = hdr + paylen; i < len - 4; i++)
					assert_int_equal(buf[i], 0);
				/* parse a copy of exactly len bytes */
				pkt = dup_buf(buf, len);
				assert_int_equal(sv_roce_parse(pkt, len, &q), 0);
				expected(&e, &p, paylen);
				assert_pkt_equal(&q, &e);
				assert_ptr_equal(q.payload, pkt + hdr);
				assert_memory_equal(q.payload, buf + hdr,
						    paylen);
				/* (an IPv4 packet without DF is refused) */
				assert_true(sv_roce_icrc_ok(&ip, pkt, len) ==
					    (v == 1 || ip.df));
				assert_int_equal(sv_roce_icrc(&ip, pkt, len - 4),
						 le32_at(pkt + len - 4));
				/* IPv6 is exact: one flipped bit anywhere
				 * outside BTH byte 4 fails */
				if (v == 1 && l < 3) {
					for (i = 0; i < len * 8; i++) {
						pkt[i / 8] ^= 1u << (i % 8);
						assert_int_equal(
							sv_roce_icrc_ok(&ip, pkt,
									len),
							i / 8 == 4);
						pkt[i / 8] ^= 1u << (i % 8);
					}
				}
				/* the address and ports are covered */
				ip.dst[15] ^= 1;
				assert_false(sv_roce_icrc_ok(&ip, pkt, len));
				ip.dst[15] ^= 1;
				ip.sport ^= 0x100;
				assert_false(sv_roce_icrc_ok(&ip, pkt, len));
				free(pkt);
			}
		}
	}
	/* an unknown opcode builds nothing */
	struct sv_roce_pkt u = { .opcode = 0x15 };

	assert_int_equal(sv_roce_build_hdr(buf, &u), 0);
}

/* ================= malformed packets ================= */

static int parse_copy(const uint8_t *b, size_t len, struct sv_roce_pkt *p)
{
	uint8_t *c = dup_buf(b, len);
	int rc = sv_roce_parse(c, len, p);

	free(c);
	return rc;
}

static void test_malformed(void **state)
{
	uint8_t buf[SV_ROCE_MAX_HDR + 64];
	struct sv_roce_pkt p;
	unsigned int op, o;
	size_t len;
	uint8_t *big;

	(void)state;
	/* unknown opcodes */
	for (op = 0; op < 256; op++) {
		if (is_known(op))
			continue;
		memset(buf, 0, sizeof(buf));
		buf[0] = (uint8_t)op;
		buf[2] = 0xff;                          /* P_Key */
		buf[3] = 0xfe;
		buf[5] = 0x12;                          /* dest QP */
		buf[7] = 0x34;
		buf[9] = 0xab;                          /* PSN */
		buf[11] = 0xcd;
		assert_int_equal(parse_copy(buf, 64, &p), -EOPNOTSUPP);
		/* the BTH is still read: a responder can NAK it */
		assert_int_equal(p.opcode, op);
		assert_int_equal(p.pkey, 0xfffe);
		assert_int_equal(p.dqpn, 0x120034);
		assert_int_equal(p.psn, 0xab00cd);
		assert_int_equal(p.flags, 0);
		assert_int_equal(parse_copy(buf, 15, &p), -EINVAL);
	}
	for (o = 0; o < sizeof(known_ops); o++) {
		struct sv_roce_pkt q = { .opcode = known_ops[o] };
		const struct sv_roce_opinfo *inf = sv_roce_op(q.opcode);
		size_t hdr;
		unsigned int t;

		memset(buf, 0, sizeof(buf));
		hdr = sv_roce_build_hdr(buf, &q);
		/* truncated: headers or ICRC missing */
		for (len = 0; len < hdr + 4; len++)
			assert_int_equal(parse_copy(buf, len, &p), -EINVAL);
		assert_int_equal(parse_copy(buf, hdr + 4, &p), 0);
		assert_int_equal(p.paylen, 0);
		/* TVer other than 0 */
		for (t = 1; t < 16; t++) {
			buf[1] = (uint8_t)t;
			assert_int_equal(parse_copy(buf, hdr + 8, &p), -EINVAL);
		}
		buf[1] = 0;
		if (!(inf->flags & SV_RF_PAYLOAD)) {
			/* bytes where no payload may be, or a pad count */
			for (len = hdr + 5; len < hdr + 12; len++)
				assert_int_equal(parse_copy(buf, len, &p),
						 -EINVAL);
			buf[1] = 0x10;
			assert_int_equal(parse_copy(buf, hdr + 4, &p),
					 -EINVAL);
		} else {
			/* a pad count larger than what follows */
			buf[1] = 0x30;
			assert_int_equal(parse_copy(buf, hdr + 4, &p),
					 -EINVAL);
			assert_int_equal(parse_copy(buf, hdr + 6, &p),
					 -EINVAL);
			assert_int_equal(parse_copy(buf, hdr + 7, &p), 0);
			assert_int_equal(p.pad, 3);
			assert_int_equal(p.paylen, 0);
			assert_int_equal(parse_copy(buf, hdr + 11, &p), 0);
			assert_int_equal(p.paylen, 4);
		}
		buf[1] = 0;
		/* reserved bits are ignored: BTH bytes 4 and 8, DETH byte 4 */
		buf[4] |= 0x3f;
		buf[8] |= 0x7f;
		if (inf->flags & SV_RF_DETH)
			buf[SV_BTH_BYTES + 4] = 0xff;
		assert_int_equal(parse_copy(buf, hdr + 4, &p), 0);
		assert_false(p.fecn || p.becn || p.ackreq);
		assert_int_equal(p.sqpn, 0);
		/* XRCETH: the SRQ number round-trips, its reserved byte is
		 * ignored */
		if (inf->flags & SV_RF_XRCETH) {
			q.xrcsrq = 0xabcdef;
			memset(buf, 0, sizeof(buf));
			assert_int_equal(sv_roce_build_hdr(buf, &q), hdr);
			assert_int_equal(buf[SV_BTH_BYTES], 0);
			buf[SV_BTH_BYTES] = 0xff;
			assert_int_equal(parse_copy(buf, hdr + 4, &p), 0);
			assert_int_equal(p.xrcsrq, 0xabcdef);
		}
	}
	/* no UDP payload is that long */
	big = calloc(1, 70000);
	assert_non_null(big);
	big[0] = SV_OP_RC_SEND_ONLY;
	assert_int_equal(sv_roce_parse(big, 65527, &p), 0);
	assert_int_equal(sv_roce_parse(big, 65528, &p), -EINVAL);
	free(big);
}

/* Random bytes: parse and the ICRC checks never read outside the packet,
 * and what parses is consistent. */
static void test_garbage(void **state)
{
	unsigned int n;

	(void)state;
	for (n = 0; n < 100000; n++) {
		size_t len = rnd() % 120, i;
		uint8_t *b = malloc(len ? len : 1);
		struct sv_roce_pkt p;
		struct sv_roce_ip ip;
		int rc;

		assert_non_null(b);
		for (i = 0; i < len; i++)
			b[i] = (uint8_t)rnd();
		if (len && (n & 1))     /* half of them with a known opcode */
			b[0] = known_ops[rnd() % sizeof(known_ops)];
		if (len > 1 && (n & 2))
			b[1] &= 0xf0;   /* TVer 0 */
		rc = sv_roce_parse(b, len, &p);
		if (rc == 0) {
			const struct sv_roce_opinfo *op = sv_roce_op(b[0]);

			assert_non_null(op);
			assert_int_equal(op->hdr_bytes + p.paylen + p.pad + 4,
					 len);
			assert_ptr_equal(p.payload, b + op->hdr_bytes);
		} else {
			assert_true(rc == -EINVAL || rc == -EOPNOTSUPP);
		}
		random_ip(&ip, n & 4);
		(void)sv_roce_icrc_ok(&ip, b, len);
		free(b);
	}
}

/* ================= source port, PSNs ================= */

static void test_sport(void **state)
{
	unsigned int i;

	(void)state;
	/* what rxe sent for QPN 0x11 <-> 0x11 */
	assert_int_equal(sv_roce_sport(0x11, 0x11), 0xc121);
	assert_int_equal(sv_roce_sport(0x11, 0x11), ref[0].ip.sport);
	for (i = 0; i < 10000; i++) {
		uint32_t a = rnd() & 0xffffff, b = rnd() & 0xffffff;
		uint16_t s = sv_roce_sport(a, b);

		assert_true(s >= 0xc000);
		assert_int_equal(s, sv_roce_sport(b, a));
		/* only the 24-bit QPNs count */
		assert_int_equal(s, sv_roce_sport(a | 0xff000000u, b));
	}
}

static void test_psn_diff(void **state)
{
	(void)state;
	assert_int_equal(sv_psn_diff(5, 3), 2);
	assert_int_equal(sv_psn_diff(3, 5), -2);
	assert_int_equal(sv_psn_diff(0, 0xffffff), 1);
	assert_int_equal(sv_psn_diff(0xffffff, 0), -1);
	assert_int_equal(sv_psn_diff(0x7fffff, 0), 0x7fffff);
	assert_int_equal(sv_psn_diff(0x800000, 0), -0x800000);
	assert_int_equal(sv_psn_diff(0x123456, 0x123456), 0);
}

/* ================= speed (printed, not asserted) ================= */

static void test_icrc_speed(void **state)
{
	static uint8_t buf[4096 + 64];
	static const unsigned int sizes[] = { 1024, 4096 };
	volatile uint32_t sink = 0;
	unsigned int s, i, iters = 20000;
	struct sv_roce_ip ip;

	(void)state;
	random_ip(&ip, true);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rnd();
	for (s = 0; s < 2; s++) {
		struct sv_roce_pkt p = { .opcode = SV_OP_RC_SEND_ONLY };
		size_t hdr = sv_roce_build_hdr(buf, &p);
		size_t len = sv_roce_finish(buf, hdr + sizes[s], &ip);
		double t0, t1, t2;

		t0 = now_ns();
		for (i = 0; i < iters; i++)
			sink += sv_roce_icrc(&ip, buf, len - 4);
		t1 = now_ns();
		for (i = 0; i < iters; i++)
			sink += sv_roce_icrc_ok(&ip, buf, len);
		t2 = now_ns();
		print_message("ICRC of a %u-byte payload (%zu-byte UDP "
			      "payload): sv_roce_icrc %.0f ns, "
			      "sv_roce_icrc_ok (IPv4, id recovered) %.0f ns\n",
			      sizes[s], len, (t1 - t0) / iters,
			      (t2 - t1) / iters);
	}
	(void)sink;
}

/*
 * --pcap FILE: every RoCEv2 packet of a capture (softverbs' own traffic, the
 * net_tshark test's) parses, and its ICRC verifies with the IP
 * identification and DF it really had on the wire: what the sender
 * computed for the kernel's IP header (segments of a GSO datagram
 * included) is what the kernel sent.
 */
static void test_capture_strict(void **state)
{
	unsigned int i, bad = 0;

	(void)state;
	assert_true(nref > 0);
	for (i = 0; i < nref; i++) {
		struct ref_pkt *r = &ref[i];
		struct sv_roce_pkt p;

		assert_true(r->len >= SV_BTH_BYTES + SV_ICRC_BYTES);
		if (sv_roce_parse(r->buf, r->len, &p) ||
		    sv_roce_icrc(&r->ip, r->buf, r->len - 4) !=
			    le32_at(r->buf + r->len - 4)) {
			print_message("packet %u (opcode 0x%02x, psn %#x, "
				      "ip id %u, %zu bytes) fails\n", i,
				      r->buf[0], sv_bth_psn(r->buf),
				      r->ip.ip_id, r->len);
			bad++;
		}
	}
	print_message("%u RoCEv2 packets, %u failed\n", nref, bad);
	assert_int_equal(bad, 0);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--pcap")) {
		const struct CMUnitTest capture[] = {
			cmocka_unit_test(test_capture_strict),
		};

		pcap_path = argv[2];
		return cmocka_run_group_tests(capture, load_pcap, free_pcap);
	}

	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flush_awrite_layout),
		cmocka_unit_test(test_opcode_table),
		cmocka_unit_test(test_pcap_decode),
		cmocka_unit_test(test_pcap_icrc),
		cmocka_unit_test(test_pcap_bitflip),
		cmocka_unit_test(test_random_ids),
		cmocka_unit_test(test_icrc_lengths),
		cmocka_unit_test(test_single_bit),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_sport),
		cmocka_unit_test(test_psn_diff),
		cmocka_unit_test(test_icrc_speed),
	};

	return cmocka_run_group_tests(tests, load_pcap, free_pcap);
}

// SPDX-License-Identifier: MIT
/*
 * The RoCEv2 invariant CRC (wire.h): CRC-32 with the IEEE polynomial,
 * reflected (zlib's crc32), over
 *
 *     8 bytes of 0xff                 (where an IB packet's LRH would be)
 *     the IPv4 header (20 bytes)      TOS, TTL and checksum all ones
 *       or the IPv6 header (40)       traffic class, flow label, hop limit
 *                                     all ones
 *     the UDP header (8)              checksum all ones
 *     the BTH (12)                    byte 4 (FECN, BECN, reserved) all ones
 *     the rest of the UDP payload up to the ICRC,
 *
 * appended little-endian. It runs on every packet sent and received. The
 * portable code is slice-by-8 (eight table lookups per 8 bytes); on x86-64
 * CPUs with carry-less multiplication (PCLMULQDQ) long runs are folded 64
 * bytes at a time instead, several times faster, and with VPCLMULQDQ on
 * 512-bit registers (AVX-512) 256 bytes at a time, about twice faster again
 * on a packet of 1 KiB (SOFTVERBS_ICRC_PORTABLE=1 in the environment keeps
 * the portable code, SOFTVERBS_ICRC_NO_AVX512=1 the 128-bit folding: for
 * tests).
 *
 * IPv4 receivers have a problem: a UDP socket does not tell them the IP
 * identification nor the DF bit, and both are covered. They need not be
 * guessed (65536 * 2 CRCs): the CRC is affine in the message, so the CRC
 * of the packet with identification 0 and DF clear differs from the
 * received ICRC by the CRC (with zero start value and no final inversion)
 * of a message that is zero except for the two identification bytes and
 * the flags byte, followed by N zero bytes (the rest of the IP header, the
 * UDP header, the payload). Shifting a CRC register through a zero byte
 * multiplies it by x^8 modulo the polynomial P; x is invertible modulo P
 * (P(0) = 1), so multiplying by x^(-8N) undoes the N bytes and leaves the
 * register right after the unknown bytes. The register after three bytes
 * from zero is then solved byte by byte, backwards, with the table: the top
 * bytes of the 256 table entries are all different, so the top byte of a
 * register names the table entry that was last XORed into it.
 *
 * Polynomial arithmetic is in the reflected representation throughout:
 * bit 31 of a 32-bit word is the coefficient of x^0, bit 0 that of x^31.
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "device/roce/wire.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <wmmintrin.h>
#define ICRC_CLMUL 1
#endif

#define CRC32_POLY 0xedb88320u   /* P without x^32, reflected */
#define GF_ONE     0x80000000u   /* the polynomial 1, reflected */

static uint32_t crc_tab[8][256];     /* slice-by-8 tables; [0] is the
				      * byte-at-a-time table */
static uint8_t crc_top_inv[256];     /* i with crc_tab[0][i] >> 24 == t */
static uint32_t x_inv8_pow2[32];     /* x^(-8 * 2^k) mod P */
static uint32_t crc_after_ff8;       /* the register after the 8 0xff
				      * bytes, from the initial ~0 */
static bool use_clmul;               /* fold with PCLMULQDQ */
static bool use_vclmul;              /* and 256 bytes at a time (AVX-512) */

/* ================= CRC ================= */

static inline uint32_t get_le32(const uint8_t *b)
{
	uint32_t v;

	memcpy(&v, b, 4);
	return le32toh(v);
}

static inline uint32_t crc_byte(uint32_t crc, uint8_t b)
{
	return crc >> 8 ^ crc_tab[0][(crc ^ b) & 0xff];
}

/* The CRC register after n more bytes (no inversion in or out), with the
 * tables. */
static uint32_t crc_update_tab(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n >= 8) {
		uint32_t lo = get_le32(p) ^ crc, hi = get_le32(p + 4);

		crc = crc_tab[7][lo & 0xff] ^ crc_tab[6][lo >> 8 & 0xff] ^
		      crc_tab[5][lo >> 16 & 0xff] ^ crc_tab[4][lo >> 24] ^
		      crc_tab[3][hi & 0xff] ^ crc_tab[2][hi >> 8 & 0xff] ^
		      crc_tab[1][hi >> 16 & 0xff] ^ crc_tab[0][hi >> 24];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = crc_byte(crc, *p++);
	return crc;
}

/* Four zero bytes through the register: reg * x^32 mod P. */
static inline uint32_t crc_shift_zero4(uint32_t reg)
{
	return crc_tab[3][reg & 0xff] ^ crc_tab[2][reg >> 8 & 0xff] ^
	       crc_tab[1][reg >> 16 & 0xff] ^ crc_tab[0][reg >> 24];
}

#ifdef ICRC_CLMUL
/*
 * Folding with carry-less multiplication. Sixteen message bytes loaded
 * little-endian into a 128-bit register R are, in the reflected order, the
 * polynomial whose x^127 coefficient is bit 0 of R; its low half R.lo
 * stands for A_hi * x^64 and its high half R.hi for A_lo (each a reflected
 * 64-bit polynomial). Moving R forward over D more message bits multiplies
 * it by x^D; modulo P that is
 *
 *     A_hi * (x^(64+D) mod P) + A_lo * (x^D mod P),
 *
 * a polynomial of degree below 96, XORed into the 16 bytes that are D bits
 * later. A carry-less product of two reflected operands lands one bit
 * towards x^0 of where the reflected 128-bit form wants it; the constants
 * make up for it: they are x^(64+D-1) and x^(D-1) mod P (reflected, 32
 * bits) in the top halves of 64-bit words, which also keeps each product
 * inside 128 bits. What is left at the end, 16 bytes standing for the whole
 * message so far, goes through the tables from a zero register.
 */
static __m128i fold_k128, fold_k512; /* D = 128 and D = 512 */
static __m128i fold_k2048;           /* D = 2048 */

__attribute__((target("pclmul")))
static inline __m128i clmul_fold(__m128i r, __m128i k, __m128i next)
{
	return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(r, k, 0x00),
					   _mm_clmulepi64_si128(r, k, 0x11)),
			     next);
}

/* The end of a folding: four lanes a0..a3 (16 consecutive bytes each,
 * a0 first) into one, the n < 64 bytes left at p 16 at a time, the last
 * 16 bytes of register and fewer than 16 of message through the tables. */
__attribute__((target("pclmul")))
static inline uint32_t clmul_end(__m128i a0, __m128i a1, __m128i a2,
				 __m128i a3, const uint8_t *p, size_t n)
{
	uint8_t rest[16];

	a0 = clmul_fold(a0, fold_k128, a1);
	a0 = clmul_fold(a0, fold_k128, a2);
	a0 = clmul_fold(a0, fold_k128, a3);
	while (n >= 16) {
		a0 = clmul_fold(a0, fold_k128,
				_mm_loadu_si128((const __m128i *)p));
		p += 16;
		n -= 16;
	}
	_mm_storeu_si128((__m128i *)rest, a0);
	return crc_update_tab(crc_update_tab(0, rest, 16), p, n);
}

__attribute__((target("pclmul")))
static uint32_t crc_update_clmul(uint32_t crc, const uint8_t *p, size_t n)
{
	__m128i a0, a1, a2, a3;

	/* the register enters as the first 4 bytes' partner, as in the
	 * table code */
	a0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p),
			   _mm_cvtsi32_si128((int)crc));
	a1 = _mm_loadu_si128((const __m128i *)(p + 16));
	a2 = _mm_loadu_si128((const __m128i *)(p + 32));
	a3 = _mm_loadu_si128((const __m128i *)(p + 48));
	p += 64;
	n -= 64;
	/* four independent lanes, 64 bytes apart */
	while (n >= 64) {
		a0 = clmul_fold(a0, fold_k512,
				_mm_loadu_si128((const __m128i *)p));
		a1 = clmul_fold(a1, fold_k512,
				_mm_loadu_si128((const __m128i *)(p + 16)));
		a2 = clmul_fold(a2, fold_k512,
				_mm_loadu_si128((const __m128i *)(p + 32)));
		a3 = clmul_fold(a3, fold_k512,
				_mm_loadu_si128((const __m128i *)(p + 48)));
		p += 64;
		n -= 64;
	}
	return clmul_end(a0, a1, a2, a3, p, n);
}
#endif

#ifdef ICRC_CLMUL
/*
 * The same folding on four 512-bit registers, each four independent 128-bit
 * lanes: 256 bytes a round (each lane D = 2048 bits forward). Then the four
 * registers into one (D = 512 per lane), 64 bytes at a time while they
 * last, and its four lanes to clmul_end. n >= 256.
 */
#define VCLMUL_TARGET "avx512f,avx512vl,vpclmulqdq,pclmul"

__attribute__((target(VCLMUL_TARGET)))
static inline __m512i vclmul_fold(__m512i r, __m512i k, __m512i next)
{
	/* the three-way XOR in one instruction (0x96: a ^ b ^ c) */
	return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(r, k, 0x00),
					 _mm512_clmulepi64_epi128(r, k, 0x11),
					 next, 0x96);
}

__attribute__((target(VCLMUL_TARGET)))
static uint32_t crc_update_vclmul(uint32_t crc, const uint8_t *p, size_t n)
{
	const __m512i k2048 = _mm512_broadcast_i32x4(fold_k2048);
	const __m512i k512 = _mm512_broadcast_i32x4(fold_k512);
	__m512i x0, x1, x2, x3;

	x0 = _mm512_xor_si512(_mm512_loadu_si512(p),
			      _mm512_inserti32x4(_mm512_setzero_si512(),
						 _mm_cvtsi32_si128((int)crc), 0));
	x1 = _mm512_loadu_si512(p + 64);
	x2 = _mm512_loadu_si512(p + 128);
	x3 = _mm512_loadu_si512(p + 192);
	p += 256;
	n -= 256;
	while (n >= 256) {
		x0 = vclmul_fold(x0, k2048, _mm512_loadu_si512(p));
		x1 = vclmul_fold(x1, k2048, _mm512_loadu_si512(p + 64));
		x2 = vclmul_fold(x2, k2048, _mm512_loadu_si512(p + 128));
		x3 = vclmul_fold(x3, k2048, _mm512_loadu_si512(p + 192));
		p += 256;
		n -= 256;
	}
	x1 = vclmul_fold(x0, k512, x1);
	x2 = vclmul_fold(x1, k512, x2);
	x3 = vclmul_fold(x2, k512, x3);
	while (n >= 64) {
		x3 = vclmul_fold(x3, k512, _mm512_loadu_si512(p));
		p += 64;
		n -= 64;
	}
	return clmul_end(_mm512_extracti32x4_epi32(x3, 0),
			 _mm512_extracti32x4_epi32(x3, 1),
			 _mm512_extracti32x4_epi32(x3, 2),
			 _mm512_extracti32x4_epi32(x3, 3), p, n);
}
#endif

/* The CRC register after n more bytes (no inversion in or out). */
static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n)
{
#ifdef ICRC_CLMUL
	if (use_vclmul && n >= 256)
		return crc_update_vclmul(crc, p, n);
	if (use_clmul && n >= 64)
		return crc_update_clmul(crc, p, n);
#endif
	return crc_update_tab(crc, p, n);
}

/* ================= arithmetic modulo P ================= */

/* a * b mod P, one coefficient at a time. */
static uint32_t gf_mul_bits(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;

	/* a's coefficients from x^0 up, b multiplied by x as we go */
	while (a) {
		prod ^= b & -(a >> 31);
		a <<= 1;
		b = b >> 1 ^ (CRC32_POLY & -(b & 1));
	}
	return prod;
}

#ifdef ICRC_CLMUL
/* a * b mod P with one carry-less multiplication: the 63-bit product
 * (shifted like any reflected product, see above), its high 32
 * coefficients moved down by four zero bytes. */
__attribute__((target("pclmul")))
static uint32_t gf_mul_clmul(uint32_t a, uint32_t b)
{
	uint64_t z = (uint64_t)_mm_cvtsi128_si64(_mm_clmulepi64_si128(
		_mm_cvtsi32_si128((int)a), _mm_cvtsi32_si128((int)b), 0x00));

	return crc_shift_zero4((uint32_t)(z << 1)) ^ (uint32_t)(z >> 31);
}
#endif

static uint32_t gf_mul(uint32_t a, uint32_t b)
{
#ifdef ICRC_CLMUL
	if (use_clmul)
		return gf_mul_clmul(a, b);
#endif
	return gf_mul_bits(a, b);
}

/* x^n mod P (at start-up only). */
static uint32_t gf_x_pow(uint32_t n)
{
	uint32_t r = GF_ONE, sq = GF_ONE >> 1;      /* 1 and x */

	for (; n; n >>= 1) {
		if (n & 1)
			r = gf_mul_bits(r, sq);
		sq = gf_mul_bits(sq, sq);
	}
	return r;
}

/* x^(-8n) mod P: the product of the precomputed x^(-8 * 2^k) for the set
 * bits k of n (square-and-multiply, with the squares made once). */
static uint32_t gf_x_inv8_pow(uint32_t n)
{
	uint32_t r = GF_ONE;

	while (n) {
		int k = __builtin_ctz(n);

		r = r == GF_ONE ? x_inv8_pow2[k] : gf_mul(r, x_inv8_pow2[k]);
		n &= n - 1;
	}
	return r;
}

__attribute__((constructor)) static void icrc_init(void)
{
	static const uint8_t ff8[8] = { 0xff, 0xff, 0xff, 0xff,
					0xff, 0xff, 0xff, 0xff };
	uint32_t x_inv, x_inv8;
	unsigned int i, k;
#ifdef ICRC_CLMUL
	const char *portable;
#endif

	for (i = 0; i < 256; i++) {
		uint32_t c = i;

		for (k = 0; k < 8; k++)
			c = c >> 1 ^ (CRC32_POLY & -(c & 1));
		crc_tab[0][i] = c;
		crc_top_inv[c >> 24] = (uint8_t)i;
	}
	for (k = 1; k < 8; k++)
		for (i = 0; i < 256; i++)
			crc_tab[k][i] = crc_byte(crc_tab[k - 1][i], 0);
	crc_after_ff8 = crc_update_tab(~0u, ff8, sizeof(ff8));

	/* x^-1 = (P - 1) / x: P's coefficients shifted down by one, and
	 * x^31 from x^32 */
	x_inv = CRC32_POLY << 1 | 1;
	x_inv8 = gf_mul_bits(x_inv, x_inv);
	x_inv8 = gf_mul_bits(x_inv8, x_inv8);
	x_inv8 = gf_mul_bits(x_inv8, x_inv8);
	x_inv8_pow2[0] = x_inv8;
	for (k = 1; k < 32; k++)
		x_inv8_pow2[k] = gf_mul_bits(x_inv8_pow2[k - 1],
					     x_inv8_pow2[k - 1]);

#ifdef ICRC_CLMUL
	/* the folding constants: low word for R.lo, high word for R.hi */
	fold_k128 = _mm_set_epi64x((long long)((uint64_t)gf_x_pow(127) << 32),
				   (long long)((uint64_t)gf_x_pow(191) << 32));
	fold_k512 = _mm_set_epi64x((long long)((uint64_t)gf_x_pow(511) << 32),
				   (long long)((uint64_t)gf_x_pow(575) << 32));
	fold_k2048 = _mm_set_epi64x((long long)((uint64_t)gf_x_pow(2047) << 32),
				    (long long)((uint64_t)gf_x_pow(2111) << 32));
	__builtin_cpu_init();
	portable = getenv("SOFTVERBS_ICRC_PORTABLE");
	use_clmul = __builtin_cpu_supports("pclmul") &&
		    !(portable && *portable && strcmp(portable, "0") != 0);
	portable = getenv("SOFTVERBS_ICRC_NO_AVX512");
	use_vclmul = use_clmul && __builtin_cpu_supports("avx512f") &&
		     __builtin_cpu_supports("avx512vl") &&
		     __builtin_cpu_supports("vpclmulqdq") &&
		     !(portable && *portable && strcmp(portable, "0") != 0);
#endif
}

/* ================= the ICRC ================= */

static bool gid_is_v4(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					    0xff, 0xff };

	return memcmp(gid, prefix, sizeof(prefix)) == 0;
}

#define V4_PSEUDO_BYTES (20 + 8)
#define V6_PSEUDO_BYTES (40 + 8)

/*
 * Write the masked IP and UDP headers of a packet with a UDP payload of
 * udp_len bytes (ICRC included) at h; returns their length. IPv4 has no
 * options (RoCEv2 senders use none).
 */
static size_t icrc_pseudo_hdr(uint8_t *h, const struct sv_roce_ip *ip,
			      size_t udp_len)
{
	uint8_t *u;

	if (gid_is_v4(ip->src)) {
		h[0] = 0x45;                       /* version 4, 5 words */
		h[1] = 0xff;                       /* TOS */
		sv_put_be16(h + 2, (uint16_t)(20 + 8 + udp_len));
		sv_put_be16(h + 4, ip->ip_id);
		h[6] = ip->df ? 0x40 : 0;          /* flags, fragment 0 */
		h[7] = 0;
		h[8] = 0xff;                       /* TTL */
		h[9] = 17;                         /* UDP */
		h[10] = h[11] = 0xff;              /* header checksum */
		memcpy(h + 12, ip->src + 12, 4);
		memcpy(h + 16, ip->dst + 12, 4);
		u = h + 20;
	} else {
		h[0] = 0x6f;                       /* version 6, traffic */
		h[1] = h[2] = h[3] = 0xff;         /* class, flow label */
		sv_put_be16(h + 4, (uint16_t)(8 + udp_len));
		h[6] = 17;                         /* next header: UDP */
		h[7] = 0xff;                       /* hop limit */
		memcpy(h + 8, ip->src, 16);
		memcpy(h + 24, ip->dst, 16);
		u = h + 40;
	}
	sv_put_be16(u, ip->sport);
	sv_put_be16(u + 2, ip->dport);
	sv_put_be16(u + 4, (uint16_t)(8 + udp_len));
	u[6] = u[7] = 0xff;                        /* UDP checksum */
	return (size_t)(u + 8 - h);
}

uint32_t sv_roce_icrc(const struct sv_roce_ip *ip, const uint8_t *bth,
		      size_t len)
{
	uint8_t h[V6_PSEUDO_BYTES + SV_BTH_BYTES];
	size_t n = icrc_pseudo_hdr(h, ip, len + SV_ICRC_BYTES);
	size_t b = len < SV_BTH_BYTES ? len : SV_BTH_BYTES;
	uint32_t crc;

	/* pseudo header and BTH (byte 4 masked) in one go */
	memcpy(h + n, bth, b);
	if (b > 4)
		h[n + 4] = 0xff;
	crc = crc_update(crc_after_ff8, h, n + b);
	crc = crc_update(crc, bth + b, len - b);
	return ~crc;
}

/*
 * The two bytes whose CRC register, from zero, is reg: true and *v = the
 * bytes (first one high) if there are any. Backwards through the two table
 * steps reg = (s1 >> 8) ^ tab[(s1 ^ b1) & 0xff], s1 = tab[b0].
 */
static bool icrc_solve2(uint32_t reg, uint16_t *v)
{
	uint8_t i1 = crc_top_inv[reg >> 24];       /* index of step 2 */
	uint32_t s1_hi = reg ^ crc_tab[0][i1];     /* s1 >> 8 */
	uint8_t b0 = crc_top_inv[s1_hi >> 16];     /* s1 = tab[b0] */

	if (crc_tab[0][b0] >> 8 != s1_hi)
		return false;
	*v = (uint16_t)(b0 << 8 | (i1 ^ (crc_tab[0][b0] & 0xff)));
	return true;
}

/* The register s with reg = crc_byte(s, 0): one zero byte backwards. */
static uint32_t crc_unshift_zero(uint32_t reg)
{
	uint8_t i = crc_top_inv[reg >> 24];

	return (reg ^ crc_tab[0][i]) << 8 | i;
}

bool sv_roce_icrc_solve_v4(const struct sv_roce_ip *ip, const uint8_t *buf,
			   size_t len, uint16_t *ip_id, bool *df)
{
	struct sv_roce_ip z;
	uint32_t delta, reg;
	size_t m;

	if (!gid_is_v4(ip->src) || len < SV_BTH_BYTES + SV_ICRC_BYTES ||
	    len > 65535 - 20 - 8)
		return false;
	m = len - SV_ICRC_BYTES;

	/* the CRC difference made by the identification and the flags byte
	 * (IP header bytes 4..6), followed by 13 + 8 + m bytes */
	z = *ip;
	z.ip_id = 0;
	z.df = false;
	delta = sv_roce_icrc(&z, buf, m) ^ get_le32(buf + m);
	/* the register right after the flags byte */
	reg = gf_mul(delta, gf_x_inv8_pow((uint32_t)(13 + 8 + m)));

	/* with DF, the flags byte 0x40 contributed tab[0x40] to reg */
	if (icrc_solve2(crc_unshift_zero(reg ^ crc_tab[0][0x40]), ip_id)) {
		*df = true;
		return true;
	}
	if (icrc_solve2(crc_unshift_zero(reg), ip_id)) {
		*df = false;
		return true;
	}
	return false;
}

bool sv_roce_icrc_ok(const struct sv_roce_ip *ip, const uint8_t *buf,
		     size_t len)
{
	uint16_t id;
	bool df;

	/* RoCEv2 packets are never fragmented: senders set DF (rxe, NICs,
	 * us). Requiring it halves what passes, and every single-bit error
	 * of the common lengths that would pass does so only with DF clear
	 * (test_single_bit) */
	if (gid_is_v4(ip->src))
		return sv_roce_icrc_solve_v4(ip, buf, len, &id, &df) && df;
	if (len < SV_BTH_BYTES + SV_ICRC_BYTES || len > 65535 - 8)
		return false;
	return sv_roce_icrc(ip, buf, len - SV_ICRC_BYTES) ==
	       get_le32(buf + len - SV_ICRC_BYTES);
}

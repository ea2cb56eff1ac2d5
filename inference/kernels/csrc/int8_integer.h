// The integer int8 path (int8_path > 0, gemv_int8_integer; it shares products.h's frames): one row x quantised to int8 and its products with the int8
// weights taken in int32, by AVX-512 VNNI (vpdpbusd: u8 x s8, four products summed into each int32 lane) or,
// in an AVX2 build, by vpmaddubsw + vpmaddwd (the same four products per int32 lane, in two instructions).
//
// The float path widens every weight to float32 in registers: 4 widenings, 4 converts and 4 FMAs per 64
// weights (AVX-512; twice that with AVX2's 8 lanes) made int8 decode compute-bound (its products took 1.69x
// a read of the same bytes on an AVX-512 EPYC, 1.7x a float32 product's time per byte on an AVX2 one). Here
// 64 weights take one XOR and one vpdpbusd (AVX2: per 32, one vpsignb, one vpmaddubsw, one vpmaddwd), and a
// chunk's int32 sums one convert and one FMA.
//
// The math, per weight group g of G weights (quant.quantize_rows) and per sub-group of A activations in it
// (A: act_group, a multiple of 4; or the whole row):
//   activations: a = 127 / amax(|x| over the sub-group), xq = round(x * a) in [-127, 127], x ~= xq * s with
//                s = amax / 127;
//   VNNI:        vpdpbusd wants the unsigned operand first, so the weights go in as q + 128 (q XOR 0x80) and
//                xq as the signed one: sum (q + 128) xq = sum q xq + 128 sum xq, and the second term depends
//                on x alone, so it is taken once per call and starts each chunk's accumulator negated;
//   AVX2:        vpmaddubsw (u8 x s8 -> int16 pair sums, saturating) takes |xq| as the unsigned operand and
//                q with xq's sign (vpsignb) as the signed one: |xq| (q sign(xq)) = q xq, each pair at most
//                2 * 127 * 127 < 2^15 (quantize_rows keeps |q| <= 127), so nothing saturates; vpmaddwd
//                against ones sums the pairs into the int32 lanes;
//   y = alpha * sum over lanes of (weight scale_g * s of the lane's sub-group) * (exact int32 lane sum).
// Both give the same exact int32 sums; they differ only in the float rounding of the scaled sums.
// A group longer than 64 bytes takes several 64-byte chunks; a last partial chunk is read with a mask
// (AVX2: from a zero-padded copy; x is zero padded), so any group size and row length work. The VNNI code is
// built for AVX-512 (with BW) and its functions carry their own target attribute: it runs only where the CPU
// reports avx512vnni. The AVX2 code is built only for AVX2 (an AVX-512 CPU without VNNI keeps the float path).

#pragma once

#include <ATen/ATen.h>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "simd.h"
#include "shape.h"
#include "products.h"
#include "int8.h"
#include "int16.h"

namespace {  // included by ops.cpp only, the one translation unit: internal linkage

// Whether the integer path runs here: AVX-512 VNNI, or an AVX2 build.
bool integer_available() { return TOKENSTEP_HAS_AVX2_INTEGER_CODE || vnni_available(); }

// The int8 path a call takes: the int16 path (every build has it), an integer one where it runs, else 0 (float).
int64_t path_in_use(int64_t int8_path) {
  return int8_path == kInt16Path || (int8_path != 0 && integer_available()) ? int8_path : 0;
}

// Whether a path code is an integer path's (activations per scale), which needs activation_group.
inline bool integer_path(int64_t path) { return path != 0 && path != kInt16Path; }

// One row of x, quantised for the weight groups: per group ceil(G / 64) chunks of 64 int8 (zero padded),
// and per chunk its 16 int32 lanes' activation scales (lane j holds bytes 4j..4j+3; A, a multiple of 4,
// keeps each lane in one sub-group); VNNI: each lane's starting value (-128 * the sum of its four xq);
// AVX2: |xq|.
struct QuantRow {
  int64_t G = 0, S = 0, chunks = 0;
  uint64_t tail = ~0ull;       // the byte mask of each group's last chunk
  std::vector<int8_t> xq;      // S * chunks * 64
  std::vector<int32_t> start;  // S * chunks * 16 (VNNI)
  std::vector<uint8_t> xabs;   // S * chunks * 64 (AVX2)
  std::vector<float> scale;    // S * chunks * 16

  // Sized for K activations in groups of G, xq and the scales zeroed (the padding stays 0).
  void reset(int64_t K, int64_t group) {
    G = group, S = K / group, chunks = (group + 63) / 64;
    tail = group % 64 == 0 ? ~0ull : (1ull << (group % 64)) - 1;
    xq.assign(S * chunks * 64, 0);
    scale.assign(S * chunks * 16, 0.0f);
  }
};

// How many activations share one scale: act_group <= 0 is the whole row; else at most the weight group,
// and a multiple of 4 unless it is the whole group.
int64_t activation_group(int64_t act_group, int64_t K, int64_t G) {
  const int64_t A = act_group <= 0 ? K : std::min(act_group, G);
  TORCH_CHECK(A >= G || A % 4 == 0, "act_group: a multiple of 4 (or the weight group, or <= 0: the row)");
  return A;
}

#if TOKENSTEP_HAS_VNNI_CODE
// The largest |x| of n floats.
TOKENSTEP_VNNI float amax_of(const float* x, int64_t n) {
  __m512 m = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
  if (k < n) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_maskz_loadu_ps((1u << (n - k)) - 1, x + k)));
  return _mm512_reduce_max_ps(m);
}

// xq = x * (127 / amax) rounded to nearest, ties to even (the MXCSR default, as torch.round), for n floats.
TOKENSTEP_VNNI void quantize_run(const float* x, int64_t n, float amax, int8_t* q) {
  if (amax == 0.0f) return;  // all zero: xq stays 0
  const __m512 a = _mm512_set1_ps(127.0f / amax);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int64_t k = 0; k < n; k += 16) {
    const __mmask16 m = k + 16 <= n ? 0xffff : static_cast<__mmask16>((1u << (n - k)) - 1);
    __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + k), a));
    v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
    _mm512_mask_cvtepi32_storeu_epi8(q + k, m, v);
  }
}

// A group of G floats with one scale per run of A (amax >= 0: one given scale for all, per row).
TOKENSTEP_VNNI void quantize_runs(const float* xg, int64_t G, int64_t A, float row_amax, int8_t* q, float* lane_scale) {
  for (int64_t k0 = 0; k0 < G; k0 += A) {
    const int64_t n = std::min(A, G - k0);
    const float amax = row_amax >= 0.0f ? row_amax : amax_of(xg + k0, n);
    quantize_run(xg + k0, n, amax, q + k0);
    for (int64_t lane = k0 / 4; lane < (k0 + n + 3) / 4; ++lane) lane_scale[lane] = amax / 127.0f;
  }
}

// |x| of 16 floats -> each lane the largest of its run of A (4, 8 or 16) aligned lanes.
TOKENSTEP_VNNI inline __m512 run_amax(__m512 m, int64_t A) {
  m = _mm512_max_ps(m, _mm512_permute_ps(m, 0xB1));  // neighbours
  m = _mm512_max_ps(m, _mm512_permute_ps(m, 0x4E));  // pairs: each run of 4 holds its max
  if (A >= 8) m = _mm512_max_ps(m, _mm512_shuffle_f32x4(m, m, 0xB1));  // 128-bit blocks
  if (A >= 16) m = _mm512_max_ps(m, _mm512_shuffle_f32x4(m, m, 0x4E));  // 256-bit halves
  return m;
}

// A group of G floats (G a multiple of 16) with one scale per run of A in {4, 8, 16}, 16 floats at a time:
// per-run amax, quantisation and each lane's scale without a horizontal reduction per run.
TOKENSTEP_VNNI void quantize_short_runs(const float* x, int64_t G, int64_t A, int8_t* q, float* lane_scale) {
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int64_t k = 0; k < G; k += 16) {
    const __m512 v = _mm512_loadu_ps(x + k);
    const __m512 amax = run_amax(_mm512_abs_ps(v), A);
    const __mmask16 nonzero = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_OQ);
    const __m512 a = _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(127.0f), amax);  // 0 where the run is all 0
    __m512i qv = _mm512_cvtps_epi32(_mm512_mul_ps(v, a));
    qv = _mm512_min_epi32(_mm512_max_epi32(qv, lo), hi);
    _mm512_mask_cvtepi32_storeu_epi8(q + k, 0xffff, qv);
    // lane j of vpdpbusd holds floats 4j..4j+3: one scale each, the run's amax / 127
    _mm512_mask_compressstoreu_ps(lane_scale + k / 4, 0x1111, _mm512_div_ps(amax, _mm512_set1_ps(127.0f)));
  }
}

// x (K floats, weight groups of G) -> QuantRow, one activation scale per A consecutive activations of a
// group (A = K: per row). Vectorised: a scalar loop cost microseconds per call, and a step makes 121.
TOKENSTEP_VNNI void quantize_row(const float* x, int64_t K, int64_t G, int64_t A, QuantRow& out) {
  out.reset(K, G);
  const int64_t S = out.S, chunks = out.chunks;
  out.start.resize(S * chunks * 16);
  const float row_amax = A >= K ? amax_of(x, K) : 0.0f;
  const __m512i c128 = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t g = 0; g < S; ++g) {
    const float* xg = x + g * G;
    int8_t* q = out.xq.data() + g * chunks * 64;
    float* lane_scale = out.scale.data() + g * chunks * 16;  // chunk c's lane j at c * 16 + j: element 4 (c * 16 + j)
    if ((A == 4 || A == 8 || A == 16) && G % 16 == 0) {
      quantize_short_runs(xg, G, A, q, lane_scale);
    } else {
      quantize_runs(xg, G, A, A >= K ? row_amax : -1.0f, q, lane_scale);
    }
    for (int64_t c = 0; c < chunks; ++c) {  // -128 * the sums of xq in each lane: the accumulators' start
      const __m512i lanes = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c128, _mm512_loadu_si512(q + c * 64));
      _mm512_storeu_si512(out.start.data() + (g * chunks + c) * 16, _mm512_sub_epi32(_mm512_setzero_si512(), lanes));
    }
  }
}

constexpr int64_t kVnniPrefetchBytes = 4096;

// One 64-byte chunk of a weight row against the chunk of x: acc += (int32 lanes of q xq) * lane scales * ws.
TOKENSTEP_VNNI inline __m512 vnni_chunk(__m512i w, const int8_t* xq, const int32_t* start, const float* xs, float ws,
                                        __m512 acc) {
  const __m512i s = _mm512_dpbusd_epi32(_mm512_loadu_si512(start), _mm512_xor_si512(w, _mm512_set1_epi8(-128)),
                                        _mm512_loadu_si512(xq));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(_mm512_loadu_ps(xs), _mm512_set1_ps(ws)), acc);
}

// sum over chunks of (weight scale * activation scale * exact int32 lane sums of q xq) for rows r..r+n-1
// of q (K apart, S bf16 scales per row).
TOKENSTEP_VNNI void vnni_rows(const int8_t* q, const uint16_t* sp, int64_t K, const QuantRow& x, int64_t r,
                              int64_t n, float* out) {
  const int64_t S = x.S, G = x.G, chunks = x.chunks;
  const int8_t* xq = x.xq.data();
  const int32_t* start = x.start.data();
  const float* xs = x.scale.data();
  for (int64_t i = 0; i < n; ++i) {
    const int8_t* row = q + (r + i) * K;
    const uint16_t* ws = sp + (r + i) * S;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    if (G == 64) {  // the default: one chunk per group, two per pass for two accumulators
      int64_t g = 0;
      for (; g + 2 <= S; g += 2) {
        _mm_prefetch(reinterpret_cast<const char*>(row + g * 64) + kVnniPrefetchBytes, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(row + g * 64) + kVnniPrefetchBytes + 64, _MM_HINT_T0);
        acc0 = vnni_chunk(_mm512_loadu_si512(row + g * 64), xq + g * 64, start + g * 16, xs + g * 16,
                          bf16_to_float(ws[g]), acc0);
        acc1 = vnni_chunk(_mm512_loadu_si512(row + g * 64 + 64), xq + g * 64 + 64, start + g * 16 + 16,
                          xs + g * 16 + 16, bf16_to_float(ws[g + 1]), acc1);
      }
      if (g < S) {
        acc0 = vnni_chunk(_mm512_loadu_si512(row + g * 64), xq + g * 64, start + g * 16, xs + g * 16,
                          bf16_to_float(ws[g]), acc0);
      }
    } else {  // any group size: chunks of 64, the last one of a group masked (x is zero padded)
      for (int64_t g = 0; g < S; ++g) {
        const float w_scale = bf16_to_float(ws[g]);
        for (int64_t c = 0; c < chunks; ++c) {
          const __mmask64 m = c + 1 == chunks ? x.tail : ~0ull;
          const int64_t at = (g * chunks + c);
          acc0 = vnni_chunk(_mm512_maskz_loadu_epi8(m, row + g * G + c * 64), xq + at * 64, start + at * 16,
                            xs + at * 16, w_scale, acc0);
        }
      }
    }
    out[i] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  }
}
#endif

#if TOKENSTEP_HAS_AVX2_INTEGER_CODE
// Eight int32 in [-127, 127] -> eight int8 at q.
inline void store8_epi8(int8_t* q, __m256i v) {
  const __m256i words = _mm256_packs_epi32(v, v);  // per 128-bit half: its four values twice, as int16
  const __m256i bytes = _mm256_packs_epi16(words, words);
  const int32_t low = _mm_cvtsi128_si32(_mm256_castsi256_si128(bytes)), high = _mm_cvtsi128_si32(_mm256_extracti128_si256(bytes, 1));
  std::memcpy(q, &low, 4);
  std::memcpy(q + 4, &high, 4);
}

// x * a rounded to nearest (ties to even, as cvtps and torch.round), clamped to [-127, 127], eight lanes.
inline __m256i quantize8(__m256 x, __m256 a) {
  const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(x, a));
  return _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(-127)), _mm256_set1_epi32(127));
}

// xq = x * (127 / amax) rounded, for n floats (the tail as the vector lanes do it).
void quantize_run(const float* x, int64_t n, float amax, int8_t* q) {
  if (amax == 0.0f) return;  // all zero: xq stays 0
  const float a = 127.0f / amax;
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) store8_epi8(q + k, quantize8(_mm256_loadu_ps(x + k), _mm256_set1_ps(a)));
  for (; k < n; ++k) q[k] = static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, std::nearbyint(x[k] * a))));
}

// A group of G floats with one scale per run of A (amax >= 0: one given scale for all, per row).
void quantize_runs(const float* xg, int64_t G, int64_t A, float row_amax, int8_t* q, float* lane_scale) {
  for (int64_t k0 = 0; k0 < G; k0 += A) {
    const int64_t n = std::min(A, G - k0);
    const float amax = row_amax >= 0.0f ? row_amax : max_magnitude(xg + k0, n);
    quantize_run(xg + k0, n, amax, q + k0);
    for (int64_t lane = k0 / 4; lane < (k0 + n + 3) / 4; ++lane) lane_scale[lane] = amax / 127.0f;
  }
}

// A group of G floats (G a multiple of 8) with one scale per run of A in {4, 8}, 8 floats at a time: each
// run's amax by in-register maxima, no horizontal reduction per run.
void quantize_short_runs(const float* x, int64_t G, int64_t A, int8_t* q, float* lane_scale) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t k = 0; k < G; k += 8) {
    const __m256 v = _mm256_loadu_ps(x + k);
    __m256 m = _mm256_and_ps(v, magnitude);
    m = _mm256_max_ps(m, _mm256_permute_ps(m, 0xB1));  // neighbours
    m = _mm256_max_ps(m, _mm256_permute_ps(m, 0x4E));  // pairs: each run of 4 holds its max
    if (A == 8) m = _mm256_max_ps(m, _mm256_permute2f128_ps(m, m, 1));
    const __m256 nonzero = _mm256_cmp_ps(m, _mm256_setzero_ps(), _CMP_NEQ_OQ);
    const __m256 a = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(127.0f), m), nonzero);  // 0 where the run is all 0
    store8_epi8(q + k, quantize8(v, a));
    alignas(32) float amax[8];
    _mm256_store_ps(amax, m);
    lane_scale[k / 4] = amax[0] / 127.0f;  // lane j of the int32 sums holds floats 4j..4j+3
    lane_scale[k / 4 + 1] = amax[4] / 127.0f;
  }
}

// x (K floats, weight groups of G) -> QuantRow, one activation scale per A consecutive activations of a
// group (A = K: per row), and |xq| for vpmaddubsw's unsigned operand.
void quantize_row(const float* x, int64_t K, int64_t G, int64_t A, QuantRow& out) {
  out.reset(K, G);
  const int64_t S = out.S, chunks = out.chunks;
  out.xabs.resize(S * chunks * 64);
  const float row_amax = A >= K ? max_magnitude(x, K) : 0.0f;
  for (int64_t g = 0; g < S; ++g) {
    int8_t* q = out.xq.data() + g * chunks * 64;
    float* lane_scale = out.scale.data() + g * chunks * 16;
    if ((A == 4 || A == 8) && G % 8 == 0) {
      quantize_short_runs(x + g * G, G, A, q, lane_scale);
    } else {
      quantize_runs(x + g * G, G, A, A >= K ? row_amax : -1.0f, q, lane_scale);
    }
  }
  for (size_t i = 0; i < out.xq.size(); i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(out.xq.data() + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.xabs.data() + i), _mm256_abs_epi8(v));
  }
}

// The exact int32 sums of 32 weights times 32 activations, four consecutive bytes per lane.
inline __m256i lane_sums(__m256i w, const int8_t* xq, const uint8_t* xabs) {
  const __m256i signed_w = _mm256_sign_epi8(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)));
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xabs)), signed_w);
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// One 64-byte chunk (two halves of 32) of a weight row against the chunk of x: the scaled sum of its lanes.
inline __m256 chunk_sum(__m256i w0, __m256i w1, const int8_t* xq, const uint8_t* xabs, const float* xs) {
  const __m256 low = _mm256_mul_ps(_mm256_cvtepi32_ps(lane_sums(w0, xq, xabs)), _mm256_loadu_ps(xs));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(lane_sums(w1, xq + 32, xabs + 32)), _mm256_loadu_ps(xs + 8), low);
}

// R rows (K apart, S bf16 scales per row) with G == 64 against x in one pass, prefetching P bytes ahead: each
// x load serves R rows. Per row, the sum over groups of (weight scale * the chunk's scaled lane sums), even
// and odd groups in two accumulators; each row's sum is formed as for one row alone, so every R and P gives
// the same bits.
template <int64_t R, int64_t P>
inline void avx2_rows_even(const int8_t* q, const uint16_t* sp, int64_t K, const QuantRow& x, float* out,
                           int64_t step) {
  const int64_t S = x.S, stride = step * K, scales = step * S;  // the R rows lie `step` rows apart, their products too
  const int8_t* xq = x.xq.data();
  const uint8_t* xa = x.xabs.data();
  const float* xs = x.scale.data();
  __m256 acc[R][2];
  for (int64_t r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < S; ++g) {
    for (int64_t r = 0; r < R; ++r) {
      const int8_t* w = q + r * stride + g * 64;
      prefetch_ahead<P>(w, 64);
      const __m256 sum = chunk_sum(load32(w), load32(w + 32), xq + g * 64, xa + g * 64, xs + g * 16);
      acc[r][g & 1] = _mm256_fmadd_ps(sum, _mm256_set1_ps(bf16_to_float(sp[r * scales + g])), acc[r][g & 1]);
    }
  }
  for (int64_t r = 0; r < R; ++r) out[r * step] = vsum(_mm256_add_ps(acc[r][0], acc[r][1]));
}

// One row of any group size: chunks of 64, the last one of a group from a zero-padded copy (its x is zero
// padded, so the copy's padding adds nothing).
inline float avx2_row_any(const int8_t* row, const uint16_t* ws, const QuantRow& x) {
  const int64_t S = x.S, G = x.G, chunks = x.chunks;
  __m256 acc = _mm256_setzero_ps();
  alignas(32) int8_t padded[64] = {};
  for (int64_t g = 0; g < S; ++g) {
    const __m256 w_scale = _mm256_set1_ps(bf16_to_float(ws[g]));
    for (int64_t c = 0; c < chunks; ++c) {
      const int8_t* w = row + g * G + c * 64;
      if (c + 1 == chunks && G % 64 != 0) {
        std::memcpy(padded, w, G % 64);
        w = padded;
      }
      const int64_t at = g * chunks + c;
      acc = _mm256_fmadd_ps(chunk_sum(load32(w), load32(w + 32), x.xq.data() + at * 64, x.xabs.data() + at * 64,
                                      x.scale.data() + at * 16), w_scale, acc);
    }
  }
  return vsum(acc);
}

// The products of rows r..r+n-1 in the int8 shape (R rows per pass, prefetch P; kernel_shape.py times them on
// this path when it is the one in use), one instance per candidate shape.
template <int64_t R, int64_t P>
void fill_integer(const int8_t* q, const uint16_t* sp, int64_t K, const QuantRow& x, int64_t r, int64_t n,
                  float* out) {
  if (x.G != 64) {
    for (int64_t i = 0; i < n; ++i) out[i] = avx2_row_any(q + (r + i) * K, sp + (r + i) * x.S, x);
    return;
  }
  in_passes<R>(
      n, [&](int64_t i, int64_t step) {
        avx2_rows_even<rows_of(R), P>(q + (r + i) * K, sp + (r + i) * x.S, K, x, out + i, step);
      },
      [&](int64_t i) { avx2_rows_even<1, P>(q + (r + i) * K, sp + (r + i) * x.S, K, x, out + i, 1); });
}

#endif

// The products of rows r..r+n-1 (K apart, S bf16 scales per row) with a quantised row x.
using FillInteger = void (*)(const int8_t*, const uint16_t*, int64_t, const QuantRow&, int64_t, int64_t, float*);

// This CPU's integer products: VNNI's (one shape), or AVX2's in the int8 shape in force (as int8_in_shape).
FillInteger integer_in_shape() {
#if TOKENSTEP_HAS_VNNI_CODE
  return vnni_rows;
#else
  static const FillInteger table[kRowShapes][kPrefetchShapes] = TOKENSTEP_EACH_SHAPE(fill_integer);
  return table[g_shape.int8_rows.load(std::memory_order_relaxed)][g_shape.int8_prefetch.load(std::memory_order_relaxed)];
#endif
}

// The integer path: the same contract as gemv_int8 (alpha, RMSNorm gain and weight per row of x, bias,
// residual, glu for one row); act_group: activations per scale (activation_group). Several rows (a short
// prefill) quantise each row, and each weight row, read once, meets them all in L1; each row's product is
// formed as it is for that row alone.
at::Tensor gemv_int8_integer(const at::Tensor& q, const at::Tensor& scale, const at::Tensor& x, double alpha,
                             const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& residual,
                             double rms_eps, bool glu, const std::optional<at::Tensor>& norm_weight,
                             int64_t act_group) {
  TORCH_CHECK(integer_available(), "the integer int8 path needs AVX-512 VNNI or an AVX2 build");
  check(q, x, bias, residual);
  const int64_t G = group_size(q, scale), K = q.size(1), T = x.size(0), A = activation_group(act_group, K, G);
  TORCH_CHECK(!glu || (T == 1 && !residual.has_value()), "glu: one row of x, no residual");
  const std::vector<float> alphas = row_alphas(x.data_ptr<float>(), T, K, alpha, rms_eps);
  const at::Tensor h = weighted(x, norm_weight);
  thread_local std::vector<QuantRow> quantised;  // their buffers are reused from call to call
  if (static_cast<int64_t>(quantised.size()) < T) quantised.resize(T);
  for (int64_t t = 0; t < T; ++t) quantize_row(h.data_ptr<float>() + t * K, K, G, A, quantised[t]);
  const int8_t* qp = q.data_ptr<int8_t>();
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scale.data_ptr());
  const QuantRow* xr = quantised.data();
  const FillInteger in_shape = integer_in_shape();
  auto fill = [=](int64_t r, int64_t n, float* out) { in_shape(qp, sp, K, *xr, r, n, out); };
  if (glu) return rows_glu(q.size(0), x, alphas[0], bias, fill);
  if (T == 1) return rows_one(q.size(0), x, alphas[0], bias, residual, fill);
  return rows(q.size(0), x, alphas, bias, residual, [=](int64_t r, auto&& put) {
    for (int64_t t = 0; t < T; ++t) {
      float product;
      in_shape(qp, sp, K, xr[t], r, 1, &product);
      put(t, product);
    }
  });
}

// An int8 product on the path asked for (0: float activations, gemv_int8; kInt16Path: gemv_int8_int16; else
// gemv_int8_integer with act_group = path), the float one where the integer path does not run.
at::Tensor int8_product(int64_t path, const at::Tensor& q, const at::Tensor& scale, const at::Tensor& x,
                        double alpha, const std::optional<at::Tensor>& bias,
                        const std::optional<at::Tensor>& residual, double rms_eps, bool glu,
                        const std::optional<at::Tensor>& norm_weight) {
  if (path == kInt16Path) return gemv_int8_int16(q, scale, x, alpha, bias, residual, rms_eps, glu, norm_weight);
  if (path != 0 && integer_available()) {
    return gemv_int8_integer(q, scale, x, alpha, bias, residual, rms_eps, glu, norm_weight, path);
  }
  return gemv_int8(q, scale, x, alpha, bias, residual, rms_eps, glu, norm_weight);
}

// The quantised activations as (xq (groups, chunks * 64) int8, lane scales (groups, chunks * 16) float32),
// for tests to check the kernel's integer math against a torch reference.
std::tuple<at::Tensor, at::Tensor> quantize_activations(const at::Tensor& x, int64_t group, int64_t act_group) {
  TORCH_CHECK(x.dim() == 1 && x.is_contiguous() && x.scalar_type() == at::kFloat && group > 0 &&
              x.size(0) % group == 0, "x: contiguous float32 (K,), group dividing K");
  TORCH_CHECK(integer_available(), "needs AVX-512 VNNI or an AVX2 build");
  QuantRow out;
  const int64_t A = activation_group(act_group, x.size(0), group);
  quantize_row(x.data_ptr<float>(), x.size(0), group, A, out);
  at::Tensor xq = at::from_blob(out.xq.data(), {out.S, out.chunks * 64}, at::kChar).clone();
  at::Tensor scales = at::from_blob(out.scale.data(), {out.S, out.chunks * 16}, at::kFloat).clone();
  return {xq, scales};
}

// Which code the integer int8 path runs on here: "vnni", "avx2", or "" (none: the float path only).
std::string integer_code() { return vnni_available() ? "vnni" : TOKENSTEP_HAS_AVX2_INTEGER_CODE ? "avx2" : ""; }

}  // namespace

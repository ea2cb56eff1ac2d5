// The vector primitives every part of the kernels is written in, for AVX-512 (16 float lanes) or AVX2 + FMA
// (8): the flags the build passes (inference/kernels/__init__.py: this CPU's) pick the branch, and no other file
// chooses between the two for float vectors. There is no scalar fallback: without one of these instruction sets
// the kernels are not built and the decoder runs stock ops.
//   Vec (kLanes floats): vzero, vset, vload, vstore, vadd, vmul, vfma, vmax, vround, vldexp, vwiden (int8 ->
//     float32), vabs; sums and maxima across lanes: vsum, vsum4 (four vectors at once), vmax_all, vmax_lanes,
//     hsum256 (one __m256, which the AVX2 vsum is); vexp; max_magnitude over a row;
//   IVec (kWide int16 lanes, the int16 path): izero, iwiden, iload, imadd, iadd, ifloat, store_int16, store_int8;
//   bf16_to_float, prefetch_ahead.
// The integer int8 path (VNNI's vpdpbusd, AVX2's vpmaddubsw) and the int4 head keep their own instructions in
// their files: they exist in one form each.

#pragma once

#include <immintrin.h>
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace {  // included by ops.cpp only, the one translation unit: internal linkage

inline float bf16_to_float(uint16_t bits) {
  uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  __builtin_memcpy(&value, &widened, sizeof(value));
  return value;
}

// The lane sum of eight floats: AVX2's vsum, and the int4 head's 256-bit sums in either build.
inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

#if defined(__AVX512F__)
using Vec = __m512;
constexpr int64_t kLanes = 16;
inline Vec vzero() { return _mm512_setzero_ps(); }
inline Vec vset(float s) { return _mm512_set1_ps(s); }
inline Vec vload(const float* p) { return _mm512_loadu_ps(p); }
inline void vstore(float* p, Vec v) { _mm512_storeu_ps(p, v); }
inline Vec vadd(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline Vec vmul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline float vsum(Vec v) { return _mm512_reduce_add_ps(v); }
inline Vec vmax(Vec a, Vec b) { return _mm512_max_ps(a, b); }
inline __m256 half_sum(Vec v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }
inline Vec vround(Vec v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline Vec vldexp(Vec v, Vec n) { return _mm512_scalef_ps(v, n); }  // v * 2^n, n integral
// kLanes int8 weights as float32
inline Vec vwiden(const int8_t* q) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q))));
}
#elif defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
constexpr int64_t kLanes = 8;
inline Vec vzero() { return _mm256_setzero_ps(); }
inline Vec vset(float s) { return _mm256_set1_ps(s); }
inline Vec vload(const float* p) { return _mm256_loadu_ps(p); }
inline void vstore(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline Vec vadd(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Vec vmul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline float vsum(Vec v) { return hsum256(v); }
inline Vec vmax(Vec a, Vec b) { return _mm256_max_ps(a, b); }
inline __m256 half_sum(Vec v) { return v; }
inline Vec vround(Vec v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline Vec vldexp(Vec v, Vec n) {  // v * 2^n for integral n in [-126, 127]: n + 127 into the exponent bits
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(v, _mm256_castsi256_ps(bits));
}
inline Vec vwiden(const int8_t* q) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
}
#else
#error "the kernels need AVX-512F or AVX2 + FMA"
#endif

constexpr int64_t kStep = 4 * kLanes;  // the main loops keep four accumulators

// The lane sums of four vectors at once: fewer shuffles than four horizontal sums.
inline void vsum4(Vec a0, Vec a1, Vec a2, Vec a3, float* out) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(half_sum(a0), half_sum(a1)),
                                  _mm256_hadd_ps(half_sum(a2), half_sum(a3)));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

// The largest lane (lanes that are NaN are passed over, as std::max(top, x) passes them over).
inline float vmax_all(Vec v) {
  alignas(64) float lanes[kLanes];
  vstore(lanes, v);
  float top = lanes[0];
  for (int64_t i = 1; i < kLanes; ++i) top = std::max(top, lanes[i]);
  return top;
}

// exp(x) per lane (Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2, a degree-7 polynomial in r, times
// 2^n; within 2 ulp of std::exp). Lanes below -87.3 give exp(-87.3) ~ 1e-38 (softmax weights: nothing).
inline Vec vexp(Vec x) {
  x = vmax(x, vset(-87.3365f));
  const Vec n = vround(vmul(x, vset(1.44269504088896341f)));
  Vec r = vfma(n, vset(-0.693359375f), x);
  r = vfma(n, vset(2.12194440e-4f), r);
  Vec y = vset(1.9875691500e-4f);
  y = vfma(y, r, vset(1.3981999507e-3f));
  y = vfma(y, r, vset(8.3334519073e-3f));
  y = vfma(y, r, vset(4.1665795894e-2f));
  y = vfma(y, r, vset(1.6666665459e-1f));
  y = vfma(y, r, vset(5.0000001201e-1f));
  y = vfma(y, vmul(r, r), vadd(r, vset(1.0f)));
  return vldexp(y, n);
}

template <int64_t P>
inline void prefetch_ahead(const void* p, int64_t bytes) {
  if (P == 0) return;
  const char* ahead = static_cast<const char*>(p) + P;
  for (int64_t i = 0; i < bytes; i += 64) _mm_prefetch(ahead + i, _MM_HINT_T0);
}

// The int16 path's integer vectors, and float helpers it and the quantisers share.
#if defined(__AVX512BW__)
using IVec = __m512i;
constexpr int64_t kWide = 32;  // int16 lanes: weights widened per load
inline IVec izero() { return _mm512_setzero_si512(); }
inline IVec iwiden(const int8_t* q) {
  return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
}
inline IVec iload(const int16_t* p) { return _mm512_loadu_si512(p); }
inline IVec imadd(IVec a, IVec b) { return _mm512_madd_epi16(a, b); }  // pairs of int16 products -> int32
inline IVec iadd(IVec a, IVec b) { return _mm512_add_epi32(a, b); }
inline Vec ifloat(IVec a) { return _mm512_cvtepi32_ps(a); }
// kLanes floats (already scaled) -> kLanes int16, rounded half to even, saturated
inline void store_int16(int16_t* p, Vec v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(v)));
}
inline void store_int8(int8_t* p, Vec v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v)));
}
inline Vec vabs(Vec v) { return _mm512_abs_ps(v); }
inline float vmax_lanes(Vec v) { return _mm512_reduce_max_ps(v); }
#else
using IVec = __m256i;
constexpr int64_t kWide = 16;
inline IVec izero() { return _mm256_setzero_si256(); }
inline IVec iwiden(const int8_t* q) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
}
inline IVec iload(const int16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline IVec imadd(IVec a, IVec b) { return _mm256_madd_epi16(a, b); }
inline IVec iadd(IVec a, IVec b) { return _mm256_add_epi32(a, b); }
inline Vec ifloat(IVec a) { return _mm256_cvtepi32_ps(a); }
inline void store_int16(int16_t* p, Vec v) {
  const __m256i i = _mm256_cvtps_epi32(v);
  const __m128i packed = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}
inline void store_int8(int8_t* p, Vec v) {
  const __m256i i = _mm256_cvtps_epi32(v);
  const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi16(words, words));
}
inline Vec vabs(Vec v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
inline float vmax_lanes(Vec v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
#endif

// The largest |x| of n floats (NaN lanes as _max_ps leaves them: a NaN is dropped by the next lane compared).
inline float max_magnitude(const float* x, int64_t n) {
  Vec m = vzero();
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) m = vmax(m, vabs(vload(x + k)));
  float out = vmax_lanes(m);
  for (; k < n; ++k) out = std::max(out, std::fabs(x[k]));
  return out;
}

// AVX-512 VNNI (vpdpbusd, vpdpwssd) in an AVX-512 build: its functions carry TOKENSTEP_VNNI and run only where
// vnni_available() (the build's flags do not include it: an AVX-512 CPU without VNNI runs the rest).
#if defined(__AVX512F__) && defined(__AVX512BW__)
#define TOKENSTEP_HAS_VNNI_CODE 1
#define TOKENSTEP_HAS_AVX2_INTEGER_CODE 0
#if defined(TOKENSTEP_EMULATED_AVX512)  // tests/support/avx512_on_avx2.h: no AVX-512 instruction may be emitted
#define TOKENSTEP_VNNI
#else
#define TOKENSTEP_VNNI __attribute__((target("avx512vnni,avx512bw,avx512f")))
#endif
#else
#define TOKENSTEP_HAS_VNNI_CODE 0
#define TOKENSTEP_HAS_AVX2_INTEGER_CODE 1  // the kernels build only for AVX-512 or AVX2 + FMA (simd.h)
#endif

bool vnni_available() {
#if TOKENSTEP_HAS_VNNI_CODE
#if defined(TOKENSTEP_EMULATED_AVX512)
  static const bool yes = true;  // every _mm512 intrinsic is SIMDe's portable code
#else
  static const bool yes = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
#endif
  return yes;
#else
  return false;
#endif
}


}  // namespace

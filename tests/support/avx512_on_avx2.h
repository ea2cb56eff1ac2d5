// The kernels' AVX-512 code (inference/kernels/csrc/) built for a CPU without AVX-512, for tests
// (tests/kernels/test_kernels_emulated.py):
//   TOKENSTEP_KERNELS_FLAGS="-mavx2 -mfma -include tests/support/avx512_on_avx2.h"
// Each _mm512_* intrinsic becomes SIMDe's portable code (https://github.com/simd-everywhere/simde, built on AVX2
// here), the __AVX512*__ macros send the kernels (simd.h and the parts ops.cpp includes) down their AVX-512
// branches, and TOKENSTEP_EMULATED_AVX512 drops the VNNI functions' target attribute (no AVX-512 instruction may
// be emitted) and reports VNNI present.
// The intrinsics SIMDe 0.7.4 (Debian 12) lacks or aliases wrongly are written out below, lane by lane.
#pragma once
#include <immintrin.h>
#define SIMDE_ENABLE_NATIVE_ALIASES
#define SIMDE_X86_AVX512F_NO_NATIVE
#define SIMDE_X86_AVX512BW_NO_NATIVE
#define SIMDE_X86_AVX512VL_NO_NATIVE
#define SIMDE_X86_AVX512DQ_NO_NATIVE
#define SIMDE_X86_AVX512VNNI_NO_NATIVE
#define SIMDE_X86_AVX512CD_NO_NATIVE
#define SIMDE_X86_AVX512BF16_NO_NATIVE
#include <simde/x86/avx512.h>
#define __AVX512F__ 1
#define __AVX512BW__ 1
#define __AVX512VL__ 1
#define __AVX512DQ__ 1
#define TOKENSTEP_EMULATED_AVX512 1
// SIMDe 0.7.4's alias of this one takes the masked form's four arguments
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)
// Not in SIMDe 0.7.4: the reductions, summed in the order GCC's own sums (halves, then quarters, ...)
#include <algorithm>
#include <cstring>
static inline float tokenstep_reduce_add_ps(simde__m512 v) {
  float a[16];
  std::memcpy(a, &v, sizeof(a));
  float t[8];
  for (int i = 0; i < 8; ++i) t[i] = a[i] + a[i + 8];
  for (int i = 0; i < 4; ++i) t[i] = t[i] + t[i + 4];
  return (t[0] + t[2]) + (t[1] + t[3]);
}
static inline float tokenstep_reduce_max_ps(simde__m512 v) {
  float a[16];
  std::memcpy(a, &v, sizeof(a));
  float m = a[0];
  for (int i = 1; i < 16; ++i) m = std::max(m, a[i]);
  return m;
}
#undef _mm512_reduce_add_ps
#define _mm512_reduce_add_ps(v) tokenstep_reduce_add_ps(v)
#undef _mm512_reduce_max_ps
#define _mm512_reduce_max_ps(v) tokenstep_reduce_max_ps(v)
static inline __m256 tokenstep_extractf32x8_ps(simde__m512 v, int half) {
  __m256 out;
  std::memcpy(&out, reinterpret_cast<const char*>(&v) + 32 * half, sizeof(out));
  return out;
}
#undef _mm512_extractf32x8_ps
#define _mm512_extractf32x8_ps(v, half) tokenstep_extractf32x8_ps(v, half)
// Lane by lane (the masked loads read no byte outside their mask, as the instructions do not)
template <typename T, typename V>
static inline void tokenstep_lanes(const V& v, T* out) { std::memcpy(out, &v, sizeof(V)); }
template <typename V, typename T>
static inline V tokenstep_vector(const T* in) {
  V v;
  std::memcpy(&v, in, sizeof(V));
  return v;
}
static inline __m512 tokenstep_cvtepi32_ps(__m512i a) {
  int32_t i[16]; float f[16];
  tokenstep_lanes(a, i);
  for (int k = 0; k < 16; ++k) f[k] = static_cast<float>(i[k]);
  return tokenstep_vector<__m512>(f);
}
static inline __m512i tokenstep_cvtepi8_epi32(__m128i a) {
  int8_t b[16]; int32_t i[16];
  tokenstep_lanes(a, b);
  for (int k = 0; k < 16; ++k) i[k] = b[k];
  return tokenstep_vector<__m512i>(i);
}
static inline __m512i tokenstep_cvtps_epi32(__m512 a) {  // round half to even; out of range or NaN: INT32_MIN
  float f[16]; int32_t i[16];
  tokenstep_lanes(a, f);
  for (int k = 0; k < 16; ++k) {
    const float r = __builtin_nearbyintf(f[k]);
    i[k] = (r >= -2147483648.0f && r < 2147483648.0f) ? static_cast<int32_t>(r) : INT32_MIN;
  }
  return tokenstep_vector<__m512i>(i);
}
static inline __m512i tokenstep_maskz_loadu_epi8(unsigned long long m, const void* p) {
  int8_t b[64] = {};
  for (int k = 0; k < 64; ++k) if (m >> k & 1) b[k] = static_cast<const int8_t*>(p)[k];
  return tokenstep_vector<__m512i>(b);
}
static inline __m512 tokenstep_maskz_loadu_ps(unsigned m, const void* p) {
  float f[16] = {};
  for (int k = 0; k < 16; ++k) if (m >> k & 1) f[k] = static_cast<const float*>(p)[k];
  return tokenstep_vector<__m512>(f);
}
static inline void tokenstep_mask_cvtepi32_storeu_epi8(void* p, unsigned m, __m512i a) {  // truncated
  int32_t i[16];
  tokenstep_lanes(a, i);
  for (int k = 0; k < 16; ++k) if (m >> k & 1) static_cast<int8_t*>(p)[k] = static_cast<int8_t>(i[k]);
}
static inline __m512 tokenstep_permute_ps(__m512 a, int imm) {  // within each 128-bit block
  float f[16], o[16];
  tokenstep_lanes(a, f);
  for (int k = 0; k < 16; ++k) o[k] = f[(k & ~3) + (imm >> (2 * (k & 3)) & 3)];
  return tokenstep_vector<__m512>(o);
}
// 128-bit blocks: two of a, two of b
static inline __m512 tokenstep_shuffle_f32x4(__m512 a, __m512 b, int imm) {
  float fa[16], fb[16], o[16];
  tokenstep_lanes(a, fa);
  tokenstep_lanes(b, fb);
  for (int k = 0; k < 4; ++k) {
    const float* from = k < 2 ? fa : fb;
    std::memcpy(o + 4 * k, from + 4 * (imm >> (2 * k) & 3), 16);
  }
  return tokenstep_vector<__m512>(o);
}
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps(a) tokenstep_cvtepi32_ps(a)
#undef _mm512_cvtepi8_epi32
#define _mm512_cvtepi8_epi32(a) tokenstep_cvtepi8_epi32(a)
#undef _mm512_cvtps_epi32
#define _mm512_cvtps_epi32(a) tokenstep_cvtps_epi32(a)
#undef _mm512_maskz_loadu_epi8
#define _mm512_maskz_loadu_epi8(m, p) tokenstep_maskz_loadu_epi8(m, p)
#undef _mm512_maskz_loadu_ps
#define _mm512_maskz_loadu_ps(m, p) tokenstep_maskz_loadu_ps(m, p)
#undef _mm512_mask_cvtepi32_storeu_epi8
#define _mm512_mask_cvtepi32_storeu_epi8(p, m, a) tokenstep_mask_cvtepi32_storeu_epi8(p, m, a)
#undef _mm512_permute_ps
#define _mm512_permute_ps(a, imm) tokenstep_permute_ps(a, imm)
#undef _mm512_shuffle_f32x4
#define _mm512_shuffle_f32x4(a, b, imm) tokenstep_shuffle_f32x4(a, b, imm)

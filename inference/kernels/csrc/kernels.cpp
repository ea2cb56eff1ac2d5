// Decode on x86-64 CPUs: one-row products y = alpha * (W x) [* scale] + bias + residual, decode
// attention over the KV cache, `decode_layer`, which runs a whole decoder layer in one call, and
// `decode_layers` (kernels_step.cpp), every layer of a step in one call and one parallel region.
//
// Decode reads every weight once per token, so it runs at the speed the matrix streams from memory.
// Each thread takes a contiguous range of rows and reads it front to back, in the shape measured fastest
// on this machine (1, 2 or 4 rows at a time, a software prefetch 0-8 KB ahead or none: kernel_shape.py);
// BLAS GEMV (no prefetch) reached 75-85 % of a plain streaming read on an AMD EPYC, this 87-97 %; on an
// Intel Xeon the products take 1.05x a torch.sum of the same bytes. The int8 variant widens each weight
// to float32 in registers, so its activations stay float32 (the stock int8 kernel is fast only with
// bfloat16 ones), and applies one scale per group of weights in a row (weights.py picks the group size).
// The same code is built for AVX-512 (16 lanes) or AVX2 + FMA (8 lanes): kernels.py passes the flags
// for this CPU, and the few vector primitives below pick their instructions from them. Built on first
// use by kernels.py; without a compiler or one of these instruction sets the decoder uses stock ops.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <omp.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

namespace {

// --- The kernel shape: how the one-row products read their weights ----------------------------------
// Rows per pass (each x load serves that many rows, that many streams are read at once) and how far
// ahead of the row being read a software prefetch goes (0: none, the hardware prefetcher alone), for the
// float32 and the int8 products each. The best shape depends on the machine, not the vendor: four float32
// rows per pass measured fastest on an Intel Xeon and one row 1.3x faster on an AMD EPYC (same bits);
// software prefetch helped with AVX-512 on one EPYC and hurt with AVX2 only on another. So kernel_shape.py
// times these candidates on the loaded model's weights at first use and sets the fastest (set_shape);
// until then the defaults below (what this instruction set measured best first) are in force.
// Negative rows: that many rows far apart, rows i, i + n/2 (i + n/4, ...) of a fill's n (64),
// not i, i + 1. On an AVX2 EPYC (2 threads, the default model's products as a step runs them, against a read
// of the same bytes) one row per pass took 1.13x the read, two adjacent rows 1.32x, two or four far apart
// 1.03x, the same bits; the int8 products on int16 activations 3.79 -> 3.44 ms (the tuner's medians). Our
// reading: each x load serves several rows, and rows far apart are separate streams to the prefetcher where
// adjacent rows look like one stream read out of order.
constexpr int64_t kShapeRows[] = {1, 2, 4, -2, -4};
constexpr int64_t kShapePrefetch[] = {0, 1024, 2048, 4096, 8192};  // bytes
#define TOKENSTEP_EACH_PREFETCH(f, R) {f<R, 0>, f<R, 1024>, f<R, 2048>, f<R, 4096>, f<R, 8192>}
// A table of `f` in every shape, indexed [rows][prefetch] as kShapeRows and kShapePrefetch list them.
#define TOKENSTEP_EACH_SHAPE(f)                                                                       \
  {TOKENSTEP_EACH_PREFETCH(f, 1), TOKENSTEP_EACH_PREFETCH(f, 2), TOKENSTEP_EACH_PREFETCH(f, 4),      \
   TOKENSTEP_EACH_PREFETCH(f, -2), TOKENSTEP_EACH_PREFETCH(f, -4)}
constexpr int kRowShapes = sizeof(kShapeRows) / sizeof(kShapeRows[0]);
constexpr int kPrefetchShapes = sizeof(kShapePrefetch) / sizeof(kShapePrefetch[0]);
#if defined(__AVX512F__)
constexpr int64_t kPrefetchBytes = 8192;  // the default distance, and the one of dot_f32 (attention)
constexpr int kDefaultF32Rows = 2;        // index into kShapeRows: four rows
#else
constexpr int64_t kPrefetchBytes = 0;
constexpr int kDefaultF32Rows = 1;  // two rows (8 accumulators of 16 registers)
#endif
constexpr int kDefaultPrefetch = kPrefetchBytes == 0 ? 0 : 4;  // index into kShapePrefetch

// The shape in force, as indexes into the lists above (atomics: set between calls, read by every call).
struct ShapeIndexes {
  std::atomic<int> f32_rows{kDefaultF32Rows}, f32_prefetch{kDefaultPrefetch};
  std::atomic<int> int8_rows{0}, int8_prefetch{kDefaultPrefetch};
};
ShapeIndexes g_shape;

constexpr int64_t kRowsPerTask = 16;

// --- Where x sits ------------------------------------------------------------------------------------
// A float32 one-row product loads a weight vector and the x vector at the same offset k for each FMA.
// With x on the alignment of the weight rows (both 64-byte aligned, as torch and the packed block put
// them) those pairs of loads collide in the L1 (its banks): measured on an AMD EPYC, 2 threads, the
// default model's 121 matrices in a C driver, 1.10-1.15x a plain read of the same bytes with x 64- or
// 32-byte aligned, 0.97-1.00x with x 4, 8, 16 or 48 bytes off; a whole float32 decode step in this library,
// x at 16 bytes off against 64-byte aligned, the same bits: 0.85x (when a plain read of the weights took
// 8.8 ms) and 0.93x (16.6 ms). So the float32 one-row products read a copy of x (K floats) placed
// g_x_offset bytes past a 64-byte boundary. The int8 products widen 16 weights per x vector; there the
// offset measured 1.03x slower, so their x stays where it is.
std::atomic<int64_t> g_x_offset{16};

// x (K floats) copied to `buffer` at g_x_offset bytes past a 64-byte boundary; the copy's first float.
const float* staggered(const float* x, int64_t K, std::vector<float>& buffer) {
  const int64_t offset = g_x_offset.load(std::memory_order_relaxed);
  buffer.resize(K + 32);
  const auto address = reinterpret_cast<uintptr_t>(buffer.data());
  float* start = reinterpret_cast<float*>((address + 63) / 64 * 64 + offset);
  std::copy(x, x + K, start);
  return start;
}

// Sets the offset (bytes, a multiple of 4 below 64) from the next call on; returns the one before.
int64_t set_x_offset(int64_t bytes) {
  TORCH_CHECK(bytes >= 0 && bytes < 64 && bytes % 4 == 0, "x offset: a multiple of 4 bytes below 64");
  return g_x_offset.exchange(bytes);
}

inline float bf16_to_float(uint16_t bits) {
  uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  __builtin_memcpy(&value, &widened, sizeof(value));
  return value;
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
inline float vsum(Vec v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
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
#error "kernels.cpp needs AVX-512F or AVX2 + FMA"
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

template <int64_t P = kPrefetchBytes>
inline void prefetch_ahead(const void* p, int64_t bytes) {
  if (P == 0) return;
  const char* ahead = static_cast<const char*>(p) + P;
  for (int64_t i = 0; i < bytes; i += 64) _mm_prefetch(ahead + i, _MM_HINT_T0);
}

inline float dot_f32(const float* w, const float* x, int64_t K) {
  Vec a0 = vzero(), a1 = a0, a2 = a0, a3 = a0;
  int64_t k = 0;
  for (; k + kStep <= K; k += kStep) {
    prefetch_ahead(w + k, kStep * sizeof(float));
    a0 = vfma(vload(w + k), vload(x + k), a0);
    a1 = vfma(vload(w + k + kLanes), vload(x + k + kLanes), a1);
    a2 = vfma(vload(w + k + 2 * kLanes), vload(x + k + 2 * kLanes), a2);
    a3 = vfma(vload(w + k + 3 * kLanes), vload(x + k + 3 * kLanes), a3);
  }
  for (; k + kLanes <= K; k += kLanes) a0 = vfma(vload(w + k), vload(x + k), a0);
  float sum = vsum(vadd(vadd(a0, a1), vadd(a2, a3)));
  for (; k < K; ++k) sum += w[k] * x[k];
  return sum;
}

// R consecutive rows (K apart) times x in one pass, prefetching P bytes ahead: each x load serves R rows,
// and R streams are read at once. Each row's sum is formed exactly as dot_f32 forms it (the same
// accumulators, the same order), so the products are bit-identical for every R and P. Measured on an
// Intel Xeon (2 threads, the default model's o, down, qkv and head matrices): 25.5 GB/s one row at a
// time, 27.8 two, 28.9 four; on an AMD EPYC one row was the fastest (see the shape section above).
// The R rows lie `step` rows apart (1: consecutive), and so do their products in out.
template <int64_t R, int64_t P>
inline void dot_rows_f32(const float* w, const float* x, int64_t K, float* out, int64_t step) {
  const int64_t stride = step * K;
  Vec a[R][4];
  for (int64_t r = 0; r < R; ++r) a[r][0] = a[r][1] = a[r][2] = a[r][3] = vzero();
  int64_t k = 0;
  for (; k + kStep <= K; k += kStep) {
    for (int64_t r = 0; r < R; ++r) prefetch_ahead<P>(w + r * stride + k, kStep * sizeof(float));
    const Vec x0 = vload(x + k), x1 = vload(x + k + kLanes), x2 = vload(x + k + 2 * kLanes),
              x3 = vload(x + k + 3 * kLanes);
    for (int64_t r = 0; r < R; ++r) {
      const float* v = w + r * stride + k;
      a[r][0] = vfma(vload(v), x0, a[r][0]);
      a[r][1] = vfma(vload(v + kLanes), x1, a[r][1]);
      a[r][2] = vfma(vload(v + 2 * kLanes), x2, a[r][2]);
      a[r][3] = vfma(vload(v + 3 * kLanes), x3, a[r][3]);
    }
  }
  for (; k + kLanes <= K; k += kLanes) {
    for (int64_t r = 0; r < R; ++r) a[r][0] = vfma(vload(w + r * stride + k), vload(x + k), a[r][0]);
  }
  for (int64_t r = 0; r < R; ++r) {
    float sum = vsum(vadd(vadd(a[r][0], a[r][1]), vadd(a[r][2], a[r][3])));
    for (int64_t tail = k; tail < K; ++tail) sum += w[r * stride + tail] * x[tail];
    out[r * step] = sum;
  }
}

// Group-wise scales: each run of G weights of a row shares one scale (G = K / scale columns; G = K is
// one scale per row). A group's products are summed first, then scaled once.
template <int64_t P>
inline float dot_int8_any(const int8_t* q, const float* x, int64_t K, const uint16_t* scale, int64_t G) {
  Vec t0 = vzero(), t1 = t0;
  float rest = 0.0f;
  for (int64_t g0 = 0; g0 < K; g0 += G) {
    const int64_t end = g0 + G;
    Vec a0 = vzero(), a1 = a0, a2 = a0, a3 = a0;
    int64_t k = g0;
    for (; k + kStep <= end; k += kStep) {
      prefetch_ahead<P>(q + k, kStep);
      a0 = vfma(vwiden(q + k), vload(x + k), a0);
      a1 = vfma(vwiden(q + k + kLanes), vload(x + k + kLanes), a1);
      a2 = vfma(vwiden(q + k + 2 * kLanes), vload(x + k + 2 * kLanes), a2);
      a3 = vfma(vwiden(q + k + 3 * kLanes), vload(x + k + 3 * kLanes), a3);
    }
    for (; k + kLanes <= end; k += kLanes) a0 = vfma(vwiden(q + k), vload(x + k), a0);
    float part = 0.0f;
    for (; k < end; ++k) part += static_cast<float>(q[k]) * x[k];
    const float s = bf16_to_float(*scale++);
    t0 = vfma(vadd(a0, a1), vset(s), t0);
    t1 = vfma(vadd(a2, a3), vset(s), t1);
    rest += part * s;
  }
  return vsum(vadd(t0, t1)) + rest;
}

// The same when G is a multiple of kStep (64 is): no tails, no zeroing, four scaled sums. Widening is
// the work here (int8 decode is compute-bound with AVX2: 8 lanes), so the per-group bookkeeping counts:
// on AVX2 with G = 64 this form measured 14.9 G weights/s on one core against 12.1 for the general one.
// R consecutive rows (K apart, their scales S apart) at once, prefetching P bytes ahead; each row's sum
// is formed as for one row alone, so the products are bit-identical for every R and P.
template <int64_t R, int64_t P>
inline void dot_rows_int8_even(const int8_t* q, const float* x, int64_t K, const uint16_t* scale, int64_t S,
                               int64_t G, float* out, int64_t step) {
  const int64_t stride = step * K, scales = step * S;  // the R rows lie `step` rows apart, their products too
  Vec t[R][4];
  for (int64_t r = 0; r < R; ++r) t[r][0] = t[r][1] = t[r][2] = t[r][3] = vzero();
  for (int64_t g0 = 0, g = 0; g0 < K; g0 += G, ++g) {
    Vec a[R][4];
    {
      const Vec x0 = vload(x + g0), x1 = vload(x + g0 + kLanes), x2 = vload(x + g0 + 2 * kLanes),
                x3 = vload(x + g0 + 3 * kLanes);
      for (int64_t r = 0; r < R; ++r) {
        const int8_t* v = q + r * stride + g0;
        prefetch_ahead<P>(v, kStep);
        a[r][0] = vmul(vwiden(v), x0);
        a[r][1] = vmul(vwiden(v + kLanes), x1);
        a[r][2] = vmul(vwiden(v + 2 * kLanes), x2);
        a[r][3] = vmul(vwiden(v + 3 * kLanes), x3);
      }
    }
    for (int64_t k = g0 + kStep; k < g0 + G; k += kStep) {
      const Vec x0 = vload(x + k), x1 = vload(x + k + kLanes), x2 = vload(x + k + 2 * kLanes),
                x3 = vload(x + k + 3 * kLanes);
      for (int64_t r = 0; r < R; ++r) {
        const int8_t* v = q + r * stride + k;
        prefetch_ahead<P>(v, kStep);
        a[r][0] = vfma(vwiden(v), x0, a[r][0]);
        a[r][1] = vfma(vwiden(v + kLanes), x1, a[r][1]);
        a[r][2] = vfma(vwiden(v + 2 * kLanes), x2, a[r][2]);
        a[r][3] = vfma(vwiden(v + 3 * kLanes), x3, a[r][3]);
      }
    }
    for (int64_t r = 0; r < R; ++r) {
      const Vec sv = vset(bf16_to_float(scale[r * scales + g]));
      for (int j = 0; j < 4; ++j) t[r][j] = vfma(a[r][j], sv, t[r][j]);
    }
  }
  for (int64_t r = 0; r < R; ++r) out[r * step] = vsum(vadd(vadd(t[r][0], t[r][1]), vadd(t[r][2], t[r][3])));
}

// Rows 0..n-1 of a fill in passes of the shape's rows: pass(i, step) takes rows i, i + step, ... (|R| of them),
// one(i) row i alone. R > 0: consecutive rows (step 1); R < 0: rows far apart (step n / |R|); then the rest alone.
template <int64_t R, typename Pass, typename One>
inline void in_passes(int64_t n, Pass pass, One one) {
  int64_t i = 0;
  if constexpr (R > 0) {
    for (; i + R <= n; i += R) pass(i, 1);
  } else {
    const int64_t h = n / -R;
    for (; i < h; ++i) pass(i, h);
    i = -R * h;
  }
  for (; i < n; ++i) one(i);
}

constexpr int64_t rows_of(int64_t R) { return R > 0 ? R : -R; }

// The products of n consecutive rows in the shape (R rows per pass, prefetch P): fill_f32 and fill_int8,
// one instance per candidate shape, picked at each call from the shape in force.
template <int64_t R, int64_t P>
void fill_f32(const float* w, const float* x, int64_t K, int64_t n, float* out) {
  in_passes<R>(
      n, [&](int64_t i, int64_t step) { dot_rows_f32<rows_of(R), P>(w + i * K, x, K, out + i, step); },
      [&](int64_t i) { dot_rows_f32<1, P>(w + i * K, x, K, out + i, 1); });
}

template <int64_t R, int64_t P>
void fill_int8(const int8_t* q, const float* x, int64_t K, const uint16_t* scale, int64_t S, int64_t G, int64_t n,
               float* out) {
  if (G % kStep != 0) {
    for (int64_t i = 0; i < n; ++i) out[i] = dot_int8_any<P>(q + i * K, x, K, scale + i * S, G);
    return;
  }
  in_passes<R>(
      n, [&](int64_t i, int64_t step) {
        dot_rows_int8_even<rows_of(R), P>(q + i * K, x, K, scale + i * S, S, G, out + i, step);
      },
      [&](int64_t i) { dot_rows_int8_even<1, P>(q + i * K, x, K, scale + i * S, S, G, out + i, 1); });
}

using FillF32 = void (*)(const float*, const float*, int64_t, int64_t, float*);
using FillInt8 = void (*)(const int8_t*, const float*, int64_t, const uint16_t*, int64_t, int64_t, int64_t, float*);

FillF32 f32_in_shape() {
  static const FillF32 table[kRowShapes][kPrefetchShapes] = TOKENSTEP_EACH_SHAPE(fill_f32);
  return table[g_shape.f32_rows.load(std::memory_order_relaxed)][g_shape.f32_prefetch.load(std::memory_order_relaxed)];
}

FillInt8 int8_in_shape() {
  static const FillInt8 table[kRowShapes][kPrefetchShapes] = TOKENSTEP_EACH_SHAPE(fill_int8);
  return table[g_shape.int8_rows.load(std::memory_order_relaxed)][g_shape.int8_prefetch.load(std::memory_order_relaxed)];
}

int index_of(const int64_t* list, int size, int64_t value, const char* what) {
  for (int i = 0; i < size; ++i) {
    if (list[i] == value) return i;
  }
  TORCH_CHECK(false, what, " ", value, " is not a candidate (rows per pass: 1, 2 or 4, or -2 or -4 for rows far ",
              "apart; prefetch: 0, 1024, 2048, 4096 or 8192 bytes)");
  return 0;
}

// The shape in force: float32 rows, prefetch bytes, int8 rows, prefetch bytes.
std::vector<int64_t> get_shape() {
  return {kShapeRows[g_shape.f32_rows.load()], kShapePrefetch[g_shape.f32_prefetch.load()],
          kShapeRows[g_shape.int8_rows.load()], kShapePrefetch[g_shape.int8_prefetch.load()]};
}

// Sets the shape of the products from the next call on (every value checked first); returns it.
std::vector<int64_t> set_shape(int64_t f32_rows, int64_t f32_prefetch, int64_t int8_rows, int64_t int8_prefetch) {
  const int a = index_of(kShapeRows, kRowShapes, f32_rows, "float32 rows per pass");
  const int b = index_of(kShapePrefetch, kPrefetchShapes, f32_prefetch, "float32 prefetch");
  const int c = index_of(kShapeRows, kRowShapes, int8_rows, "int8 rows per pass");
  const int d = index_of(kShapePrefetch, kPrefetchShapes, int8_prefetch, "int8 prefetch");
  g_shape.f32_rows = a;
  g_shape.f32_prefetch = b;
  g_shape.int8_rows = c;
  g_shape.int8_prefetch = d;
  return get_shape();
}

// Four rows of x (K apart) times one weight row that sits in L1: each weight load serves four products.
inline void dot4_f32(const float* w, const float* x, int64_t K, float* out) {
  Vec a0 = vzero(), a1 = a0, a2 = a0, a3 = a0;
  int64_t k = 0;
  for (; k + kLanes <= K; k += kLanes) {
    const Vec wv = vload(w + k);
    a0 = vfma(wv, vload(x + k), a0);
    a1 = vfma(wv, vload(x + K + k), a1);
    a2 = vfma(wv, vload(x + 2 * K + k), a2);
    a3 = vfma(wv, vload(x + 3 * K + k), a3);
  }
  out[0] = vsum(a0);
  out[1] = vsum(a1);
  out[2] = vsum(a2);
  out[3] = vsum(a3);
  for (; k < K; ++k) {
    for (int i = 0; i < 4; ++i) out[i] += w[k] * x[i * K + k];
  }
}

// One row of q times its scales, as float32.
inline void dequantize_row(const int8_t* q, const uint16_t* scale, int64_t K, int64_t G, float* out) {
  for (int64_t g0 = 0; g0 < K; g0 += G, ++scale) {
    const float s = bf16_to_float(*scale);
    const Vec vs = vset(s);
    const int64_t end = g0 + G;
    int64_t k = g0;
    for (; k + kLanes <= end; k += kLanes) vstore(out + k, vmul(vwiden(q + k), vs));
    for (; k < end; ++k) out[k] = static_cast<float>(q[k]) * s;
  }
}

void check(const at::Tensor& w, const at::Tensor& x, const std::optional<at::Tensor>& bias,
           const std::optional<at::Tensor>& residual) {
  TORCH_CHECK(w.dim() == 2 && w.is_contiguous() && w.device().is_cpu(), "weight: contiguous (out, in) on CPU");
  TORCH_CHECK(x.dim() == 2 && x.size(1) == w.size(1) && x.is_contiguous() && x.scalar_type() == at::kFloat,
              "x: contiguous float32 (rows, in)");
  TORCH_CHECK(!bias.has_value() || (bias->is_contiguous() && bias->numel() == w.size(0) &&
                                    bias->scalar_type() == at::kFloat), "bias: float32 (out,)");
  TORCH_CHECK(!residual.has_value() || (residual->is_contiguous() && residual->numel() == x.size(0) * w.size(0) &&
                                        residual->scalar_type() == at::kFloat), "residual: float32 (rows, out)");
}

// The group size of int8 scales (rows, groups) over (rows, K) weights.
int64_t group_size(const at::Tensor& q, const at::Tensor& scale) {
  TORCH_CHECK(q.scalar_type() == at::kChar, "weight: int8");
  TORCH_CHECK(scale.scalar_type() == at::kBFloat16 && scale.is_contiguous() && scale.dim() == 2 &&
              scale.size(0) == q.size(0) && scale.size(1) > 0 && q.size(1) % scale.size(1) == 0,
              "scale: bfloat16 (out, groups) with groups dividing in");
  return q.size(1) / scale.size(1);
}

// 1 / rms(x) of one row of K floats (the squares summed in float32 vectors, the rest in double).
inline double rms_gain(const float* row, int64_t K, double rms_eps) {
  Vec a = vzero();
  int64_t k = 0;
  for (; k + kLanes <= K; k += kLanes) a = vfma(vload(row + k), vload(row + k), a);
  float squares = vsum(a);
  for (; k < K; ++k) squares += row[k] * row[k];
  return 1.0 / std::sqrt(static_cast<double>(squares) / K + rms_eps);
}

// Per row of x: alpha, times 1 / rms(x[t]) when rms_eps >= 0 (an RMSNorm in the same call: one pass over
// x; its weight is folded into the matrix, or multiplies x first, see `weighted`).
std::vector<float> row_alphas(const float* x, int64_t T, int64_t K, double alpha, double rms_eps) {
  std::vector<float> out(T, static_cast<float>(alpha));
  if (rms_eps < 0) return out;
  for (int64_t t = 0; t < T; ++t) out[t] = static_cast<float>(alpha * rms_gain(x + t * K, K, rms_eps));
  return out;
}

// x times an RMSNorm's weight per column, when the weight is not folded into the matrix (int8 matrices
// are quantised from the model's own weights); else x itself.
at::Tensor weighted(const at::Tensor& x, const std::optional<at::Tensor>& norm_weight) {
  if (!norm_weight.has_value()) return x;
  const int64_t T = x.size(0), K = x.size(1);
  TORCH_CHECK(norm_weight->is_contiguous() && norm_weight->numel() == K && norm_weight->scalar_type() == at::kFloat,
              "norm_weight: float32 (in,)");
  at::Tensor out = at::empty_like(x);
  const float* xp = x.data_ptr<float>();
  const float* gp = norm_weight->data_ptr<float>();
  float* op = out.data_ptr<float>();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t k = 0; k < K; ++k) op[t * K + k] = xp[t * K + k] * gp[k];
  }
  return out;
}

// y[t, r] = alphas[t] * dot(r, x[t]) + bias[r] + residual[t, r], rows split over the threads.
template <typename Dot>
at::Tensor rows(int64_t N, const at::Tensor& x, const std::vector<float>& alphas,
                const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& residual, Dot dot) {
  const int64_t T = x.size(0);
  at::Tensor y = at::empty({T, N}, x.options());
  const float* bp = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  const float* rp = residual.has_value() ? residual->data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, N, kRowsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      dot(r, [&](int64_t t, float product) {
        float v = product * alphas[t];
        if (bp) v += bp[r];
        if (rp) v += rp[t * N + r];
        yp[t * N + r] = v;
      });
    }
  });
  return y;
}

constexpr int64_t kBlock = 64;  // rows whose products one call of `fill` writes to a stack buffer

// One row x: y[r] = alpha * dot(r, x) + bias[r] + residual[r], rows split over the threads.
// fill(r, n, out) writes the products of rows r..r+n-1 (n <= kBlock) to out.
template <typename Fill>
at::Tensor rows_one(int64_t N, const at::Tensor& x, float alpha, const std::optional<at::Tensor>& bias,
                    const std::optional<at::Tensor>& residual, Fill fill) {
  at::Tensor y = at::empty({1, N}, x.options());
  const float* bp = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  const float* rp = residual.has_value() ? residual->data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, N, kRowsPerTask, [&](int64_t begin, int64_t end) {
    float products[kBlock];
    for (int64_t b = begin; b < end; b += kBlock) {
      const int64_t n = std::min(kBlock, end - b);
      fill(b, n, products);
      for (int64_t i = 0; i < n; ++i) {
        float v = products[i] * alpha;
        if (bp) v += bp[b + i];
        if (rp) v += rp[b + i];
        yp[b + i] = v;
      }
    }
  });
  return y;
}

// A gated MLP's input product for one row x: rows [0, F) of the matrix are the gate, [F, 2F) the up
// projection, and y[r] = silu(gate_r) * up_r, so the (1, 2F) product never goes back to memory. Each
// thread reads a block of gate rows, then the same block of up rows: two sequential streams.
template <typename Fill>
at::Tensor rows_glu(int64_t N, const at::Tensor& x, float alpha, const std::optional<at::Tensor>& bias, Fill fill) {
  TORCH_CHECK(x.size(0) == 1 && N % 2 == 0, "glu: one row of x, an even number of rows (gate, then up)");
  const int64_t F = N / 2;
  at::Tensor y = at::empty({1, F}, x.options());
  const float* bp = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, F, kRowsPerTask, [&](int64_t begin, int64_t end) {
    float gate[kBlock], up[kBlock];
    for (int64_t b = begin; b < end; b += kBlock) {
      const int64_t n = std::min(kBlock, end - b);
      fill(b, n, gate);
      fill(F + b, n, up);
      for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i] * alpha + (bp ? bp[b + i] : 0.0f);
        const float u = up[i] * alpha + (bp ? bp[F + b + i] : 0.0f);
        yp[b + i] = g / (1.0f + std::exp(-g)) * u;
      }
    }
  });
  return y;
}

at::Tensor gemv_f32(const at::Tensor& w, const at::Tensor& x, double alpha, const std::optional<at::Tensor>& bias,
                    const std::optional<at::Tensor>& residual, double rms_eps, bool glu,
                    const std::optional<at::Tensor>& norm_weight) {
  check(w, x, bias, residual);
  TORCH_CHECK(w.scalar_type() == at::kFloat && x.size(0) == 1, "weight: float32; x: one row");
  TORCH_CHECK(!glu || !residual.has_value(), "glu: no residual");
  const float* wp = w.data_ptr<float>();
  const int64_t K = w.size(1);
  const std::vector<float> alphas = row_alphas(x.data_ptr<float>(), 1, K, alpha, rms_eps);
  const at::Tensor h = weighted(x, norm_weight);
  std::vector<float> x_copy;
  const float* xp = staggered(h.data_ptr<float>(), K, x_copy);
  const FillF32 in_shape = f32_in_shape();
  auto fill = [=](int64_t r, int64_t n, float* out) { in_shape(wp + r * K, xp, K, n, out); };
  if (glu) return rows_glu(w.size(0), x, alphas[0], bias, fill);
  return rows_one(w.size(0), x, alphas[0], bias, residual, fill);
}

// One row of x streams the int8 matrix and widens it in registers. Several rows (a short prefill)
// dequantise each weight row once into a buffer that stays in L1 and take every x row's product with it.
at::Tensor gemv_int8(const at::Tensor& q, const at::Tensor& scale, const at::Tensor& x, double alpha,
                     const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& residual,
                     double rms_eps, bool glu, const std::optional<at::Tensor>& norm_weight) {
  check(q, x, bias, residual);
  const int64_t G = group_size(q, scale), K = q.size(1), T = x.size(0), S = scale.size(1);
  TORCH_CHECK(!glu || (T == 1 && !residual.has_value()), "glu: one row of x, no residual");
  const int8_t* qp = q.data_ptr<int8_t>();
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scale.data_ptr());
  const std::vector<float> alphas = row_alphas(x.data_ptr<float>(), T, K, alpha, rms_eps);
  const at::Tensor h = weighted(x, norm_weight);
  const float* xp = h.data_ptr<float>();  // not staggered: measured 1.03x slower so (kernel layout above)
  const FillInt8 in_shape = int8_in_shape();
  auto fill = [=](int64_t r, int64_t n, float* out) { in_shape(qp + r * K, xp, K, sp + r * S, S, G, n, out); };
  if (glu) return rows_glu(q.size(0), x, alphas[0], bias, fill);
  if (T == 1) return rows_one(q.size(0), x, alphas[0], bias, residual, fill);
  return rows(q.size(0), x, alphas, bias, residual, [=](int64_t r, auto&& put) {
    thread_local std::vector<float> buffer;
    buffer.resize(K);
    dequantize_row(qp + r * K, sp + r * S, K, G, buffer.data());
    int64_t t = 0;
    for (float four[4]; t + 4 <= T; t += 4) {
      dot4_f32(buffer.data(), xp + t * K, K, four);
      for (int i = 0; i < 4; ++i) put(t + i, four[i]);
    }
    for (; t < T; ++t) put(t, dot_f32(buffer.data(), xp + t * K, K));
  });
}

// Decode attention: one query per head over every cached position, no mask. q: (1, H * hd); keys and
// values: (KV, n, hd) views of the cache (rows hd apart, heads any stride apart); the H / KV query heads
// of a group share one KV head. softmax(q k / sqrt(hd)) v per head, in float32.
//
// The positions of each KV head are cut into chunks, so both threads have work even with few KV heads
// and K/V are read once (flash-decoding): a chunk keeps its own max m, sum l of exp(score - m) and
// exp-weighted sum of values; the chunks of a head are merged at the end by rescaling to the largest m.
// Scores are reduced four keys at a time and exp runs on whole vectors. Default model, 30 layers, one
// token (Intel Xeon, 2 threads): 1.5 -> 1.1 ms at 512 positions, 7.8 -> 4.7-5.5 ms at 2048, where K/V
// are 94 MB to read. The query heads of a group go through a chunk together (chunk_heads), the scores' scaling
// and maximum run on vectors, and a chunk's values are prefetched into L2 during its score pass: AVX2 EPYC, one
// layer's attention at 2000 positions from the caches, one thread, 173-199 -> 89-98 us; 30 layers from memory,
// 2 threads, 1.36-1.55x -> 1.30-1.46x a read of the same bytes (benchmarks/bench_attention.py). Same bits.
namespace attention {
constexpr int64_t kMinChunk = 32;  // positions
constexpr int64_t kChunkValueBytes = 128 << 10;  // the most values of one chunk (512 positions of 64 floats)
constexpr int kMostHeads = 3;  // query heads of a group in one pass of chunk_heads (12 AVX2 accumulators)
// The exp-weighted sum of values keeps this many floats of acc in registers over a chunk's positions (8 AVX2
// vectors): loaded and stored once a chunk, not once every four positions (where a store crossing a cache line
// was loaded back four positions later). Default model, one decode forward, A/B in one process, the same bits,
// AVX2 EPYC: 0.978x at 2000 positions; with the fused step's tasks grouped by KV head too, 0.92x at 2000 and
// 0.97x at 512.
constexpr int64_t kSlice = 64;
// Below this many bytes of keys and values the attention of one position runs on the calling thread: a
// parallel region costs more than the read (rope and attention took 28 us a layer at 16-116 positions
// in parallel, 15 us on one thread).
constexpr int64_t kParallelBytes = 256 << 10;

// The floats between two heads' scores in chunk_heads' buffer for chunks of `size` positions: whole vectors.
inline int64_t score_stride(int64_t size) { return (size + kLanes - 1) / kLanes * kLanes; }

// Query heads q[0], q[hd], ..., HG of them (of one KV head), over the same `count` positions: each head's
// (m, l, acc[hd]) into out + h * out_stride. Each vector of keys and values is loaded once for all HG heads,
// and the heads' sums are independent chains of fmas (one head's four score sums wait on the fma latency).
// A head's numbers do not depend on HG: the same operations in the same order. scores: HG * stride floats
// (stride >= count rounded up to whole vectors).
template <int HG>
void chunk_heads(const float* q, const float* k, const float* v, int64_t count, int64_t hd, float scale,
                 float* scores, int64_t stride, float* out, int64_t out_stride) {
  const int64_t whole = hd / kLanes * kLanes;
  int64_t j = 0;
  for (; j + 4 <= count; j += 4) {  // four keys at a time, one reduction for the four, for each head
    const float* k0 = k + j * hd;
    // The same four positions' values asked for into L2 while their keys are scored: the value pass then reads
    // the chunk from L2, its memory time spent under the score pass's compute (a chunk's K and V: < 200 KB).
    const char* v0 = reinterpret_cast<const char*>(v + j * hd);
    for (int64_t b = 0; b < 4 * hd * int64_t(sizeof(float)); b += 64) _mm_prefetch(v0 + b, _MM_HINT_T1);
    Vec a[HG][4];
    for (int h = 0; h < HG; ++h) a[h][0] = a[h][1] = a[h][2] = a[h][3] = vzero();
    for (int64_t d = 0; d < whole; d += kLanes) {
      Vec qd[HG];
      for (int h = 0; h < HG; ++h) qd[h] = vload(q + h * hd + d);
      for (int i = 0; i < 4; ++i) {
        const Vec kd = vload(k0 + i * hd + d);
        for (int h = 0; h < HG; ++h) a[h][i] = vfma(kd, qd[h], a[h][i]);
      }
    }
#pragma GCC unroll 4
    for (int h = 0; h < HG; ++h) vsum4(a[h][0], a[h][1], a[h][2], a[h][3], scores + h * stride + j);
    if (whole < hd) {
      for (int h = 0; h < HG; ++h) {
        for (int64_t i = 0; i < 4; ++i) {
          for (int64_t d = whole; d < hd; ++d) scores[h * stride + j + i] += k0[i * hd + d] * q[h * hd + d];
        }
      }
    }
  }
  for (; j < count; ++j) {
    for (int h = 0; h < HG; ++h) scores[h * stride + j] = dot_f32(k + j * hd, q + h * hd, hd);
  }
  const int64_t padded = score_stride(count);
  for (int h = 0; h < HG; ++h) {
    float* sc = scores + h * stride;
    for (j = count; j < padded; ++j) sc[j] = -INFINITY;  // scale > 0: -inf once scaled too
    Vec most = vset(-INFINITY);
    for (j = 0; j < padded; j += kLanes) {  // each score times scale; their maximum
      const Vec x = vmul(vload(sc + j), vset(scale));
      vstore(sc + j, x);
      most = vmax(x, most);
    }
    const float top = vmax_all(most);
    Vec total = vzero();
    for (j = 0; j < padded; j += kLanes) {
      const Vec e = vexp(vadd(vload(sc + j), vset(-top)));
      vstore(sc + j, e);
      total = vadd(total, e);
    }
    float* o = out + h * out_stride;
    o[0] = top;
    o[1] = vsum(total);
    for (int64_t d = 0; d < hd; ++d) o[2 + d] = 0.0f;
  }
  // The exp-weighted sum of values: per head and element one chain of fmas over the positions, four at a time
  // (in the same order whatever HG and kVecs), kVecs vectors of each head's acc in registers at a time.
  constexpr int64_t kVecs = HG == 1 ? kSlice / kLanes : (kLanes == 8 ? 4 : kSlice / kLanes);
  constexpr int64_t kWidth = kVecs * kLanes;
  const int64_t groups = count / 4 * 4;
  j = 0;
  if (hd % kWidth == 0) {
    for (int64_t d0 = 0; d0 < hd; d0 += kWidth) {
      Vec a[HG][kVecs];
      for (int h = 0; h < HG; ++h) {
        for (int64_t i = 0; i < kVecs; ++i) a[h][i] = vzero();
      }
      for (j = 0; j < groups; j += 4) {
        const float* v0 = v + j * hd + d0;
        for (int h = 0; h < HG; ++h) {
          const float* sc = scores + h * stride + j;
          const Vec p0 = vset(sc[0]), p1 = vset(sc[1]), p2 = vset(sc[2]), p3 = vset(sc[3]);
          for (int64_t i = 0; i < kVecs; ++i) {
            const int64_t d = i * kLanes;
            Vec t = vfma(p0, vload(v0 + d), a[h][i]);
            t = vfma(p1, vload(v0 + hd + d), t);
            t = vfma(p2, vload(v0 + 2 * hd + d), t);
            a[h][i] = vfma(p3, vload(v0 + 3 * hd + d), t);
          }
        }
      }
      for (int h = 0; h < HG; ++h) {
        for (int64_t i = 0; i < kVecs; ++i) vstore(out + h * out_stride + 2 + d0 + i * kLanes, a[h][i]);
      }
    }
    j = groups;
  }
  for (; j + 4 <= count; j += 4) {  // four positions per pass over acc (in memory: hd not a whole slice)
    const float* v0 = v + j * hd;
    for (int h = 0; h < HG; ++h) {
      const float* sc = scores + h * stride + j;
      float* acc = out + h * out_stride + 2;
      const Vec p0 = vset(sc[0]), p1 = vset(sc[1]), p2 = vset(sc[2]), p3 = vset(sc[3]);
      int64_t d = 0;
      for (; d + kLanes <= hd; d += kLanes) {
        Vec a = vfma(p0, vload(v0 + d), vload(acc + d));
        a = vfma(p1, vload(v0 + hd + d), a);
        a = vfma(p2, vload(v0 + 2 * hd + d), a);
        vstore(acc + d, vfma(p3, vload(v0 + 3 * hd + d), a));
      }
      for (; d < hd; ++d) {
        acc[d] += sc[0] * v0[d] + sc[1] * v0[hd + d] + sc[2] * v0[2 * hd + d] + sc[3] * v0[3 * hd + d];
      }
    }
  }
  for (; j < count; ++j) {
    for (int h = 0; h < HG; ++h) {
      float* acc = out + h * out_stride + 2;
      const float p = scores[h * stride + j];
      for (int64_t d = 0; d < hd; ++d) acc[d] += p * v[j * hd + d];
    }
  }
}

// Heads [h0, h1) of q over one chunk (the query heads of one KV head): kMostHeads at a time through chunk_heads.
// Their (m, l, acc) go to partial + (h * chunks + c) * (hd + 2); scores: kMostHeads * stride floats.
inline void chunk_group(const float* q, int64_t h0, int64_t h1, const float* k, const float* v, int64_t count,
                        int64_t hd, float scale, float* scores, int64_t stride, float* partial, int64_t chunks,
                        int64_t c) {
  const int64_t os = chunks * (hd + 2);
  for (int64_t h = h0; h < h1;) {
    float* o = partial + (h * chunks + c) * (hd + 2);
    const int64_t left = h1 - h;
    if (left >= kMostHeads) {
      chunk_heads<kMostHeads>(q + h * hd, k, v, count, hd, scale, scores, stride, o, os);
      h += kMostHeads;
    } else if (left == 2) {
      chunk_heads<2>(q + h * hd, k, v, count, hd, scale, scores, stride, o, os);
      h += 2;
    } else {
      chunk_heads<1>(q + h * hd, k, v, count, hd, scale, scores, stride, o, os);
      h += 1;
    }
  }
}

// Chunks per KV head for n positions (about eight tasks per thread, none shorter than kMinChunk positions)
// and the positions per chunk.
std::pair<int64_t, int64_t> chunking(int64_t n, int64_t KV, int64_t hd) {
  const int64_t wanted = (8 * at::get_num_threads() + KV - 1) / KV;
  // and chunks short enough that their values, asked for into L2 during the score pass, are still there for
  // the value pass (long contexts: more chunks, not longer ones)
  const int64_t longest = std::max<int64_t>(kMinChunk, kChunkValueBytes / (hd * int64_t(sizeof(float))));
  const int64_t chunks = std::max<int64_t>({1, std::min(wanted, n / kMinChunk), (n + longest - 1) / longest});
  return {chunks, (n + chunks - 1) / chunks};
}

// The chunks of each of H heads merged (each rescaled to the largest m): out (H * hd). partial: per (head,
// chunk) m, l, acc[hd], as `chunk` leaves them.
void merge(const float* partial, int64_t H, int64_t hd, int64_t n, int64_t chunks, int64_t size, float* out) {
  std::fill_n(out, H * hd, 0.0f);
  for (int64_t h = 0; h < H; ++h) {
    const float* first = partial + h * chunks * (hd + 2);
    float top = -INFINITY;
    for (int64_t c = 0; c * size < n; ++c) top = std::max(top, first[c * (hd + 2)]);
    float total = 0.0f;
    float* oh = out + h * hd;
    for (int64_t c = 0; c * size < n; ++c) {
      const float* part = first + c * (hd + 2);
      const float w = std::exp(part[0] - top);
      total += w * part[1];
      for (int64_t d = 0; d < hd; ++d) oh[d] += w * part[2 + d];
    }
    const float inv = 1.0f / total;
    for (int64_t d = 0; d < hd; ++d) oh[d] *= inv;
  }
}
}  // namespace attention

at::Tensor attend_one(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values, double scale) {
  TORCH_CHECK(keys.dim() == 3 && values.sizes() == keys.sizes() && keys.scalar_type() == at::kFloat &&
              values.scalar_type() == at::kFloat && keys.stride(2) == 1 && values.stride(2) == 1 &&
              keys.stride(1) == keys.size(2) && values.stride(1) == values.size(2),
              "keys, values: float32 (kv_heads, n, head_dim) with contiguous rows");
  const int64_t KV = keys.size(0), n = keys.size(1), hd = keys.size(2);
  TORCH_CHECK(q.is_contiguous() && q.scalar_type() == at::kFloat && q.numel() % (KV * hd) == 0 && n > 0,
              "q: contiguous float32 (1, heads * head_dim), heads a multiple of kv_heads");
  const int64_t H = q.numel() / hd, group = H / KV;
  const auto [chunks, size] = attention::chunking(n, KV, hd);
  std::vector<float> partial(H * chunks * (hd + 2));  // per (head, chunk): m, l, acc[hd]
  const float* qp = q.data_ptr<float>();
  const float* kp = keys.data_ptr<float>();
  const float* vp = values.data_ptr<float>();
  const int64_t ks = keys.stride(0), vs = values.stride(0);
  const float s = static_cast<float>(scale);
  const int64_t grain = 2 * n * KV * hd * int64_t(sizeof(float)) < attention::kParallelBytes ? KV * chunks : 1;
  at::parallel_for(0, KV * chunks, grain, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores;
    const int64_t stride = attention::score_stride(size);
    scores.resize(attention::kMostHeads * stride);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t g = task / chunks, c = task % chunks;
      const int64_t first = c * size, count = std::min(size, n - first);
      if (count <= 0) continue;
      attention::chunk_group(qp, g * group, (g + 1) * group, kp + g * ks + first * hd, vp + g * vs + first * hd,
                             count, hd, s, scores.data(), stride, partial.data(), chunks, c);
    }
  });
  at::Tensor out = at::empty({1, H * hd}, q.options());  // not at::zeros: a fill kernel's dispatch, per layer
  attention::merge(partial.data(), H, hd, n, chunks, size, out.data_ptr<float>());
  return out;
}

// The float32 matrix q * scale, for products of many rows (a long prefill), which go to BLAS.
at::Tensor dequantize_int8(const at::Tensor& q, const at::Tensor& scale) {
  TORCH_CHECK(q.dim() == 2 && q.is_contiguous() && q.device().is_cpu(), "weight: contiguous (out, in) on CPU");
  const int64_t G = group_size(q, scale), N = q.size(0), K = q.size(1), S = scale.size(1);
  at::Tensor w = at::empty({N, K}, q.options().dtype(at::kFloat));
  const int8_t* qp = q.data_ptr<int8_t>();
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scale.data_ptr());
  float* wp = w.data_ptr<float>();
  at::parallel_for(0, N, kRowsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) dequantize_row(qp + r * K, sp + r * S, K, G, wp + r * K);
  });
  return w;
}

#include "kernels_int16.cpp"    // the int16 int8 path: gemv_int8_int16
#include "kernels_int4.cpp"     // the int4 head of the int8 mode: gemv_int4
#include "kernels_integer.cpp"  // the integer int8 path (AVX-512 VNNI, or AVX2): int8_product, gemv_int8_integer

// An int8 head for one row x (quant.RescoredHead on the kernels): logits = W_int8 rmsnorm(x), then the
// `rescored` highest logits (ties: the lower id) computed again from the float rows. In Python the same
// steps were six ops (norm, product, topk, gather, bmm, scatter), ~430 us beside the product right after
// a decode step, when their code is out of the caches; here one pass picks the top and `rescored` dot products
// (split between the threads) redo them. h = x / rms(x) * weight in one loop (the squares summed in double):
// within float rounding of F.rms_norm. q: int8 (the products on `int8_path`), or a 4-bit head (kernels_int4.cpp).
at::Tensor head_rescored(const at::Tensor& q, const at::Tensor& scale, const at::Tensor& x,
                         const at::Tensor& norm_weight, double eps, const at::Tensor& float_rows, int64_t rescored,
                         int64_t int8_path) {
  TORCH_CHECK(x.dim() == 2 && x.size(0) == 1 && x.scalar_type() == at::kFloat, "x: one float32 row");
  const int64_t V = q.size(0), C = x.size(1), K = std::min<int64_t>(std::max<int64_t>(rescored, 0), V);
  TORCH_CHECK(float_rows.dim() == 2 && float_rows.size(0) == V && float_rows.size(1) == C &&
                  float_rows.scalar_type() == at::kFloat && float_rows.is_contiguous(),
              "float_rows: contiguous float32 (vocabulary, hidden), as the int8 head");
  TORCH_CHECK(norm_weight.is_contiguous() && norm_weight.numel() == C && norm_weight.scalar_type() == at::kFloat,
              "norm_weight: float32 (hidden,)");
  const at::Tensor xc = x.contiguous();
  at::Tensor h = at::empty_like(xc);  // x / rms(x) * weight (at::rms_norm is six ATen ops: 130 us cold)
  {
    const float* xp = xc.data_ptr<float>();
    const float* gp = norm_weight.data_ptr<float>();
    float* hp = h.data_ptr<float>();
    double squares = 0.0;
    for (int64_t i = 0; i < C; ++i) squares += double(xp[i]) * xp[i];
    const float inv_rms = float(1.0 / std::sqrt(squares / double(C) + eps));
    for (int64_t i = 0; i < C; ++i) hp[i] = xp[i] * inv_rms * gp[i];
  }
  at::Tensor logits =
      q.scalar_type() == at::kByte  // a 4-bit head (kernels_int4.cpp), else int8
          ? gemv_int4(q, scale, h, 1.0)
          : int8_product(int8_path, q, scale, h, 1.0, std::nullopt, std::nullopt, -1.0, false, std::nullopt);
  float* lp = logits.data_ptr<float>();
  // The K best (value, -id) pairs in a min-heap. Once it is full, eight logits at a time are compared with the
  // worst kept, and only those above it (few, past the first thousands) are offered one by one, in order.
  std::vector<std::pair<float, int64_t>> best;
  best.reserve(K + 1);
  auto worse = [](const std::pair<float, int64_t>& a, const std::pair<float, int64_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);  // heap top: the worst kept
  };
  auto offer = [&](int64_t i) {
    const float v = lp[i];
    if (v > best.front().first) {  // ties with the worst kept: the lower id (kept) stays
      std::pop_heap(best.begin(), best.end(), worse);
      best.back() = {v, i};
      std::push_heap(best.begin(), best.end(), worse);
    }
  };
  int64_t i = 0;
  for (; i < V && static_cast<int64_t>(best.size()) < K; ++i) {
    best.emplace_back(lp[i], i);
    std::push_heap(best.begin(), best.end(), worse);
  }
  if (K > 0) {
    for (; i + 8 <= V; i += 8) {
      int above = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(lp + i), _mm256_set1_ps(best.front().first),
                                                   _CMP_GT_OQ));
      for (; above != 0; above &= above - 1) offer(i + __builtin_ctz(above));
    }
    for (; i < V; ++i) offer(i);
  }
  const float* rows = float_rows.data_ptr<float>();
  const float* hp = h.data_ptr<float>();
  // The rows are far apart and out of the caches: each thread asks for its next rows while it takes one.
  constexpr int64_t kAhead = 2;  // rows
  auto ask = [&](int64_t j) {
    const char* row = reinterpret_cast<const char*>(rows + best[j].second * C);
    for (int64_t b = 0; b < C * int64_t(sizeof(float)); b += 64) _mm_prefetch(row + b, _MM_HINT_T0);
  };
  at::parallel_for(0, static_cast<int64_t>(best.size()), 32, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < std::min(end, begin + kAhead); ++j) ask(j);
    for (int64_t j = begin; j < end; ++j) {
      if (j + kAhead < end) ask(j + kAhead);
      lp[best[j].second] = dot_f32(rows + best[j].second * C, hp, C);
    }
  });
  return logits;
}

// y = W (x, or rmsnorm(x) when rms_eps >= 0) + bias + residual: the float32 or the int8 product (int8 on
// `int8_path`: 0 float activations, else the integer path with that many activations per scale, kernels_integer.cpp).
at::Tensor product(const at::Tensor& w, const std::optional<at::Tensor>& scale, const at::Tensor& x,
                   const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& residual,
                   double rms_eps, bool glu, const std::optional<at::Tensor>& norm_weight, int64_t int8_path) {
  if (scale.has_value()) return int8_product(int8_path, w, *scale, x, 1.0, bias, residual, rms_eps, glu, norm_weight);
  return gemv_f32(w, x, 1.0, bias, residual, rms_eps, glu, norm_weight);
}

// One Q or K head (hd floats) in place: its RMSNorm over the head when g (Qwen3's q/k norms: x / rms(x) * g,
// the squares summed in double), then rotary: (even, odd) pairs times cos + i sin of `rope` (hd / 2 pairs).
inline void rotate_head(float* pair, const float* rope, int64_t hd, const float* g, double eps) {
  if (g != nullptr) {
    double squares = 0.0;
    for (int64_t i = 0; i < hd; ++i) squares += double(pair[i]) * pair[i];
    const float inv_rms = float(1.0 / std::sqrt(squares / double(hd) + eps));
    for (int64_t i = 0; i < hd; ++i) pair[i] = pair[i] * inv_rms * g[i];
  }
  for (int64_t i = 0; i < hd / 2; ++i) {
    const float a = pair[2 * i], b = pair[2 * i + 1], c = rope[2 * i], s = rope[2 * i + 1];
    pair[2 * i] = a * c - b * s;
    pair[2 * i + 1] = a * s + b * c;
  }
}

// One decoder layer for one new position, in one call: the per-op Python and dispatch time of the same
// steps (about 2.8 ms of a 21 ms float32 step of the default model) was time the memory bus sat idle.
//   qkv = W_qkv rmsnorm(x); rotate Q and K heads; K, V -> the cache at `position`;
//   x += W_o attention(q, cache);  x += W_down (silu(gate) * up)(rmsnorm(x)).
// mats: qkv, o, gate+up, down (float32, or int8 with scales); norms: attention's, MLP's (None when
// folded into the matrix), and optionally Qwen3's q and k norms (head_dim weights, eps attn_eps: an RMSNorm
// over each Q and K head before rotary); kv: this layer's cache (2, kv_heads, capacity, head_dim); rope:
// (head_dim / 2, 2) cos and sin of this position; window: attend to the last `window` positions (0: all);
// int8_path: how int8 products run (0: float activations; else integer: activations per scale, <0 per row).
at::Tensor decode_layer(const at::Tensor& x, at::TensorList mats, const c10::List<std::optional<at::Tensor>>& scales,
                        const c10::List<std::optional<at::Tensor>>& biases,
                        const c10::List<std::optional<at::Tensor>>& norms, const at::Tensor& kv, int64_t position,
                        const at::Tensor& rope, int64_t heads, double attn_eps, double mlp_eps, int64_t window,
                        int64_t int8_path) {
  TORCH_CHECK(mats.size() == 4 && scales.size() == 4 && biases.size() == 4 && (norms.size() == 2 || norms.size() == 4),
              "four matrices (qkv, o, gate+up, down) with their scales and biases, two norms (or four: q/k norms)");
  TORCH_CHECK(kv.dim() == 4 && kv.size(0) == 2 && kv.scalar_type() == at::kFloat && kv.stride(3) == 1 &&
              kv.stride(2) == kv.size(3) && position >= 0 && position < kv.size(2),
              "kv: float32 (2, kv_heads, capacity, head_dim) with room at `position`");
  const int64_t KV = kv.size(1), hd = kv.size(3), q_dim = heads * hd, kv_dim = KV * hd;
  TORCH_CHECK(hd % 2 == 0 && rope.is_contiguous() && rope.scalar_type() == at::kFloat && rope.numel() == hd,
              "rope: float32 (head_dim / 2, 2)");
  at::Tensor qkv = product(mats[0], scales[0], x, biases[0], std::nullopt, attn_eps, false, norms[0], int8_path);
  TORCH_CHECK(qkv.size(1) == q_dim + 2 * kv_dim, "qkv: heads * head_dim + 2 kv_heads * head_dim rows");
  float* p = qkv.data_ptr<float>();
  const float* r = rope.data_ptr<float>();
  const float* head_norm[2] = {nullptr, nullptr};  // q, k: RMSNorm weights over one head, or none
  for (int64_t i = 0; norms.size() == 4 && i < 2; ++i) {
    const std::optional<at::Tensor> w = norms.get(2 + i);
    TORCH_CHECK(w.has_value() && w->is_contiguous() && w->scalar_type() == at::kFloat && w->numel() == hd,
                "q/k norms: float32 (head_dim,)");
    head_norm[i] = w->data_ptr<float>();
  }
  for (int64_t h = 0; h < heads + KV; ++h) rotate_head(p + h * hd, r, hd, head_norm[h < heads ? 0 : 1], attn_eps);
  float* cache = kv.data_ptr<float>();
  for (int64_t part = 0; part < 2; ++part) {
    for (int64_t g = 0; g < KV; ++g) {
      float* slot = cache + part * kv.stride(0) + g * kv.stride(1) + position * hd;
      std::copy(p + q_dim + part * kv_dim + g * hd, p + q_dim + part * kv_dim + (g + 1) * hd, slot);
    }
  }
  const int64_t n = position + 1, first = (window > 0 && n > window) ? n - window : 0;
  const at::Tensor keys = kv[0].narrow(1, first, n - first), values = kv[1].narrow(1, first, n - first);
  const at::Tensor attended = attend_one(qkv.narrow(1, 0, q_dim), keys, values, 1.0 / std::sqrt(double(hd)));
  const at::Tensor mid = product(mats[1], scales[1], attended, biases[1], x, -1.0, false, std::nullopt, int8_path);
  const at::Tensor gated = product(mats[2], scales[2], mid, biases[2], std::nullopt, mlp_eps, true, norms[1], int8_path);
  return product(mats[3], scales[3], gated, biases[3], mid, -1.0, false, std::nullopt, int8_path);
}

#include "kernels_step.cpp"  // decode_layers: every layer of a decode step in one parallel region

#include "kernels_vocab.cpp"  // vocab_stats: one step's softmax, entropy, top n and argmax in one call

}  // namespace

TORCH_LIBRARY(tokenstep, m) {
  m.def("gemv_f32(Tensor w, Tensor x, float alpha, Tensor? bias, Tensor? residual, float rms_eps=-1, "
        "bool glu=False, Tensor? norm_weight=None) -> Tensor");
  m.def("gemv_int8(Tensor q, Tensor scale, Tensor x, float alpha, Tensor? bias, Tensor? residual, "
        "float rms_eps=-1, bool glu=False, Tensor? norm_weight=None) -> Tensor");
  m.def("attend_one(Tensor q, Tensor keys, Tensor values, float scale) -> Tensor");
  m.def("dequantize_int8(Tensor q, Tensor scale) -> Tensor");
  m.def("decode_layer(Tensor x, Tensor[] mats, Tensor?[] scales, Tensor?[] biases, Tensor?[] norms, Tensor kv, "
        "int position, Tensor rope, int heads, float attn_eps, float mlp_eps, int window, int int8_path=0) -> Tensor");
  m.def("decode_layers(Tensor x, Tensor[] mats, Tensor?[] scales, Tensor?[] biases, Tensor?[] norms, Tensor[] kv, "
        "int position, Tensor rope, int heads, float attn_eps, float mlp_eps, int window, int int8_path=0) -> Tensor");
  m.def("set_shape(int f32_rows, int f32_prefetch, int int8_rows, int int8_prefetch) -> int[]", set_shape);
  m.def("get_shape() -> int[]", get_shape);
  m.def("head_rescored(Tensor q, Tensor scale, Tensor x, Tensor norm_weight, float eps, Tensor float_rows, "
        "int rescored, int int8_path=0) -> Tensor");
  m.def("set_x_offset(int bytes) -> int", set_x_offset);
  m.def("products_region(Tensor[] mats, Tensor?[] scales, Tensor[] xs, int int8_path=0) -> Tensor[]");
  m.def("vocab_stats(Tensor logits, int top_n, bool greedy) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("exp_nonpositive(Tensor t) -> Tensor");
}

TORCH_LIBRARY_IMPL(tokenstep, CPU, m) {
  m.impl("gemv_f32", gemv_f32);
  m.impl("gemv_int8", gemv_int8);
  m.impl("dequantize_int8", dequantize_int8);
  m.impl("attend_one", attend_one);
  m.impl("decode_layer", decode_layer);
  m.impl("decode_layers", decode_layers);
  m.impl("products_region", products_region);
  m.impl("head_rescored", head_rescored);
  m.impl("vocab_stats", vocab_stats);
  m.impl("exp_nonpositive", exp_nonpositive_op);
}

// Int8 one-row products on float32 activations (int8_path 0, every build): each weight widened to float32 in
// registers, one bfloat16 scale per group of weights in a row (gemv_int8); several rows of x (a short prefill)
// dequantise each weight row once into L1; a whole matrix dequantised for BLAS (dequantize_int8).

#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <cstdint>
#include <optional>
#include <vector>

#include "simd.h"
#include "shape.h"
#include "products.h"
#include "f32.h"

namespace {  // included by ops.cpp only, the one translation unit: internal linkage

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

using FillInt8 = void (*)(const int8_t*, const float*, int64_t, const uint16_t*, int64_t, int64_t, int64_t, float*);

FillInt8 int8_in_shape() {
  static const FillInt8 table[kRowShapes][kPrefetchShapes] = TOKENSTEP_EACH_SHAPE(fill_int8);
  return table[g_shape.int8_rows.load(std::memory_order_relaxed)][g_shape.int8_prefetch.load(std::memory_order_relaxed)];
}

// Rows of x per pass of fill_many_int8 over a weight row: 4 * B accumulators plus the row's four widened vectors.
constexpr int64_t kInt8Block = kLanes == 16 ? 4 : 2;

// One weight row (q, its scales sp; G a multiple of kStep) times B rows of x (K apart): out[b], each formed as
// dot_rows_int8_even forms one row's (per group four products, then sums, then one fma by the scale; the four
// sums added at the end), so each row of x gets the bits it gets alone; each weight widened once for the B rows.
template <int64_t B>
inline void int8_block(const int8_t* q, const uint16_t* sp, const float* x, int64_t K, int64_t G, float* out) {
  Vec t[B][4];
  for (int64_t b = 0; b < B; ++b) t[b][0] = t[b][1] = t[b][2] = t[b][3] = vzero();
  for (int64_t g0 = 0, g = 0; g0 < K; g0 += G, ++g) {
    Vec a[B][4];
    for (int64_t k = g0; k < g0 + G; k += kStep) {
      const Vec w0 = vwiden(q + k), w1 = vwiden(q + k + kLanes), w2 = vwiden(q + k + 2 * kLanes),
                w3 = vwiden(q + k + 3 * kLanes);
      for (int64_t b = 0; b < B; ++b) {
        const float* xb = x + b * K + k;
        if (k == g0) {
          a[b][0] = vmul(w0, vload(xb)), a[b][1] = vmul(w1, vload(xb + kLanes));
          a[b][2] = vmul(w2, vload(xb + 2 * kLanes)), a[b][3] = vmul(w3, vload(xb + 3 * kLanes));
        } else {
          a[b][0] = vfma(w0, vload(xb), a[b][0]), a[b][1] = vfma(w1, vload(xb + kLanes), a[b][1]);
          a[b][2] = vfma(w2, vload(xb + 2 * kLanes), a[b][2]), a[b][3] = vfma(w3, vload(xb + 3 * kLanes), a[b][3]);
        }
      }
    }
    const Vec sv = vset(bf16_to_float(sp[g]));
    for (int64_t b = 0; b < B; ++b) {
      for (int j = 0; j < 4; ++j) t[b][j] = vfma(a[b][j], sv, t[b][j]);
    }
  }
  for (int64_t b = 0; b < B; ++b) out[b] = vsum(vadd(vadd(t[b][0], t[b][1]), vadd(t[b][2], t[b][3])));
}

// The products of weight rows q[0..n) (K apart, their S scales S apart, groups of G a multiple of kStep) with the T
// rows of x (K apart): products[i * T + t], the bits fill_int8 gives row t alone (int8_block).
inline void fill_many_int8(const int8_t* q, const uint16_t* sp, int64_t K, int64_t S, int64_t G, const float* x,
                           int64_t T, int64_t n, float* products) {
  for (int64_t i = 0; i < n; ++i) {
    const int8_t* row = q + i * K;
    const uint16_t* scales = sp + i * S;
    float* out = products + i * T;
    int64_t t = 0;
    for (; t + kInt8Block <= T; t += kInt8Block) int8_block<kInt8Block>(row, scales, x + t * K, K, G, out + t);
    switch (T - t) {
      case 0: break;
      case 1: int8_block<1>(row, scales, x + t * K, K, G, out + t); break;
      case 2: int8_block<2>(row, scales, x + t * K, K, G, out + t); break;
      default: int8_block<3>(row, scales, x + t * K, K, G, out + t); break;
    }
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

}  // namespace

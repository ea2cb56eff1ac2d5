// The int16 int8 path (int8_path -16, gemv_int8_int16; it shares products.h's frames and falls back on
// gemv_int8): int8 weights against the activations quantised to
// int16, one scale per weight group, the products summed exactly in int32 by vpmaddwd.
//
// The float path widens each weight to float32 (a sign extension to int32, a convert and an FMA per 8 weights
// with AVX2); here 16 weights take one sign extension to int16 and one vpmaddwd (32 with AVX-512BW), and a
// group one convert and one FMA. From the caches on one AVX2 core (scratch driver, 576-wide rows, groups of 64)
// that is 28 G weights/s against the float path's 14.9, so the products keep up with memory with room to spare.
//
// The math, per weight group g of G weights (quant.quantize_rows):
//   activations: a = 32767 / amax(|x| over the group), xq = round(x * a) in [-32767, 32767] (half to even),
//                x ~= xq * s with s = amax / 32767;
//   y = alpha * sum over groups of (weight scale_g * s_g) * (exact int32 sum of q * xq over the group).
// |q| <= 128 and |xq| <= 32767, so an int32 lane (G / 16 pairs of products with AVX2) holds any G up to 4096
// exactly. The activations' step is 1/65534 of the group's largest, against the weights' 1/254 of theirs: the
// path's numbers are the float path's to about 1e-4 (the quantisation of the activations is the only new
// error, and it is 250x finer than the weights'), unlike the int8-activation path of int8_integer.h, whose
// 1/254 step made the first-step probabilities move with last-bit changes upstream.
//
// Groups that are not a multiple of kWide (16 with AVX2, 32 with AVX-512) or longer than 4096 take the float
// path (`int16_fits`): quantize_rows makes groups of 64, 32 or 16, or one per row when none divides the row.

#pragma once

#include <ATen/ATen.h>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "simd.h"
#include "shape.h"
#include "products.h"
#include "int8.h"

namespace {  // included by ops.cpp only, the one translation unit: internal linkage

constexpr int64_t kInt16Path = -16;  // quant.INT8_PATHS["int16"]: the int8_path code of this path

// Whether weight groups of G run on this path here (else the float path takes them).
inline bool int16_fits(int64_t G) { return G % kWide == 0 && G <= 4096; }

// One row of x quantised per weight group (G a multiple of kWide): xq (K int16) and each group's scale.
struct Int16Row {
  int64_t G = 0, S = 0;
  std::vector<int16_t> xq;
  std::vector<float> scale;
};

// x (K floats) quantised per group of G (a multiple of kLanes): xq = round(x * top / amax) of each group (half to
// even, within [-top, top]), its scale amax / top; an all-zero (or NaN) group gives zeros and scale 0. The
// int16 path's activations (top 32767) and the 4-bit head's (top 127, head.h).
template <typename Q>
void quantize_groups(const float* x, int64_t K, int64_t G, float top, std::vector<Q>& xq, std::vector<float>& scale) {
  xq.resize(K);
  scale.resize(K / G);
  for (int64_t g = 0; g < K / G; ++g) {
    const float* xg = x + g * G;
    Q* qg = xq.data() + g * G;
    const float amax = max_magnitude(xg, G);
    if (!(amax > 0.0f)) {
      std::fill_n(qg, G, Q{0});
      scale[g] = 0.0f;
      continue;
    }
    const Vec a = vset(top / amax);
    for (int64_t k = 0; k < G; k += kLanes) {
      if constexpr (sizeof(Q) == 2) {
        store_int16(qg + k, vmul(vload(xg + k), a));
      } else {
        store_int8(qg + k, vmul(vload(xg + k), a));
      }
    }
    scale[g] = amax / top;
  }
}

void quantize_int16(const float* x, int64_t K, int64_t G, Int16Row& out) {
  out.G = G, out.S = K / G;
  quantize_groups(x, K, G, 32767.0f, out.xq, out.scale);
}

// R consecutive rows (K apart, their S scales S apart) times the quantised x, prefetching P bytes ahead; C
// weights per inner pass (64, one cache line, when G allows, else kWide). Each row's sum is formed as for one
// row alone, so the products are bit-identical for every R and P.
template <int64_t R, int64_t P, int64_t C>
inline void int16_rows(const int8_t* q, const uint16_t* sp, int64_t K, int64_t S, const Int16Row& x, float* out,
                       int64_t step) {
  const int64_t G = x.G, stride = step * K, scales = step * S;  // the R rows lie `step` rows apart, their products too
  const int16_t* xq = x.xq.data();
  Vec t[R];
  for (int64_t r = 0; r < R; ++r) t[r] = vzero();
  for (int64_t g = 0; g < S; ++g) {
    const int64_t g0 = g * G;
    IVec a[R];
    for (int64_t r = 0; r < R; ++r) a[r] = izero();
    for (int64_t k = g0; k < g0 + G; k += C) {
      for (int64_t r = 0; r < R; ++r) prefetch_ahead<P>(q + r * stride + k, C);
      for (int64_t j = 0; j < C; j += kWide) {
        const IVec xv = iload(xq + k + j);
        for (int64_t r = 0; r < R; ++r) a[r] = iadd(a[r], imadd(iwiden(q + r * stride + k + j), xv));
      }
    }
    const float xs = x.scale[g];
    for (int64_t r = 0; r < R; ++r) t[r] = vfma(ifloat(a[r]), vset(bf16_to_float(sp[r * scales + g]) * xs), t[r]);
  }
  for (int64_t r = 0; r < R; ++r) out[r * step] = vsum(t[r]);
}

// The products of rows r..r+n-1 in the int8 shape in force (R rows per pass, prefetch P; kernel_shape.py times
// them on this path when it is the one in use), one instance per candidate shape.
template <int64_t R, int64_t P>
void fill_int16(const int8_t* q, const uint16_t* sp, int64_t K, const Int16Row& x, int64_t r, int64_t n, float* out) {
  const int64_t S = x.S;
  if (x.G % 64 != 0) {
    for (int64_t i = 0; i < n; ++i) int16_rows<1, P, kWide>(q + (r + i) * K, sp + (r + i) * S, K, S, x, out + i, 1);
    return;
  }
  in_passes<R>(
      n, [&](int64_t i, int64_t step) {
        int16_rows<rows_of(R), P, 64>(q + (r + i) * K, sp + (r + i) * S, K, S, x, out + i, step);
      },
      [&](int64_t i) { int16_rows<1, P, 64>(q + (r + i) * K, sp + (r + i) * S, K, S, x, out + i, 1); });
}

using FillInt16 = void (*)(const int8_t*, const uint16_t*, int64_t, const Int16Row&, int64_t, int64_t, float*);

FillInt16 int16_in_shape() {
  static const FillInt16 table[kRowShapes][kPrefetchShapes] = TOKENSTEP_EACH_SHAPE(fill_int16);
  return table[g_shape.int8_rows.load(std::memory_order_relaxed)][g_shape.int8_prefetch.load(std::memory_order_relaxed)];
}

// Rows of x per pass of fill_many_int16 over a weight row: 2 * kIntBlock accumulators (AVX-512: 16 of 32 registers,
// AVX2: 8 of 16). Two weight rows at a time (each x load serving both) made a pass's layers 1.7x slower on an AMD
// EPYC AVX-512 (one row of x: 7.9 against 4.6 ms), so one.
constexpr int64_t kIntBlock = kLanes == 16 ? 8 : 4;

// One weight row (q, its scales sp) times B quantised rows of x: out[b], each sum formed as int16_rows forms one
// row's (per lane the exact int32 sum of a group's products, one fma per group, the lanes summed at the end), so
// each row of x gets the bits it gets alone; each kWide weights widened once for the B rows. DOT(a, w, x): a plus
// the pairs of w * x summed into int32 lanes: vpmaddwd + vpaddd, or VNNI's vpdpwssd (the same exact sums in one
// instruction). ATTR: the function's target.
#define TOKENSTEP_INT16_BLOCK(NAME, ATTR, DOT)                                                                  \
  template <int64_t B>                                                                                          \
  ATTR inline void NAME(const int8_t* q, const uint16_t* sp, const Int16Row* xs, float* out) {                  \
    const int64_t G = xs[0].G, S = xs[0].S;                                                                     \
    Vec acc[B];                                                                                                 \
    for (int64_t b = 0; b < B; ++b) acc[b] = vzero();                                                           \
    for (int64_t g = 0; g < S; ++g) {                                                                           \
      IVec a[B];                                                                                                \
      for (int64_t b = 0; b < B; ++b) a[b] = izero();                                                           \
      for (int64_t k = g * G; k < (g + 1) * G; k += kWide) {                                                    \
        const IVec w = iwiden(q + k);                                                                           \
        for (int64_t b = 0; b < B; ++b) a[b] = DOT(a[b], w, iload(xs[b].xq.data() + k));                         \
      }                                                                                                         \
      const float s = bf16_to_float(sp[g]);                                                                     \
      for (int64_t b = 0; b < B; ++b) acc[b] = vfma(ifloat(a[b]), vset(s * xs[b].scale[g]), acc[b]);             \
    }                                                                                                           \
    for (int64_t b = 0; b < B; ++b) out[b] = vsum(acc[b]);                                                      \
  }

// The products of weight rows q[0..n) (K apart, their scales S apart) with the T rows of x quantised (xs, groups
// that fit this path): products[i * T + t], the bits fill_int16 gives row t alone (BLOCK: a TOKENSTEP_INT16_BLOCK).
#define TOKENSTEP_FILL_MANY_INT16(NAME, ATTR, BLOCK)                                                            \
  ATTR void NAME(const int8_t* q, const uint16_t* sp, int64_t K, const Int16Row* xs, int64_t T, int64_t n,      \
                 float* products) {                                                                             \
    const int64_t S = xs[0].S;                                                                                  \
    for (int64_t i = 0; i < n; ++i) {                                                                           \
      const int8_t* row = q + i * K;                                                                            \
      const uint16_t* scales = sp + i * S;                                                                      \
      float* out = products + i * T;                                                                            \
      int64_t t = 0;                                                                                            \
      for (; t + kIntBlock <= T; t += kIntBlock) BLOCK<kIntBlock>(row, scales, xs + t, out + t);                 \
      switch (T - t) {                                                                                          \
        case 0: break;                                                                                          \
        case 1: BLOCK<1>(row, scales, xs + t, out + t); break;                                                  \
        case 2: BLOCK<2>(row, scales, xs + t, out + t); break;                                                  \
        case 3: BLOCK<3>(row, scales, xs + t, out + t); break;                                                  \
        case 4: BLOCK<4>(row, scales, xs + t, out + t); break;                                                  \
        case 5: BLOCK<5>(row, scales, xs + t, out + t); break;                                                  \
        case 6: BLOCK<6>(row, scales, xs + t, out + t); break;                                                  \
        default: BLOCK<7>(row, scales, xs + t, out + t); break;                                                 \
      }                                                                                                         \
    }                                                                                                           \
  }

inline IVec int16_dot(IVec a, IVec w, IVec x) { return iadd(a, imadd(w, x)); }
TOKENSTEP_INT16_BLOCK(int16_block, , int16_dot)
TOKENSTEP_FILL_MANY_INT16(fill_many_int16_plain, , int16_block)
#if TOKENSTEP_HAS_VNNI_CODE
TOKENSTEP_INT16_BLOCK(int16_block_vnni, TOKENSTEP_VNNI, _mm512_dpwssd_epi32)
TOKENSTEP_FILL_MANY_INT16(fill_many_int16_vnni, TOKENSTEP_VNNI, int16_block_vnni)
#endif
#undef TOKENSTEP_INT16_BLOCK
#undef TOKENSTEP_FILL_MANY_INT16

// fill_many_int16_plain, or its VNNI form where this CPU has VNNI (the same bits).
inline void fill_many_int16(const int8_t* q, const uint16_t* sp, int64_t K, const Int16Row* xs, int64_t T, int64_t n,
                            float* products) {
#if TOKENSTEP_HAS_VNNI_CODE
  if (vnni_available()) return fill_many_int16_vnni(q, sp, K, xs, T, n, products);
#endif
  fill_many_int16_plain(q, sp, K, xs, T, n, products);
}

// 2 to kMostRows rows of x on the int16 path, each row's products the bits of its own one-row call (fill_many_int16,
// the epilogue as gemv_f32_many's): a pass of a few rows through torch (a prompt or a verify pass whose layers are
// captured for the logit lens) then gives what the same rows give in one kernels call (csrc/rows.h) and in steps.
at::Tensor int16_many(const at::Tensor& q, const at::Tensor& scale, const at::Tensor& x, double alpha,
                      const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& residual, double rms_eps,
                      const std::optional<at::Tensor>& norm_weight) {
  const int64_t G = group_size(q, scale), K = q.size(1), N = q.size(0), S = scale.size(1), T = x.size(0);
  const std::vector<float> alphas = row_alphas(x.data_ptr<float>(), T, K, alpha, rms_eps);
  const at::Tensor h = weighted(x, norm_weight);
  std::vector<Int16Row> rows(T);
  for (int64_t t = 0; t < T; ++t) quantize_int16(h.data_ptr<float>() + t * K, K, G, rows[t]);
  const int8_t* qp = q.data_ptr<int8_t>();
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scale.data_ptr());
  at::Tensor y = at::empty({T, N}, x.options());
  const float* bp = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  const float* rp = residual.has_value() ? residual->data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, N, kRowsPerTask, [&](int64_t begin, int64_t end) {
    std::vector<float> products((end - begin) * T);  // (rows, T)
    fill_many_int16(qp + begin * K, sp + begin * S, K, rows.data(), T, end - begin, products.data());
    rows_of_products(products.data(), begin, end - begin, T, N, alphas.data(), bp, rp, yp);
  });
  return y;
}

// The int16 path: the same contract as gemv_int8 (alpha, RMSNorm gain and weight, bias, residual, glu). One row
// of x runs here; several (a short prefill) and groups this path does not fit run on gemv_int8.
at::Tensor gemv_int8_int16(const at::Tensor& q, const at::Tensor& scale, const at::Tensor& x, double alpha,
                           const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& residual,
                           double rms_eps, bool glu, const std::optional<at::Tensor>& norm_weight) {
  check(q, x, bias, residual);
  const int64_t G = group_size(q, scale), K = q.size(1);
  if (x.size(0) > 1 && x.size(0) <= kMostRows && int16_fits(G) && !glu) {
    return int16_many(q, scale, x, alpha, bias, residual, rms_eps, norm_weight);
  }
  if (x.size(0) != 1 || !int16_fits(G)) return gemv_int8(q, scale, x, alpha, bias, residual, rms_eps, glu, norm_weight);
  TORCH_CHECK(!glu || !residual.has_value(), "glu: no residual");
  const std::vector<float> alphas = row_alphas(x.data_ptr<float>(), 1, K, alpha, rms_eps);
  const at::Tensor h = weighted(x, norm_weight);
  thread_local Int16Row quantised;  // its buffers are reused from call to call
  quantize_int16(h.data_ptr<float>(), K, G, quantised);
  const int8_t* qp = q.data_ptr<int8_t>();
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scale.data_ptr());
  const Int16Row* xr = &quantised;
  const FillInt16 in_shape = int16_in_shape();
  auto fill = [=](int64_t r, int64_t n, float* out) { in_shape(qp, sp, K, *xr, r, n, out); };
  if (glu) return rows_glu(q.size(0), x, alphas[0], bias, fill);
  return rows_one(q.size(0), x, alphas[0], bias, residual, fill);
}

// The quantised activations as (xq (K,) int16, scales (groups,) float32), for tests to check the kernel's
// math against a torch reference.
std::tuple<at::Tensor, at::Tensor> quantize_activations_int16(const at::Tensor& x, int64_t group) {
  TORCH_CHECK(x.dim() == 1 && x.is_contiguous() && x.scalar_type() == at::kFloat && group > 0 &&
              x.size(0) % group == 0 && int16_fits(group),
              "x: contiguous float32 (K,), group dividing K, a multiple of ", kWide, " up to 4096");
  Int16Row out;
  quantize_int16(x.data_ptr<float>(), x.size(0), group, out);
  at::Tensor xq = at::from_blob(out.xq.data(), {x.size(0)}, at::kShort).clone();
  at::Tensor scales = at::from_blob(out.scale.data(), {out.S}, at::kFloat).clone();
  return {xq, scales};
}

// The group sizes this path takes here: int16 lanes per load (16 AVX2, 32 AVX-512), the longest group.
std::vector<int64_t> int16_groups() { return {kWide, 4096}; }

}  // namespace

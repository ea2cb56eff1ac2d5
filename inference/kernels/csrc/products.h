// What every one-row product shares, whatever its weights: the argument checks, the RMSNorm gain and weight
// applied to x, and the frames that split a matrix's rows over the threads and write y = alpha * (W x) + bias +
// residual (rows, rows_one) or the gated MLP's silu(gate) * up (rows_glu) from a fill function's products.

#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "simd.h"
#include "shape.h"

namespace {  // included by ops.cpp only, the one translation unit: internal linkage

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

}  // namespace

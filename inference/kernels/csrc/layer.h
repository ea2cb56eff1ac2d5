// One decoder layer for one new position in one call (decode_layer): its products (float32 or int8 on any
// int8 path), rotary and Qwen3's q/k norms (rotate_head, which decode_layers shares), the cache write and
// attention.

#pragma once

#include <ATen/ATen.h>
#include <algorithm>
#include <cmath>
#include <optional>

#include "simd.h"
#include "f32.h"
#include "int8_integer.h"
#include "attention.h"

namespace {  // included by ops.cpp only, the one translation unit: internal linkage

// y = W (x, or rmsnorm(x) when rms_eps >= 0) + bias + residual: the float32 or the int8 product (int8 on
// `int8_path`: 0 float activations, else the integer path with that many activations per scale, int8_integer.h).
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

}  // namespace

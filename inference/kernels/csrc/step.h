// Every layer of a decode step in one parallel region (decode_layers), and a step's products alone in one
// region (products_region, what kernel_shape.py times); they call the row functions of the product headers.
//
// decode_layer runs a layer as ATen-level steps: four products, each its own parallel region (at::parallel_for)
// with its output tensor, row scales, x copy and, for int8, a normed copy of x allocated per call, and the
// views, rotary and attention of short contexts on the calling thread while the other one waits. Those steps
// cost about 20-25 us a layer whatever the layer's size (a 30-layer model of 64-wide layers took 1.16 ms a
// token on int8 on an AVX2 EPYC; 0.58 ms in one region), time in which the weights do not stream.
//
// Here the threads enter one region for the whole step and meet at barriers between the phases of a layer
// (the products' rows: float32 claimed a block at a time, int8 in equal shares, see product_rows):
//   1. the qkv rows, each thread its share (its own rmsnorm gain and normed copy of x: K floats, no wait);
//   2. rotary (and Qwen3's q/k norms) head by head, each thread its share of the heads; K and V to the cache;
//   3. attention: the (head, chunk) tasks of attend_one, split between the threads;
//   4. every thread merges the chunks of all heads into its own copy (hd * heads floats), then its share of
//      the o rows, plus the residual;
//   5. its share of the gate/up rows -> act(gate) * up;  6. its share of the down rows, plus the residual.
// Gemma's layers add to that (the `Layer` fields set only for them): a norm over each branch's output before it
// joins the residual stream (post_attn_norm, post_mlp_norm: the product goes to a scratch row, then after a barrier
// each thread adds its share of the normed row, one more barrier), GeGLU (gelu_tanh(gate) * up, `activation`), a
// window on some layers only (`windows`, one per layer) and their own rotary base (`local_rope`).
// Each row, head and chunk is computed exactly as in decode_layer (the same fill functions, gains, chunking
// and merge), so both give the same bits; only who computes what and when changes.

#pragma once

#include <ATen/ATen.h>
#include <omp.h>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "simd.h"
#include "shape.h"
#include "products.h"
#include "f32.h"
#include "int8.h"
#include "int16.h"
#include "int8_integer.h"
#include "attention.h"
#include "layer.h"

namespace {  // included by ops.cpp only, the one translation unit: internal linkage

namespace step {

// One layer matrix as raw pointers: float32 weights, or int8 with bfloat16 group scales (S per row, G wide).
struct Matrix {
  const float* w = nullptr;
  const int8_t* q = nullptr;
  const uint16_t* scale = nullptr;
  const float* bias = nullptr;
  int64_t N = 0, K = 0, S = 0, G = 0;
  int64_t act = 0;  // the integer path: activations per scale (activation_group), checked before the region
};

struct Layer {
  Matrix qkv, o, glu, down;
  const float* attn_norm = nullptr;  // RMSNorm weights not folded into the next matrix (int8), else null
  const float* mlp_norm = nullptr;
  const float* head_norm[2] = {nullptr, nullptr};  // Qwen3, Gemma 3: q, k (head_dim weights)
  const float* post_norm[2] = {nullptr, nullptr};  // Gemma: RMSNorm weights over attention's, the MLP's output
  float* keys = nullptr;  // the cache: KV heads `head_stride` floats apart, positions hd apart
  float* values = nullptr;
  int64_t head_stride = 0;
};

// Per thread, reused from step to step.
struct Scratch {
  std::vector<float> normed, copy, attended, scores;
  QuantRow quantised;
  Int16Row int16;
};

Matrix matrix_of(const at::Tensor& w, const std::optional<at::Tensor>& scale, const std::optional<at::Tensor>& bias,
                 int64_t K, int64_t N) {
  TORCH_CHECK(w.dim() == 2 && w.is_contiguous() && w.device().is_cpu() && w.size(1) == K && (N < 0 || w.size(0) == N),
              "decode_layers: a matrix of shape (", N, ", ", K, ") expected, got ", w.sizes());
  Matrix m;
  m.N = w.size(0), m.K = K;
  if (scale.has_value()) {
    m.G = group_size(w, *scale), m.S = scale->size(1);
    m.q = w.data_ptr<int8_t>();
    m.scale = reinterpret_cast<const uint16_t*>(scale->data_ptr());
  } else {
    TORCH_CHECK(w.scalar_type() == at::kFloat, "decode_layers: float32 or int8 matrices");
    m.w = w.data_ptr<float>();
  }
  TORCH_CHECK(!bias.has_value() || (bias->is_contiguous() && bias->numel() == m.N && bias->scalar_type() == at::kFloat),
              "decode_layers: bias float32 (out,)");
  m.bias = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  return m;
}

const float* vector_of(const std::optional<at::Tensor>& t, int64_t n, const char* what) {
  if (!t.has_value()) return nullptr;
  TORCH_CHECK(t->is_contiguous() && t->scalar_type() == at::kFloat && t->numel() == n, "decode_layers: ", what,
              " float32 (", n, ",)");
  return t->data_ptr<float>();
}

// [begin, end) of n items for thread `tid` of `nt`: contiguous shares, as at::parallel_for cuts them.
inline std::pair<int64_t, int64_t> share(int64_t n, int tid, int nt) {
  const int64_t size = (n + nt - 1) / nt, begin = std::min(n, tid * size);
  return {begin, std::min(n, begin + size)};
}

// A gated MLP's activation (decode_layers' `activation`): silu (Llama's SwiGLU), gelu with tanh (Gemma's GeGLU),
// gelu with erf, each as torch computes it in float32.
enum Activation : int64_t { kSilu = 0, kGeluTanh = 1, kGelu = 2 };

inline void check_activation(int64_t activation) {
  TORCH_CHECK(activation >= kSilu && activation <= kGelu, "activation: 0 silu, 1 gelu_tanh, 2 gelu");
}

// act(g) * u.
inline float gated(float g, float u, int64_t activation) {
  if (activation == kSilu) return g / (1.0f + std::exp(-g)) * u;
  if (activation == kGeluTanh) {
    constexpr float kBeta = 0.7978845608028654f, kKappa = 0.044715f;  // sqrt(2 / pi)
    return 0.5f * g * (1.0f + std::tanh(kBeta * (g + kKappa * g * g * g))) * u;
  }
  return g * 0.5f * (1.0f + std::erf(g * 0.7071067811865476f)) * u;
}

// The gain row_alphas gives one row (alpha 1): 1 / rms(x) when eps >= 0, else 1.
inline float gain_of(const float* x, int64_t K, double eps) {
  return eps < 0 ? 1.0f : static_cast<float>(1.0 * rms_gain(x, K, eps));
}

// This thread's rows of y = alpha * (M h) + bias + residual (glu: rows of silu(gate) * up, the gate rows
// [0, N/2), the up rows [N/2, N)); fill(r, n, out): the products of rows r..r+n-1 with h.
template <typename Fill>
void rows_into(const Matrix& m, Fill fill, float alpha, bool glu, int64_t activation, const float* residual,
               float* y, std::atomic<int64_t>* claims, int tid, int nt) {
  const float* bp = m.bias;
  const int64_t F = m.N / 2;
  const int64_t rows = glu ? F : m.N;
  float first[kBlock], second[kBlock];
  // float32 rows are claimed kBlock at a time (the first thread free takes the next block), int8 rows in
  // equal shares: measured on an AVX2 EPYC (A/B, 20 and 30 rounds, same bits), claims made float32 steps
  // 0.980x / 0.985x and int8 steps (bound by widening there) 1.049x / 1.034x.
  const bool claimed = m.w != nullptr;
  const auto [begin, end] = share(rows, tid, nt);
  const int64_t last = claimed ? rows : end;
  int64_t b = claimed ? claims->fetch_add(kBlock, std::memory_order_relaxed) : begin;
  auto next = [&] { return claimed ? claims->fetch_add(kBlock, std::memory_order_relaxed) : b + kBlock; };
  for (; b < last; b = next()) {
    const int64_t n = std::min(kBlock, last - b);
    fill(b, n, first);
    if (glu) {
      fill(F + b, n, second);
      for (int64_t i = 0; i < n; ++i) {
        const float g = first[i] * alpha + (bp ? bp[b + i] : 0.0f);
        const float u = second[i] * alpha + (bp ? bp[F + b + i] : 0.0f);
        y[b + i] = gated(g, u, activation);
      }
      continue;
    }
    for (int64_t i = 0; i < n; ++i) {
      float v = first[i] * alpha;
      if (bp) v += bp[b + i];
      if (residual) v += residual[b + i];
      y[b + i] = v;
    }
  }
}

// This thread's rows of y = gain * (M (x * norm)) + bias + residual, formed as gemv_f32 / gemv_int8 /
// gemv_int8_int16 / gemv_int8_integer form them (each fill a lambda of its own: no std::function, no
// allocation per product).
void product_rows(const Matrix& m, const float* x, double eps, const float* norm, int64_t path, bool glu,
                  int64_t activation, const float* residual, float* y, std::atomic<int64_t>* claims, int tid, int nt,
                  Scratch& s) {
  const int64_t K = m.K;
  const float alpha = gain_of(x, K, eps);
  const float* h = x;
  if (norm != nullptr) {
    s.normed.resize(K);
    for (int64_t k = 0; k < K; ++k) s.normed[k] = x[k] * norm[k];
    h = s.normed.data();
  }
  if (m.w != nullptr) {
    const float* xp = staggered(h, K, s.copy);
    const FillF32 in_shape = f32_in_shape();
    auto fill = [&](int64_t r, int64_t n, float* out) { in_shape(m.w + r * K, xp, K, n, out); };
    return rows_into(m, fill, alpha, glu, activation, residual, y, claims, tid, nt);
  }
  if (path == kInt16Path && int16_fits(m.G)) {  // each thread quantises its own copy of x: no wait
    quantize_int16(h, K, m.G, s.int16);
    const FillInt16 in_shape = int16_in_shape();
    auto fill = [&](int64_t r, int64_t n, float* out) { in_shape(m.q, m.scale, K, s.int16, r, n, out); };
    return rows_into(m, fill, alpha, glu, activation, residual, y, claims, tid, nt);
  }
  if (integer_path(path)) {
    quantize_row(h, K, m.G, m.act, s.quantised);
    const FillInteger in_shape = integer_in_shape();
    auto fill = [&](int64_t r, int64_t n, float* out) { in_shape(m.q, m.scale, K, s.quantised, r, n, out); };
    return rows_into(m, fill, alpha, glu, activation, residual, y, claims, tid, nt);
  }
  const FillInt8 in_shape = int8_in_shape();
  auto fill = [&](int64_t r, int64_t n, float* out) {
    in_shape(m.q + r * K, h, K, m.scale + r * m.S, m.S, m.G, n, out);
  };
  rows_into(m, fill, alpha, glu, activation, residual, y, claims, tid, nt);
}

// Phase 2 for this thread's heads of qkv (heads query heads, then KV key heads): the head's RMSNorm (Qwen3),
// rotary; a key head and its value head are written to the cache at `position`.
void rotate_heads(const Layer& layer, float* qkv, const float* rope, int64_t heads, int64_t KV, int64_t hd,
                  double eps, int64_t position, int tid, int nt) {
  const auto [begin, end] = share(heads + KV, tid, nt);
  for (int64_t h = begin; h < end; ++h) {
    float* pair = qkv + h * hd;
    rotate_head(pair, rope, hd, layer.head_norm[h < heads ? 0 : 1], eps);
    if (h >= heads) {
      const int64_t g = h - heads;
      std::copy(pair, pair + hd, layer.keys + g * layer.head_stride + position * hd);
      const float* v = qkv + (heads + KV) * hd + g * hd;
      std::copy(v, v + hd, layer.values + g * layer.head_stride + position * hd);
    }
  }
}

// This thread's share of out = residual + rmsnorm(branch) * w over T rows of C (Gemma's norm after a branch, as
// transformers computes it in float32: branch * (1 / rms(branch)) * w): each thread forms the gain of each row
// it touches (the same bits whoever forms it), no wait.
void add_normed(const float* branch, const float* w, double eps, const float* residual, float* out, int64_t T,
                int64_t C, int tid, int nt) {
  const auto [begin, end] = share(T * C, tid, nt);
  int64_t row = -1;
  float gain = 1.0f;
  for (int64_t i = begin; i < end; ++i) {
    if (i / C != row) row = i / C, gain = gain_of(branch + row * C, C, eps);
    out[i] = residual[i] + branch[i] * gain * w[i % C];
  }
}

// Norms per layer in decode_layers' lists (checked with the list lengths): 2, 4 with q/k norms (Qwen3), or 6 with
// the norms after attention and after the MLP too (Gemma; its q/k norms None where a config has none).
int64_t norms_per_layer(int64_t L, at::TensorList mats, const c10::List<std::optional<at::Tensor>>& scales,
                        const c10::List<std::optional<at::Tensor>>& biases,
                        const c10::List<std::optional<at::Tensor>>& norms) {
  TORCH_CHECK(L > 0 && static_cast<int64_t>(mats.size()) == 4 * L && static_cast<int64_t>(scales.size()) == 4 * L &&
                  static_cast<int64_t>(biases.size()) == 4 * L && norms.size() % L == 0,
              "four matrices, scales and biases per layer, the same number of norms per layer, one cache per layer");
  const int64_t per = static_cast<int64_t>(norms.size()) / L;
  TORCH_CHECK(per == 2 || per == 4 || per == 6, "two norms per layer (four: q/k norms; six: and the norms after "
              "attention and the MLP)");
  return per;
}

// The L layers' matrices (qkv, o, gate+up, down) and norms from decode_layers' lists, checked against the widths
// (hidden C, heads query and KV KV heads of hd); their caches are the caller's. *F: the widest MLP.
std::vector<Layer> layers_of(int64_t L, at::TensorList mats, const c10::List<std::optional<at::Tensor>>& scales,
                             const c10::List<std::optional<at::Tensor>>& biases,
                             const c10::List<std::optional<at::Tensor>>& norms, int64_t C, int64_t heads, int64_t KV,
                             int64_t hd, int64_t path, int64_t* F) {
  const int64_t per = norms_per_layer(L, mats, scales, biases, norms), q_dim = heads * hd, kv_dim = KV * hd;
  std::vector<Layer> layers(L);
  *F = 0;
  for (int64_t l = 0; l < L; ++l) {
    Layer& layer = layers[l];
    const int64_t i = 4 * l;
    layer.qkv = matrix_of(mats[i], scales.get(i), biases.get(i), C, q_dim + 2 * kv_dim);
    layer.o = matrix_of(mats[i + 1], scales.get(i + 1), biases.get(i + 1), q_dim, C);
    layer.glu = matrix_of(mats[i + 2], scales.get(i + 2), biases.get(i + 2), C, -1);
    TORCH_CHECK(layer.glu.N % 2 == 0, "glu: an even number of rows (gate, then up)");
    layer.down = matrix_of(mats[i + 3], scales.get(i + 3), biases.get(i + 3), layer.glu.N / 2, C);
    *F = std::max(*F, layer.glu.N / 2);
    for (Matrix* m : {&layer.qkv, &layer.o, &layer.glu, &layer.down}) {
      if (integer_path(path) && m->q != nullptr) m->act = activation_group(path, m->K, m->G);
    }
    layer.attn_norm = vector_of(norms.get(per * l), C, "attention norm");
    layer.mlp_norm = vector_of(norms.get(per * l + 1), C, "MLP norm");
    for (int64_t j = 0; per >= 4 && j < 2; ++j) {
      layer.head_norm[j] = vector_of(norms.get(per * l + 2 + j), hd, "q/k norms");
      TORCH_CHECK(layer.head_norm[j] != nullptr || per == 6, "q/k norms: float32 (head_dim,)");
    }
    TORCH_CHECK((layer.head_norm[0] == nullptr) == (layer.head_norm[1] == nullptr), "q/k norms: both or neither");
    for (int64_t j = 0; per == 6 && j < 2; ++j) {
      layer.post_norm[j] = vector_of(norms.get(per * l + 4 + j), C, "norms after a branch");
      TORCH_CHECK(layer.post_norm[j] != nullptr, "norms after attention and the MLP: float32 (hidden,)");
    }
  }
  return layers;
}
}  // namespace step

namespace step {

// Each layer's window from decode_layers' `windows`: one for every layer, or one per layer (0: all positions).
std::vector<int64_t> windows_of(at::IntArrayRef windows, int64_t L) {
  TORCH_CHECK(windows.size() == 1 || static_cast<int64_t>(windows.size()) == L,
              "windows: one for every layer, or one per layer");
  std::vector<int64_t> out(L);
  for (int64_t l = 0; l < L; ++l) {
    out[l] = windows[windows.size() == 1 ? 0 : l];
    TORCH_CHECK(out[l] >= 0, "windows: 0 (every position) or a positive number of positions");
  }
  return out;
}

// What a query at position n - 1 attends to under `window` (0: every position): positions [first, n), `count` of
// them, in `chunks` chunks of `size` as attend_one cuts them.
struct Reach {
  int64_t first, count, chunks, size;
};

inline Reach reach_of(int64_t n, int64_t window, int64_t KV, int64_t hd) {
  const int64_t first = (window > 0 && n > window) ? n - window : 0;
  const std::pair<int64_t, int64_t> chunking = attention::chunking(n - first, KV, hd);
  return Reach{first, n - first, chunking.first, chunking.second};
}

// The rotary tables of a call: cos and sin of each row's position (rows * hd / 2 pairs), and the windowed layers'
// own (Gemma 3's local base), where given.
struct Ropes {
  const float* global = nullptr;
  const float* local = nullptr;
  const float* of(int64_t window) const { return window > 0 && local != nullptr ? local : global; }
};

Ropes ropes_of(const at::Tensor& rope, const std::optional<at::Tensor>& local_rope, int64_t rows, int64_t hd) {
  for (const at::Tensor* t : {&rope, local_rope.has_value() ? &*local_rope : nullptr}) {
    TORCH_CHECK(t == nullptr || (t->is_contiguous() && t->scalar_type() == at::kFloat && t->numel() == rows * hd),
                rows == 1 ? "rope: float32 (head_dim / 2, 2)" : "rope: float32 (rows, head_dim / 2, 2)");
  }
  return Ropes{rope.data_ptr<float>(), local_rope.has_value() ? local_rope->data_ptr<float>() : nullptr};
}

}  // namespace step

// decode_layer over every layer for one new position, in one parallel region (see the top of this file). The
// arguments as decode_layer's, four matrices, scales and biases per layer, the same number of norms per layer
// (two; four with q/k norms; six with Gemma's norms after attention and the MLP), one cache per layer; the norms'
// eps and the int8 path hold for every layer (the post-attention norm's eps is attn_eps, the post-MLP's mlp_eps).
// windows: one for every layer or one per layer; local_rope: cos and sin for the windowed layers (None: `rope`);
// activation: the gated MLP's (step::Activation).
at::Tensor decode_layers(const at::Tensor& x, at::TensorList mats, const c10::List<std::optional<at::Tensor>>& scales,
                         const c10::List<std::optional<at::Tensor>>& biases,
                         const c10::List<std::optional<at::Tensor>>& norms, at::TensorList kv, int64_t position,
                         const at::Tensor& rope, const std::optional<at::Tensor>& local_rope, int64_t heads,
                         double attn_eps, double mlp_eps, at::IntArrayRef windows, int64_t activation,
                         int64_t int8_path) {
  const int64_t L = static_cast<int64_t>(kv.size());
  step::norms_per_layer(L, mats, scales, biases, norms);
  step::check_activation(activation);
  TORCH_CHECK(x.dim() == 2 && x.size(0) == 1 && x.is_contiguous() && x.scalar_type() == at::kFloat,
              "x: one contiguous float32 row");
  const int64_t C = x.size(1), KV = kv[0].dim() == 4 ? kv[0].size(1) : 0, hd = kv[0].dim() == 4 ? kv[0].size(3) : 0;
  TORCH_CHECK(heads > 0 && KV > 0 && heads % KV == 0, "heads: a multiple of the cache's kv_heads");
  TORCH_CHECK(hd % 2 == 0, "head_dim: even");
  const step::Ropes ropes = step::ropes_of(rope, local_rope, 1, hd);
  const std::vector<int64_t> window = step::windows_of(windows, L);
  const int64_t q_dim = heads * hd, kv_dim = KV * hd;
  const int64_t path = path_in_use(int8_path);
  int64_t F = 0;
  std::vector<step::Layer> layers = step::layers_of(L, mats, scales, biases, norms, C, heads, KV, hd, path, &F);
  for (int64_t l = 0; l < L; ++l) {
    const at::Tensor& c = kv[l];
    TORCH_CHECK(c.dim() == 4 && c.size(0) == 2 && c.size(1) == KV && c.size(3) == hd && c.scalar_type() == at::kFloat &&
                    c.stride(3) == 1 && c.stride(2) == hd && position >= 0 && position < c.size(2),
                "kv: float32 (2, kv_heads, capacity, head_dim) with room at `position`, the same heads every layer");
    layers[l].keys = c.data_ptr<float>();
    layers[l].values = layers[l].keys + c.stride(0);
    layers[l].head_stride = c.stride(1);
  }
  std::vector<step::Reach> reach(L);  // each layer's, under its window
  int64_t most_chunks = 1, widest = 1;
  for (int64_t l = 0; l < L; ++l) {
    reach[l] = step::reach_of(position + 1, window[l], KV, hd);
    most_chunks = std::max(most_chunks, reach[l].chunks), widest = std::max(widest, reach[l].size);
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(double(hd)));
  at::Tensor out = x.clone();  // the residual stream, layer after layer
  float* cur = out.data_ptr<float>();
  std::vector<float> qkv(q_dim + 2 * kv_dim), mid(C), gated(F), partial(heads * most_chunks * (hd + 2));
  std::vector<float> branch(layers[0].post_norm[0] != nullptr ? C : 0);  // a branch's output before its norm
  const int64_t group = heads / KV;
  std::unique_ptr<std::atomic<int64_t>[]> claims(new std::atomic<int64_t>[4 * L]);
  for (int64_t i = 0; i < 4 * L; ++i) claims[i] = 0;
#pragma omp parallel num_threads(at::get_num_threads())
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    std::atomic<int64_t>* claim = claims.get();  // each product's row counter, in order
    thread_local step::Scratch s;
    auto product = [&](const step::Matrix& m, const float* in, double eps, const float* norm, bool glu,
                       const float* residual, float* y) {
      step::product_rows(m, in, eps, norm, path, glu, activation, residual, y, claim++, tid, nt, s);
    };
    const int64_t stride = attention::score_stride(widest);
    s.scores.resize(attention::kMostHeads * stride);
    s.attended.resize(q_dim);
    for (int64_t l = 0; l < L; ++l) {
      const step::Layer& layer = layers[l];
      const step::Reach& at_l = reach[l];
      product(layer.qkv, cur, attn_eps, layer.attn_norm, false, nullptr, qkv.data());
#pragma omp barrier
      step::rotate_heads(layer, qkv.data(), ropes.of(window[l]), heads, KV, hd, attn_eps, position, tid, nt);
#pragma omp barrier
      // Tasks of (KV head, chunk): the query heads of a group go through the chunk's keys and values together
      // (chunk_group; per (head, chunk) tasks read them once a head: at 2000 positions a KV head's K and V, 1 MB,
      // no longer fit L2). Each (head, chunk) gives the numbers it gives alone: the same bits.
      const auto [begin, end] = step::share(KV * at_l.chunks, tid, nt);
      for (int64_t t = begin; t < end; ++t) {
        const int64_t g = t / at_l.chunks, j = t % at_l.chunks, at = j * at_l.size;
        const int64_t len = std::min(at_l.size, at_l.count - at);
        const int64_t offset = g * layer.head_stride + (at_l.first + at) * hd;
        if (len <= 0) continue;
        attention::chunk_group(qkv.data(), g * group, (g + 1) * group, attention::Rows{layer.keys + offset, hd},
                               attention::Rows{layer.values + offset, hd}, len, hd, scale, s.scores.data(), stride,
                               partial.data(), at_l.chunks, j);
      }
#pragma omp barrier
      attention::merge(partial.data(), heads, hd, at_l.count, at_l.chunks, at_l.size, s.attended.data());
      if (layer.post_norm[0] == nullptr) {
        product(layer.o, s.attended.data(), -1.0, nullptr, false, cur, mid.data());
      } else {  // Gemma: mid = cur + norm(W_o attended)
        product(layer.o, s.attended.data(), -1.0, nullptr, false, nullptr, branch.data());
#pragma omp barrier
        step::add_normed(branch.data(), layer.post_norm[0], attn_eps, cur, mid.data(), 1, C, tid, nt);
      }
#pragma omp barrier
      product(layer.glu, mid.data(), mlp_eps, layer.mlp_norm, true, nullptr, gated.data());
#pragma omp barrier
      if (layer.post_norm[1] == nullptr) {
        product(layer.down, gated.data(), -1.0, nullptr, false, mid.data(), cur);
      } else {  // cur = mid + norm(W_down gated)
        product(layer.down, gated.data(), -1.0, nullptr, false, nullptr, branch.data());
#pragma omp barrier
        step::add_normed(branch.data(), layer.post_norm[1], mlp_eps, mid.data(), cur, 1, C, tid, nt);
      }
#pragma omp barrier
    }
  }
  return out;
}

// The one-row products of `mats`, each with its own x (rows of x: each matrix's input width), in one parallel
// region with a barrier after each, as decode_layers runs a step's products (float32 rows claimed a block at a
// time, int8 rows in equal shares, the int8 path given): what kernel_shape.py times, so a shape is chosen on
// the scheduling it will run under (timed as separate calls, each its own region with equal shares, the
// float32 shapes ranked differently from whole steps on an AVX2 EPYC). Returns each product (1, out).
std::vector<at::Tensor> products_region(at::TensorList mats, const c10::List<std::optional<at::Tensor>>& scales,
                                        at::TensorList xs, int64_t int8_path) {
  const int64_t P = static_cast<int64_t>(mats.size());
  TORCH_CHECK(static_cast<int64_t>(scales.size()) == P && static_cast<int64_t>(xs.size()) == P,
              "products_region: one scale (or None) and one x per matrix");
  const int64_t path = path_in_use(int8_path);
  std::vector<step::Matrix> ms(P);
  std::vector<at::Tensor> out(P);
  for (int64_t i = 0; i < P; ++i) {
    TORCH_CHECK(xs[i].dim() == 2 && xs[i].size(0) == 1 && xs[i].is_contiguous() && xs[i].scalar_type() == at::kFloat,
                "products_region: each x one contiguous float32 row");
    ms[i] = step::matrix_of(mats[i], scales.get(i), std::nullopt, xs[i].size(1), -1);
    if (integer_path(path) && ms[i].q != nullptr) ms[i].act = activation_group(path, ms[i].K, ms[i].G);
    out[i] = at::empty({1, ms[i].N}, xs[i].options());
  }
  std::unique_ptr<std::atomic<int64_t>[]> claims(new std::atomic<int64_t>[std::max<int64_t>(P, 1)]);
  for (int64_t i = 0; i < P; ++i) claims[i] = 0;
#pragma omp parallel num_threads(at::get_num_threads())
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    thread_local step::Scratch s;
    for (int64_t i = 0; i < P; ++i) {
      step::product_rows(ms[i], xs[i].data_ptr<float>(), -1.0, nullptr, path, false, step::kSilu, nullptr,
                         out[i].data_ptr<float>(), &claims[i], tid, nt, s);
#pragma omp barrier
    }
  }
  return out;
}

}  // namespace

// Every layer of a pass over several positions in one parallel region (decode_rows): a verify pass of one request
// (its positions over its own cache, each under the causal mask) or one scheduler step of several requests (each
// row over its own blocks of the paged pool), M = 2..16 rows, float32 or int8 weights.
//
// Per layer, as decode_layers (step.h) runs one position, with each weight row read once for all M rows of x:
//   1. the qkv rows: each thread claims L2 tiles of weight rows (fill_many_f32) for all M rows of x;
//   2. each row's heads: Qwen3's q/k norms, rotary at the row's position; its K and V into its cache;
//   3. attention: every row's (KV head, chunk) tasks, row m over positions [first, p_m] of its cache (or blocks),
//      chunked as attend_one chunks that many positions;
//   4. each thread merges the chunks of its share of the rows; 5. the o rows plus the residual;
//   6. the gate/up rows -> act(gate) * up;  7. the down rows plus the residual.
// Gemma's norms after attention and the MLP, GeGLU, per-layer windows and the windowed layers' rotary base as
// decode_layers has them (step.h).
// Each product, head and chunk is formed as the one-position step forms it (dot_f32's sums, rows_into's
// epilogue, attend_one's chunking and merge), so each row gets the bits it gets in a step of its own
// (tests/kernels/test_decode_rows.py): a verify pass and a batch change no logit of the tokens they check.
//
// Why: a pass of M positions through Python, layer by layer, paid four product calls, rotary, the cache write,
// SDPA with a mask and silu * up in torch per layer (about 150 calls a pass) on top of the products, where one
// position is one call (issue 38: a 2-position pass cost 1.37-1.53x a step).

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
#include "f32.h"
#include "attention.h"
#include "layer.h"
#include "step.h"

namespace {  // included by ops.cpp only, the one translation unit: internal linkage

namespace many {

// Where each row's K/V go and its attention reads: one cache per layer ((2, KV, capacity, hd), rows `hd` apart)
// shared by every row, or the paged pool per layer ((blocks, 2, KV, B, hd)) with a block table per row.
struct Caches {
  std::vector<float*> base;  // per layer: the cache's keys, or the pool's first block
  int64_t value_offset = 0;  // cache: floats from a key to its value (stride 0); pool: unused (KV heads after K)
  int64_t head_stride = 0;   // cache: floats between KV heads; pool: B * hd
  const int64_t* tables = nullptr;  // pool: (M, width) block ids; null: one cache
  int64_t width = 0, B = 0, block_stride = 0;

  bool paged() const { return tables != nullptr; }
  // Key (part 0) or value (part 1) of KV head g at position p of row m, in layer l.
  float* at(int64_t l, int64_t m, int64_t part, int64_t g, int64_t p, int64_t KV, int64_t hd) const {
    if (!paged()) return base[l] + part * value_offset + g * head_stride + p * hd;
    return base[l] + tables[m * width + p / B] * block_stride + (part * KV + g) * B * hd + (p % B) * hd;
  }
};

// This thread's claimed tiles of y[t, r] = alphas[t] * (W h_t)[r] + bias[r] + residual[t, r] over T rows (glu:
// act(gate) * up, gate rows [0, N/2), up rows [N/2, N)); fill(r, n, next, next_n, products): the products of weight
// rows r..r+n-1 with the T rows of h, products[i * T + t] (next, next_n: the rows this thread computes after them, -1
// for none). The epilogue is rows_into's (step.h), row by row. A thread claims its next tile before it computes the
// one it has, so that tile's rows come into L2 meanwhile (fill_many_f32's `ahead`; a gated product's gate rows fetch
// its up rows).
template <typename Fill>
void products_into(const step::Matrix& m, int64_t tile, Fill fill, const float* alphas, int64_t T, bool glu,
                   int64_t activation, const float* residual, float* y, std::atomic<int64_t>* claims,
                   std::vector<float>& first, std::vector<float>& second) {
  const int64_t F = m.N / 2, rows = glu ? F : m.N, out = rows;
  const float* bp = m.bias;
  first.resize(tile * T);
  if (glu) second.resize(tile * T);
  int64_t b = claims->fetch_add(tile, std::memory_order_relaxed);
  while (b < rows) {
    const int64_t n = std::min(tile, rows - b), nb = claims->fetch_add(tile, std::memory_order_relaxed);
    const int64_t nn = nb < rows ? std::min(tile, rows - nb) : 0;
    if (glu) fill(b, n, F + b, n, first.data());
    else fill(b, n, nb < rows ? nb : -1, nn, first.data());
    if (glu) {
      fill(F + b, n, nb < rows ? nb : -1, nn, second.data());
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t t = 0; t < T; ++t) {
          const float g = first[i * T + t] * alphas[t] + (bp ? bp[b + i] : 0.0f);
          const float u = second[i * T + t] * alphas[t] + (bp ? bp[F + b + i] : 0.0f);
          y[t * out + b + i] = step::gated(g, u, activation);
        }
      }
      b = nb;
      continue;
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t t = 0; t < T; ++t) {
        float v = first[i * T + t] * alphas[t];
        if (bp) v += bp[b + i];
        if (residual) v += residual[t * out + b + i];
        y[t * out + b + i] = v;
      }
    }
    b = nb;
  }
}

// Per thread, for one call.
struct Scratch {
  std::vector<float> alphas, normed, copy, first, second, scores, one;
  std::vector<Int16Row> int16;  // the int8 paths: each row of x as the one-position step quantises its one row
  std::vector<QuantRow> quantised;
};

// Weight rows of an int8 tile: about kTileBytes of them.
inline int64_t int8_tile_rows(int64_t K) { return std::max<int64_t>(kWRows, kTileBytes / K / kWRows * kWRows); }

// This thread's share of y = gain_t * (W (x_t * norm)) + bias + residual_t for the T rows of x (K = m.K floats
// apart): each thread forms the gains and its own copy of the rows (T K floats, or their quantised forms; no wait).
// Float32: each weight tile applied to all T rows at once (fill_many_f32); int8 likewise on the int16 path
// (fill_many_int16) and on the float path where its groups are whole steps (fill_many_int8). Int8 otherwise (the
// integer path, other groups; as step::product_rows chooses): each tile of weight rows to each row of x in turn, by
// the one-row fill of that path (the tile read from memory for the first row, from L2 for the others). Either way
// each row gets the bits of its own step.
void product(const step::Matrix& m, const float* x, int64_t T, double eps, const float* norm, bool glu,
             int64_t activation, int64_t path, const float* residual, float* y, std::atomic<int64_t>* claims,
             Scratch& s) {
  const int64_t K = m.K;
  s.alphas.resize(T);
  for (int64_t t = 0; t < T; ++t) s.alphas[t] = step::gain_of(x + t * K, K, eps);
  const float* h = x;
  if (norm != nullptr) {
    s.normed.resize(T * K);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t k = 0; k < K; ++k) s.normed[t * K + k] = x[t * K + k] * norm[k];
    }
    h = s.normed.data();
  }
  if (m.w != nullptr) {
    const float* xp = staggered(h, T * K, s.copy);
    const int64_t tile = tile_rows(K);
    auto fill = [&](int64_t r, int64_t n, int64_t next, int64_t next_n, float* out) {
      fill_many_f32(m.w + r * K, n, xp, K, T, out, ahead_of(next < 0 ? nullptr : m.w + next * K, next_n, K, T, tile));
    };
    return products_into(m, tile, fill, s.alphas.data(), T, glu, activation, residual, y, claims, s.first, s.second);
  }
  const int64_t tile = int8_tile_rows(K);
  s.one.resize(tile);
  // one(t, r, n, out): the products of rows r..r+n-1 with row t of x, as the step's fill forms them
  auto each_row = [&](auto one) {
    auto fill = [&](int64_t r, int64_t n, int64_t, int64_t, float* out) {
      for (int64_t t = 0; t < T; ++t) {
        one(t, r, n, s.one.data());
        for (int64_t i = 0; i < n; ++i) out[i * T + t] = s.one[i];
      }
    };
    products_into(m, tile, fill, s.alphas.data(), T, glu, activation, residual, y, claims, s.first, s.second);
  };
  if (path == kInt16Path && int16_fits(m.G)) {  // each weight widened once for up to kIntBlock rows of x
    s.int16.resize(T);
    for (int64_t t = 0; t < T; ++t) quantize_int16(h + t * K, K, m.G, s.int16[t]);
    auto fill = [&](int64_t r, int64_t n, int64_t, int64_t, float* out) {
      fill_many_int16(m.q + r * K, m.scale + r * m.S, K, s.int16.data(), T, n, out);
    };
    return products_into(m, tile, fill, s.alphas.data(), T, glu, activation, residual, y, claims, s.first, s.second);
  }
  if (integer_path(path)) {
    s.quantised.resize(T);
    for (int64_t t = 0; t < T; ++t) quantize_row(h + t * K, K, m.G, m.act, s.quantised[t]);
    const FillInteger in_shape = integer_in_shape();
    return each_row(
        [&](int64_t t, int64_t r, int64_t n, float* out) { in_shape(m.q, m.scale, K, s.quantised[t], r, n, out); });
  }
  if (m.G % kStep == 0) {  // each weight widened once for up to kInt8Block rows of x
    auto fill = [&](int64_t r, int64_t n, int64_t, int64_t, float* out) {
      fill_many_int8(m.q + r * K, m.scale + r * m.S, K, m.S, m.G, h, T, n, out);
    };
    return products_into(m, tile, fill, s.alphas.data(), T, glu, activation, residual, y, claims, s.first, s.second);
  }
  const FillInt8 in_shape = int8_in_shape();
  each_row([&](int64_t t, int64_t r, int64_t n, float* out) {
    in_shape(m.q + r * K, h + t * K, K, m.scale + r * m.S, m.S, m.G, n, out);
  });
}

}  // namespace many

// decode_layers for M rows (2..16) of x at `positions` (int64, M): row m's K/V go to position p_m of its cache and it
// attends over positions [max(0, p_m + 1 - window), p_m] (window 0: all). kv: per layer, one cache (2, KV, capacity,
// hd) that every row shares (tables None: the positions of one sequence, a verify pass), or the layer's paged pool
// (blocks, 2, KV, B, hd) with `tables` (M, width) int64, row m's blocks (a scheduler step: a row per request, or
// several rows of one request's chunk). rope: (M, hd / 2, 2) cos and sin of each row's position (local_rope: the
// windowed layers', where they have their own base); windows, activation: as decode_layers takes them. The rows' K/V
// are all written before any row attends, so rows of one sequence see each other under the causal mask. Float32
// or int8 matrices (int8_path: as decode_layers takes it).
at::Tensor decode_rows(const at::Tensor& x, at::TensorList mats, const c10::List<std::optional<at::Tensor>>& scales,
                       const c10::List<std::optional<at::Tensor>>& biases,
                       const c10::List<std::optional<at::Tensor>>& norms, at::TensorList kv, const at::Tensor& positions,
                       const std::optional<at::Tensor>& tables, const at::Tensor& rope,
                       const std::optional<at::Tensor>& local_rope, int64_t heads, double attn_eps, double mlp_eps,
                       at::IntArrayRef windows, int64_t activation, int64_t int8_path) {
  const int64_t L = static_cast<int64_t>(kv.size());
  step::norms_per_layer(L, mats, scales, biases, norms);
  step::check_activation(activation);
  const std::vector<int64_t> window = step::windows_of(windows, L);
  TORCH_CHECK(x.dim() == 2 && x.size(0) >= 1 && x.size(0) <= kMostRows && x.is_contiguous() &&
                  x.scalar_type() == at::kFloat, "x: 1 to ", kMostRows, " contiguous float32 rows");
  const int64_t M = x.size(0), C = x.size(1);
  TORCH_CHECK(positions.dim() == 1 && positions.size(0) == M && positions.is_contiguous() &&
                  positions.scalar_type() == at::kLong, "positions: int64 (rows,)");
  const int64_t* pos = positions.data_ptr<int64_t>();
  many::Caches caches;
  caches.base.resize(L);
  int64_t KV = 0, hd = 0;
  if (tables.has_value()) {
    const at::Tensor& pool = kv[0];
    TORCH_CHECK(pool.dim() == 5 && pool.size(1) == 2, "kv with tables: each layer's pool (blocks, 2, kv_heads, B, hd)");
    KV = pool.size(2), hd = pool.size(4), caches.B = pool.size(3);
    caches.head_stride = caches.B * hd, caches.block_stride = 2 * KV * caches.B * hd;
    TORCH_CHECK(tables->dim() == 2 && tables->size(0) == M && tables->is_contiguous() &&
                    tables->scalar_type() == at::kLong, "tables: int64 (rows, blocks per row)");
    caches.tables = tables->data_ptr<int64_t>(), caches.width = tables->size(1);
    for (int64_t m = 0; m < M; ++m) {
      TORCH_CHECK(pos[m] >= 0 && pos[m] / caches.B < caches.width, "row ", m, ": position ", pos[m],
                  " outside its block table");
      for (int64_t b = 0; b <= pos[m] / caches.B; ++b) {
        const int64_t id = caches.tables[m * caches.width + b];
        TORCH_CHECK(id >= 0 && id < pool.size(0), "row ", m, ": block ", id, " outside the pool of ", pool.size(0));
      }
    }
    for (int64_t l = 0; l < L; ++l) {
      TORCH_CHECK(kv[l].sizes() == pool.sizes() && kv[l].is_contiguous() && kv[l].scalar_type() == at::kFloat,
                  "kv: contiguous float32 pools of one shape");
      caches.base[l] = kv[l].data_ptr<float>();
    }
  } else {
    TORCH_CHECK(kv[0].dim() == 4, "kv: float32 (2, kv_heads, capacity, head_dim) per layer, or pools with tables");
    KV = kv[0].size(1), hd = kv[0].size(3);
    caches.value_offset = kv[0].stride(0), caches.head_stride = kv[0].stride(1);
    for (int64_t l = 0; l < L; ++l) {
      const at::Tensor& c = kv[l];
      TORCH_CHECK(c.dim() == 4 && c.size(0) == 2 && c.size(1) == KV && c.size(3) == hd &&
                      c.scalar_type() == at::kFloat && c.stride(3) == 1 && c.stride(2) == hd &&
                      c.stride(0) == caches.value_offset && c.stride(1) == caches.head_stride,
                  "kv: float32 (2, kv_heads, capacity, head_dim) of one layout every layer");
      for (int64_t m = 0; m < M; ++m) {
        TORCH_CHECK(pos[m] >= 0 && pos[m] < c.size(2), "row ", m, ": position ", pos[m], " outside the cache");
      }
      caches.base[l] = c.data_ptr<float>();
    }
  }
  TORCH_CHECK(heads > 0 && KV > 0 && heads % KV == 0, "heads: a multiple of the cache's kv_heads");
  TORCH_CHECK(hd % 2 == 0 && hd <= attention::kMostHeadDim, "head_dim: even, at most ", attention::kMostHeadDim);
  const step::Ropes ropes = step::ropes_of(rope, local_rope, M, hd);
  const int64_t q_dim = heads * hd, kv_dim = KV * hd, width = q_dim + 2 * kv_dim, group = heads / KV;
  int64_t F = 0;
  const int64_t path = path_in_use(int8_path);
  const std::vector<step::Layer> layers = step::layers_of(L, mats, scales, biases, norms, C, heads, KV, hd, path, &F);
  // Each row's attention under a window: its first position, count, chunks (as attend_one cuts `count` positions)
  // and where its partial sums begin; the tasks (row, KV head, chunk) ordered by KV head and chunk, then row: the
  // rows of one sequence read nearly the same positions in their chunk j, so a thread's next task finds that chunk's
  // keys and values in L1/L2 (by row first, at 512 positions every row read the layer's whole cache from memory
  // again). One plan per distinct window (Gemma's layers have two).
  struct Task {
    int64_t m, g, j;
  };
  struct Plan {
    int64_t window;
    std::vector<step::Reach> rows;  // each row's
    std::vector<int64_t> partial_at;
    std::vector<Task> tasks;
  };
  std::vector<Plan> plans;
  std::vector<int64_t> plan_of(L);
  int64_t widest = 0, most_partial = 0;
  for (int64_t l = 0; l < L; ++l) {
    auto known = std::find_if(plans.begin(), plans.end(), [&](const Plan& p) { return p.window == window[l]; });
    if (known != plans.end()) {
      plan_of[l] = known - plans.begin();
      continue;
    }
    Plan p{window[l], std::vector<step::Reach>(M), std::vector<int64_t>(M + 1, 0), {}};
    int64_t most_chunks = 0;
    for (int64_t m = 0; m < M; ++m) {
      const step::Reach& r = p.rows[m] = step::reach_of(pos[m] + 1, p.window, KV, hd);
      p.partial_at[m + 1] = p.partial_at[m] + heads * r.chunks * (hd + 2);
      widest = std::max(widest, r.size);
      most_chunks = std::max(most_chunks, r.chunks);
    }
    for (int64_t g = 0; g < KV; ++g) {
      for (int64_t j = 0; j < most_chunks; ++j) {
        for (int64_t m = 0; m < M; ++m) {
          if (j < p.rows[m].chunks) p.tasks.push_back({m, g, j});
        }
      }
    }
    most_partial = std::max(most_partial, p.partial_at[M]);
    plan_of[l] = static_cast<int64_t>(plans.size());
    plans.push_back(std::move(p));
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(double(hd)));
  at::Tensor out = x.clone();  // the residual stream, layer after layer
  float* cur = out.data_ptr<float>();
  std::vector<float> qkv(M * width), mid(M * C), gated(M * F), attended(M * q_dim), partial(most_partial);
  std::vector<float> branch(layers[0].post_norm[0] != nullptr ? M * C : 0);  // a branch's output before its norm
  std::unique_ptr<std::atomic<int64_t>[]> claims(new std::atomic<int64_t>[4 * L]);
  for (int64_t i = 0; i < 4 * L; ++i) claims[i] = 0;
#pragma omp parallel num_threads(at::get_num_threads())
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    std::atomic<int64_t>* claim = claims.get();  // each product's tile counter, in order
    many::Scratch s;
    const int64_t stride = attention::score_stride(widest);
    s.scores.resize(attention::kMostHeads * stride);
    for (int64_t l = 0; l < L; ++l) {
      const step::Layer& layer = layers[l];
      const Plan& plan = plans[plan_of[l]];
      const float* r = ropes.of(window[l]);
      many::product(layer.qkv, cur, M, attn_eps, layer.attn_norm, false, activation, path, nullptr, qkv.data(), claim++, s);
#pragma omp barrier
      {  // each row's heads: norms, rotary at its position, its K and V to its cache
        const auto [begin, end] = step::share(M * (heads + KV), tid, nt);
        for (int64_t t = begin; t < end; ++t) {
          const int64_t m = t / (heads + KV), h = t % (heads + KV);
          float* row = qkv.data() + m * width;
          rotate_head(row + h * hd, r + m * hd, hd, layer.head_norm[h < heads ? 0 : 1], attn_eps);
          if (h >= heads) {
            const int64_t g = h - heads;
            std::copy_n(row + h * hd, hd, caches.at(l, m, 0, g, pos[m], KV, hd));
            std::copy_n(row + (heads + KV + g) * hd, hd, caches.at(l, m, 1, g, pos[m], KV, hd));
          }
        }
      }
#pragma omp barrier
      {  // every row's (KV head, chunk) tasks, as decode_layers runs one row's
        const auto [begin, end] = step::share(static_cast<int64_t>(plan.tasks.size()), tid, nt);
        for (int64_t t = begin; t < end; ++t) {
          const auto [m, g, j] = plan.tasks[t];
          const step::Reach& r = plan.rows[m];
          const int64_t at = j * r.size;
          const int64_t len = std::min(r.size, r.count - at);
          if (len <= 0) continue;
          const float* q = qkv.data() + m * width;
          float* part = partial.data() + plan.partial_at[m];
          const int64_t from = r.first + at;
          if (caches.paged()) {
            const int64_t* table = caches.tables + m * caches.width;
            const float* base = caches.base[l];
            attention::chunk_group(q, g * group, (g + 1) * group,
                                   attention::BlockRows{base + g * caches.B * hd, table, from, caches.B,
                                                        caches.block_stride, hd},
                                   attention::BlockRows{base + (KV + g) * caches.B * hd, table, from, caches.B,
                                                        caches.block_stride, hd},
                                   len, hd, scale, s.scores.data(), stride, part, r.chunks, j);
          } else {
            const float* keys = caches.at(l, m, 0, g, from, KV, hd);
            const float* values = caches.at(l, m, 1, g, from, KV, hd);
            attention::chunk_group(q, g * group, (g + 1) * group, attention::Rows{keys, hd},
                                   attention::Rows{values, hd}, len, hd, scale, s.scores.data(), stride, part,
                                   r.chunks, j);
          }
        }
      }
#pragma omp barrier
      {
        const auto [begin, end] = step::share(M, tid, nt);
        for (int64_t m = begin; m < end; ++m) {
          const step::Reach& r = plan.rows[m];
          attention::merge(partial.data() + plan.partial_at[m], heads, hd, r.count, r.chunks, r.size,
                           attended.data() + m * q_dim);
        }
      }
#pragma omp barrier
      if (layer.post_norm[0] == nullptr) {
        many::product(layer.o, attended.data(), M, -1.0, nullptr, false, activation, path, cur, mid.data(), claim++, s);
      } else {  // Gemma: mid = cur + norm(W_o attended), row by row
        many::product(layer.o, attended.data(), M, -1.0, nullptr, false, activation, path, nullptr, branch.data(), claim++,
                      s);
#pragma omp barrier
        step::add_normed(branch.data(), layer.post_norm[0], attn_eps, cur, mid.data(), M, C, tid, nt);
      }
#pragma omp barrier
      many::product(layer.glu, mid.data(), M, mlp_eps, layer.mlp_norm, true, activation, path, nullptr, gated.data(),
                    claim++, s);
#pragma omp barrier
      if (layer.post_norm[1] == nullptr) {
        many::product(layer.down, gated.data(), M, -1.0, nullptr, false, activation, path, mid.data(), cur, claim++, s);
      } else {  // cur = mid + norm(W_down gated)
        many::product(layer.down, gated.data(), M, -1.0, nullptr, false, activation, path, nullptr, branch.data(),
                      claim++, s);
#pragma omp barrier
        step::add_normed(branch.data(), layer.post_norm[1], mlp_eps, mid.data(), cur, M, C, tid, nt);
      }
#pragma omp barrier
    }
  }
  return out;
}

}  // namespace

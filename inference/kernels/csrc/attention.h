// Decode attention: one query per head over the KV cache (attend_one), cut into chunks merged at the end
// (flash-decoding); decode_layers (step.h) runs the same chunks inside its parallel region.

#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "simd.h"
#include "shape.h"
#include "f32.h"

namespace {  // included by ops.cpp only, the one translation unit: internal linkage

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

// Where a chunk's key (or value) rows are. `four(j, buffer)`: rows j..j+3, hd floats apart; `one(j)`: row j;
// `prefetch_four(j)`: rows j..j+3 asked for into L2. Rows: hd floats apart, a cache of one sequence.
struct Rows {
  const float* base;
  int64_t hd;
  const float* four(int64_t j, float*) const { return base + j * hd; }
  const float* one(int64_t j) const { return base + j * hd; }
  void prefetch_four(int64_t j) const {
    const char* at = reinterpret_cast<const char*>(base + j * hd);
    for (int64_t b = 0; b < 4 * hd * int64_t(sizeof(float)); b += 64) _mm_prefetch(at + b, _MM_HINT_T1);
  }
};
// BlockRows: in blocks of B positions, `block_stride` floats apart, in the order of a block table (a request's
// cache in the paged pool, session/paged_cache.py); the chunk begins at the request's position `first`. Four
// rows that straddle two blocks are copied to `buffer` (4 hd floats), so the loops read them as Rows' four.
struct BlockRows {
  const float* base;
  const int64_t* table;
  int64_t first, B, block_stride, hd;
  const float* one(int64_t j) const {
    const int64_t p = first + j;
    return base + table[p / B] * block_stride + (p % B) * hd;
  }
  const float* four(int64_t j, float* buffer) const {
    if ((first + j) % B + 4 <= B) return one(j);
    for (int64_t i = 0; i < 4; ++i) std::copy_n(one(j + i), hd, buffer + i * hd);
    return buffer;
  }
  void prefetch_four(int64_t j) const {
    for (int64_t i = 0; i < 4; ++i) {
      const char* at = reinterpret_cast<const char*>(one(j + i));
      for (int64_t b = 0; b < hd * int64_t(sizeof(float)); b += 64) _mm_prefetch(at + b, _MM_HINT_T1);
    }
  }
};
constexpr int64_t kMostHeadDim = 256;  // the widest head a chunk's four-row buffer holds

// Query heads q[0], q[hd], ..., HG of them (of one KV head), over the same `count` positions: each head's
// (m, l, acc[hd]) into out + h * out_stride. Each vector of keys and values is loaded once for all HG heads,
// and the heads' sums are independent chains of fmas (one head's four score sums wait on the fma latency).
// A head's numbers do not depend on HG: the same operations in the same order. scores: HG * stride floats
// (stride >= count rounded up to whole vectors). k, v: where the keys and values are (Rows, BlockRows); the
// same operations in the same order wherever they are.
template <int HG, typename At>
void chunk_heads(const float* q, const At& k, const At& v, int64_t count, int64_t hd, float scale,
                 float* scores, int64_t stride, float* out, int64_t out_stride) {
  alignas(64) float buffer[4 * kMostHeadDim];  // four rows of keys or values that straddle two blocks
  const int64_t whole = hd / kLanes * kLanes;
  int64_t j = 0;
  for (; j + 4 <= count; j += 4) {  // four keys at a time, one reduction for the four, for each head
    const float* k0 = k.four(j, buffer);
    // The same four positions' values asked for into L2 while their keys are scored: the value pass then reads
    // the chunk from L2, its memory time spent under the score pass's compute (a chunk's K and V: < 200 KB).
    v.prefetch_four(j);
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
    for (int h = 0; h < HG; ++h) scores[h * stride + j] = dot_f32(k.one(j), q + h * hd, hd);
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
        const float* v0 = v.four(j, buffer) + d0;
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
    const float* v0 = v.four(j, buffer);
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
      const float* vj = v.one(j);
      for (int64_t d = 0; d < hd; ++d) acc[d] += p * vj[d];
    }
  }
}

// Heads [h0, h1) of q over one chunk (the query heads of one KV head): kMostHeads at a time through chunk_heads.
// Their (m, l, acc) go to partial + (h * chunks + c) * (hd + 2); scores: kMostHeads * stride floats.
template <typename At>
inline void chunk_group(const float* q, int64_t h0, int64_t h1, const At& k, const At& v, int64_t count,
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
      attention::chunk_group(qp, g * group, (g + 1) * group, attention::Rows{kp + g * ks + first * hd, hd},
                             attention::Rows{vp + g * vs + first * hd, hd}, count, hd, s, scores.data(), stride,
                             partial.data(), chunks, c);
    }
  });
  at::Tensor out = at::empty({1, H * hd}, q.options());  // not at::zeros: a fill kernel's dispatch, per layer
  attention::merge(partial.data(), H, hd, n, chunks, size, out.data_ptr<float>());
  return out;
}

// One decode row of each of D requests, each over its own cache in the paged pool (session/paged_cache.py): row r
// of qkv (Q positioned, then K, V: q_dim + 2 KV hd floats) writes its K and V at position lengths[r] - 1 of its
// block table (tables[r], blocks of B positions; the block there must be the request's own, not shared: the
// caller checks), then attends over its lengths[r] positions. blocks: the layer's pool (blocks, 2, KV, B, hd).
// Each request is chunked as attend_one chunks n positions, and each chunk reads its rows where the table puts
// them (BlockRows): the numbers attend_one gives over the same positions copied out of the blocks, without the
// copy; every request's (KV head, chunk) tasks share one parallel region. Returns (D, q_dim).
at::Tensor attend_paged(const at::Tensor& qkv, const at::Tensor& blocks, const at::Tensor& tables,
                        const at::Tensor& lengths, int64_t q_dim, double scale) {
  TORCH_CHECK(blocks.dim() == 5 && blocks.size(1) == 2 && blocks.is_contiguous() && blocks.scalar_type() == at::kFloat,
              "blocks: contiguous float32 (blocks, 2, kv_heads, block_tokens, head_dim)");
  const int64_t n_blocks = blocks.size(0), KV = blocks.size(2), B = blocks.size(3), hd = blocks.size(4);
  const int64_t kv_dim = KV * hd, block_stride = 2 * KV * B * hd;
  TORCH_CHECK(qkv.dim() == 2 && qkv.is_contiguous() && qkv.scalar_type() == at::kFloat &&
              qkv.size(1) == q_dim + 2 * kv_dim && q_dim % kv_dim == 0 && q_dim > 0,
              "qkv: contiguous float32 (rows, q_dim + 2 kv_heads head_dim), heads a multiple of kv_heads");
  TORCH_CHECK(hd <= attention::kMostHeadDim, "head_dim: at most ", attention::kMostHeadDim);
  const int64_t D = qkv.size(0), width = qkv.size(1);
  TORCH_CHECK(tables.dim() == 2 && tables.size(0) == D && tables.is_contiguous() && tables.scalar_type() == at::kLong &&
              lengths.dim() == 1 && lengths.size(0) == D && lengths.is_contiguous() &&
              lengths.scalar_type() == at::kLong, "tables: int64 (rows, blocks per row); lengths: int64 (rows,)");
  const int64_t H = q_dim / hd, group = H / KV, width_blocks = tables.size(1);
  float* bp = blocks.data_ptr<float>();
  const float* qp = qkv.data_ptr<float>();
  const int64_t* tp = tables.data_ptr<int64_t>();
  const int64_t* lp = lengths.data_ptr<int64_t>();
  std::vector<int64_t> task_at(D + 1, 0), partial_at(D + 1, 0), chunks_of(D), size_of(D);
  int64_t bytes = 0, widest = 0;
  for (int64_t r = 0; r < D; ++r) {
    const int64_t n = lp[r];
    TORCH_CHECK(n >= 1 && (n - 1) / B < width_blocks, "row ", r, ": ", n, " positions outside its block table");
    for (int64_t b = 0; b <= (n - 1) / B; ++b) {
      TORCH_CHECK(tp[r * width_blocks + b] >= 0 && tp[r * width_blocks + b] < n_blocks, "row ", r, ": block ",
                  tp[r * width_blocks + b], " outside the pool of ", n_blocks);
    }
    float* at = bp + tp[r * width_blocks + (n - 1) / B] * block_stride + ((n - 1) % B) * hd;
    for (int64_t g = 0; g < KV; ++g) {  // K then V of the row, head by head, into the newest position
      std::copy_n(qp + r * width + q_dim + g * hd, hd, at + g * B * hd);
      std::copy_n(qp + r * width + q_dim + kv_dim + g * hd, hd, at + (KV + g) * B * hd);
    }
    const auto [chunks, size] = attention::chunking(n, KV, hd);
    chunks_of[r] = chunks, size_of[r] = size;
    task_at[r + 1] = task_at[r] + KV * chunks;
    partial_at[r + 1] = partial_at[r] + H * chunks * (hd + 2);
    bytes += 2 * n * kv_dim * int64_t(sizeof(float));
    widest = std::max(widest, size);
  }
  std::vector<float> partial(partial_at[D]);  // per request, per (head, chunk): m, l, acc[hd]
  const float s = static_cast<float>(scale);
  const int64_t grain = bytes < attention::kParallelBytes ? task_at[D] : 1;
  at::parallel_for(0, task_at[D], grain, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores;
    scores.resize(attention::kMostHeads * attention::score_stride(widest));
    int64_t r = std::upper_bound(task_at.begin(), task_at.end(), begin) - task_at.begin() - 1;
    for (int64_t task = begin; task < end; ++task) {
      while (task >= task_at[r + 1]) ++r;
      const int64_t chunks = chunks_of[r], size = size_of[r], local = task - task_at[r];
      const int64_t g = local / chunks, c = local % chunks, first = c * size;
      const int64_t count = std::min(size, lp[r] - first);
      if (count <= 0) continue;
      const int64_t* table = tp + r * width_blocks;
      attention::chunk_group(qp + r * width, g * group, (g + 1) * group,
                             attention::BlockRows{bp + g * B * hd, table, first, B, block_stride, hd},
                             attention::BlockRows{bp + (KV + g) * B * hd, table, first, B, block_stride, hd}, count,
                             hd, s, scores.data(), attention::score_stride(size), partial.data() + partial_at[r],
                             chunks, c);
    }
  });
  at::Tensor out = at::empty({D, q_dim}, qkv.options());
  float* op = out.data_ptr<float>();
  for (int64_t r = 0; r < D; ++r) {
    attention::merge(partial.data() + partial_at[r], H, hd, lp[r], chunks_of[r], size_of[r], op + r * q_dim);
  }
  return out;
}

}  // namespace

// The int8 mode's head. The int4 ranking product (gemv_int4): the head's rows as 4-bit
// weights, group-wise, read against x quantised to int8 per group, only to rank the vocabulary; head_rescored
// then takes the best `rescored` tokens' logits again from the float rows (quant.RescoredHead).
//
// The head is a fifth of what an int8 step reads (the default model: 29 of 139 MB), and only its ranking and
// the tail's share of the probability come from it: every logit the views show is rescored in float. In 4 bits
// it is 0.56 bytes a weight. The math, per group g of G weights (G a multiple of 32, quant.quantize_int4):
//   weights:     n = q + 8 in [0, 15] with q = round(w / s_g) in [-8, 7], s_g = amax / 7 (bfloat16); a block of
//                32 weights is 16 bytes, byte j holding weight j (low nibble) and weight j + 16 (high nibble);
//   activations: xq = round(x * 127 / amax_g) in [-127, 127], x ~= xq * t_g with t_g = amax_g / 127;
//   y = sum over groups of s_g t_g (sum n xq - 8 sum xq), the integer sums exact in int32.
// vpmaddubsw takes the nibbles (unsigned) against xq (signed): pairs at most 2 * 15 * 127 = 3810, so the int16
// pairs of up to 8 blocks (G <= 256) add up without saturating; vpmaddwd against ones widens them to int32 once
// a group, starting from the group's -8 sum xq spread over the lanes (each lane's four activations). The code is
// 256-bit AVX2, which AVX-512 CPUs run too.
//
// head_rescored (below) takes the head's logits from an int8 or a 4-bit head and rescores the best in float32.

#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "simd.h"
#include "shape.h"
#include "products.h"
#include "f32.h"
#include "int16.h"
#include "int8_integer.h"

namespace {  // included by ops.cpp only, the one translation unit: internal linkage

namespace int4 {
constexpr int64_t kBlock = 32;  // weights per 16 bytes

// One row of x quantised per group of G: xq (K int8), each group's scale and its eight lanes' starting sums.
struct Row {
  int64_t G = 0, S = 0;
  std::vector<int8_t> xq;
  std::vector<float> scale;
  std::vector<int32_t> start;  // S * 8: lane j of group g starts at -8 * (its four xq of every block)
  // Groups of 32 are read two at a time (row32): xq of each pair of groups reordered as the nibbles come out
  // of 32 bytes (group g's weights 0-15, g+1's 0-15, then g's 16-31, g+1's 16-31), and the pair's lanes:
  // 0-3 group g's (lane j: its weights 4j..4j+3 and 16+4j..16+4j+3), 4-7 group g+1's.
  std::vector<int8_t> xpair;
  std::vector<int32_t> spair;
};

void quantize(const float* x, int64_t K, int64_t G, Row& out) {
  out.G = G, out.S = K / G;
  quantize_groups(x, K, G, 127.0f, out.xq, out.scale);
  out.start.assign(out.S * 8, 0);
  for (int64_t k = 0; k < K; ++k) out.start[(k / G) * 8 + (k % kBlock) / 4] -= 8 * out.xq[k];
  if (G != kBlock) return;
  const int64_t pairs = out.S / 2;
  out.xpair.resize(pairs * 64);
  out.spair.assign(pairs * 8, 0);
  for (int64_t i = 0; i < pairs; ++i) {
    const int8_t* a = out.xq.data() + i * 64;  // groups 2i and 2i + 1
    int8_t* to = out.xpair.data() + i * 64;
    std::copy(a, a + 16, to);
    std::copy(a + 32, a + 48, to + 16);
    std::copy(a + 16, a + 32, to + 32);
    std::copy(a + 48, a + 64, to + 48);
    for (int64_t k = 0; k < 64; ++k) out.spair[i * 8 + (k / 32) * 4 + (k % 16) / 4] -= 8 * a[k];
  }
}

// The S factors (weight scale * activation scale) of one row's groups, eight at a time.
inline void factors_of(const uint16_t* ws, const float* xs, int64_t S, float* out) {
  int64_t g = 0;
  for (; g + 8 <= S; g += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ws + g)));
    _mm256_storeu_ps(out + g, _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)), _mm256_loadu_ps(xs + g)));
  }
  for (; g < S; ++g) out[g] = bf16_to_float(ws[g]) * xs[g];
}

// The int32 sums of one group (B blocks of 32 at p, against xq), its lanes started at `start`.
template <int64_t B>
inline __m256i group_sums(const uint8_t* p, const int8_t* xq, const int32_t* start) {
  const __m128i low = _mm_set1_epi8(0x0F);
  __m256i pairs = _mm256_setzero_si256();
  for (int64_t b = 0; b < B; ++b) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * b));
    const __m256i n = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low), _mm_and_si128(v, low));
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * b));
    pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(n, xv));
  }
  return _mm256_add_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(start)));
}

// One row: packed (K / 2 bytes) with its S bfloat16 scales, B blocks a group (B >= 2: groups of 32 take
// row32), the whole row prefetched P bytes ahead first; two accumulators (even and odd groups), so the FMAs do
// not wait on each other.
template <int64_t P, int64_t B>
inline float row(const uint8_t* packed, const uint16_t* ws, const Row& x, float* factors) {
  const int64_t S = x.S, bytes = S * B * 16;
  for (int64_t b = 0; P && b < bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(packed) + b + P, _MM_HINT_T0);
  factors_of(ws, x.scale.data(), S, factors);
  const int8_t* xq = x.xq.data();
  const int32_t* start = x.start.data();
  __m256 t0 = _mm256_setzero_ps(), t1 = t0;
  int64_t g = 0;
  for (; g + 2 <= S; g += 2) {
    const __m256i a = group_sums<B>(packed + g * B * 16, xq + g * B * 32, start + g * 8);
    const __m256i b = group_sums<B>(packed + (g + 1) * B * 16, xq + (g + 1) * B * 32, start + (g + 1) * 8);
    t0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a), _mm256_broadcast_ss(factors + g), t0);
    t1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(b), _mm256_broadcast_ss(factors + g + 1), t1);
  }
  if (g < S) {
    const __m256i a = group_sums<B>(packed + g * B * 16, xq + g * B * 32, start + g * 8);
    t0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a), _mm256_broadcast_ss(factors + g), t0);
  }
  return hsum256(_mm256_add_ps(t0, t1));
}

// One row of groups of 32 (the default), two groups a step: 32 bytes of nibbles, two vpmaddubsw against the
// pair's reordered xq, and one convert and FMA for both groups (their factors four lanes each).
template <int64_t P>
inline float row32(const uint8_t* packed, const uint16_t* ws, const Row& x, float* factors) {
  const int64_t S = x.S, bytes = S * 16;
  for (int64_t b = 0; P && b < bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(packed) + b + P, _MM_HINT_T0);
  factors_of(ws, x.scale.data(), S, factors);
  const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  auto pair = [&](int64_t g, __m256 t) {  // groups g, g + 1 (g even)
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(packed + g * 16));
    const int8_t* xq = x.xpair.data() + g * 32;
    const __m256i products = _mm256_add_epi16(
        _mm256_maddubs_epi16(_mm256_and_si256(v, low), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq))),
        _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), low),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32))));
    const __m256i sums = _mm256_add_epi32(_mm256_madd_epi16(products, ones),
                                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.spair.data() + g * 4)));
    const __m256 f = _mm256_permutevar8x32_ps(
        _mm256_castps128_ps256(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(factors + g)))), spread);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), f, t);
  };
  __m256 t0 = _mm256_setzero_ps(), t1 = t0;
  int64_t g = 0;
  for (; g + 4 <= S; g += 4) {
    t0 = pair(g, t0);
    t1 = pair(g + 2, t1);
  }
  for (; g + 2 <= S; g += 2) t0 = pair(g, t0);
  if (g < S) {  // an odd last group, in the natural order
    const __m256i a = group_sums<1>(packed + g * 16, x.xq.data() + g * 32, x.start.data() + g * 8);
    t1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a), _mm256_broadcast_ss(factors + g), t1);
  }
  return hsum256(_mm256_add_ps(t0, t1));
}

template <int64_t P, int64_t B>
void fill_blocks(const uint8_t* packed, const uint16_t* sp, int64_t K, const Row& x, int64_t r, int64_t n,
                 float* out) {
  thread_local std::vector<float> factors;
  factors.resize(x.S + 8);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = packed + (r + i) * (K / 2);
    const uint16_t* s = sp + (r + i) * x.S;
    if constexpr (B == 1) {
      out[i] = row32<P>(p, s, x, factors.data());
    } else {
      out[i] = row<P, B>(p, s, x, factors.data());
    }
  }
}

// Groups of 32 (the default), 64, 128 or 256 weights.
template <int64_t P>
void fill(const uint8_t* packed, const uint16_t* sp, int64_t K, const Row& x, int64_t r, int64_t n, float* out) {
  switch (x.G / kBlock) {
    case 1: return fill_blocks<P, 1>(packed, sp, K, x, r, n, out);
    case 2: return fill_blocks<P, 2>(packed, sp, K, x, r, n, out);
    case 4: return fill_blocks<P, 4>(packed, sp, K, x, r, n, out);
    default: return fill_blocks<P, 8>(packed, sp, K, x, r, n, out);
  }
}

using Fill = void (*)(const uint8_t*, const uint16_t*, int64_t, const Row&, int64_t, int64_t, float*);

// The rows in the int8 shape's prefetch distance (one row a pass: the head is one long stream).
Fill in_shape() {
  static const Fill table[5] = {fill<0>, fill<1024>, fill<2048>, fill<4096>, fill<8192>};
  return table[g_shape.int8_prefetch.load(std::memory_order_relaxed)];
}

// The group size of int4 weights (rows, K / 2) uint8 with scales (rows, groups) bfloat16.
int64_t group_of(const at::Tensor& packed, const at::Tensor& scale) {
  TORCH_CHECK(packed.dim() == 2 && packed.is_contiguous() && packed.scalar_type() == at::kByte &&
                  packed.device().is_cpu(),
              "weight: contiguous (out, in / 2) uint8 (two 4-bit weights a byte) on CPU");
  TORCH_CHECK(scale.scalar_type() == at::kBFloat16 && scale.is_contiguous() && scale.dim() == 2 &&
                  scale.size(0) == packed.size(0) && scale.size(1) > 0 && (2 * packed.size(1)) % scale.size(1) == 0,
              "scale: bfloat16 (out, groups) with groups dividing in");
  const int64_t G = 2 * packed.size(1) / scale.size(1);
  TORCH_CHECK(G == 32 || G == 64 || G == 128 || G == 256, "int4 groups: 32, 64, 128 or 256 weights");
  return G;
}
}  // namespace int4

// y = alpha * W_int4 x for each row of x (rows, K), the rows split over the threads: the head's ranking
// product (quant.KernelInt4Linear; a decode step takes it inside head_rescored).
at::Tensor gemv_int4(const at::Tensor& packed, const at::Tensor& scale, const at::Tensor& x, double alpha) {
  const int64_t G = int4::group_of(packed, scale), K = 2 * packed.size(1), N = packed.size(0), T = x.size(0);
  TORCH_CHECK(x.dim() == 2 && x.size(1) == K && x.is_contiguous() && x.scalar_type() == at::kFloat,
              "x: contiguous float32 (rows, in)");
  at::Tensor y = at::empty({T, N}, x.options());
  const uint8_t* pp = packed.data_ptr<uint8_t>();
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scale.data_ptr());
  const int4::Fill fill = int4::in_shape();
  const float a = static_cast<float>(alpha);
  thread_local int4::Row quantised;  // its buffers are reused from call to call (a decode step's head: one a step)
  int4::Row& xr = quantised;  // the calling thread's, which the workers read (`quantised` named there is theirs)
  for (int64_t t = 0; t < T; ++t) {
    int4::quantize(x.data_ptr<float>() + t * K, K, G, xr);
    float* yp = y.data_ptr<float>() + t * N;
    at::parallel_for(0, N, kRowsPerTask, [&](int64_t begin, int64_t end) {
      fill(pp, sp, K, xr, begin, end - begin, yp + begin);
      for (int64_t r = begin; r < end; ++r) yp[r] *= a;
    });
  }
  return y;
}

// The quantised activations as (xq (K,) int8, scales (groups,), lane starts (groups, 8) int32), for tests.
std::tuple<at::Tensor, at::Tensor, at::Tensor> quantize_activations_int4(const at::Tensor& x, int64_t group) {
  TORCH_CHECK(x.dim() == 1 && x.is_contiguous() && x.scalar_type() == at::kFloat && group % int4::kBlock == 0 &&
              group > 0 && x.size(0) % group == 0, "x: contiguous float32 (K,), group a multiple of 32 dividing K");
  int4::Row out;
  int4::quantize(x.data_ptr<float>(), x.size(0), group, out);
  return {at::from_blob(out.xq.data(), {x.size(0)}, at::kChar).clone(),
          at::from_blob(out.scale.data(), {out.S}, at::kFloat).clone(),
          at::from_blob(out.start.data(), {out.S, 8}, at::kInt).clone()};
}

// An int8 head for one row x (quant.RescoredHead on the kernels): logits = W_int8 rmsnorm(x), then the
// `rescored` highest logits (ties: the lower id) computed again from the float rows. In Python the same
// steps were six ops (norm, product, topk, gather, bmm, scatter), ~430 us beside the product right after
// a decode step, when their code is out of the caches; here one pass picks the top and `rescored` dot products
// (split between the threads) redo them. h = x / rms(x) * weight in one loop (the squares summed in double):
// within float rounding of F.rms_norm. q: int8 (the products on `int8_path`), or a 4-bit head (gemv_int4 above).
at::Tensor head_rescored_row(const at::Tensor& q, const at::Tensor& scale, const at::Tensor& x,
                             const at::Tensor& norm_weight, double eps, const at::Tensor& float_rows, int64_t rescored,
                             int64_t int8_path) {
  const int64_t V = q.size(0), C = x.size(1), K = std::min<int64_t>(std::max<int64_t>(rescored, 0), V);
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
      q.scalar_type() == at::kByte  // a 4-bit head (gemv_int4), else int8
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


// head_rescored_row for each of 1 to kMostRows rows of x (a verify pass, a batch step: each row's logits the bits of
// its own step's), (rows, V).
at::Tensor head_rescored(const at::Tensor& q, const at::Tensor& scale, const at::Tensor& x,
                         const at::Tensor& norm_weight, double eps, const at::Tensor& float_rows, int64_t rescored,
                         int64_t int8_path) {
  TORCH_CHECK(x.dim() == 2 && x.size(0) >= 1 && x.size(0) <= kMostRows && x.scalar_type() == at::kFloat,
              "x: 1 to ", kMostRows, " float32 rows");
  const int64_t V = q.size(0), C = x.size(1);
  TORCH_CHECK(float_rows.dim() == 2 && float_rows.size(0) == V && float_rows.size(1) == C &&
                  float_rows.scalar_type() == at::kFloat && float_rows.is_contiguous(),
              "float_rows: contiguous float32 (vocabulary, hidden), as the int8 head");
  TORCH_CHECK(norm_weight.is_contiguous() && norm_weight.numel() == C && norm_weight.scalar_type() == at::kFloat,
              "norm_weight: float32 (hidden,)");
  if (x.size(0) == 1) return head_rescored_row(q, scale, x, norm_weight, eps, float_rows, rescored, int8_path);
  std::vector<at::Tensor> rows;
  for (int64_t t = 0; t < x.size(0); ++t) {
    rows.push_back(head_rescored_row(q, scale, x.narrow(0, t, 1), norm_weight, eps, float_rows, rescored, int8_path));
  }
  return at::cat(rows);
}

}  // namespace

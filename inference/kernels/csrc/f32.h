// Float32 products of one row: y = alpha * (W x) [* 1 / rms(x)] + bias + residual, W float32 (gemv_f32), the rows
// read in the kernel shape in force; of 2 to 16 rows of x (small M: a verify pass), each weight row read once for
// all of them (gemv_f32_many); where x sits for them (set_x_offset); dot_f32, which attention and the
// head's rescoring use too.

#pragma once

#include <ATen/ATen.h>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>
#include <unistd.h>

#include "simd.h"
#include "shape.h"
#include "products.h"

namespace {  // included by ops.cpp only, the one translation unit: internal linkage

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

inline float dot_f32(const float* w, const float* x, int64_t K) {
  Vec a0 = vzero(), a1 = a0, a2 = a0, a3 = a0;
  int64_t k = 0;
  for (; k + kStep <= K; k += kStep) {
    prefetch_ahead<kPrefetchBytes>(w + k, kStep * sizeof(float));
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

// The products of n consecutive rows in the shape (R rows per pass, prefetch P): fill_f32 (fill_int8 in int8.h),
// one instance per candidate shape, picked at each call from the shape in force.
template <int64_t R, int64_t P>
void fill_f32(const float* w, const float* x, int64_t K, int64_t n, float* out) {
  in_passes<R>(
      n, [&](int64_t i, int64_t step) { dot_rows_f32<rows_of(R), P>(w + i * K, x, K, out + i, step); },
      [&](int64_t i) { dot_rows_f32<1, P>(w + i * K, x, K, out + i, 1); });
}

using FillF32 = void (*)(const float*, const float*, int64_t, int64_t, float*);

FillF32 f32_in_shape() {
  static const FillF32 table[kRowShapes][kPrefetchShapes] = TOKENSTEP_EACH_SHAPE(fill_f32);
  return table[g_shape.f32_rows.load(std::memory_order_relaxed)][g_shape.f32_prefetch.load(std::memory_order_relaxed)];
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

// R weight rows (K apart) streamed from memory past B rows of x (xstride floats apart), each weight vector loaded once
// for all B and each x vector for all R; products into out[r * orow + b]. Each product is formed exactly as dot_f32
// forms it (four accumulators over kStep, the same order, the same tail), so a row of x gets the same bits in a pass
// of M rows as alone. 4 R B accumulators live at once: 8 registers at R = 1, B = 2; 16 at R = B = 2 (AVX-512 only:
// AVX2 has 16 registers in all). fill_many_f32 streams rows of x two at a time, at most kStreamMost of them.
template <int64_t R, int64_t B, int64_t P>
inline void dot_block_f32(const float* w, const float* x, int64_t K, int64_t xstride, float* out, int64_t orow) {
  Vec a[R][B][4];
  for (int64_t r = 0; r < R; ++r)
    for (int64_t b = 0; b < B; ++b) a[r][b][0] = a[r][b][1] = a[r][b][2] = a[r][b][3] = vzero();
  int64_t k = 0;
  for (; k + kStep <= K; k += kStep) {
    for (int64_t r = 0; r < R; ++r) prefetch_ahead<P>(w + r * K + k, kStep * sizeof(float));
    Vec wv[R][4];
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < 4; ++j) wv[r][j] = vload(w + r * K + k + j * kLanes);
    for (int64_t b = 0; b < B; ++b) {
      const float* v = x + b * xstride + k;
      for (int64_t j = 0; j < 4; ++j) {
        const Vec xv = vload(v + j * kLanes);
        for (int64_t r = 0; r < R; ++r) a[r][b][j] = vfma(wv[r][j], xv, a[r][b][j]);
      }
    }
  }
  for (; k + kLanes <= K; k += kLanes) {
    for (int64_t r = 0; r < R; ++r) {
      const Vec w0 = vload(w + r * K + k);
      for (int64_t b = 0; b < B; ++b) a[r][b][0] = vfma(w0, vload(x + b * xstride + k), a[r][b][0]);
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t b = 0; b < B; ++b) {
      float sum = vsum(vadd(vadd(a[r][b][0], a[r][b][1]), vadd(a[r][b][2], a[r][b][3])));
      for (int64_t tail = k; tail < K; ++tail) sum += w[r * K + tail] * x[b * xstride + tail];
      out[r * orow + b] = sum;
    }
  }
}

// Where the next L2 tile's lines are asked for (L2Ahead::next): at each step of dot_tile_f32's inner loop (AVX-512), or
// after each group of kWRows weight rows (AVX2).
// - AVX-512: asked for in slices of ~70 lines after each group of four weight rows, they stalled the thread at each
//   slice (perf: 92 % of fill_many_f32's samples on that loop); among the fmas, a line or two at a time, a pass of 8
//   positions took 21.8-24.9 ms against 29.0-31.6 (default model, context 128, AMD EPYC, 2 threads, the two builds
//   taking turns, fastest of 10 each).
// - AVX2 (its code built on the AMD EPYC: TOKENSTEP_KERNELS_FLAGS="-mavx2 -mfma", the same A/B): at each step, passes
//   of 8 and 16 positions took 1.05x and 1.18x what they took by group; its inner steps are half as long (8 fmas of 8
//   lanes, 2 weight rows).
constexpr bool kPrefetchEachStep = kLanes == 16;

// Asks for `bytes` from `p` into L2 in `parts` even slices, one per call of next() (call c: floor(c * bytes / (parts *
// 64)) lines in all, so a slice of less than a line is a line every few calls), rest(): all that is left. The rows a
// thread reads after its current tile, fetched while it computes that tile from L2.
struct L2Ahead {
  const char* p = nullptr;
  int64_t bytes = 0, unit = 64, owed = 0, at = 0;  // owed / unit: the lines asked for by now, less those sent
  L2Ahead() = default;
  L2Ahead(const float* rows, int64_t floats, int64_t parts)
      : p(reinterpret_cast<const char*>(rows)), bytes(rows ? floats * int64_t(sizeof(float)) : 0),
        unit(std::max<int64_t>(parts, 1) * 64) {}
  void next() {  // no division: one runs at every step of dot_tile_f32's inner loop
    for (owed += bytes; owed >= unit && at < bytes; owed -= unit, at += 64) _mm_prefetch(p + at, _MM_HINT_T1);
  }
  void rest() {
    for (; at < bytes; at += 64) _mm_prefetch(p + at, _MM_HINT_T1);
  }
};

// Whether dot_tile_f32's phases ask for the next phase's vectors into L1 (below). Which is faster depends on the
// machine, not the code: on an AMD EPYC a pass of 8 positions took 25.6-26.6 ms with them against 29.0-30.2 without,
// on an Intel Xeon (AMX) passes of 4-16 positions 0.96-0.98x the time without them (one process switching between
// rounds; its L1 prefetcher follows a phase's strided reads by itself, the asks took load slots from the fmas). So
// kernel_shape.py times the model's own passes both ways at first use and sets the faster (set_tile_l1_prefetch); the
// same bits either way.
std::atomic<bool> g_tile_l1_prefetch{true};

// Sets whether the tiles' phases ask for the next phase's vectors into L1, from the next call on; returns the setting
// before.
bool set_tile_l1_prefetch(bool on) { return g_tile_l1_prefetch.exchange(on); }

// The small-M products: R weight rows (K apart) times B rows of x (K apart), products into out[r * orow + b]. Each
// product is formed exactly as dot_f32 forms it, so a row of x gets the same bits in a pass of M rows as alone:
// dot_f32's four accumulators (the floats at k % kStep in [j kLanes, (j + 1) kLanes), each summed in k order, the
// vector tail into the first) are its four phases here, one phase at a time over the whole rows, each kept until the
// same final sum. So only R * B accumulators live at once (not 4 R B), and each weight and x vector loaded serves
// B and R products: 16 accumulators and 8 loads per 16 fmas at R = B = 4 (AVX-512), where one weight row at a time
// with four accumulators per product took 20 loads per 16 fmas and ran at half the fma rate (in L1, 4 rows of x,
// K = 576: 73 against 37 GFLOP/s on an AMD EPYC, one thread). For rows already in L2 (phase-strided reads of
// rows streamed from memory measured slower than dot_block_f32's one pass). Each phase (where g_tile_l1_prefetch)
// asks for the vectors the next phase reads (after the last phase: the next R weight rows' first) into L1, so that
// the strided reads of a phase do not wait on L2 (perf put 45 % of this function's samples on the weight loads
// without it; a pass of 8 positions, the same A/B as kPrefetchEachStep's: 25.6-26.6 ms against 29.0-30.2 ms).
template <int64_t R, int64_t B>
inline void dot_tile_f32(const float* w, const float* x, int64_t K, float* out, int64_t orow, L2Ahead& ahead,
                         bool l1) {
  Vec part[4][R][B];
  const int64_t steps = K / kStep;
  int64_t end = steps * kStep;  // where the first phase's vector tail ends
  for (int64_t j = 0; j < 4; ++j) {
    Vec a[R][B];
    for (int64_t r = 0; r < R; ++r)
      for (int64_t b = 0; b < B; ++b) a[r][b] = vzero();
    // The vectors the next phase reads (the next kWRows weight rows' first phase after the last), asked into L1 while
    // this phase computes; not where the next phase's vectors share this phase's cache lines (AVX2: 32-byte vectors,
    // phases 0 and 1, 2 and 3 on one line).
    const float* next = j < 3 ? w + (j + 1) * kLanes : w + R * K;
    const bool ask = l1 && (j == 3 || ((j + 1) * kLanes * int64_t(sizeof(float))) % 64 == 0);
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t k = s * kStep + j * kLanes;
      Vec wv[R];
      for (int64_t r = 0; r < R; ++r) {
        if (ask) _mm_prefetch(reinterpret_cast<const char*>(next + r * K + s * kStep), _MM_HINT_T0);
        wv[r] = vload(w + r * K + k);
      }
      if (kPrefetchEachStep) ahead.next();
      for (int64_t b = 0; b < B; ++b) {
        const Vec xv = vload(x + b * K + k);
        for (int64_t r = 0; r < R; ++r) a[r][b] = vfma(wv[r], xv, a[r][b]);
      }
    }
    if (j == 0) {
      for (; end + kLanes <= K; end += kLanes) {
        for (int64_t r = 0; r < R; ++r) {
          const Vec wv = vload(w + r * K + end);
          for (int64_t b = 0; b < B; ++b) a[r][b] = vfma(wv, vload(x + b * K + end), a[r][b]);
        }
      }
    }
    for (int64_t r = 0; r < R; ++r)
      for (int64_t b = 0; b < B; ++b) part[j][r][b] = a[r][b];
  }
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t b = 0; b < B; ++b) {
      float sum = vsum(vadd(vadd(part[0][r][b], part[1][r][b]), vadd(part[2][r][b], part[3][r][b])));
      for (int64_t tail = end; tail < K; ++tail) sum += w[r * K + tail] * x[b * K + tail];
      out[r * orow + b] = sum;
    }
  }
}

constexpr int64_t kWRows = kLanes == 16 ? 4 : 2;  // weight rows per tile (AVX-512: 16 accumulators; AVX2: 8 of 16)
constexpr int64_t kXBlock = 4;                     // rows of x per tile
// The most rows of x streamed past each weight row (more: L2 tiles). AVX2, whose tiles ask for the next one's lines by
// group (kPrefetchEachStep): 3 and 4 rows took 1.11x and 1.08x longer from the tiles than streamed (the AVX2 build,
// the same A/B).
constexpr int64_t kStreamMost = kPrefetchEachStep ? 2 : 4;
constexpr int64_t kMostRows = 16;                  // the most rows of x a small-M product takes

// R weight rows times the b (1..kXBlock) rows of x from x: dot_tile_f32 for that b.
template <int64_t R>
inline void dot_tile_any_f32(const float* w, const float* x, int64_t K, int64_t b, float* out, int64_t orow,
                             L2Ahead& ahead, bool l1) {
  switch (b) {
    case 4: return dot_tile_f32<R, 4>(w, x, K, out, orow, ahead, l1);
    case 3: return dot_tile_f32<R, 3>(w, x, K, out, orow, ahead, l1);
    case 2: return dot_tile_f32<R, 2>(w, x, K, out, orow, ahead, l1);
    default: return dot_tile_f32<R, 1>(w, x, K, out, orow, ahead, l1);
  }
}

// R weight rows (K apart) streamed past T rows of x (at most kStreamMost), two rows of x at a time, the first two from
// memory (prefetched as the one-row products are), the rest from L1.
template <int64_t R>
inline void stream_rows_f32(const float* w, const float* xp, int64_t K, int64_t T, float* out) {
  int64_t u = 0;
  for (; u + 2 <= T; u += 2) {
    if (u == 0) dot_block_f32<R, 2, kPrefetchBytes>(w, xp, K, K, out, T);
    else dot_block_f32<R, 2, 0>(w, xp + u * K, K, K, out + u, T);
  }
  if (u < T) {
    if (u == 0) dot_block_f32<R, 1, kPrefetchBytes>(w, xp, K, K, out, T);
    else dot_block_f32<R, 1, 0>(w, xp + u * K, K, K, out + u, T);
  }
}

// Whether streamed rows of x go past two weight rows at once (AVX-512 only) or one: as the one-row products read
// theirs, in the shape measured on this machine (kernel_shape.py). Where one row per pass measured fastest (an AMD
// EPYC: 1.3x faster than four), one; where more did (an Intel Xeon: 4 rows far apart), two adjacent rows. On that
// Xeon (AMX, 2 threads, default model, context 128, pass_ab.py: five runs of the two builds taking turns) a pass of 2
// positions took 0.92-0.98x the time it took with one weight row at a time.
inline bool stream_in_pairs() {
  return kLanes == 16 && rows_of(kShapeRows[g_shape.f32_rows.load(std::memory_order_relaxed)]) > 1;
}

// Weight rows per L2 tile of gemv_f32_many: about this many bytes of them, which stay in L2 while the blocks of x go
// over them.
constexpr int64_t kTileBytes = 96 << 10;

// Weight rows per L2 tile for rows K floats wide: about kTileBytes, a whole number of kWRows.
inline int64_t tile_rows(int64_t K) {
  return std::max<int64_t>(kWRows, kTileBytes / (K * int64_t(sizeof(float))) / kWRows * kWRows);
}


// The rows of x a group of weight rows goes over before the next group (fill_many_f32): two blocks of x where they and
// a group fit in two thirds of this machine's L1 data cache (so each group is read from L2 once for 8 rows of x, and
// the rows of x stay in L1 across the groups), else one block (each group read from L2 once per block). An Intel Xeon
// (48 KB L1): K = 576 sweeps 8 rows, K = 1536 4; an AMD EPYC (32 KB): 4 at both, as before. On that Xeon (AMX, 2
// threads, default model, context 128, pass_ab.py against one block at a time, the same bits): passes of 5, 8 and 16
// positions 0.95x, 0.94x and 0.98x the time (the AVX2 build there: 0.95x, 0.97x, 0.97x), 4 (one block either way)
// 1.00x; all 16 rows in one sweep instead: 1.06x at 16 (16 rows of x do not fit).
inline int64_t sweep_rows(int64_t K) {
  static const int64_t l1 = [] {
    const long bytes = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    return bytes > 0 ? int64_t(bytes) : int64_t(32) << 10;
  }();
  return (2 * kXBlock + kWRows) * K * int64_t(sizeof(float)) <= l1 * 2 / 3 ? 2 * kXBlock : kXBlock;
}

// The products of weight rows w[0..n) (K apart, an L2 tile: tile_rows) with T rows of x (xp, K apart):
// products[i * T + t], each formed as dot_f32 forms it (the bits a row of x gets alone). `ahead`: the rows this thread
// reads after the tile, asked for into L2 in slices as the tile is computed (ahead_of). Up to kStreamMost rows of x,
// each weight row is streamed once past them (dot_block_f32, two rows at a time where stream_in_pairs); more rows of x
// go over the tile in blocks of kXBlock from L2, each group of weight rows over a sweep of one or two blocks before the
// next group (sweep_rows) (dot_tile_f32, kWRows weight rows at a time, phase by phase: 8 loads
// per 16 fmas where a streamed row with four accumulators a product takes 20), the tile having come into L2 while the
// one before was computed. Measured (default model, a pass of M positions in one call, AMD EPYC AVX-512, 2 threads,
// fastest of 6 rounds under load 3, the same bits): streaming M = 2 as one block of 2 rather than two of 1, 22.2 ->
// 20.3 ms; M = 5, 8, 16 all from L2 with the next tile asked for, rather than the first block streamed from memory
// and the rest from L2 without it: 28.0 / 30.2 / 44.2 -> 29.0 / 30.5 / 43.5 ms at 16 positions, 29.3 / 35.1 / 53.5 ->
// 28.6 / 33.7 / 48.0 ms at 512. Since the tiles' prefetches go out among the fmas (L2Ahead, dot_tile_f32), 3 and 4 rows
// of x take the tiles too, where they were streamed: 18.2-19.1 / 19.0-21.5 ms against 20.7-24.4 / 21.8-23.3 (context
// 128, the two builds taking turns); 2 rows about equal either way (19.2-20.2 against 18.8-19.1), so they stream.
inline void fill_many_f32(const float* wp, int64_t n, const float* xp, int64_t K, int64_t T, float* products,
                          L2Ahead ahead) {
  if (T <= kStreamMost) {
    int64_t i = 0;
    if (stream_in_pairs()) {
      for (; i + 2 <= n; i += 2) stream_rows_f32<2>(wp + i * K, xp, K, T, products + i * T);
    }
    for (; i < n; ++i) stream_rows_f32<1>(wp + i * K, xp, K, T, products + i * T);
    return;
  }
  // Each group of weight rows goes over a whole sweep of x's rows (sweep_rows) before the next group: the group is read
  // from L2 once per sweep, not once per block of x.
  const int64_t sweep = sweep_rows(K);
  const bool l1 = g_tile_l1_prefetch.load(std::memory_order_relaxed);
  for (int64_t s0 = 0; s0 < T; s0 += sweep) {
    const int64_t s1 = std::min(T, s0 + sweep);
    for (int64_t i = 0; i < n;) {
      const float* w = wp + i * K;
      const int64_t rows = i + kWRows <= n ? kWRows : 1;
      for (int64_t t = s0; t < s1; t += kXBlock) {
        const int64_t b = std::min(kXBlock, s1 - t);
        float* out = products + i * T + t;
        if (rows == kWRows) dot_tile_any_f32<kWRows>(w, xp + t * K, K, b, out, T, ahead, l1);
        else dot_tile_any_f32<1>(w, xp + t * K, K, b, out, T, ahead, l1);
        if (!kPrefetchEachStep) ahead.next();
      }
      i += rows;
    }
  }
  ahead.rest();  // what rounding left
}

// The L2Ahead of a fill of T rows of x over a tile of `tile` rows: the thread's next `next_rows` rows from `next` (none
// when null), one slice per call of next() over the tile (kPrefetchEachStep); none when the rows of x stream.
inline L2Ahead ahead_of(const float* next, int64_t next_rows, int64_t K, int64_t T, int64_t tile) {
  if (T <= kStreamMost || next == nullptr) return L2Ahead();
  // the calls of next() per group of weight rows: each step of dot_tile_f32's over it, or one after it
  const int64_t steps = kPrefetchEachStep ? std::max<int64_t>(K / kStep, 1) * 4 : 1;
  return L2Ahead(next, next_rows * K, (T + kXBlock - 1) / kXBlock * ((tile + kWRows - 1) / kWRows) * steps);
}

// y[t, r] = products[(r - r0) * T + t] * alphas[t] + bias[r] + residual[t, r] for weight rows r0..r0+n-1 and the T
// rows of x (y and residual N wide): a product of several rows' epilogue. Row by row, every row of x within (as
// rows() writes them): the compiler contracts product * alpha + bias into one fma or not by the loop's shape, and a
// row of a pass must get the bits it gets alone (tests/kernels/test_small_m.py).
inline void rows_of_products(const float* products, int64_t r0, int64_t n, int64_t T, int64_t N, const float* alphas,
                             const float* bp, const float* rp, float* yp) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = r0 + i;
    for (int64_t t = 0; t < T; ++t) {
      float v = products[i * T + t] * alphas[t];
      if (bp) v += bp[r];
      if (rp) v += rp[t * N + r];
      yp[t * N + r] = v;
    }
  }
}

// y = alpha_t * (W x_t) + bias + residual_t for T rows of x (2 <= T <= kMostRows): rows of W split over the
// threads as the one-row products split them, a thread's rows in L2 tiles (fill_many_f32).
at::Tensor gemv_f32_many(const float* wp, int64_t N, int64_t K, const at::Tensor& x, const std::vector<float>& alphas,
                         const float* h, const std::optional<at::Tensor>& bias,
                         const std::optional<at::Tensor>& residual) {
  const int64_t T = x.size(0);
  std::vector<float> x_copy;
  const float* xp = staggered(h, T * K, x_copy);  // each row at the same offset where K * 4 is a multiple of 64
  const int64_t tile = tile_rows(K);
  at::Tensor y = at::empty({T, N}, x.options());
  const float* bp = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  const float* rp = residual.has_value() ? residual->data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, N, kRowsPerTask, [&](int64_t begin, int64_t end) {
    std::vector<float> products(tile * kMostRows);  // (rows of the tile, T)
    for (int64_t r0 = begin; r0 < end; r0 += tile) {
      const int64_t n = std::min(tile, end - r0);
      const int64_t next = r0 + tile < end ? std::min(tile, end - r0 - tile) : 0;
      fill_many_f32(wp + r0 * K, n, xp, K, T, products.data(),
                    ahead_of(next ? wp + (r0 + tile) * K : nullptr, next, K, T, tile));
      rows_of_products(products.data(), r0, n, T, N, alphas.data(), bp, rp, yp);
    }
  });
  return y;
}

at::Tensor gemv_f32(const at::Tensor& w, const at::Tensor& x, double alpha, const std::optional<at::Tensor>& bias,
                    const std::optional<at::Tensor>& residual, double rms_eps, bool glu,
                    const std::optional<at::Tensor>& norm_weight) {
  check(w, x, bias, residual);
  const int64_t T = x.size(0);
  TORCH_CHECK(w.scalar_type() == at::kFloat && T >= 1 && T <= kMostRows, "weight: float32; x: 1 to ", kMostRows,
              " rows");
  TORCH_CHECK(!glu || (T == 1 && !residual.has_value()), "glu: one row of x, no residual");
  const float* wp = w.data_ptr<float>();
  const int64_t K = w.size(1);
  const std::vector<float> alphas = row_alphas(x.data_ptr<float>(), T, K, alpha, rms_eps);
  const at::Tensor h = weighted(x, norm_weight);
  if (T > 1) return gemv_f32_many(wp, w.size(0), K, x, alphas, h.data_ptr<float>(), bias, residual);
  std::vector<float> x_copy;
  const float* xp = staggered(h.data_ptr<float>(), K, x_copy);
  const FillF32 in_shape = f32_in_shape();
  auto fill = [=](int64_t r, int64_t n, float* out) { in_shape(wp + r * K, xp, K, n, out); };
  if (glu) return rows_glu(w.size(0), x, alphas[0], bias, fill);
  return rows_one(w.size(0), x, alphas[0], bias, residual, fill);
}

}  // namespace

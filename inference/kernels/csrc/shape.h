// The kernel shape: how the one-row products read their weights (rows per pass, software prefetch distance),
// the shape in force (set_shape / get_shape, chosen by inference/model/kernel_shape.py), the tables that pick an
// instance of a fill function per shape, and how a fill walks its rows in passes.

#pragma once

#include <atomic>
#include <cstdint>
#include <vector>
#include <c10/util/Exception.h>

namespace {  // included by ops.cpp only, the one translation unit: internal linkage

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

}  // namespace

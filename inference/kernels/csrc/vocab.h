// One step's vocabulary statistics in one call (vocab_stats):
// softmax in float64, its maximum and first argmax, its entropy, how many probabilities are non-zero, the
// top n logits (descending, ties to the lower id), and for a greedy step the one-hot final distribution.
//
// Why: right after a decode step each torch op costs 20-100 us, its code being out of the caches; the
// draw and report of a greedy step took ~20 of them (0.68 ms measured on an AMD EPYC, beside a 12 ms
// step). Here the same numbers take one call: a pass that keeps the top n in a small heap, then passes of
// exp, sum, scaling and the entropy's weighted sum. sampling.py falls back to torch ops when the kernels
// are not loaded, for other dtypes and devices, and whenever the maximum is not finite (the NaN / all -inf
// errors are said there).
//
// exp: exp(t) = 2^n exp(r), n = round(t / ln 2), r = t - n ln 2 (ln 2 split in two, Cody-Waite), |r| <=
// ln 2 / 2, exp(r) by its Taylor series to r^13 (truncation < 2e-17 relative), 2^n put into the exponent
// bits by two factors (each a normal double) so that the last multiplication rounds into the subnormals as
// exp does; t < -746 gives 0 (exp(-746) is below half the smallest subnormal). Branch-free, so the loop
// vectorises. Against torch.exp over [-760, 0]: within 2 ulp, zero at the same places (tests/kernels/test_vocab_stats.py).

// The selects below (t < -746, q > 0) are if-converted, and so the loops vectorised, only where the compiler
// may assume floating-point operations do not trap (GCC's default -ftrapping-math keeps them as branches:
// on an AVX2 EPYC the exp loop then ran scalar, 317 us for 49K logits against 124 us vectorised). This file
// sets no floating-point flags and reads none: the values are the same either way.

#pragma once

#include <ATen/ATen.h>
#include <omp.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

namespace {  // included by ops.cpp only, the one translation unit: internal linkage

#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")

inline double exp_nonpositive(double t) {
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2Hi = 0.693147180369123816490;  // ln 2 rounded to 32 significant bits
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const bool under = t < -746.0;
  t = under ? -746.0 : t;
  const double shifted = t * kLog2e + kRound;
  const double n = shifted - kRound;  // round(t / ln 2), an integer in [-1076, 0]
  const double r = (t - n * kLn2Hi) - n * kLn2Lo;
  double s = 1.0 / 6227020800.0;  // 1/13!
  s = s * r + 1.0 / 479001600.0;
  s = s * r + 1.0 / 39916800.0;
  s = s * r + 1.0 / 3628800.0;
  s = s * r + 1.0 / 362880.0;
  s = s * r + 1.0 / 40320.0;
  s = s * r + 1.0 / 5040.0;
  s = s * r + 1.0 / 720.0;
  s = s * r + 1.0 / 120.0;
  s = s * r + 1.0 / 24.0;
  s = s * r + 1.0 / 6.0;
  s = s * r + 0.5;
  s = s * r + 1.0;
  s = s * r + 1.0;
  // 2^n for n in [-1076, 0]: in two halves, so that each is a normal double (2^-1076 alone is not). n as
  // an integer is the difference of the bit patterns (kRound's ulp is 1), which vectorises without AVX-512.
  int64_t shifted_bits;
  std::memcpy(&shifted_bits, &shifted, 8);
  const int64_t k = shifted_bits - 0x4338000000000000LL;  // the bits of kRound
  const int64_t half = k >> 1;
  double a, b;
  const int64_t bits_a = (half + 1023) << 52, bits_b = (k - half + 1023) << 52;
  std::memcpy(&a, &bits_a, 8);
  std::memcpy(&b, &bits_b, 8);
  const double e = s * a * b;
  return under ? 0.0 : e;
}

// The top n of x (descending value, ties to the lower id) by one pass with a heap whose root is the worst
// kept entry. Scanning ids upwards, an entry equal to the root's value comes after it, so only a value
// strictly above the root's enters a full heap; blocks of 32 with none above it are skipped by one
// vectorised compare (7 us for 49K logits where entry by entry took 43). NaN never enters. Returns how
// many entries were kept: fewer than n only when x holds NaN.
int64_t top_entries(const float* x, int64_t V, int64_t n, int64_t* ids, double* values) {
  std::vector<std::pair<float, int64_t>> heap;  // its front is the worst kept entry
  heap.reserve(n);
  auto better = [](const std::pair<float, int64_t>& a, const std::pair<float, int64_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  auto consider = [&](int64_t i) {
    const float v = x[i];
    if (static_cast<int64_t>(heap.size()) < n) {
      if (v == v) {
        heap.emplace_back(v, i);
        std::push_heap(heap.begin(), heap.end(), better);
      }
    } else if (v > heap.front().first) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = {v, i};
      std::push_heap(heap.begin(), heap.end(), better);
    }
  };
  constexpr int64_t kBlock = 32;
  int64_t i = 0;
  for (; i < V && static_cast<int64_t>(heap.size()) < n; ++i) consider(i);
  for (; i + kBlock <= V; i += kBlock) {
    const float threshold = heap.front().first;
    int above = 0;
    for (int64_t j = 0; j < kBlock; ++j) above |= x[i + j] > threshold;
    if (above)
      for (int64_t j = 0; j < kBlock; ++j) consider(i + j);
  }
  for (; i < V; ++i) consider(i);
  std::sort_heap(heap.begin(), heap.end(), better);  // best first
  for (size_t j = 0; j < heap.size(); ++j) {
    ids[j] = heap[j].second;
    values[j] = heap[j].first;
  }
  return static_cast<int64_t>(heap.size());
}

// Sum of v[0..V) in 8 interleaved partial sums (vectorises; the order is fixed, so the result is too).
double sum8(const double* v, int64_t V) {
  double sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= V; i += 8)
    for (int j = 0; j < 8; ++j) sums[j] += v[i + j];
  for (; i < V; ++i) sums[0] += v[i];
  return ((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7]));
}

// (sum of p_i x_i over p_i > 0, how many p_i > 0). The products are taken for every i and then selected
// (0 * -inf would be NaN), so the loop has no branch and vectorises.
std::pair<double, int64_t> weighted_nonzero(const double* p, const float* x, int64_t V) {
  double dots[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  double counts[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // doubles (exact to 2^53): one vector type, it vectorises
  int64_t i = 0;
  for (; i + 8 <= V; i += 8)
    for (int j = 0; j < 8; ++j) {
      const double q = p[i + j], product = q * static_cast<double>(x[i + j]);
      counts[j] += q > 0.0 ? 1.0 : 0.0;
      dots[j] += q > 0.0 ? product : 0.0;
    }
  for (; i < V; ++i) {
    const double q = p[i], product = q * static_cast<double>(x[i]);
    counts[0] += q > 0.0 ? 1.0 : 0.0;
    dots[0] += q > 0.0 ? product : 0.0;
  }
  double count = 0;
  for (int j = 0; j < 8; ++j) count += counts[j];
  return {((dots[0] + dots[1]) + (dots[2] + dots[3])) + ((dots[4] + dots[5]) + (dots[6] + dots[7])),
          static_cast<int64_t>(count)};
}

// pp[i] = exp(x[i] - top) for i in [begin, end); returns their sum (sum8).
double exp_part(const float* x, double top, double* pp, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) pp[i] = exp_nonpositive(static_cast<double>(x[i]) - top);
  return sum8(pp + begin, end - begin);
}

// The passes over the vocabulary run in kParts fixed parts, split between the threads from kParallelVocab
// tokens on: the sums are formed part by part, then the parts' sums in order, so the numbers do not depend
// on the thread count. AVX2 EPYC, 49K logits, right after a 512 MB read and a parallel region (as after a
// decode step), medians of 30: 220-244 us in one pass on one thread, 152-160 us in parts on two.
constexpr int64_t kParts = 16;
constexpr int64_t kParallelVocab = 8192;

// (p, p_final, top_ids, numbers): numbers = [max, argmax, entropy, non-zero count, p[argmax], then the top n
// logits], the top n by logit descending (ties to the lower id) in top_ids. With a NaN in the logits
// (numbers[0] is NaN then) or a maximum that is not finite, p and p_final are empty and the caller falls
// back to torch ops; p_final (one-hot at the argmax) is filled for a greedy step only. Few allocations:
// each costs ~5 us right after a decode step.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> vocab_stats(const at::Tensor& logits, int64_t top_n,
                                                                      bool greedy) {
  TORCH_CHECK(logits.dim() == 1 && logits.scalar_type() == at::kFloat && logits.is_contiguous() &&
              logits.size(0) > 0, "vocab_stats: contiguous 1-D float32 logits");
  const float* x = logits.data_ptr<float>();
  const int64_t V = logits.size(0);
  const int64_t n = std::max<int64_t>(1, std::min(top_n, V));
  auto numbers = at::empty({5 + n}, at::kDouble);
  auto top_ids = at::empty({n}, at::kLong);
  double* st = numbers.data_ptr<double>();
  std::fill(st, st + 5, 0.0);
  const int64_t* ids = top_ids.data_ptr<int64_t>();
  const bool full = top_entries(x, V, n, top_ids.data_ptr<int64_t>(), st + 5) == n;
  const double top = full ? st[5] : std::nan("");
  st[0] = top;
  if (!std::isfinite(top)) return {numbers.new_empty({0}), numbers.new_empty({0}), top_ids, numbers};

  auto p = at::empty({V}, at::kDouble);
  double* pp = p.data_ptr<double>();
  at::Tensor p_final = greedy ? at::empty({V}, at::kDouble) : numbers.new_empty({0});  // one-hot at the argmax
  double* pf = greedy ? p_final.data_ptr<double>() : nullptr;
  const int64_t part = (V + kParts - 1) / kParts;
  auto bounds = [&](int64_t c) {  // part c's [begin, end)
    const int64_t begin = std::min(V, c * part);
    return std::pair<int64_t, int64_t>{begin, std::min(V, begin + part)};
  };
  double sums[kParts], dots[kParts];
  int64_t counts[kParts];
  double total = 0.0, inverse = 0.0;
#pragma omp parallel num_threads(V >= kParallelVocab ? at::get_num_threads() : 1)
  {
#pragma omp for schedule(static)
    for (int64_t c = 0; c < kParts; ++c) {
      const auto [begin, end] = bounds(c);
      sums[c] = exp_part(x, top, pp, begin, end);
      if (pf != nullptr) std::memset(pf + begin, 0, (end - begin) * sizeof(double));
    }
#pragma omp single
    {
      for (int64_t c = 0; c < kParts; ++c) total += sums[c];
      inverse = 1.0 / total;  // NaN with a NaN past the first n entries (the heap skipped it, exp did not)
    }
#pragma omp for schedule(static)
    for (int64_t c = 0; c < kParts; ++c) {
      const auto [begin, end] = bounds(c);
      for (int64_t i = begin; i < end; ++i) pp[i] *= inverse;
      std::tie(dots[c], counts[c]) = weighted_nonzero(pp + begin, x + begin, end - begin);
    }
  }
  if (total != total) {
    st[0] = total;
    return {numbers.new_empty({0}), numbers.new_empty({0}), top_ids, numbers};
  }
  double dot = 0.0;
  int64_t nonzero = 0;
  for (int64_t c = 0; c < kParts; ++c) {
    dot += dots[c];
    nonzero += counts[c];
  }
  st[1] = static_cast<double>(ids[0]);
  st[2] = std::max(0.0, top + std::log(total) - dot);  // log Z - E_p[logit], log Z = max + log sum
  st[3] = static_cast<double>(nonzero);
  st[4] = pp[ids[0]];
  if (pf != nullptr) pf[ids[0]] = 1.0;
  return {p, p_final, top_ids, numbers};
}

// exp_nonpositive over a float64 tensor (values <= 0), for the test against torch.exp.
at::Tensor exp_nonpositive_op(const at::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == at::kDouble && t.is_contiguous(), "exp_nonpositive: contiguous float64");
  auto out = at::empty_like(t);
  const double* a = t.data_ptr<double>();
  double* o = out.data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) o[i] = exp_nonpositive(a[i]);
  return out;
}

#pragma GCC pop_options

}  // namespace

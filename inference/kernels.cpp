// One-row products for decode on AVX-512 CPUs: y = alpha * (W x) [* scale] + bias + residual.
//
// Decode reads every weight once per token, so it runs at the speed the matrix streams from memory.
// Each thread takes a contiguous range of rows and reads it front to back as one stream, prefetching
// a few KB ahead; BLAS GEMV (several rows at a time, no prefetch) reached 75-85 % of a plain streaming
// read here, this reaches 87-97 %. The int8 variant widens each weight to float32 in registers, so its
// activations stay float32 (the stock int8 kernel is fast only with bfloat16 ones), and applies one
// scale per group of weights in a row (weights.py picks the group size).
// Built on first use by kernels.py; without a compiler or AVX-512 the decoder uses stock ops instead.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <torch/library.h>

#include <cstdint>
#include <vector>

namespace {

constexpr int64_t kPrefetchBytes = 8192;  // ahead of the row being read, within the thread's range
constexpr int64_t kRowsPerTask = 16;

inline float bf16_to_float(uint16_t bits) {
  uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  __builtin_memcpy(&value, &widened, sizeof(value));
  return value;
}

inline float dot_f32(const float* w, const float* x, int64_t K) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t k = 0;
  for (; k + 64 <= K; k += 64) {
    const char* ahead = reinterpret_cast<const char*>(w + k) + kPrefetchBytes;
    _mm_prefetch(ahead, _MM_HINT_T0);
    _mm_prefetch(ahead + 64, _MM_HINT_T0);
    _mm_prefetch(ahead + 128, _MM_HINT_T0);
    _mm_prefetch(ahead + 192, _MM_HINT_T0);
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + k), _mm512_loadu_ps(x + k), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + k + 16), _mm512_loadu_ps(x + k + 16), a1);
    a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + k + 32), _mm512_loadu_ps(x + k + 32), a2);
    a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + k + 48), _mm512_loadu_ps(x + k + 48), a3);
  }
  for (; k + 16 <= K; k += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + k), _mm512_loadu_ps(x + k), a0);
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  for (; k < K; ++k) sum += w[k] * x[k];
  return sum;
}

inline __m512 widen(const int8_t* q) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q))));
}

// Group-wise scales: each run of G weights of a row shares one scale (G = K / scale columns; G = K is
// one scale per row). A group's products are summed first, then scaled once.
inline float dot_int8(const int8_t* q, const float* x, int64_t K, const uint16_t* scale, int64_t G) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 t0 = zero, t1 = zero;
  float rest = 0.0f;
  for (int64_t g0 = 0; g0 < K; g0 += G) {
    const int64_t end = g0 + G;
    __m512 a0 = zero, a1 = zero, a2 = zero, a3 = zero;
    int64_t k = g0;
    for (; k + 64 <= end; k += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(q + k) + kPrefetchBytes, _MM_HINT_T0);
      a0 = _mm512_fmadd_ps(widen(q + k), _mm512_loadu_ps(x + k), a0);
      a1 = _mm512_fmadd_ps(widen(q + k + 16), _mm512_loadu_ps(x + k + 16), a1);
      a2 = _mm512_fmadd_ps(widen(q + k + 32), _mm512_loadu_ps(x + k + 32), a2);
      a3 = _mm512_fmadd_ps(widen(q + k + 48), _mm512_loadu_ps(x + k + 48), a3);
    }
    for (; k + 16 <= end; k += 16) a0 = _mm512_fmadd_ps(widen(q + k), _mm512_loadu_ps(x + k), a0);
    float part = 0.0f;
    for (; k < end; ++k) part += static_cast<float>(q[k]) * x[k];
    const float s = bf16_to_float(*scale++);
    t0 = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), _mm512_set1_ps(s), t0);
    t1 = _mm512_fmadd_ps(_mm512_add_ps(a2, a3), _mm512_set1_ps(s), t1);
    rest += part * s;
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(t0, t1)) + rest;
}

// Four rows of x (K apart) times one weight row that sits in L1: each weight load serves four products.
inline void dot4_f32(const float* w, const float* x, int64_t K, float* out) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m512 wv = _mm512_loadu_ps(w + k);
    a0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + k), a0);
    a1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + K + k), a1);
    a2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + 2 * K + k), a2);
    a3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + 3 * K + k), a3);
  }
  out[0] = _mm512_reduce_add_ps(a0);
  out[1] = _mm512_reduce_add_ps(a1);
  out[2] = _mm512_reduce_add_ps(a2);
  out[3] = _mm512_reduce_add_ps(a3);
  for (; k < K; ++k) {
    for (int i = 0; i < 4; ++i) out[i] += w[k] * x[i * K + k];
  }
}

// One row of q times its scales, as float32.
inline void dequantize_row(const int8_t* q, const uint16_t* scale, int64_t K, int64_t G, float* out) {
  for (int64_t g0 = 0; g0 < K; g0 += G, ++scale) {
    const float s = bf16_to_float(*scale);
    const __m512 vs = _mm512_set1_ps(s);
    const int64_t end = g0 + G;
    int64_t k = g0;
    for (; k + 16 <= end; k += 16) _mm512_storeu_ps(out + k, _mm512_mul_ps(widen(q + k), vs));
    for (; k < end; ++k) out[k] = static_cast<float>(q[k]) * s;
  }
}

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

// y[t, r] = alpha * dot(r, x[t]) + bias[r] + residual[t, r], rows split over the threads.
template <typename Dot>
at::Tensor rows(int64_t N, int64_t K, const at::Tensor& x, double alpha, const std::optional<at::Tensor>& bias,
                const std::optional<at::Tensor>& residual, Dot dot) {
  const int64_t T = x.size(0);
  at::Tensor y = at::empty({T, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* bp = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  const float* rp = residual.has_value() ? residual->data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  const float a = static_cast<float>(alpha);
  at::parallel_for(0, N, kRowsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      dot(r, [&](int64_t t, float product) {
        float v = product * a;
        if (bp) v += bp[r];
        if (rp) v += rp[t * N + r];
        yp[t * N + r] = v;
      });
    }
  });
  return y;
}

at::Tensor gemv_f32(const at::Tensor& w, const at::Tensor& x, double alpha, const std::optional<at::Tensor>& bias,
                    const std::optional<at::Tensor>& residual) {
  check(w, x, bias, residual);
  TORCH_CHECK(w.scalar_type() == at::kFloat && x.size(0) == 1, "weight: float32; x: one row");
  const float* wp = w.data_ptr<float>();
  const float* xp = x.data_ptr<float>();
  const int64_t K = w.size(1);
  return rows(w.size(0), K, x, alpha, bias, residual,
              [=](int64_t r, auto&& put) { put(0, dot_f32(wp + r * K, xp, K)); });
}

// One row of x streams the int8 matrix and widens it in registers. Several rows (a short prefill)
// dequantise each weight row once into a buffer that stays in L1 and take every x row's product with it.
at::Tensor gemv_int8(const at::Tensor& q, const at::Tensor& scale, const at::Tensor& x, double alpha,
                     const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& residual) {
  check(q, x, bias, residual);
  const int64_t G = group_size(q, scale), K = q.size(1), T = x.size(0), S = scale.size(1);
  const int8_t* qp = q.data_ptr<int8_t>();
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scale.data_ptr());
  const float* xp = x.data_ptr<float>();
  if (T == 1) {
    return rows(q.size(0), K, x, alpha, bias, residual,
                [=](int64_t r, auto&& put) { put(0, dot_int8(qp + r * K, xp, K, sp + r * S, G)); });
  }
  return rows(q.size(0), K, x, alpha, bias, residual, [=](int64_t r, auto&& put) {
    thread_local std::vector<float> buffer;
    buffer.resize(K);
    dequantize_row(qp + r * K, sp + r * S, K, G, buffer.data());
    int64_t t = 0;
    for (float four[4]; t + 4 <= T; t += 4) {
      dot4_f32(buffer.data(), xp + t * K, K, four);
      for (int i = 0; i < 4; ++i) put(t + i, four[i]);
    }
    for (; t < T; ++t) put(t, dot_f32(buffer.data(), xp + t * K, K));
  });
}

// The float32 matrix q * scale, for products of many rows (a long prefill), which go to BLAS.
at::Tensor dequantize_int8(const at::Tensor& q, const at::Tensor& scale) {
  TORCH_CHECK(q.dim() == 2 && q.is_contiguous() && q.device().is_cpu(), "weight: contiguous (out, in) on CPU");
  const int64_t G = group_size(q, scale), N = q.size(0), K = q.size(1), S = scale.size(1);
  at::Tensor w = at::empty({N, K}, q.options().dtype(at::kFloat));
  const int8_t* qp = q.data_ptr<int8_t>();
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scale.data_ptr());
  float* wp = w.data_ptr<float>();
  at::parallel_for(0, N, kRowsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) dequantize_row(qp + r * K, sp + r * S, K, G, wp + r * K);
  });
  return w;
}

}  // namespace

TORCH_LIBRARY(tokenstep, m) {
  m.def("gemv_f32(Tensor w, Tensor x, float alpha, Tensor? bias, Tensor? residual) -> Tensor");
  m.def("gemv_int8(Tensor q, Tensor scale, Tensor x, float alpha, Tensor? bias, Tensor? residual) -> Tensor");
  m.def("dequantize_int8(Tensor q, Tensor scale) -> Tensor");
}

TORCH_LIBRARY_IMPL(tokenstep, CPU, m) {
  m.impl("gemv_f32", gemv_f32);
  m.impl("gemv_int8", gemv_int8);
  m.impl("dequantize_int8", dequantize_int8);
}

// The integer int8 path (included by kernels.cpp, inside its namespace, so it shares check, group_size,
// row_alphas, weighted, rows_one and rows_glu): one row x quantised to int8 and its products with the int8
// weights taken by AVX-512 VNNI (vpdpbusd: u8 x s8, four products summed into each int32 lane).
//
// The float path widens every weight to float32 in registers: 4 widenings, 4 converts and 4 FMAs per 64
// weights made int8 decode compute-bound (its products took 1.69x a read of the same bytes on an AMD EPYC).
// Here 64 weights take one XOR and one vpdpbusd, and a group's int32 sums one convert and one FMA.
//
// The math, per group g of G weights (the weight groups of quant.quantize_rows):
//   activations: a = 127 / amax(|x| over the group, or over the whole row), xq = round(x * a) in [-127, 127],
//                x ~= xq * s with s = amax / 127;
//   weights:     vpdpbusd wants the unsigned operand first, so the weights go in as q + 128 (q XOR 0x80) and
//                xq as the signed one: sum (q + 128) xq = sum q xq + 128 sum xq, and the second term depends
//                on x alone, so it is taken once per call and starts each group's accumulator negated;
//   y = alpha * sum_g (weight scale_g * s_g) * (exact int32 sum_g of q xq).
// A group longer than 64 bytes takes several 64-byte chunks; a last partial chunk is read with a mask
// (x is zero padded), so any group size and row length work. Built only for AVX-512 (with BW); the VNNI
// functions carry their own target attribute and run only where the CPU reports avx512vnni.

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define TOKENSTEP_HAS_VNNI_CODE 1
#define TOKENSTEP_VNNI __attribute__((target("avx512vnni,avx512bw,avx512f")))
#else
#define TOKENSTEP_HAS_VNNI_CODE 0
#endif

enum Int8Path : int64_t { kInt8Float = 0, kInt8IntegerGroup = 1, kInt8IntegerRow = 2 };

bool vnni_available() {
#if TOKENSTEP_HAS_VNNI_CODE
  static const bool yes = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
  return yes;
#else
  return false;
#endif
}

// One row of x, quantised for the weight groups: per group ceil(G / 64) chunks of 64 int8 (zero padded),
// the negated 128 * (lane sums of xq) per group, and the activation scale s per group.
struct QuantRow {
  int64_t G = 0, S = 0, chunks = 0;
  uint64_t tail = ~0ull;       // the byte mask of each group's last chunk
  std::vector<int8_t> xq;      // S * chunks * 64
  std::vector<int32_t> start;  // S * 16: each group's accumulator before its products
  std::vector<float> scale;    // S
};

#if TOKENSTEP_HAS_VNNI_CODE
// The largest |x| of n floats.
TOKENSTEP_VNNI float amax_of(const float* x, int64_t n) {
  __m512 m = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
  if (k < n) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_maskz_loadu_ps((1u << (n - k)) - 1, x + k)));
  return _mm512_reduce_max_ps(m);
}

// x (K floats, groups of G) -> QuantRow; per_row: one activation scale for the whole row. Vectorised: the
// scalar loop cost a few microseconds per call, and a decode step makes 121 of them.
TOKENSTEP_VNNI void quantize_row(const float* x, int64_t K, int64_t G, bool per_row, QuantRow& out) {
  const int64_t S = K / G, chunks = (G + 63) / 64;
  out.G = G, out.S = S, out.chunks = chunks;
  out.tail = G % 64 == 0 ? ~0ull : (1ull << (G % 64)) - 1;
  out.xq.assign(S * chunks * 64, 0);
  out.start.resize(S * 16);
  out.scale.assign(S, 0.0f);
  const float row_amax = per_row ? amax_of(x, K) : 0.0f;
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  const __m512i c128 = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t g = 0; g < S; ++g) {
    const float* xg = x + g * G;
    const float amax = per_row ? row_amax : amax_of(xg, G);
    int8_t* q = out.xq.data() + g * chunks * 64;
    __m512i lanes = _mm512_setzero_si512();
    if (amax > 0.0f) {  // all zero: xq 0, scale 0
      const __m512 a = _mm512_set1_ps(127.0f / amax);
      out.scale[g] = amax / 127.0f;
      for (int64_t k = 0; k < G; k += 16) {
        const __mmask16 m = k + 16 <= G ? 0xffff : static_cast<__mmask16>((1u << (G - k)) - 1);
        // x * a rounded to nearest, ties to even (the MXCSR default), as torch.round does
        __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, xg + k), a));
        v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
        _mm512_mask_cvtepi32_storeu_epi8(q + k, m, v);
      }
      // 128 * the sums of xq that land in each vpdpbusd lane, negated: each group's accumulator start
      for (int64_t c = 0; c < chunks; ++c) lanes = _mm512_dpbusd_epi32(lanes, c128, _mm512_loadu_si512(q + c * 64));
    }
    _mm512_storeu_si512(out.start.data() + g * 16, _mm512_sub_epi32(_mm512_setzero_si512(), lanes));
  }
}

constexpr int64_t kVnniPrefetchBytes = 4096;

// sum_g wscale_g * s_g * (int32 sum_g q xq) for rows r..r+n-1 of q (K apart, S bf16 scales per row).
TOKENSTEP_VNNI void vnni_rows(const int8_t* q, const uint16_t* sp, int64_t K, const QuantRow& x, int64_t r,
                              int64_t n, float* out) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const int64_t S = x.S, G = x.G, chunks = x.chunks;
  const __mmask64 tail = x.tail;
  const int8_t* xq = x.xq.data();
  const int32_t* start = x.start.data();
  const float* xs = x.scale.data();
  for (int64_t i = 0; i < n; ++i) {
    const int8_t* row = q + (r + i) * K;
    const uint16_t* ws = sp + (r + i) * S;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    if (G == 64) {  // the default: one chunk per group, two groups per pass for two accumulators
      int64_t g = 0;
      for (; g + 2 <= S; g += 2) {
        _mm_prefetch(reinterpret_cast<const char*>(row + g * 64) + kVnniPrefetchBytes, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(row + g * 64) + kVnniPrefetchBytes + 64, _MM_HINT_T0);
        const __m512i w0 = _mm512_xor_si512(_mm512_loadu_si512(row + g * 64), flip);
        const __m512i w1 = _mm512_xor_si512(_mm512_loadu_si512(row + g * 64 + 64), flip);
        const __m512i s0 = _mm512_dpbusd_epi32(_mm512_loadu_si512(start + g * 16), w0,
                                               _mm512_loadu_si512(xq + g * 64));
        const __m512i s1 = _mm512_dpbusd_epi32(_mm512_loadu_si512(start + g * 16 + 16), w1,
                                               _mm512_loadu_si512(xq + g * 64 + 64));
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), _mm512_set1_ps(bf16_to_float(ws[g]) * xs[g]), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), _mm512_set1_ps(bf16_to_float(ws[g + 1]) * xs[g + 1]), acc1);
      }
      for (; g < S; ++g) {
        const __m512i w = _mm512_xor_si512(_mm512_loadu_si512(row + g * 64), flip);
        const __m512i s = _mm512_dpbusd_epi32(_mm512_loadu_si512(start + g * 16), w, _mm512_loadu_si512(xq + g * 64));
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(bf16_to_float(ws[g]) * xs[g]), acc0);
      }
    } else {  // any group size: chunks of 64, the last one masked
      for (int64_t g = 0; g < S; ++g) {
        const int8_t* wg = row + g * G;
        const int8_t* xg = xq + g * chunks * 64;
        __m512i s = _mm512_loadu_si512(start + g * 16);
        for (int64_t c = 0; c < chunks; ++c) {
          const __mmask64 m = c + 1 == chunks ? tail : ~0ull;
          const __m512i w = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, wg + c * 64), flip);
          s = _mm512_dpbusd_epi32(s, w, _mm512_loadu_si512(xg + c * 64));
        }
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(bf16_to_float(ws[g]) * xs[g]), acc0);
      }
    }
    out[i] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  }
}
#endif

// The integer path: the same contract as gemv_int8 (alpha, RMSNorm gain and weight per row of x, bias,
// residual, glu for one row); per_row: one activation scale per row of x instead of one per weight group.
// Several rows (a short prefill) quantise each row, and each weight row, read once, meets them all in L1;
// each row's product is formed exactly as it is for that row alone.
at::Tensor gemv_int8_integer(const at::Tensor& q, const at::Tensor& scale, const at::Tensor& x, double alpha,
                             const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& residual,
                             double rms_eps, bool glu, const std::optional<at::Tensor>& norm_weight, bool per_row) {
  TORCH_CHECK(vnni_available(), "the integer int8 path needs AVX-512 VNNI (kernels built for AVX-512)");
  check(q, x, bias, residual);
  const int64_t G = group_size(q, scale), K = q.size(1), T = x.size(0);
  TORCH_CHECK(!glu || (T == 1 && !residual.has_value()), "glu: one row of x, no residual");
  const std::vector<float> alphas = row_alphas(x.data_ptr<float>(), T, K, alpha, rms_eps);
  const at::Tensor h = weighted(x, norm_weight);
#if TOKENSTEP_HAS_VNNI_CODE
  thread_local std::vector<QuantRow> quantised;  // their buffers are reused from call to call
  if (static_cast<int64_t>(quantised.size()) < T) quantised.resize(T);
  for (int64_t t = 0; t < T; ++t) quantize_row(h.data_ptr<float>() + t * K, K, G, per_row, quantised[t]);
  const int8_t* qp = q.data_ptr<int8_t>();
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scale.data_ptr());
  const QuantRow* xr = quantised.data();
  auto fill = [=](int64_t r, int64_t n, float* out) { vnni_rows(qp, sp, K, *xr, r, n, out); };
  if (glu) return rows_glu(q.size(0), x, alphas[0], bias, fill);
  if (T == 1) return rows_one(q.size(0), x, alphas[0], bias, residual, fill);
  return rows(q.size(0), x, alphas, bias, residual, [=](int64_t r, auto&& put) {
    for (int64_t t = 0; t < T; ++t) {
      float product;
      vnni_rows(qp, sp, K, xr[t], r, 1, &product);
      put(t, product);
    }
  });
#else
  return at::Tensor();
#endif
}

// An int8 product of one row on the path asked for: the integer one where VNNI runs, else gemv_int8.
at::Tensor int8_product(int64_t path, const at::Tensor& q, const at::Tensor& scale, const at::Tensor& x,
                        double alpha, const std::optional<at::Tensor>& bias,
                        const std::optional<at::Tensor>& residual, double rms_eps, bool glu,
                        const std::optional<at::Tensor>& norm_weight) {
  if (path != kInt8Float && x.size(0) == 1 && vnni_available()) {
    return gemv_int8_integer(q, scale, x, alpha, bias, residual, rms_eps, glu, norm_weight, path == kInt8IntegerRow);
  }
  return gemv_int8(q, scale, x, alpha, bias, residual, rms_eps, glu, norm_weight);
}

// The quantised activations as (xq (S, chunks * 64) int8, scales (S,) float32), for tests to check the
// kernel's integer math against a torch reference.
std::tuple<at::Tensor, at::Tensor> quantize_activations(const at::Tensor& x, int64_t group, bool per_row) {
  TORCH_CHECK(x.dim() == 1 && x.is_contiguous() && x.scalar_type() == at::kFloat && group > 0 &&
              x.size(0) % group == 0, "x: contiguous float32 (K,), group dividing K");
  TORCH_CHECK(vnni_available(), "needs AVX-512 VNNI");
  QuantRow out;
#if TOKENSTEP_HAS_VNNI_CODE
  quantize_row(x.data_ptr<float>(), x.size(0), group, per_row, out);
#endif
  at::Tensor xq = at::from_blob(out.xq.data(), {out.S, out.chunks * 64}, at::kChar).clone();
  at::Tensor scales = at::from_blob(out.scale.data(), {out.S}, at::kFloat).clone();
  return {xq, scales};
}

bool has_vnni() { return vnni_available(); }

TORCH_LIBRARY_FRAGMENT(tokenstep, m) {
  m.def("gemv_int8_integer(Tensor q, Tensor scale, Tensor x, float alpha, Tensor? bias, Tensor? residual, "
        "float rms_eps=-1, bool glu=False, Tensor? norm_weight=None, bool per_row=False) -> Tensor");
  m.def("quantize_activations(Tensor x, int group, bool per_row=False) -> (Tensor, Tensor)");
  m.def("has_vnni() -> bool", &has_vnni);  // no tensor to dispatch on: one kernel for every backend
}

TORCH_LIBRARY_IMPL(tokenstep, CPU, m) {
  m.impl("gemv_int8_integer", gemv_int8_integer);
  m.impl("quantize_activations", quantize_activations);
}

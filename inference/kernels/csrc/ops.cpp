// Decode on x86-64 CPUs: one-row products y = alpha * (W x) [* scale] + bias + residual, decode
// attention over the KV cache, `decode_layer`, which runs a whole decoder layer in one call, and
// `decode_layers`, every layer of a step in one call and one parallel region.
//
// Decode reads every weight once per token, so it runs at the speed the matrix streams from memory.
// Each thread takes a contiguous range of rows and reads it front to back, in the shape measured fastest
// on this machine (1, 2 or 4 rows at a time, a software prefetch 0-8 KB ahead or none: kernel_shape.py);
// BLAS GEMV (no prefetch) reached 75-85 % of a plain streaming read on an AMD EPYC, this 87-97 %; on an
// Intel Xeon the products take 1.05x a torch.sum of the same bytes. The int8 variant widens each weight
// to float32 in registers, so its activations stay float32 (the stock int8 kernel is fast only with
// bfloat16 ones), and applies one scale per group of weights in a row (weights.py picks the group size).
// The same code is built for AVX-512 (16 lanes) or AVX2 + FMA (8 lanes): inference/kernels/__init__.py
// passes the flags for this CPU, and the vector primitives of simd.h pick their instructions from them. Built
// on first use; without a compiler or one of these instruction sets the decoder uses stock ops.
//
// This file is the one translation unit: it includes the parts (each a header of one concern, its functions
// in an anonymous namespace: the compiler sees the whole library at once and inlines across the parts) and
// registers the ops. The parts, in the order they build on each other:
//   simd.h          the vector primitives (AVX-512 / AVX2)
//   shape.h         the kernel shape: rows per pass, prefetch distance (set_shape, get_shape)
//   products.h      what every one-row product shares: checks, RMSNorm gain, the row frames
//   f32.h           float32 products (gemv_f32, set_x_offset, set_tile_l1_prefetch)
//   int8.h          int8 products on float32 activations (gemv_int8, dequantize_int8)
//   attention.h     one-query attention over the cache (attend_one), over paged caches (attend_paged)
//   int16.h         the int16 int8 path (gemv_int8_int16, quantize_activations_int16, int16_groups)
//   int8_integer.h  the integer int8 path, VNNI or AVX2 (gemv_int8_integer, quantize_activations, integer_code)
//   head.h          the int8 mode's head: the int4 ranking product and the rescoring (gemv_int4,
//                   quantize_activations_int4, head_rescored)
//   layer.h         a decoder layer in one call (decode_layer)
//   step.h          every layer of a step in one parallel region (decode_layers, products_region)
//   rows.h          every layer of a pass over 2 to 16 positions in one parallel region (decode_rows)
//   vocab.h         one step's vocabulary statistics (vocab_stats, exp_nonpositive)
// The op list of inference/kernels/__init__.py's docstring follows the groups below.

#include <torch/library.h>

#include "simd.h"
#include "shape.h"
#include "products.h"
#include "f32.h"
#include "int8.h"
#include "attention.h"
#include "int16.h"
#include "int8_integer.h"
#include "head.h"
#include "layer.h"
#include "step.h"
#include "rows.h"
#include "vocab.h"

TORCH_LIBRARY(tokenstep, m) {
  // one-row products
  m.def("gemv_f32(Tensor w, Tensor x, float alpha, Tensor? bias, Tensor? residual, float rms_eps=-1, "
        "bool glu=False, Tensor? norm_weight=None) -> Tensor");
  m.def("gemv_int8(Tensor q, Tensor scale, Tensor x, float alpha, Tensor? bias, Tensor? residual, "
        "float rms_eps=-1, bool glu=False, Tensor? norm_weight=None) -> Tensor");
  m.def("gemv_int8_int16(Tensor q, Tensor scale, Tensor x, float alpha, Tensor? bias, Tensor? residual, "
        "float rms_eps=-1, bool glu=False, Tensor? norm_weight=None) -> Tensor");
  m.def("gemv_int8_integer(Tensor q, Tensor scale, Tensor x, float alpha, Tensor? bias, Tensor? residual, "
        "float rms_eps=-1, bool glu=False, Tensor? norm_weight=None, int act_group=4) -> Tensor");
  m.def("dequantize_int8(Tensor q, Tensor scale) -> Tensor");
  // the int8 paths' activations and what runs here (for tests and the path's choice)
  m.def("quantize_activations_int16(Tensor x, int group) -> (Tensor, Tensor)");
  m.def("int16_groups() -> int[]", &int16_groups);
  m.def("quantize_activations(Tensor x, int group, int act_group=4) -> (Tensor, Tensor)");
  m.def("integer_code() -> str", &integer_code);  // no tensor to dispatch on: one kernel for every backend
  // the kernel shape and where x sits
  m.def("set_shape(int f32_rows, int f32_prefetch, int int8_rows, int int8_prefetch) -> int[]", set_shape);
  m.def("get_shape() -> int[]", get_shape);
  m.def("set_x_offset(int bytes) -> int", set_x_offset);
  m.def("set_tile_l1_prefetch(bool on) -> bool", set_tile_l1_prefetch);
  // attention, layers, steps
  m.def("attend_one(Tensor q, Tensor keys, Tensor values, float scale) -> Tensor");
  m.def("attend_paged(Tensor qkv, Tensor(a!) blocks, Tensor tables, Tensor lengths, int q_dim, float scale) -> Tensor");
  m.def("decode_layer(Tensor x, Tensor[] mats, Tensor?[] scales, Tensor?[] biases, Tensor?[] norms, Tensor kv, "
        "int position, Tensor rope, int heads, float attn_eps, float mlp_eps, int window, int int8_path=0) -> Tensor");
  m.def("decode_layers(Tensor x, Tensor[] mats, Tensor?[] scales, Tensor?[] biases, Tensor?[] norms, Tensor[] kv, "
        "int position, Tensor rope, Tensor? local_rope, int heads, float attn_eps, float mlp_eps, int[] windows, "
        "int activation=0, int int8_path=0) -> Tensor");
  m.def("decode_rows(Tensor x, Tensor[] mats, Tensor?[] scales, Tensor?[] biases, Tensor?[] norms, Tensor[] kv, "
        "Tensor positions, Tensor? tables, Tensor rope, Tensor? local_rope, int heads, float attn_eps, float mlp_eps, "
        "int[] windows, int activation=0, int int8_path=0) -> Tensor");
  m.def("products_region(Tensor[] mats, Tensor?[] scales, Tensor[] xs, int int8_path=0) -> Tensor[]");
  // the head
  m.def("gemv_int4(Tensor packed, Tensor scale, Tensor x, float alpha) -> Tensor");
  m.def("quantize_activations_int4(Tensor x, int group) -> (Tensor, Tensor, Tensor)");
  m.def("head_rescored(Tensor q, Tensor scale, Tensor x, Tensor norm_weight, float eps, Tensor float_rows, "
        "int rescored, int int8_path=0) -> Tensor");
  // the vocabulary
  m.def("vocab_stats(Tensor logits, int top_n, bool greedy) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("exp_nonpositive(Tensor t) -> Tensor");
}

TORCH_LIBRARY_IMPL(tokenstep, CPU, m) {
  m.impl("gemv_f32", gemv_f32);
  m.impl("gemv_int8", gemv_int8);
  m.impl("gemv_int8_int16", gemv_int8_int16);
  m.impl("gemv_int8_integer", gemv_int8_integer);
  m.impl("dequantize_int8", dequantize_int8);
  m.impl("quantize_activations_int16", quantize_activations_int16);
  m.impl("quantize_activations", quantize_activations);
  m.impl("attend_one", attend_one);
  m.impl("attend_paged", attend_paged);
  m.impl("decode_layer", decode_layer);
  m.impl("decode_layers", decode_layers);
  m.impl("decode_rows", decode_rows);
  m.impl("products_region", products_region);
  m.impl("gemv_int4", gemv_int4);
  m.impl("quantize_activations_int4", quantize_activations_int4);
  m.impl("head_rescored", head_rescored);
  m.impl("vocab_stats", vocab_stats);
  m.impl("exp_nonpositive", exp_nonpositive_op);
}

//===- KernelFamily.h - Which kernel runs an op -----------------*- C++ -*-===//
//
// The op -> kernel classification both backends dispatch on: every op with
// a kernel belongs to one family (the ops one kernel function implements,
// e.g. the ten binary elementwise ops), so the lists of ops live here once.
// A backend switches on the family and maps it to its own kernel, or to
// none where it has no kernel for the family. Communication ops and the
// sharded kernels are dispatched before this (KernelFamily::None).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_KERNELFAMILY_H
#define AUTOPAR_RUNTIME_KERNELFAMILY_H

namespace autopar {

enum class OpId : unsigned;

enum class KernelFamily {
  None,
  // Elementwise.
  Binary, // Add, Sub, Mul, Div, Pow, Equal, Less, Greater, And, Or.
  Sum,
  Where,
  Trilu,
  Unary, // Neg, Abs, Sqrt, Reciprocal, Exp, Log, Tanh, Erf, Sigmoid, Relu,
         // LeakyRelu, Not, Gelu, Silu.
  SwiGLU,
  GeluGrad,
  SiluGrad,
  SwiGLUGrad,
  // Softmax and normalisations.
  Softmax, // Softmax, LogSoftmax.
  SoftmaxGrad,
  LayerNorm,
  RMSNorm,
  LayerNormGrad,
  RMSNormGrad,
  BatchNorm,
  LRN,
  // GEMMs and windows.
  MatMul,
  Linear,
  Gemm,
  Conv,
  MaxPool,
  AveragePool,
  GlobalAveragePool,
  Attention,
  AttentionGrad,
  RotaryEmbedding,
  // Layouts, slices, gathers.
  ReshapeLike, // Reshape, Flatten, Squeeze, Unsqueeze, Identity.
  Dropout,
  Transpose,
  Expand,
  Concat,
  Split,
  Slice,
  Gather,
  GatherGrad,
  // Reductions, data, the loss, optimizers.
  Reduce, // ReduceSum, ReduceMean, ReduceMax.
  Constant,
  ConstantOfShape,
  Cast,
  Shape,
  Size,
  CrossEntropyLoss,
  CrossEntropyLossGrad,
  AdamW,
  Sgd,
};

/// The family of Op's kernel, None for ops without one.
KernelFamily getKernelFamily(OpId Op);

/// True for families whose kernels only move elements (layouts, slices,
/// gathers, data ops): they take every element type as it is stored.
bool onlyMovesElements(KernelFamily F);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_KERNELFAMILY_H

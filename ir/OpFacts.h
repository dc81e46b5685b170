//===- OpFacts.h - What each layer needs to know about an op ----*- C++ -*-===//
//
// The registry (Ops.def) says what an op is: operands, attributes, shape
// function. OpFacts.def says, per op, what the rest of the compiler decides
// about it: its sharding rule (loops), its forward FLOPs, its gradient
// rule, the activations its backward keeps, the kernel family that runs it
// and, for elementwise ops, the scalar function it applies. Each column is
// an enum that the layer owning the concern switches over without a
// `default:` (the build has -Werror=switch), so adding an op means deciding
// every column, and adding a rule means handling it everywhere.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_OPFACTS_H
#define AUTOPAR_IR_OPFACTS_H

#include "ir/OpRegistry.h"

#include <cstdint>
#include <optional>

namespace autopar {

/// How an op's operand and result dimensions map to loops (OpLoops.cpp).
enum class LoopRule : uint8_t {
  None,             // Replicated (constants, shape arithmetic) or no rule.
  Broadcast,        // Every operand broadcasts to the result.
  Unary,            // Operand 0 broadcasts; the others are read whole.
  AxisFixed,        // Operand 0 elementwise except `axis` (default -1).
  IndexedAxisFixed, // Every operand elementwise except `axis` (default 0).
  CumSum,           // Elementwise except the summed axis.
  Trilu,            // Elementwise except the last two axes.
  MatMul,
  Linear,
  Gemm,
  Einsum,
  SumReduction, // Reduced axes are reductions (partial sums).
  MaxReduction, // Reduced axes are fixed (max, min, mean: partial results
                // do not add).
  ArgReduction, // The `axis` (default 0) is fixed and reduced (ArgMax).
  Norm,         // Rows parallel, the normalized axes fixed.
  Channel,      // NCHW: batch and channels parallel, the window fixed.
  ChannelFixed, // As Channel with the channels fixed (LRN).
  Conv,
  ConvTranspose,
  Attention,
  Rotary,
  Reshape,
  Transpose,
  Concat,
  Split,
  Resizing, // Rank kept, resized axes fixed (Slice, Tile, Pad, Resize).
  Gather,
};

/// How an op's forward FLOPs are counted (OpFlops.cpp).
enum class FlopRule : uint8_t {
  Unknown,     // No estimate (contrib ops, Opaque, backward-only ops).
  Free,        // Moves or describes data: 0.
  PerOutput,   // FlopsPerElement per result element.
  SumOperands, // One op per result element per operand beyond the first,
               // plus FlopsPerElement (Mean's division).
  PerInput,    // FlopsPerElement per operand-0 element (reductions).
  MatMul,
  Linear,
  Gemm,
  Einsum,
  Conv,
  ConvTranspose,
  Window, // Pools: FlopsPerElement per window element per result element.
  Resize, // 3 per interpolation tap per result element (OpFlops.cpp).
  LRN,
  Attention,
  MsAttention,
  Recurrent,       // LSTM, GRU, RNN: per step, the input and recurrent GEMMs.
  QuantizedMatMul, // MatMulNBits: A [..., K] x dequantized B [K, N].
};

/// The backward rule autodiff emits (passes/GradientRules.cpp).
enum class GradientRule : uint8_t {
  None, // Not differentiable (autodiff reports the node when reached).
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Neg,
  Identity,
  Dropout,
  Exp,
  Log,
  Sqrt,
  Reciprocal,
  Tanh,
  Sigmoid,
  Relu,
  Erf,
  Cast,
  Where,
  Linear,
  MatMul,
  Gemm,
  LayerNorm,
  RMSNorm,
  Attention,
  Gelu,
  Silu,
  SwiGLU,
  Softmax,
  LogSoftmax,
  Gather,
  CrossEntropy,
  Rotary,
  Reshape,
  Expand,
  Transpose,
  Split,
  Concat,
  Slice,
  Pad,        // Constant mode: dY padded by the negated pads.
  DepthSpace, // SpaceToDepth and DepthToSpace: the inverse rearrangement.
  NllLoss,    // Emits NegativeLogLikelihoodLossGrad.
  Reduce,
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  ShardSlice,
};

/// What the backward keeps of the forward (cost/ActivationMemory.cpp).
enum class SavedRule : uint8_t {
  None,
  Product, // Operand 0, and operand 1 when operand 0 needs a gradient.
  Mul,     // Each operand when the other needs a gradient.
  Div,     // The divisor, and the dividend when the divisor needs one.
  Input,   // Operand 0.
  Output,  // Result 0.
  Dropout, // The mask, one byte per element, in training mode.
  Norm,    // The input and the per-row statistics in fp32.
  Gather,  // The indices, when the table needs a gradient.
  Attention,
};

/// The kernel that runs an op on every backend: each family is one kernel
/// function per backend (CpuBackend.cpp, cuda/CudaOps.cpp), which may
/// serve several ops (ElementFn tells the elementwise ones apart).
enum class KernelFamily : uint8_t {
  None,
  // Elementwise.
  Binary, // ElementFn: Add .. Or, Mod .. PRelu.
  Sum,    // Sum, Mean; Min and Max (ElementFn Min, Max).
  Where,
  Trilu,
  Unary, // ElementFn: Neg .. Silu, Ceil .. Clip.
  SwiGLU,
  GeluGrad,
  SiluGrad,
  SwiGLUGrad,
  // Softmax and normalisations.
  Softmax, // Softmax, LogSoftmax.
  Hardmax,
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
  LpPool,
  GlobalLpPool,
  Resize,
  Attention,
  AttentionWithProbs,
  AttentionGrad,
  DropoutGrad,
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
  GatherElements,
  ScatterElements, // Also ScatterElements' reductions.
  GatherND,
  ScatterND,
  Pad,
  DepthSpace, // SpaceToDepth, DepthToSpace.
  ReverseSequence,
  // Reductions, data, the loss, optimizers.
  Reduce,    // ReduceSum .. ReduceSumSquare.
  ArgReduce, // ArgMax, ArgMin.
  Constant,
  ConstantOfShape,
  Cast,
  Shape,
  Size,
  EyeLike,
  OneHot,
  CrossEntropyLoss,
  NllLoss, // NegativeLogLikelihoodLoss.
  CrossEntropyLossGrad,
  NllLossGrad,
  AdamW,
  Sgd,
  // Quantization.
  Quantize,
  Dequantize,
  DynamicQuantize,
  MatMulInteger,
  ConvInteger,
  MatMulNBits,
  GatherBlockQuantized,
  // Communication: run with the backend's communicator.
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  ShardSlice,
  SendRecv,
  Send,
  Recv,
};

/// The scalar function of an elementwise op, for kernels and folders.
enum class ElementFn : uint8_t {
  None,
  // Binary.
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Equal,
  Less,
  Greater,
  And,
  Or,
  Min,
  Max,
  Mod,
  BitShift,
  GreaterOrEqual,
  LessOrEqual,
  Xor,
  BitwiseAnd,
  BitwiseOr,
  BitwiseXor,
  PRelu,
  // Unary.
  Neg,
  Abs,
  Sqrt,
  Reciprocal,
  Exp,
  Log,
  Tanh,
  Erf,
  Sigmoid,
  Relu,
  LeakyRelu,
  Not,
  Gelu,
  Silu,
  Ceil,
  Floor,
  Round,
  Sign,
  Sin,
  Cos,
  Tan,
  Asin,
  Acos,
  Atan,
  Sinh,
  Cosh,
  Asinh,
  Acosh,
  Atanh,
  Softplus,
  Softsign,
  Elu,
  Selu,
  Celu,
  HardSigmoid,
  HardSwish,
  Mish,
  ThresholdedRelu,
  Shrink,
  IsNaN,
  IsInf,
  BitwiseNot,
  Clip,
};

struct OpFacts {
  OpId Op;
  LoopRule Loops;
  FlopRule Flops;
  /// FLOPs per result element for FlopRule::PerOutput, per operand-0
  /// element for PerInput, per result element on top of the operands' for
  /// SumOperands (the convention is ir/OpFlops.cpp's); 0 otherwise.
  uint8_t FlopsPerElement;
  GradientRule Gradient;
  SavedRule Saved;
  KernelFamily Kernel;
  ElementFn Element;
};

/// The row of Op in OpFacts.def.
const OpFacts &getOpFacts(OpId Op);

inline KernelFamily getKernelFamily(OpId Op) { return getOpFacts(Op).Kernel; }

/// Whether Op runs no kernel of its own in a fused step: a view of its
/// operand (the ReshapeLike family), a constant or a shape query.
inline bool runsNoKernel(OpId Op) {
  KernelFamily K = getKernelFamily(Op);
  return K == KernelFamily::ReshapeLike || K == KernelFamily::Constant ||
         K == KernelFamily::Shape || K == KernelFamily::Size;
}

/// Fn on two integers as ONNX defines it for them (Add, Sub and Mul
/// checked for overflow, Div truncating toward zero, Mod with the divisor's
/// sign (fmod = 0); Equal, Less, Greater, GreaterOrEqual and LessOrEqual 0
/// or 1; Min, Max); nullopt for the other functions, on overflow and for a
/// division by zero. The integer folders and shape values compute with it.
std::optional<int64_t> applyIntElementFn(ElementFn Fn, int64_t A, int64_t B);

/// False for an operand a gradient does not flow through: every operand of
/// the quantization ops but DequantizeLinear's codes and MatMulNBits'
/// activations (scales, zero points and packed weights are frozen, as in
/// QLoRA; integer results take no gradient). GradientFlow and autodiff
/// follow it.
bool isGradientOperand(OpId Op, unsigned Operand);

/// True for the collectives and point-to-point transfers, which run with
/// the backend's communicator (ShardSlice, which moves nothing, is not one).
bool isCommunicationOp(OpId Op);

} // namespace autopar

#endif // AUTOPAR_IR_OPFACTS_H

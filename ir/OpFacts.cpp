//===- OpFacts.cpp - The per-op decision table ----------------------------===//

#include "ir/OpFacts.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <iterator>

using namespace autopar;

namespace {

constexpr OpFacts Facts[] = {
#define FACTS(Name, Loops, Flops, PerElement, Gradient, Saved, Kernel,         \
              Element)                                                         \
  {OpId::Name,           LoopRule::Loops,        FlopRule::Flops,              \
   PerElement,           GradientRule::Gradient, SavedRule::Saved,             \
   KernelFamily::Kernel, ElementFn::Element},
#include "ir/OpFacts.def"
};

static_assert(std::size(Facts) == NumOps,
              "OpFacts.def needs one row per op of Ops.def");

constexpr bool inRegistryOrder() {
  for (unsigned I = 0; I != std::size(Facts); ++I)
    if (unsigned(Facts[I].Op) != I)
      return false;
  return true;
}
static_assert(inRegistryOrder(),
              "OpFacts.def rows must follow the order of Ops.def");

} // namespace

const OpFacts &autopar::getOpFacts(OpId Op) { return Facts[unsigned(Op)]; }

bool autopar::isGradientOperand(OpId Op, unsigned Operand) {
  switch (getKernelFamily(Op)) {
  case KernelFamily::Dequantize:
  case KernelFamily::MatMulNBits:
    return Operand == 0;
  // Integer results: no gradient comes back (straight-through estimators
  // are quantization-aware training's fake quantization, a float op).
  case KernelFamily::Quantize:
  case KernelFamily::DynamicQuantize:
  case KernelFamily::MatMulInteger:
  case KernelFamily::ConvInteger:
  case KernelFamily::GatherBlockQuantized:
    return false;
  default:
    return true;
  }
}

bool autopar::isCommunicationOp(OpId Op) {
  KernelFamily K = getKernelFamily(Op);
  return K == KernelFamily::AllReduce || K == KernelFamily::AllGather ||
         K == KernelFamily::ReduceScatter || K == KernelFamily::AllToAll ||
         K == KernelFamily::SendRecv || K == KernelFamily::Send ||
         K == KernelFamily::Recv;
}

std::optional<int64_t> autopar::applyIntElementFn(ElementFn Fn, int64_t A,
                                                  int64_t B) {
  int64_t R;
  switch (Fn) {
  case ElementFn::Add:
    return llvm::AddOverflow(A, B, R) ? std::nullopt : std::optional(R);
  case ElementFn::Sub:
    return llvm::SubOverflow(A, B, R) ? std::nullopt : std::optional(R);
  case ElementFn::Mul:
    return llvm::MulOverflow(A, B, R) ? std::nullopt : std::optional(R);
  case ElementFn::Div:
    if (B == 0 || (A == INT64_MIN && B == -1))
      return std::nullopt;
    return A / B;
  case ElementFn::Equal:
    return int64_t(A == B);
  case ElementFn::Less:
    return int64_t(A < B);
  case ElementFn::Greater:
    return int64_t(A > B);
  case ElementFn::GreaterOrEqual:
    return int64_t(A >= B);
  case ElementFn::LessOrEqual:
    return int64_t(A <= B);
  case ElementFn::Min:
    return std::min(A, B);
  case ElementFn::Max:
    return std::max(A, B);
  case ElementFn::Mod: {
    if (B == 0)
      return std::nullopt;
    if (B == -1)
      return 0; // INT64_MIN % -1 overflows in C++.
    int64_t M = A % B;
    return M != 0 && (M < 0) != (B < 0) ? M + B : M;
  }
  case ElementFn::None:
  case ElementFn::Pow:
  case ElementFn::And:
  case ElementFn::Or:
  case ElementFn::BitShift:
  case ElementFn::Xor:
  case ElementFn::BitwiseAnd:
  case ElementFn::BitwiseOr:
  case ElementFn::BitwiseXor:
  case ElementFn::PRelu:
  case ElementFn::Neg:
  case ElementFn::Abs:
  case ElementFn::Sqrt:
  case ElementFn::Reciprocal:
  case ElementFn::Exp:
  case ElementFn::Log:
  case ElementFn::Tanh:
  case ElementFn::Erf:
  case ElementFn::Sigmoid:
  case ElementFn::Relu:
  case ElementFn::LeakyRelu:
  case ElementFn::Not:
  case ElementFn::Gelu:
  case ElementFn::Silu:
  case ElementFn::Ceil:
  case ElementFn::Floor:
  case ElementFn::Round:
  case ElementFn::Sign:
  case ElementFn::Sin:
  case ElementFn::Cos:
  case ElementFn::Tan:
  case ElementFn::Asin:
  case ElementFn::Acos:
  case ElementFn::Atan:
  case ElementFn::Sinh:
  case ElementFn::Cosh:
  case ElementFn::Asinh:
  case ElementFn::Acosh:
  case ElementFn::Atanh:
  case ElementFn::Softplus:
  case ElementFn::Softsign:
  case ElementFn::Elu:
  case ElementFn::Selu:
  case ElementFn::Celu:
  case ElementFn::HardSigmoid:
  case ElementFn::HardSwish:
  case ElementFn::Mish:
  case ElementFn::ThresholdedRelu:
  case ElementFn::Shrink:
  case ElementFn::IsNaN:
  case ElementFn::IsInf:
  case ElementFn::BitwiseNot:
  case ElementFn::Clip:
    return std::nullopt;
  }
  return std::nullopt;
}

//===- OpFacts.cpp - The per-op decision table ----------------------------===//

#include "ir/OpFacts.h"

#include <array>
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

bool autopar::isCommunicationOp(OpId Op) {
  KernelFamily K = getKernelFamily(Op);
  return K == KernelFamily::AllReduce || K == KernelFamily::AllGather ||
         K == KernelFamily::ReduceScatter || K == KernelFamily::AllToAll ||
         K == KernelFamily::SendRecv || K == KernelFamily::Send ||
         K == KernelFamily::Recv;
}

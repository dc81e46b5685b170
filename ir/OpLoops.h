//===- OpLoops.h - The iteration space of an op, for sharding ---*- C++ -*-===//
//
// Each op is seen as a loop nest over its *loops* (the iteration space, as in
// an einsum), and every dimension of every operand and result either maps to
// one loop or to none (a broadcast, a kernel window, a shape operand). This
// is the per-op sharding rule: splitting one loop over a group of D ranks
// splits every dimension mapped to it by D, replicates operands that do not
// map it, and leaves a result that does not map it as a partial sum (when
// the loop is a reduction) that a collective must complete.
//
//   MatMul [b, m, k] x [k, n] -> [b, m, n]      loops b, m, n, k (reduction)
//   Gather [V, h] by [b, s] -> [b, s, h]        loops b, s, h, V (reduction:
//                                               the vocab-parallel embedding)
//   Softmax over the last axis                  that loop is fixed
//
// A loop is split only when every dimension mapped to it is static and
// divisible by the degree, and the degree divides the loop's granule (the
// number of heads when a hidden dimension holds heads x head size).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_OPLOOPS_H
#define AUTOPAR_IR_OPLOOPS_H

#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>

namespace autopar {

class Node;

enum class LoopKind : uint8_t {
  /// Results keep the loop: splitting it splits them.
  Parallel,
  /// Results do not keep the loop: splitting it leaves partial sums.
  Reduction,
  /// Cannot be split (a normalized axis, a convolution window, a sliced
  /// axis).
  Fixed,
};

struct OpLoops {
  static constexpr int NoLoop = -1;

  llvm::SmallVector<LoopKind, 6> Kinds;
  /// Splitting loop L by D also needs Granules[L] % D == 0 (0: no
  /// constraint beyond the mapped dimensions).
  llvm::SmallVector<int64_t, 6> Granules;
  /// Per operand (absent ones included), per dimension: a loop or NoLoop.
  /// Operands the op reads as a whole (shapes, axes) map no dimension.
  llvm::SmallVector<llvm::SmallVector<int, 4>, 4> Operands;
  /// Per result, per dimension: a loop or NoLoop.
  llvm::SmallVector<llvm::SmallVector<int, 4>, 2> Results;

  unsigned getNumLoops() const { return Kinds.size(); }
  unsigned addLoop(LoopKind K, int64_t Granule = 0) {
    Kinds.push_back(K);
    Granules.push_back(Granule);
    return Kinds.size() - 1;
  }
};

/// The loops of N, or nullopt when the op has no rule (Opaque, contrib ops,
/// shape computations): such a node can only be computed replicated.
std::optional<OpLoops> getOpLoops(const Node &N);

/// True when operand I of N is read for its type only (Shape, Size): any
/// layout of it will do, and no communication is needed to read it.
bool readsOnlyShape(const Node &N, unsigned I);

/// True when loop L of N (whose loops are Loops) can be split Degree ways.
bool canSplitLoop(const Node &N, const OpLoops &Loops, unsigned L,
                  int64_t Degree);

} // namespace autopar

#endif // AUTOPAR_IR_OPLOOPS_H

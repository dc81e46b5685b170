//===- KernelArgs.h - What every backend's kernels take ---------*- C++ -*-===//
//
// A kernel gets its node, its operand tensors and its result tensors (the
// latter allocated with the program's types) as KernelArgs. It computes the
// result shapes from the operands and attributes, checks them against the
// allocated results (checkShape), and fills the results. Errors name the
// node and its op. Nothing here reads element data except readInts (host
// tensors only): the CPU and the CUDA backend both use it.
//
// Shape helpers: numpy broadcasting, row-major strides, and StridedWalk,
// which visits a shape in row-major order and keeps, for several operands
// at once, the element offset the current index maps to: what
// broadcasting, transposes, slices and reductions need.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_KERNELARGS_H
#define AUTOPAR_RUNTIME_KERNELARGS_H

#include "runtime/Backend.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>

namespace autopar {

class Attribute;

using Shape = llvm::SmallVector<int64_t, 4>;

inline Shape toShape(llvm::ArrayRef<int64_t> S) {
  return Shape(S.begin(), S.end());
}

struct KernelArgs {
  const Node &N;
  llvm::ArrayRef<Tensor> In;
  llvm::ArrayRef<Tensor> Out;
  /// For a node that draws a dropout mask (DropoutStream.h): this rank's
  /// block of its random tensor.
  const DropoutBlock *Dropout = nullptr;

  llvm::Error error(const llvm::Twine &Message) const;
  /// True when operand I is given.
  bool has(unsigned I) const { return I < In.size() && In[I].isPresent(); }
  bool hasResult(unsigned I) const {
    return I < Out.size() && Out[I].isPresent();
  }

  const Attribute *attr(llvm::StringRef Name) const;
  int64_t intAttr(llvm::StringRef Name, int64_t Default) const;
  double floatAttr(llvm::StringRef Name, double Default) const;
  llvm::StringRef stringAttr(llvm::StringRef Name,
                             llvm::StringRef Default) const;

  /// An error unless result I has shape S.
  llvm::Error checkShape(unsigned I, llvm::ArrayRef<int64_t> S) const;
  /// An error unless operand I (given) has one of the element types Types
  /// (the CPU kernels' check: the message names the CPU kernel).
  llvm::Error checkType(unsigned I,
                        std::initializer_list<ElementType> Types) const;
  /// An error unless result I has one of the element types Types (as
  /// checkType).
  llvm::Error checkResultType(unsigned I,
                              std::initializer_list<ElementType> Types) const;
  /// The elements of an i64 or i32 operand of rank 0 or 1 in host memory.
  llvm::Expected<Shape> readInts(unsigned I) const;
  /// Axis in [-Rank, Rank) as a dimension index.
  llvm::Expected<unsigned> normalizeAxis(int64_t Axis, unsigned Rank) const;
  /// The integer list in attribute Name, else operand I when given, else
  /// nullopt.
  llvm::Expected<std::optional<Shape>>
  intsFromAttrOrOperand(llvm::StringRef Name, unsigned I) const;
};

/// How a backend reads the integers of a small operand (starts, axes, k):
/// KernelArgs::readInts on the host, a copy back from a device.
using IntOperandReader = llvm::function_ref<llvm::Expected<Shape>(unsigned)>;

/// The numpy broadcast of Shapes, or nullopt when they do not broadcast.
std::optional<Shape>
broadcastShapes(llvm::ArrayRef<llvm::ArrayRef<int64_t>> Shapes);
/// Row-major element strides of S.
Shape getStrides(llvm::ArrayRef<int64_t> S);
/// Strides of In viewed as Target by numpy broadcasting (0 where In has a
/// broadcast or missing dimension); In must broadcast to Target.
Shape getBroadcastStrides(llvm::ArrayRef<int64_t> In,
                          llvm::ArrayRef<int64_t> Target);

/// Visits every index of a shape in row-major order.
class StridedWalk {
public:
  /// Strides holds one stride list per operand, each of the rank of
  /// Extents; Bases the operands' starting offsets (zero when empty).
  StridedWalk(llvm::ArrayRef<int64_t> Extents, llvm::ArrayRef<Shape> Strides,
              llvm::ArrayRef<int64_t> Bases = {});

  int64_t offset(unsigned Operand) const { return Offsets[Operand]; }
  /// Moves to the next index (past the last one, the offsets are
  /// meaningless).
  void next();
  /// The elements from the current index to the end of its innermost
  /// dimension, when Operand's innermost stride is 1 (a contiguous run of
  /// it); 1 otherwise.
  int64_t contiguousRun(unsigned Operand) const;
  /// Moves N indices on, N at most what is left of the innermost
  /// dimension.
  void advance(int64_t N);

private:
  llvm::SmallVector<int64_t, 4> Dims;
  llvm::SmallVector<Shape, 3> Strides;
  llvm::SmallVector<int64_t, 4> Index;
  llvm::SmallVector<int64_t, 3> Offsets;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_KERNELARGS_H

//===- ParamInit.h - Initial values of parameters without data --*- C++ -*-===//
//
// A parameter without data is initialised by its `init` annotation:
// "normal" draws samples of normal(0, 0.02) (GPT-2's initialisation) from a
// generator seeded by the run's seed and the parameter's name, so every
// plan that holds the same logical parameter initialises it the same way
// whatever the order of parameters; "zeros" (optimizer state) is zeros.
// Without the annotation, float parameters are "normal" and integer and
// bool ones "zeros". The generator is splitmix64 with the Box-Muller
// transform, written out here so that values do not depend on the standard
// library; each sample is rounded to f32 first and then to the parameter's
// element type.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_PARAMINIT_H
#define AUTOPAR_RUNTIME_PARAMINIT_H

#include "llvm/Support/Error.h"

#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autopar {

class Value;

/// The standard deviation of "normal" initial values.
constexpr double InitStdDev = 0.02;

/// The initial bytes (layout of weights/TensorBytes.h) of parameter Param,
/// which has a static type and no data; an error naming it for an unknown
/// `init`, or "normal" on a type that is not a float.
llvm::Expected<std::vector<uint8_t>> initParamBytes(const Value &Param,
                                                    uint64_t Seed);
/// The same for a tensor of type Ty under Param's name and `init`.
llvm::Expected<std::vector<uint8_t>>
initParamBytes(const Value &Param, const TensorType &Ty, uint64_t Seed);

/// Where Param's block starts in its logical tensor on world rank Rank
/// (zeros unless it is a `local = 1` shard).
llvm::SmallVector<int64_t, 4> getShardOrigin(const Value &Param, int Rank);

/// A shard as a block of its logical tensor: the logical and local shapes
/// and the block's origin, in a view of the logical tensor where the block
/// is contiguous per dimension. That is the tensor's own shape, except for
/// a parameter annotated `pieces = K`, whose split dimension n is viewed as
/// [K, n / K] (the rank's block of each piece).
struct ShardView {
  llvm::SmallVector<int64_t, 4> Logical, Local, Origin;
};
ShardView getShardView(const Value &Param, int Rank);

/// Copies the overlap of two blocks of one logical tensor (row-major, each
/// given by its shape and its origin in the logical tensor) from From into
/// To; nothing when they do not overlap.
void copyBlock(llvm::ArrayRef<uint8_t> From, llvm::ArrayRef<int64_t> FromShape,
               llvm::ArrayRef<int64_t> FromOrigin,
               llvm::MutableArrayRef<uint8_t> To,
               llvm::ArrayRef<int64_t> ToShape,
               llvm::ArrayRef<int64_t> ToOrigin, size_t ElemBytes);

/// copyBlock between blocks given in two views of one logical tensor
/// (FromLogical and ToLogical: reshapes of each other by splitting
/// dimensions, as ShardView's [K, n / K]); false, copying nothing, when a
/// block is not a box in their common refinement.
bool copyBlockBetweenViews(llvm::ArrayRef<uint8_t> From,
                           llvm::ArrayRef<int64_t> FromShape,
                           llvm::ArrayRef<int64_t> FromOrigin,
                           llvm::ArrayRef<int64_t> FromLogical,
                           llvm::MutableArrayRef<uint8_t> To,
                           llvm::ArrayRef<int64_t> ToShape,
                           llvm::ArrayRef<int64_t> ToOrigin,
                           llvm::ArrayRef<int64_t> ToLogical, size_t ElemBytes);

/// Where a program's parameters come from on one rank.
struct ParamSource {
  /// The folder that external data is relative to.
  std::string WeightsDir = ".";
  /// Mixed into the generator of parameters without data.
  uint64_t Seed = 0;
  /// Initialise every parameter as if it had no data (training from
  /// scratch on a model whose weights are absent).
  bool RandomInit = false;
  /// A parameter without data and without an `init` annotation is an error
  /// unless RandomInit (training: a model whose weights went missing must
  /// not train from noise quietly).
  bool RequireData = false;
  /// World rank (picks the shard of a `local = 1` parameter).
  int Rank = 0;
};

/// Param's bytes on a rank: its data (or its seeded init) as the logical
/// tensor, then, for a shard, this rank's block of it (along each
/// dimension, the block whose index is the rank's coordinates on the
/// splitting axes, major to minor). Every plan thus starts from the same
/// logical values.
llvm::Expected<std::vector<uint8_t>> loadParamBytes(const Value &Param,
                                                    const ParamSource &Source);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_PARAMINIT_H

//===- StageCut.h - Contiguous stage cuts under time and memory -*- C++ -*-===//
//
// Cuts a sequence of units (layers) with times Time into Chunks contiguous,
// non-empty stages that minimize the slowest stage's time, subject to
// Fits(Chunk, Begin, End): whether units [Begin, End) fit as stage Chunk
// (its memory cap). Fits must be monotone: a sub-range of a range that fits
// fits. Returns the units per stage, or nullopt when no cut fits.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_STAGECUT_H
#define AUTOPAR_PASSES_STAGECUT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <vector>

namespace autopar {

std::optional<std::vector<unsigned>>
cutStages(llvm::ArrayRef<double> Time, unsigned Chunks,
          llvm::function_ref<bool(unsigned Chunk, unsigned Begin, unsigned End)>
              Fits);

} // namespace autopar

#endif // AUTOPAR_PASSES_STAGECUT_H

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

#include <cstdint>
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

} // namespace autopar

#endif // AUTOPAR_RUNTIME_PARAMINIT_H

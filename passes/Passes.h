//===- Passes.h - Constructors of the registered passes ---------*- C++ -*-===//

#ifndef AUTOPAR_PASSES_PASSES_H
#define AUTOPAR_PASSES_PASSES_H

#include "passes/Pass.h"

#include <memory>

namespace autopar {

#define PASS(Argument, Class, Description)                                     \
  std::unique_ptr<Pass> create##Class();
#include "passes/Passes.def"

} // namespace autopar

#endif // AUTOPAR_PASSES_PASSES_H

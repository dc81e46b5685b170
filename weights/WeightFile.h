//===- WeightFile.h - A plan's copy of the inline weights -------*- C++ -*-===//
//
// A model with inline initializers carries its weights inside the .onnx
// file. A plan folder must carry them too, or the runtime would start from
// a random init: `autopar -o DIR` moves every parameter's inline data into
// one file of the folder (row-major little-endian bytes, each tensor at a
// 64-byte aligned offset, in parameter order) and makes the parameter an
// external reference to its range, which the runtime reads relative to the
// program (WeightReader.h). Byte-stable: the same parameters give the same
// file.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_WEIGHTS_WEIGHTFILE_H
#define AUTOPAR_WEIGHTS_WEIGHTFILE_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace autopar {

class Module;

/// Moves the inline data of every parameter of M into the returned file
/// contents and makes each such parameter `external<FileName, ...>`. Empty
/// when no parameter has inline data (M is then unchanged).
std::string externalizeInlineWeights(Module &M, llvm::StringRef FileName);

} // namespace autopar

#endif // AUTOPAR_WEIGHTS_WEIGHTFILE_H

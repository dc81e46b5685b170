//===- WeightReader.h - Reads a parameter's initial data --------*- C++ -*-===//
//
// What the runtime uses to load weights without depending on the importer:
// a parameter's WeightSource gives its bytes, inline data encoded as
// TensorBytes.h lays it out, external data read from its file after the
// checks of ExternalFile.h (the same ones the importer made). Unlike the
// importer, which only warns when planning, a missing file is an error here:
// running needs the data.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_WEIGHTS_WEIGHTREADER_H
#define AUTOPAR_WEIGHTS_WEIGHTREADER_H

#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace autopar {

/// The bytes of parameter ParamName's data from Source; external locations
/// are relative to ModelDir (the folder of the model the graph came from).
/// Errors name the parameter and, for external data, the file.
llvm::Expected<std::vector<uint8_t>> readWeightBytes(llvm::StringRef ParamName,
                                                     const WeightSource &Source,
                                                     llvm::StringRef ModelDir);

/// The same for a parameter of a graph, checking that the data's size is the
/// parameter type's size; an error when it has no weight source.
llvm::Expected<std::vector<uint8_t>> readWeightBytes(const Value &Param,
                                                     llvm::StringRef ModelDir);

} // namespace autopar

#endif // AUTOPAR_WEIGHTS_WEIGHTREADER_H

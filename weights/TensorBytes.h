//===- TensorBytes.h - Tensors as little-endian bytes -----------*- C++ -*-===//
//
// The byte layout ONNX uses for raw_data and external data, and that the
// runtime uses in memory: row-major elements, little-endian; IEEE binary64,
// binary32, binary16 and bfloat16; f8e4m3 as E4M3FN; two's complement
// integers; one byte per bool (0 or 1).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_WEIGHTS_TENSORBYTES_H
#define AUTOPAR_WEIGHTS_TENSORBYTES_H

#include "ir/Attributes.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace autopar {

/// Data's elements as bytes.
std::vector<uint8_t> encodeTensorBytes(const DenseTensor &Data);

/// Bytes read as a tensor of Type, which must have a static shape; an error
/// ("has N bytes; TYPE needs M") when the length does not match.
llvm::Expected<DenseTensor> decodeTensorBytes(llvm::ArrayRef<uint8_t> Bytes,
                                              const TensorType &Type);

} // namespace autopar

#endif // AUTOPAR_WEIGHTS_TENSORBYTES_H

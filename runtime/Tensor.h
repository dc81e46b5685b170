//===- Tensor.h - Backend memory and host tensors ---------------*- C++ -*-===//
//
// A Tensor is what kernels see: an element type, a static row-major shape
// (no strides) and a pointer to backend memory that the Tensor does not own.
// A default-constructed Tensor is absent: it stands for an optional operand
// that a node does not have (`_` in the text form). Backends never hand out
// a null pointer for a present tensor, even an empty one.
//
// A HostTensor owns its bytes in host memory in the layout of
// weights/TensorBytes.h (row-major, little-endian): what the executor takes
// as inputs and returns as outputs.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_TENSOR_H
#define AUTOPAR_RUNTIME_TENSOR_H

#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autopar {

/// The number of elements of a shape (1 for a scalar).
int64_t getNumElements(llvm::ArrayRef<int64_t> Shape);
/// The size in bytes of one element of Ty (bool is one byte).
size_t getElementSize(ElementType Ty);
/// `f32[2, 3]`.
std::string formatTensorType(ElementType Ty, llvm::ArrayRef<int64_t> Shape);

class Tensor {
public:
  /// An absent tensor.
  Tensor() = default;
  Tensor(ElementType Elem, llvm::ArrayRef<int64_t> Shape, void *Data)
      : Elem(Elem), Shape(Shape.begin(), Shape.end()), Data(Data) {}

  bool isPresent() const { return Data != nullptr; }
  ElementType getElementType() const { return Elem; }
  llvm::ArrayRef<int64_t> getShape() const { return Shape; }
  unsigned getRank() const { return Shape.size(); }
  int64_t getDim(unsigned I) const { return Shape[I]; }
  int64_t getNumElements() const { return autopar::getNumElements(Shape); }
  size_t getSizeInBytes() const {
    return size_t(getNumElements()) * getElementSize(Elem);
  }
  std::string getTypeString() const { return formatTensorType(Elem, Shape); }

  void *getData() const { return Data; }
  /// The data as elements of T; the caller has checked the element type.
  template <typename T> T *data() const { return static_cast<T *>(Data); }

private:
  ElementType Elem = ElementType::F32;
  llvm::SmallVector<int64_t, 4> Shape;
  void *Data = nullptr;
};

/// A tensor in host memory that owns its bytes.
struct HostTensor {
  ElementType Elem = ElementType::F32;
  llvm::SmallVector<int64_t, 4> Shape;
  std::vector<uint8_t> Bytes;

  std::string getTypeString() const { return formatTensorType(Elem, Shape); }
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_TENSOR_H

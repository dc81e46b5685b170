//===- IndexKernels.cpp - Gathers and scatters by index, OneHot, EyeLike --===//
//
// GatherElements, GatherND and OneHot move elements of any type. The
// scatters copy elements of any type and reduce (add, mul, max, min) in
// f32, i64 or i32 (the backend converts narrower and wider floats to f32
// around them), in the order of the updates. EyeLike writes 0 and 1 of its
// result's type. Indices are i64 or i32; negative ones count from the end.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include "ir/Types.h"

#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <type_traits>

using namespace autopar;
using namespace llvm;

/// Element I of an i64 or i32 tensor.
static int64_t indexAt(const Tensor &T, int64_t I) {
  return T.getElementType() == ElementType::I64 ? T.data<int64_t>()[I]
                                                : T.data<int32_t>()[I];
}

/// Index in [-Len, Len) as an offset in [0, Len); an error otherwise.
static Expected<int64_t> normalizeIndex(const KernelArgs &A, int64_t Index,
                                        int64_t Len, unsigned Axis) {
  if (Index < -Len || Index >= Len)
    return A.error("index " + Twine(Index) + " is out of range for axis " +
                   Twine(Axis) + " of size " + Twine(Len));
  return Index < 0 ? Index + Len : Index;
}

namespace {

enum class Reduction { None, Add, Mul, Max, Min };

/// Writes (or combines) one element of an update into a result.
class ElementWriter {
public:
  static Expected<ElementWriter> get(const KernelArgs &A, ElementType Ty) {
    StringRef Name = A.stringAttr("reduction", "none");
    Reduction R = StringSwitch<Reduction>(Name)
                      .Case("add", Reduction::Add)
                      .Case("mul", Reduction::Mul)
                      .Case("max", Reduction::Max)
                      .Case("min", Reduction::Min)
                      .Default(Reduction::None);
    if (R != Reduction::None && Ty != ElementType::F32 &&
        Ty != ElementType::I64 && Ty != ElementType::I32)
      return A.error("reduction '" + Name + "' of " + getElementTypeName(Ty) +
                     " elements has no CPU kernel");
    return ElementWriter(R, Ty);
  }

  void write(char *Dst, const char *Src) const {
    switch (Ty) {
    case ElementType::F32:
      return combine<float>(Dst, Src);
    case ElementType::I64:
      return combine<int64_t>(Dst, Src);
    case ElementType::I32:
      return combine<int32_t>(Dst, Src);
    default:
      std::memcpy(Dst, Src, getElementSize(Ty));
    }
  }

private:
  ElementWriter(Reduction R, ElementType Ty) : R(R), Ty(Ty) {}

  /// Op(A, B), wrapping around for integers (as two's complement does)
  /// instead of overflowing.
  template <typename T, typename Fn> static T wrapping(T A, T B, Fn Op) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return T(Op(U(A), U(B)));
    } else {
      return Op(A, B);
    }
  }

  template <typename T> void combine(char *Dst, const char *Src) const {
    T D, S;
    std::memcpy(&D, Dst, sizeof(T));
    std::memcpy(&S, Src, sizeof(T));
    switch (R) {
    case Reduction::None:
      D = S;
      break;
    case Reduction::Add:
      D = wrapping(D, S, std::plus<>());
      break;
    case Reduction::Mul:
      D = wrapping(D, S, std::multiplies<>());
      break;
    case Reduction::Max:
      D = std::max(D, S);
      break;
    case Reduction::Min:
      D = std::min(D, S);
      break;
    }
    std::memcpy(Dst, &D, sizeof(T));
  }

  Reduction R;
  ElementType Ty;
};

} // namespace

//===----------------------------------------------------------------------===//
// GatherElements, ScatterElements
//===----------------------------------------------------------------------===//

/// Visits each index of indices (operand 1): Fn(I, DataOffset) with I the
/// flat position in indices and DataOffset the data element it names.
static Error forEachElementIndex(const KernelArgs &A,
                                 function_ref<void(int64_t, int64_t)> Fn) {
  const Tensor &Data = A.In[0], &Indices = A.In[1];
  if (Error E = A.checkType(1, {ElementType::I64, ElementType::I32}))
    return E;
  if (Indices.getRank() != Data.getRank())
    return A.error("indices " + Indices.getTypeString() + " and data " +
                   Data.getTypeString() + " differ in rank");
  Expected<unsigned> Axis =
      A.normalizeAxis(A.intAttr("axis", 0), Data.getRank());
  if (!Axis)
    return Axis.takeError();
  Shape DataStrides = getStrides(Data.getShape());
  Shape Walked = DataStrides;
  Walked[*Axis] = 0;
  StridedWalk Walk(Indices.getShape(), {Walked});
  int64_t Len = Data.getDim(*Axis);
  for (int64_t I = 0, E = Indices.getNumElements(); I != E; ++I, Walk.next()) {
    Expected<int64_t> Index =
        normalizeIndex(A, indexAt(Indices, I), Len, *Axis);
    if (!Index)
      return Index.takeError();
    Fn(I, Walk.offset(0) + *Index * DataStrides[*Axis]);
  }
  return Error::success();
}

Error autopar::runGatherElements(const KernelArgs &A) {
  const Tensor &Data = A.In[0], &Y = A.Out[0];
  if (Error E = A.checkShape(0, A.In[1].getShape()))
    return E;
  if (Error E = A.checkResultType(0, {Data.getElementType()}))
    return E;
  size_t Size = getElementSize(Data.getElementType());
  return forEachElementIndex(A, [&](int64_t I, int64_t Offset) {
    std::memcpy(Y.data<char>() + I * Size, Data.data<char>() + Offset * Size,
                Size);
  });
}

Error autopar::runScatterElements(const KernelArgs &A) {
  const Tensor &Data = A.In[0], &Updates = A.In[2], &Y = A.Out[0];
  if (Error E = A.checkShape(0, Data.getShape()))
    return E;
  if (Updates.getShape() != A.In[1].getShape() ||
      Updates.getElementType() != Data.getElementType())
    return A.error("updates " + Updates.getTypeString() +
                   " must have the shape of indices and the type of data");
  Expected<ElementWriter> W = ElementWriter::get(A, Data.getElementType());
  if (!W)
    return W.takeError();
  size_t Size = getElementSize(Data.getElementType());
  if (Y.getData() != Data.getData())
    std::memcpy(Y.getData(), Data.getData(), Data.getSizeInBytes());
  return forEachElementIndex(A, [&](int64_t I, int64_t Offset) {
    W->write(Y.data<char>() + Offset * Size, Updates.data<char>() + I * Size);
  });
}

//===----------------------------------------------------------------------===//
// GatherND, ScatterND
//===----------------------------------------------------------------------===//

namespace {

/// How indices [b..., m..., k] address data [b..., k axes, slice...].
struct NDPlan {
  int64_t Batch = 0;     // batch_dims.
  int64_t Batches = 1;   // Product of the batch dimensions.
  int64_t Tuples = 1;    // Index tuples per batch.
  int64_t Depth = 0;     // k.
  int64_t Slice = 1;     // Elements per addressed slice.
  int64_t DataBatch = 1; // Data elements per batch.
  Shape IndexedDims;     // Data's k indexed dimensions.
  Shape IndexedStrides;  // Their strides, in elements.
};

} // namespace

static Expected<NDPlan> planND(const KernelArgs &A, int64_t Batch) {
  const Tensor &Data = A.In[0], &Indices = A.In[1];
  if (Error E = A.checkType(1, {ElementType::I64, ElementType::I32}))
    return E;
  unsigned R = Data.getRank(), Q = Indices.getRank();
  if (Q == 0 || Batch < 0 || Batch >= int64_t(std::min(R, Q)))
    return A.error("indices " + Indices.getTypeString() + " cannot index " +
                   Data.getTypeString() + " with batch_dims " + Twine(Batch));
  NDPlan P;
  P.Batch = Batch;
  P.Depth = Indices.getDim(Q - 1);
  if (P.Depth < 1 || P.Depth > int64_t(R) - Batch)
    return A.error("the last dimension of indices " + Indices.getTypeString() +
                   " must be between 1 and " + Twine(int64_t(R) - Batch));
  for (unsigned I = 0; I != Batch; ++I) {
    if (Indices.getDim(I) != Data.getDim(I))
      return A.error("batch dimension " + Twine(I) + " differs: " +
                     Indices.getTypeString() + " and " + Data.getTypeString());
    P.Batches *= Data.getDim(I);
  }
  for (unsigned I = Batch; I + 1 < Q; ++I)
    P.Tuples *= Indices.getDim(I);
  for (unsigned I = Batch + P.Depth; I != R; ++I)
    P.Slice *= Data.getDim(I);
  Shape Strides = getStrides(Data.getShape());
  for (unsigned I = Batch; I != Batch + P.Depth; ++I) {
    P.IndexedDims.push_back(Data.getDim(I));
    P.IndexedStrides.push_back(Strides[I]);
  }
  P.DataBatch = Batch ? Strides[Batch - 1] : Data.getNumElements();
  return P;
}

/// The data offset (in elements) of index tuple T of batch B.
static Expected<int64_t> tupleOffset(const KernelArgs &A, const NDPlan &P,
                                     int64_t B, int64_t T) {
  int64_t Offset = B * P.DataBatch;
  const int64_t First = (B * P.Tuples + T) * P.Depth;
  for (int64_t J = 0; J != P.Depth; ++J) {
    Expected<int64_t> Index =
        normalizeIndex(A, indexAt(A.In[1], First + J), P.IndexedDims[J],
                       unsigned(P.Batch + J));
    if (!Index)
      return Index.takeError();
    Offset += *Index * P.IndexedStrides[J];
  }
  return Offset;
}

Error autopar::runGatherND(const KernelArgs &A) {
  const Tensor &Data = A.In[0], &Y = A.Out[0];
  int64_t Batch = A.intAttr("batch_dims", 0);
  Expected<NDPlan> P = planND(A, Batch);
  if (!P)
    return P.takeError();
  Shape Out = toShape(A.In[1].getShape().drop_back());
  for (unsigned I = Batch + P->Depth; I != Data.getRank(); ++I)
    Out.push_back(Data.getDim(I));
  if (Error E = A.checkShape(0, Out))
    return E;
  if (Error E = A.checkResultType(0, {Data.getElementType()}))
    return E;
  size_t Bytes = P->Slice * getElementSize(Data.getElementType());
  char *Dst = Y.data<char>();
  for (int64_t B = 0; B != P->Batches; ++B)
    for (int64_t T = 0; T != P->Tuples; ++T, Dst += Bytes) {
      Expected<int64_t> Offset = tupleOffset(A, *P, B, T);
      if (!Offset)
        return Offset.takeError();
      std::memcpy(Dst, Data.data<char>() + *Offset * (Bytes / P->Slice), Bytes);
    }
  return Error::success();
}

Error autopar::runScatterND(const KernelArgs &A) {
  const Tensor &Data = A.In[0], &Updates = A.In[2], &Y = A.Out[0];
  Expected<NDPlan> P = planND(A, 0);
  if (!P)
    return P.takeError();
  if (Error E = A.checkShape(0, Data.getShape()))
    return E;
  if (Updates.getElementType() != Data.getElementType() ||
      Updates.getNumElements() != P->Tuples * P->Slice)
    return A.error("updates " + Updates.getTypeString() + " do not fit " +
                   A.In[1].getTypeString() + " into " + Data.getTypeString());
  Expected<ElementWriter> W = ElementWriter::get(A, Data.getElementType());
  if (!W)
    return W.takeError();
  size_t Size = getElementSize(Data.getElementType());
  if (Y.getData() != Data.getData())
    std::memcpy(Y.getData(), Data.getData(), Data.getSizeInBytes());
  const char *Src = Updates.data<char>();
  for (int64_t T = 0; T != P->Tuples; ++T) {
    Expected<int64_t> Offset = tupleOffset(A, *P, 0, T);
    if (!Offset)
      return Offset.takeError();
    char *Dst = Y.data<char>() + *Offset * Size;
    for (int64_t E = 0; E != P->Slice; ++E, Src += Size)
      W->write(Dst + E * Size, Src);
  }
  return Error::success();
}

//===----------------------------------------------------------------------===//
// OneHot, EyeLike
//===----------------------------------------------------------------------===//

Error autopar::runOneHot(const KernelArgs &A) {
  const Tensor &Indices = A.In[0], &Depth = A.In[1], &Values = A.In[2];
  for (unsigned I : {0u, 1u})
    if (A.In[I].getNumElements() && !numberAt(A.In[I], 0))
      return A.error("operand " + Twine(I) + " " + A.In[I].getTypeString() +
                     " has no CPU kernel");
  if (Depth.getNumElements() != 1 || Values.getNumElements() != 2)
    return A.error("depth must have one element and values two");
  int64_t D = int64_t(*numberAt(Depth, 0));
  if (D < 1)
    return A.error("depth must be positive, got " + Twine(D));
  Expected<unsigned> Axis =
      A.normalizeAxis(A.intAttr("axis", -1), Indices.getRank() + 1);
  if (!Axis)
    return Axis.takeError();
  Shape Out = toShape(Indices.getShape());
  Out.insert(Out.begin() + *Axis, D);
  if (Error E = A.checkShape(0, Out))
    return E;
  if (Error E = A.checkResultType(0, {Values.getElementType()}))
    return E;
  int64_t Inner = 1;
  for (unsigned I = *Axis; I != Indices.getRank(); ++I)
    Inner *= Indices.getDim(I);
  int64_t Outer = Inner ? Indices.getNumElements() / Inner : 0;
  size_t Size = getElementSize(Values.getElementType());
  const char *Off = Values.data<char>(), *On = Off + Size;
  char *Dst = A.Out[0].data<char>();
  for (int64_t O = 0; O != Outer; ++O)
    for (int64_t J = 0; J != D; ++J)
      for (int64_t I = 0; I != Inner; ++I, Dst += Size) {
        int64_t Index = int64_t(*numberAt(Indices, O * Inner + I));
        if (Index < 0)
          Index += D;
        std::memcpy(Dst, Index == J ? On : Off, Size);
      }
  return Error::success();
}

Error autopar::runEyeLike(const KernelArgs &A) {
  const Tensor &Y = A.Out[0];
  if (A.In[0].getRank() != 2)
    return A.error("input " + A.In[0].getTypeString() + " must be 2-D");
  if (Error E = A.checkShape(0, A.In[0].getShape()))
    return E;
  if (Error E = A.checkResultType(0, {ElementType::F32, ElementType::I64,
                                      ElementType::I32, ElementType::I8,
                                      ElementType::U8, ElementType::Bool}))
    return E;
  int64_t Rows = Y.getDim(0), Cols = Y.getDim(1), K = A.intAttr("k", 0);
  size_t Size = getElementSize(Y.getElementType());
  std::memset(Y.getData(), 0, Y.getSizeInBytes());
  for (int64_t R = std::max<int64_t>(0, -K); R < Rows && R + K < Cols; ++R) {
    char *Dst = Y.data<char>() + (R * Cols + R + K) * Size;
    switch (Y.getElementType()) {
    case ElementType::F32: {
      float One = 1;
      std::memcpy(Dst, &One, Size);
      break;
    }
    case ElementType::I64: {
      int64_t One = 1;
      std::memcpy(Dst, &One, Size);
      break;
    }
    case ElementType::I32: {
      int32_t One = 1;
      std::memcpy(Dst, &One, Size);
      break;
    }
    default:
      *Dst = 1;
    }
  }
  return Error::success();
}

//===- BitwiseKernels.cpp - BitwiseAnd, Or, Xor, Not and BitShift ---------===//
//
// On the two's complement bits of i64, i32, i8 and u8 (numpy broadcasting
// for the binary ops). BitShift takes u8 (the IR's only unsigned type): a
// shift by the width or more gives 0, as numpy's left_shift and right_shift
// do.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
#include "runtime/cpu/Broadcast.h"
#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"

using namespace autopar;
using namespace llvm;

template <typename T> static void runBitwiseOf(const KernelArgs &A, OpId Op) {
  const Tensor &X = A.In[0], &Y = A.In[1], &Z = A.Out[0];
  if (Op == OpId::BitwiseAnd)
    broadcastBinary<T, T>(X, Y, Z, [](T P, T Q) { return T(P & Q); });
  else if (Op == OpId::BitwiseOr)
    broadcastBinary<T, T>(X, Y, Z, [](T P, T Q) { return T(P | Q); });
  else
    broadcastBinary<T, T>(X, Y, Z, [](T P, T Q) { return T(P ^ Q); });
}

static Error runBitShift(const KernelArgs &A) {
  if (Error E = A.checkType(0, {ElementType::U8}))
    return E;
  StringRef Direction = A.stringAttr("direction", "");
  if (Direction != "LEFT" && Direction != "RIGHT")
    return A.error("'direction' must be \"LEFT\" or \"RIGHT\", got \"" +
                   Direction + "\"");
  bool Left = Direction == "LEFT";
  broadcastBinary<uint8_t, uint8_t>(A.In[0], A.In[1], A.Out[0],
                                    [=](uint8_t P, uint8_t Q) {
                                      if (Q >= 8)
                                        return uint8_t(0);
                                      return uint8_t(Left ? P << Q : P >> Q);
                                    });
  return Error::success();
}

Error autopar::runBitwise(const KernelArgs &A) {
  OpId Op = A.N.getOp();
  if (Error E = A.checkResultType(0, {A.In[0].getElementType()}))
    return E;
  if (Op == OpId::BitShift)
    return runBitShift(A);
  if (Error E = A.checkType(0, {ElementType::I64, ElementType::I32,
                                ElementType::I8, ElementType::U8}))
    return E;
  switch (A.In[0].getElementType()) {
  case ElementType::I64:
    runBitwiseOf<int64_t>(A, Op);
    break;
  case ElementType::I32:
    runBitwiseOf<int32_t>(A, Op);
    break;
  case ElementType::I8:
    runBitwiseOf<int8_t>(A, Op);
    break;
  default:
    runBitwiseOf<uint8_t>(A, Op);
    break;
  }
  return Error::success();
}

template <typename T> static void invertBits(const Tensor &X, const Tensor &Y) {
  const T *XD = X.data<T>();
  T *YD = Y.data<T>();
  for (int64_t I = 0, N = X.getNumElements(); I != N; ++I)
    YD[I] = T(~XD[I]);
}

Error autopar::runBitwiseNot(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  if (Error E = A.checkType(0, {ElementType::I64, ElementType::I32,
                                ElementType::I8, ElementType::U8}))
    return E;
  switch (X.getElementType()) {
  case ElementType::I64:
    invertBits<int64_t>(X, Y);
    break;
  case ElementType::I32:
    invertBits<int32_t>(X, Y);
    break;
  case ElementType::I8:
    invertBits<int8_t>(X, Y);
    break;
  default:
    invertBits<uint8_t>(X, Y);
    break;
  }
  return Error::success();
}

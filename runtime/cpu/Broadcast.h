//===- Broadcast.h - Elementwise loops over broadcast operands --*- C++ -*-===//
//
// What the binary elementwise kernels (ElementwiseKernels.cpp,
// BitwiseKernels.cpp) share: the numpy-broadcasting loop and integer
// arithmetic that wraps around like two's complement hardware.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_BROADCAST_H
#define AUTOPAR_RUNTIME_CPU_BROADCAST_H

#include "runtime/KernelArgs.h"
#include "runtime/cpu/Kernels.h"

#include <type_traits>

namespace autopar {

/// Z[i] = Fn(X[i'], Y[i'']) over Z's shape with X and Y broadcast to it.
template <typename T, typename R, typename FnTy>
void broadcastBinary(const Tensor &X, const Tensor &Y, const Tensor &Z,
                     FnTy Fn) {
  llvm::ArrayRef<int64_t> Out = Z.getShape();
  const T *XD = X.data<T>();
  const T *YD = Y.data<T>();
  R *ZD = Z.data<R>();
  int64_t N = Z.getNumElements();
  if (X.getShape() == Out && Y.getShape() == Out) {
    for (int64_t I = 0; I != N; ++I)
      ZD[I] = Fn(XD[I], YD[I]);
    return;
  }
  if (X.getShape() == Out && Y.getNumElements() == 1) {
    for (int64_t I = 0; I != N; ++I)
      ZD[I] = Fn(XD[I], YD[0]);
    return;
  }
  StridedWalk Walk(Out, {getBroadcastStrides(X.getShape(), Out),
                         getBroadcastStrides(Y.getShape(), Out)});
  for (int64_t I = 0; I != N; ++I, Walk.next())
    ZD[I] = Fn(XD[Walk.offset(0)], YD[Walk.offset(1)]);
}

template <typename T> T wrapAdd(T A, T B) {
  using U = std::make_unsigned_t<T>;
  return T(U(A) + U(B));
}
template <typename T> T wrapSub(T A, T B) {
  using U = std::make_unsigned_t<T>;
  return T(U(A) - U(B));
}
template <typename T> T wrapMul(T A, T B) {
  using U = std::make_unsigned_t<T>;
  return T(U(A) * U(B));
}

/// broadcastBinary with the elements split over the kernel threads in
/// chunks when X and Y have Z's shape (or Y is one element); Fn must be
/// safe to call from several threads at once (no state).
template <typename T, typename R, typename FnTy>
void broadcastBinaryOnThreads(const Tensor &X, const Tensor &Y, const Tensor &Z,
                              FnTy Fn) {
  llvm::ArrayRef<int64_t> Out = Z.getShape();
  int64_t N = Z.getNumElements();
  bool Same = X.getShape() == Out && Y.getShape() == Out;
  bool Scalar = X.getShape() == Out && Y.getNumElements() == 1;
  if (N < 2 * ElementsPerChunk || (!Same && !Scalar))
    return broadcastBinary<T, R>(X, Y, Z, Fn);
  const T *XD = X.data<T>();
  const T *YD = Y.data<T>();
  R *ZD = Z.data<R>();
  parallelForChunks(N, [&](int64_t Begin, int64_t End) {
    if (Same)
      for (int64_t I = Begin; I != End; ++I)
        ZD[I] = Fn(XD[I], YD[I]);
    else
      for (int64_t I = Begin; I != End; ++I)
        ZD[I] = Fn(XD[I], YD[0]);
  });
}

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_BROADCAST_H

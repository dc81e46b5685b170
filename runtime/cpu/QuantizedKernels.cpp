//===- QuantizedKernels.cpp - Quantized codes and products ----------------===//
//
// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// MatMulNBits and GatherBlockQuantized (ir/Ops.def). Floats arrive as f32
// (the backend converts f16 and bf16, and f8e4m3 codes, around the kernel);
// integer codes are u8, i8 or i32. Rounding is to nearest even (ONNX's
// QuantizeLinear). Integer products accumulate in i32 exactly, in a fixed
// order.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace autopar;
using namespace llvm;

namespace {

/// Where the scale (and zero point) of each element of a tensor of shape
/// X is: per tensor, per axis, or per block of `block_size` along the axis.
struct ScaleLayout {
  int64_t Outer = 1, Axis = 1, Inner = 1, Block = 0, Blocks = 1;
  bool PerTensor = true;

  /// The scale index of element I of X.
  int64_t indexOf(int64_t I) const {
    if (PerTensor)
      return 0;
    int64_t In = I % Inner, A = (I / Inner) % Axis, O = I / (Inner * Axis);
    if (!Block)
      return A;
    return (O * Blocks + A / Block) * Inner + In;
  }
};

Expected<ScaleLayout> getScaleLayout(const KernelArgs &A, unsigned Data,
                                     unsigned Scale) {
  ScaleLayout L;
  ArrayRef<int64_t> X = A.In[Data].getShape();
  L.Block = A.intAttr("block_size", 0);
  if (A.In[Scale].getNumElements() == 1 && !L.Block)
    return L;
  Expected<unsigned> Axis = A.normalizeAxis(A.intAttr("axis", 1), X.size());
  if (!Axis)
    return Axis.takeError();
  L.PerTensor = false;
  for (unsigned I = 0; I != X.size(); ++I)
    (I < *Axis ? L.Outer : I > *Axis ? L.Inner : L.Axis) *= X[I];
  if (L.Block)
    L.Blocks = (L.Axis + L.Block - 1) / L.Block;
  return L;
}

/// Element I of a code or zero-point tensor (u8, i8, i32, or f8e4m3 codes
/// the backend gives as f32), as the shape functions allow.
double codeAt(const Tensor &T, int64_t I) { return *numberAt(T, I); }

/// Writes round-half-even(V) saturated to Y's code type at I; an f32 Y
/// holds f8e4m3 codes (converted by the backend after): V itself,
/// saturated to e4m3's range when Saturate.
void storeCode(const Tensor &Y, int64_t I, float V, bool Saturate) {
  switch (Y.getElementType()) {
  case ElementType::U8:
    Y.data<uint8_t>()[I] = uint8_t(std::clamp(std::nearbyint(V), 0.f, 255.f));
    return;
  case ElementType::I8:
    Y.data<int8_t>()[I] = int8_t(std::clamp(std::nearbyint(V), -128.f, 127.f));
    return;
  default:
    Y.data<float>()[I] = Saturate ? std::clamp(V, -448.f, 448.f) : V;
    return;
  }
}

/// Calls Fn(I, Scale, Zero) for each element I of operand 0 with its scale
/// (operand 1, f32) and zero point (operand 2, 0 when absent), after
/// checking that result 0 has operand 0's shape.
Error forEachScaled(const KernelArgs &A,
                    function_ref<void(int64_t, float, float)> Fn) {
  if (Error E = A.checkType(1, {ElementType::F32}))
    return E;
  const Tensor &X = A.In[0];
  Expected<ScaleLayout> L = getScaleLayout(A, 0, 1);
  if (!L)
    return L.takeError();
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  const float *S = A.In[1].data<float>();
  for (int64_t I = 0, E = X.getNumElements(); I != E; ++I) {
    int64_t J = L->indexOf(I);
    Fn(I, S[J], A.has(2) ? float(codeAt(A.In[2], J)) : 0.f);
  }
  return Error::success();
}

} // namespace

Error autopar::runQuantize(const KernelArgs &A) {
  const float *X = A.In[0].data<float>();
  bool Saturate = A.intAttr("saturate", 1) != 0;
  return forEachScaled(A, [&](int64_t I, float Scale, float Zero) {
    storeCode(A.Out[0], I, X[I] / Scale + Zero, Saturate);
  });
}

Error autopar::runDequantize(const KernelArgs &A) {
  float *Y = A.Out[0].data<float>();
  return forEachScaled(A, [&](int64_t I, float Scale, float Zero) {
    Y[I] = (float(codeAt(A.In[0], I)) - Zero) * Scale;
  });
}

Error autopar::runDynamicQuantize(const KernelArgs &A) {
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  const Tensor &X = A.In[0];
  const float *Xd = X.data<float>();
  int64_t Count = X.getNumElements();
  // ONNX's DynamicQuantizeLinear: the range widened to include 0, 256
  // levels; an all-zero input gets scale 0 and codes 0.
  float Lo = 0, Hi = 0;
  for (int64_t I = 0; I != Count; ++I) {
    Lo = std::min(Lo, Xd[I]);
    Hi = std::max(Hi, Xd[I]);
  }
  float Scale = (Hi - Lo) / 255.f;
  float Zero =
      Scale > 0 ? std::clamp(std::nearbyint(-Lo / Scale), 0.f, 255.f) : 0.f;
  for (int64_t I = 0; I != Count; ++I)
    A.Out[0].data<uint8_t>()[I] =
        Scale > 0 ? uint8_t(std::clamp(std::nearbyint(Xd[I] / Scale) + Zero,
                                       0.f, 255.f))
                  : 0;
  A.Out[1].data<float>()[0] = Scale;
  A.Out[2].data<uint8_t>()[0] = uint8_t(Zero);
  return Error::success();
}

Error autopar::runMatMulInteger(const KernelArgs &A) {
  const Tensor &TA = A.In[0], &TB = A.In[1], &Y = A.Out[0];
  for (unsigned I : {0u, 1u})
    if (Error E = A.checkType(I, {ElementType::U8, ElementType::I8}))
      return E;
  Expected<MatMulPlan> P = planMatMul(A);
  if (!P)
    return P.takeError();
  if (Error E = A.checkResultType(0, {ElementType::I32}))
    return E;
  int64_t M = P->M, N = P->N, K = P->K;
  // A zero point per tensor, per row of A or per column of B; a full-rank
  // one follows its operand's batch.
  auto ZeroAt = [&](unsigned I, int64_t BatchOffset, int64_t J) -> int32_t {
    if (!A.has(I))
      return 0;
    const Tensor &Z = A.In[I];
    if (Z.getNumElements() == 1)
      return int32_t(codeAt(Z, 0));
    return int32_t(codeAt(Z, Z.getShape().size() <= 1 ? J : BatchOffset + J));
  };
  // B's codes minus their zero points, widened to i32 once per B matrix
  // (once in all when B has no batch of its own).
  std::vector<int32_t> BMinusZero(size_t(K * N));
  int64_t Widened = -1;
  StridedWalk Walk(P->Batch, {getBroadcastStrides(P->XBatch, P->Batch),
                              getBroadcastStrides(P->WBatch, P->Batch)});
  for (int64_t Bt = 0; Bt != P->Count; ++Bt, Walk.next()) {
    int64_t OffA = Walk.offset(0), OffB = Walk.offset(1);
    if (OffB != Widened) {
      for (int64_t Kk = 0; Kk != K; ++Kk)
        for (int64_t Nn = 0; Nn != N; ++Nn)
          BMinusZero[Kk * N + Nn] =
              int32_t(codeAt(TB, (OffB * K + Kk) * N + Nn)) -
              ZeroAt(3, OffB * N, Nn);
      Widened = OffB;
    }
    int32_t *Dst = Y.data<int32_t>() + Bt * M * N;
    parallelFor(M, [&](int64_t Row) {
      int32_t *Acc = Dst + Row * N;
      std::fill(Acc, Acc + N, 0);
      int32_t Zero = ZeroAt(2, OffA * M, Row);
      for (int64_t Kk = 0; Kk != K; ++Kk) {
        int32_t V = int32_t(codeAt(TA, (OffA * M + Row) * K + Kk)) - Zero;
        const int32_t *BRow = BMinusZero.data() + Kk * N;
        for (int64_t Nn = 0; Nn != N; ++Nn)
          Acc[Nn] += V * BRow[Nn];
      }
    });
  }
  return Error::success();
}

namespace {

/// Code J of a blob of `bits`-wide codes packed low-first (2, 4 or 8 bits).
int32_t unpackCode(const uint8_t *Blob, int64_t J, int64_t Bits) {
  int64_t Bit = J * Bits;
  return (Blob[Bit / 8] >> (Bit % 8)) & ((1 << Bits) - 1);
}

} // namespace

Error autopar::runMatMulNBits(const KernelArgs &A) {
  int64_t K = A.intAttr("K", 0), N = A.intAttr("N", 0),
          Bits = A.intAttr("bits", 4), Block = A.intAttr("block_size", 0);
  if (Bits != 2 && Bits != 4 && Bits != 8)
    return A.error("the CPU kernel unpacks 2, 4 or 8 bits, not " + Twine(Bits));
  if (A.has(4))
    return A.error("g_idx is not supported");
  const Tensor &X = A.In[0], &Y = A.Out[0];
  int64_t Blocks = (K + Block - 1) / Block, Blob = Block * Bits / 8;
  int64_t ZeroRow = (Blocks * Bits + 7) / 8;
  Shape Out = toShape(X.getShape());
  Out.back() = N;
  if (Error E = A.checkShape(0, Out))
    return E;
  // The weight dequantized once per call, [N, K]: (code - zero) * scale,
  // the zero point 2^(bits-1) when not given.
  std::vector<float> W(size_t(N * K));
  const uint8_t *Codes = A.In[1].data<uint8_t>();
  const float *Scales = A.In[2].data<float>();
  bool PackedZero = A.has(3) && A.In[3].getElementType() == ElementType::U8;
  parallelFor(N, [&](int64_t Col) {
    for (int64_t Bk = 0; Bk != Blocks; ++Bk) {
      float Zero = float(1 << (Bits - 1));
      if (PackedZero)
        Zero = float(
            unpackCode(A.In[3].data<uint8_t>() + Col * ZeroRow, Bk, Bits));
      else if (A.has(3))
        Zero = A.In[3].data<float>()[Col * Blocks + Bk];
      float Scale = Scales[Col * Blocks + Bk];
      const uint8_t *BlobData = Codes + (Col * Blocks + Bk) * Blob;
      for (int64_t J = 0; J != Block && Bk * Block + J < K; ++J)
        W[Col * K + Bk * Block + J] =
            (float(unpackCode(BlobData, J, Bits)) - Zero) * Scale;
    }
  });
  int64_t Rows = K ? X.getNumElements() / K : 0;
  sgemm(false, true, Rows, N, K, 1.f, X.data<float>(), W.data(), 0.f,
        Y.data<float>());
  if (A.has(5)) {
    const float *Bias = A.In[5].data<float>();
    float *Yd = Y.data<float>();
    for (int64_t R = 0; R != Rows; ++R)
      for (int64_t Col = 0; Col != N; ++Col)
        Yd[R * N + Col] += Bias[Col];
  }
  return Error::success();
}

Error autopar::runGatherBlockQuantized(const KernelArgs &A) {
  const Tensor &Data = A.In[0], &Indices = A.In[1], &Y = A.Out[0];
  if (Error E = A.checkType(1, {ElementType::I64, ElementType::I32}))
    return E;
  int64_t Bits = A.intAttr("bits", 4), Block = A.intAttr("block_size", 128);
  unsigned Rank = Data.getShape().size();
  Expected<unsigned> G = A.normalizeAxis(A.intAttr("gather_axis", 0), Rank);
  if (!G)
    return G.takeError();
  Expected<unsigned> Q = A.normalizeAxis(A.intAttr("quantize_axis", 1), Rank);
  if (!Q)
    return Q.takeError();
  // The codes unpacked along Q; each gathered element is dequantized from
  // its code (no table is dequantized whole).
  Shape Unpacked = toShape(Data.getShape());
  Unpacked[*Q] *= 8 / Bits;
  int64_t Len = Unpacked[*Q], Inner = 1;
  for (unsigned I = *Q + 1; I != Rank; ++I)
    Inner *= Unpacked[I];
  int64_t Blocks = (Len + Block - 1) / Block;
  int64_t ZeroRow = (Blocks * Bits + 7) / 8;
  const uint8_t *Codes = Data.data<uint8_t>();
  const float *Scales = A.In[2].data<float>();
  int64_t PackedLen = Data.getShape()[*Q];
  // Element F (flat, of the unpacked data) as (code - zero) * scale.
  auto Dequantize = [&](int64_t F) {
    int64_t In = F % Inner, L = F / Inner % Len, O = F / Inner / Len;
    int64_t S = (O * Blocks + L / Block) * Inner + In;
    // Packed codes lie along the last axis (Inner is 1 then).
    int32_t Code =
        Bits == 8 ? Codes[F] : unpackCode(Codes + O * PackedLen, L, Bits);
    float Zero = float(1 << (Bits - 1));
    if (A.has(3))
      Zero = Bits == 8 ? float(A.In[3].data<uint8_t>()[S])
                       : float(unpackCode(A.In[3].data<uint8_t>() + O * ZeroRow,
                                          L / Block, Bits));
    return (float(Code) - Zero) * Scales[S];
  };
  // Gather along G.
  int64_t GOuter = 1, GLen = Unpacked[*G], GInner = 1;
  for (unsigned I = 0; I != Rank; ++I)
    if (I != *G)
      (I < *G ? GOuter : GInner) *= Unpacked[I];
  Shape Out(Unpacked.begin(), Unpacked.begin() + *G);
  append_range(Out, Indices.getShape());
  Out.append(Unpacked.begin() + *G + 1, Unpacked.end());
  if (Error E = A.checkShape(0, Out))
    return E;
  int64_t Count = Indices.getNumElements();
  bool I64 = Indices.getElementType() == ElementType::I64;
  float *Dst = Y.data<float>();
  for (int64_t O = 0; O != GOuter; ++O)
    for (int64_t I = 0; I != Count; ++I, Dst += GInner) {
      int64_t Index =
          I64 ? Indices.data<int64_t>()[I] : Indices.data<int32_t>()[I];
      if (Index < 0)
        Index += GLen;
      if (Index < 0 || Index >= GLen)
        return A.error("index " + Twine(Index) + " is out of range [0, " +
                       Twine(GLen) + ")");
      int64_t Src = (O * GLen + Index) * GInner;
      for (int64_t J = 0; J != GInner; ++J)
        Dst[J] = Dequantize(Src + J);
    }
  return Error::success();
}

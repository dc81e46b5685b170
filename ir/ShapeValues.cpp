//===- ShapeValues.cpp - Symbolic values of small integer tensors ---------===//

#include "ir/ShapeValues.h"
#include "ir/Graph.h"
#include "ir/OpFacts.h"
#include "ir/ShapeFunctions.h"

using namespace autopar;
using namespace llvm;

/// Chains deeper than this are not followed.
static constexpr unsigned MaxDepth = 32;

/// Integer tensors, and booleans (entries 0 and 1: the conditions that
/// Equal gives Where).
static bool isIntegerShapeTensor(const Value *V) {
  const TensorType &T = V->getType();
  return (isIntegerElementType(T.getElementType()) ||
          T.getElementType() == ElementType::Bool) &&
         T.getRank() <= 1;
}

static std::optional<ShapeValue> evaluate(const Value *V, unsigned Depth);

/// The constant integers of a Constant-defined operand.
static std::optional<std::vector<int64_t>> getConstantInts(const Value *V) {
  const DenseTensor *T = V ? getConstantValue(V) : nullptr;
  if (!T || T->isFloat())
    return std::nullopt;
  return std::vector<int64_t>(T->getInts().begin(), T->getInts().end());
}

/// Entry-wise arithmetic; symbolic entries take part in products and exact
/// quotients, anything else becomes unknown.
static ShapeEntry combine(OpId Op, const ShapeEntry &A, const ShapeEntry &B) {
  if (A.Int && B.Int) {
    ElementFn Fn = getOpFacts(Op).Element;
    bool Arithmetic = Fn == ElementFn::Add || Fn == ElementFn::Sub ||
                      Fn == ElementFn::Mul || Fn == ElementFn::Div;
    if (std::optional<int64_t> R =
            Arithmetic ? applyIntElementFn(Fn, *A.Int, *B.Int) : std::nullopt)
      return ShapeEntry::get(*R);
    return ShapeEntry::get(Dim());
  }
  Dim DA = A.toDim(), DB = B.toDim();
  if (Op == OpId::Mul && !(A.Int && *A.Int < 0) && !(B.Int && *B.Int < 0))
    return ShapeEntry::get(DA * DB);
  if (Op == OpId::Div && !(B.Int && *B.Int <= 0))
    if (std::optional<Dim> Q = DA.divide(DB))
      return ShapeEntry::get(*Q);
  return ShapeEntry::get(Dim());
}

/// Less and Greater of two entries: known where both are integers (`x.size(1)
/// > 1` once the size is bound), else unknown.
static ShapeEntry compareOrder(OpId Op, const ShapeEntry &A,
                               const ShapeEntry &B) {
  if (!A.Int || !B.Int)
    return ShapeEntry::get(Dim());
  return ShapeEntry::get(
      int64_t(Op == OpId::Less ? *A.Int < *B.Int : *A.Int > *B.Int));
}

/// True when A and B are known to be the same integer: equal integers, or
/// the same symbolic dimension.
static bool isSameEntry(const ShapeEntry &A, const ShapeEntry &B) {
  if (A.Int || B.Int)
    return A.Int == B.Int;
  return !A.Symbolic.isUnknown() && A.Symbolic == B.Symbolic;
}

/// Equal of two entries as 1 (true), 0 (false) or unknown. A symbolic
/// dimension is a size, never negative: it differs from every negative
/// integer (Reshape's and Expand's -1) and equals itself; anything else
/// involving a symbol or an unknown entry is unknown.
static ShapeEntry compareEqual(const ShapeEntry &A, const ShapeEntry &B) {
  if (isSameEntry(A, B))
    return ShapeEntry::get(1);
  if (A.Int && B.Int)
    return ShapeEntry::get(0);
  const ShapeEntry &Int = A.Int ? A : B, &Other = A.Int ? B : A;
  if (Int.Int && *Int.Int < 0 && Other.Symbolic.isSymbolic())
    return ShapeEntry::get(0);
  return ShapeEntry::get(Dim());
}

/// The operands' values broadcast to one length (numpy's rule for 0-D and
/// 1-D values: a value of one entry repeats), else nullopt.
static std::optional<size_t>
getBroadcastLength(ArrayRef<const ShapeValue *> Values) {
  size_t Size = 1;
  for (const ShapeValue *V : Values)
    if (V->size() != 1)
      Size = V->size();
  for (const ShapeValue *V : Values)
    if (V->size() != Size && V->size() != 1)
      return std::nullopt;
  return Size;
}

static const ShapeEntry &broadcastEntry(const ShapeValue &V, size_t I) {
  return V[V.size() == 1 ? 0 : I];
}

static std::optional<ShapeValue> evaluateNode(const Node &N, unsigned Depth) {
  // Only nodes with the operands their op requires are followed.
  const OpInfo &Info = N.getOpInfo();
  if (N.getNumOperands() < Info.getMinOperands())
    return std::nullopt;
  for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I) {
    const OperandSpec *Spec = Info.getOperand(I);
    if (!N.getOperand(I) && (!Spec || !Spec->Optional))
      return std::nullopt;
  }
  auto Operand = [&](unsigned I) -> std::optional<ShapeValue> {
    if (I >= N.getNumOperands() || !N.getOperand(I))
      return std::nullopt;
    return evaluate(N.getOperand(I), Depth + 1);
  };
  switch (N.getOp()) {
  case OpId::Shape: {
    const TensorType &In = N.getOperand(0)->getType();
    auto [Start, End] = getShapeRange(ShapeContext(N), In.getRank());
    ShapeValue Result;
    for (unsigned I = Start; I != End; ++I)
      Result.push_back(ShapeEntry::get(In.getDim(I)));
    return Result;
  }
  case OpId::Neg: {
    std::optional<ShapeValue> In = Operand(0);
    if (!In)
      return std::nullopt;
    for (ShapeEntry &E : *In)
      E = E.Int && *E.Int != INT64_MIN ? ShapeEntry::get(-*E.Int)
                                       : ShapeEntry::get(Dim());
    return In;
  }
  case OpId::Size: {
    Dim Count = N.getOperand(0)->getType().getNumElements();
    return ShapeValue{ShapeEntry::get(Count)};
  }
  case OpId::ConstantOfShape: {
    // A 1-D integer fill of a known length: every entry is the fill value.
    std::optional<ShapeValue> Shape = Operand(0);
    const Attribute *Fill = N.getAttr("value");
    if (!Shape || Shape->size() != 1 || !Shape->front().Int ||
        *Shape->front().Int < 0 || *Shape->front().Int > MaxShapeValueEntries)
      return std::nullopt;
    int64_t FillValue = 0;
    if (Fill) {
      if (!Fill->isa(Attribute::Kind::Tensor) || Fill->getTensor().isFloat() ||
          Fill->getTensor().size() != 1)
        return std::nullopt;
      FillValue = Fill->getTensor().getInts()[0];
    }
    return ShapeValue(*Shape->front().Int, ShapeEntry::get(FillValue));
  }
  case OpId::Cast:
    if (N.getResult(0)->getType().getElementType() == ElementType::Bool &&
        N.getOperand(0)->getType().getElementType() != ElementType::Bool) {
      // To bool: nonzero integers are true; a symbolic size may be zero.
      std::optional<ShapeValue> In = Operand(0);
      if (!In)
        return std::nullopt;
      for (ShapeEntry &E : *In)
        E = E.Int ? ShapeEntry::get(int64_t(*E.Int != 0))
                  : ShapeEntry::get(Dim());
      return In;
    }
    return Operand(0);
  case OpId::Identity:
  case OpId::Unsqueeze:
  case OpId::Squeeze:
  case OpId::Reshape:
    // Each keeps the entries (as a 0-D or 1-D tensor, checked by the
    // caller).
    return Operand(0);
  case OpId::Concat: {
    ShapeValue Result;
    for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I) {
      std::optional<ShapeValue> Part = Operand(I);
      if (!Part)
        return std::nullopt;
      Result.append(Part->begin(), Part->end());
    }
    return Result;
  }
  case OpId::Gather: {
    std::optional<ShapeValue> Data = Operand(0);
    std::optional<std::vector<int64_t>> Indices =
        getConstantInts(N.getOperand(1));
    if (!Data || !Indices)
      return std::nullopt;
    ShapeValue Result;
    int64_t Size = Data->size();
    for (int64_t I : *Indices) {
      if (I < -Size || I >= Size)
        return std::nullopt;
      Result.push_back((*Data)[I < 0 ? I + Size : I]);
    }
    return Result;
  }
  case OpId::Slice: {
    std::optional<ShapeValue> Data = Operand(0);
    std::optional<std::vector<int64_t>> Starts =
        getConstantInts(N.getOperand(1));
    std::optional<std::vector<int64_t>> Ends = getConstantInts(N.getOperand(2));
    if (!Data || !Starts || !Ends || Starts->size() != 1 || Ends->size() != 1)
      return std::nullopt;
    int64_t Step = 1;
    if (N.getNumOperands() > 4 && N.getOperand(4)) {
      std::optional<std::vector<int64_t>> Steps =
          getConstantInts(N.getOperand(4));
      if (!Steps || Steps->size() != 1 || (*Steps)[0] == 0)
        return std::nullopt;
      Step = (*Steps)[0];
    }
    // ONNX's clamping for a 1-D tensor: negative indices count from the
    // end; then starts clamp to [0, size] (step > 0) or [0, size - 1]
    // (step < 0), ends to [0, size] or [-1, size - 1].
    int64_t Size = Data->size();
    if (Size == 0)
      return ShapeValue();
    auto Clamp = [&](int64_t V, int64_t Lo, int64_t Hi) {
      if (V < 0)
        V = V < -Size ? Lo : V + Size;
      return std::clamp(V, Lo, Hi);
    };
    int64_t Start = Step > 0 ? Clamp((*Starts)[0], 0, Size)
                             : Clamp((*Starts)[0], 0, Size - 1);
    int64_t End =
        Step > 0 ? Clamp((*Ends)[0], 0, Size) : Clamp((*Ends)[0], -1, Size - 1);
    ShapeValue Result;
    for (int64_t I = Start; Step > 0 ? I < End : I > End; I += Step)
      Result.push_back((*Data)[I]);
    return Result;
  }
  case OpId::Add:
  case OpId::Sub:
  case OpId::Mul:
  case OpId::Div:
  case OpId::Equal:
  case OpId::Less:
  case OpId::Greater: {
    std::optional<ShapeValue> A = Operand(0), B = Operand(1);
    if (!A || !B)
      return std::nullopt;
    std::optional<size_t> Size = getBroadcastLength({&*A, &*B});
    if (!Size)
      return std::nullopt;
    ShapeValue Result;
    for (size_t I = 0; I != *Size; ++I) {
      const ShapeEntry &EA = broadcastEntry(*A, I), &EB = broadcastEntry(*B, I);
      Result.push_back(N.getOp() == OpId::Equal ? compareEqual(EA, EB)
                       : N.getOp() == OpId::Less || N.getOp() == OpId::Greater
                           ? compareOrder(N.getOp(), EA, EB)
                           : combine(N.getOp(), EA, EB));
    }
    return Result;
  }
  case OpId::Where: {
    // Entry-wise selection; where the condition is unknown, the entry is
    // known only when both sides agree.
    std::optional<ShapeValue> C = Operand(0), X = Operand(1), Y = Operand(2);
    if (!C || !X || !Y)
      return std::nullopt;
    std::optional<size_t> Size = getBroadcastLength({&*C, &*X, &*Y});
    if (!Size)
      return std::nullopt;
    ShapeValue Result;
    for (size_t I = 0; I != *Size; ++I) {
      const ShapeEntry &EC = broadcastEntry(*C, I);
      const ShapeEntry &EX = broadcastEntry(*X, I), &EY = broadcastEntry(*Y, I);
      if (EC.Int)
        Result.push_back(*EC.Int ? EX : EY);
      else
        Result.push_back(isSameEntry(EX, EY) ? EX : ShapeEntry::get(Dim()));
    }
    return Result;
  }
  // No integer shape arithmetic: the value is unknown.
  case OpId::Sum:
  case OpId::Pow:
  case OpId::And:
  case OpId::Or:
  case OpId::Abs:
  case OpId::Sqrt:
  case OpId::Reciprocal:
  case OpId::Exp:
  case OpId::Log:
  case OpId::Tanh:
  case OpId::Erf:
  case OpId::Sigmoid:
  case OpId::Relu:
  case OpId::LeakyRelu:
  case OpId::Gelu:
  case OpId::Silu:
  case OpId::SwiGLU:
  case OpId::Not:
  case OpId::Dropout:
  case OpId::Softmax:
  case OpId::LogSoftmax:
  case OpId::CumSum:
  case OpId::Trilu:
  case OpId::Min:
  case OpId::Max:
  case OpId::Mean:
  case OpId::Mod:
  case OpId::BitShift:
  case OpId::GreaterOrEqual:
  case OpId::LessOrEqual:
  case OpId::Xor:
  case OpId::BitwiseAnd:
  case OpId::BitwiseOr:
  case OpId::BitwiseXor:
  case OpId::PRelu:
  case OpId::Ceil:
  case OpId::Floor:
  case OpId::Round:
  case OpId::Sign:
  case OpId::Sin:
  case OpId::Cos:
  case OpId::Tan:
  case OpId::Asin:
  case OpId::Acos:
  case OpId::Atan:
  case OpId::Sinh:
  case OpId::Cosh:
  case OpId::Asinh:
  case OpId::Acosh:
  case OpId::Atanh:
  case OpId::Softplus:
  case OpId::Softsign:
  case OpId::Elu:
  case OpId::Selu:
  case OpId::Celu:
  case OpId::HardSigmoid:
  case OpId::HardSwish:
  case OpId::Mish:
  case OpId::ThresholdedRelu:
  case OpId::Shrink:
  case OpId::IsNaN:
  case OpId::IsInf:
  case OpId::BitwiseNot:
  case OpId::Clip:
  case OpId::Hardmax:
  case OpId::ReduceProd:
  case OpId::ReduceMin:
  case OpId::ReduceL1:
  case OpId::ReduceL2:
  case OpId::ReduceLogSum:
  case OpId::ReduceLogSumExp:
  case OpId::ReduceSumSquare:
  case OpId::ArgMax:
  case OpId::ArgMin:
  case OpId::MatMul:
  case OpId::Linear:
  case OpId::Gemm:
  case OpId::Einsum:
  case OpId::ReduceSum:
  case OpId::ReduceMean:
  case OpId::ReduceMax:
  case OpId::LayerNormalization:
  case OpId::RMSNormalization:
  case OpId::BatchNormalization:
  case OpId::InstanceNormalization:
  case OpId::Conv:
  case OpId::ConvTranspose:
  case OpId::MaxPool:
  case OpId::AveragePool:
  case OpId::GlobalAveragePool:
  case OpId::LpPool:
  case OpId::GlobalLpPool:
  case OpId::LRN:
  case OpId::Attention:
  case OpId::RotaryEmbedding:
  case OpId::MsAttention:
  case OpId::MsGroupQueryAttention:
  case OpId::MsEmbedLayerNormalization:
  case OpId::Constant:
  case OpId::Range:
  case OpId::Flatten:
  case OpId::Transpose:
  case OpId::Split:
  case OpId::GatherElements:
  case OpId::ScatterElements:
  case OpId::Expand:
  case OpId::Tile:
  case OpId::TopK:
  case OpId::Pad:
  case OpId::GatherND:
  case OpId::ScatterND:
  case OpId::SpaceToDepth:
  case OpId::DepthToSpace:
  case OpId::EyeLike:
  case OpId::OneHot:
  case OpId::NegativeLogLikelihoodLoss:
  case OpId::ReverseSequence:
  case OpId::Resize:
  case OpId::DeformConv:
  case OpId::Col2Im:
  case OpId::CenterCropPad:
  case OpId::GroupNormalization:
  case OpId::AffineGrid:
  case OpId::TensorScatter:
  case OpId::LSTM:
  case OpId::GRU:
  case OpId::RNN:
  case OpId::QuantizeLinear:
  case OpId::DequantizeLinear:
  case OpId::DynamicQuantizeLinear:
  case OpId::MatMulInteger:
  case OpId::ConvInteger:
  case OpId::MatMulNBits:
  case OpId::GatherBlockQuantized:
  case OpId::CrossEntropyLoss:
  case OpId::CrossEntropyLossGrad:
  case OpId::NegativeLogLikelihoodLossGrad:
  case OpId::LayerNormalizationGrad:
  case OpId::RMSNormalizationGrad:
  case OpId::AttentionWithProbs:
  case OpId::AttentionGrad:
  case OpId::DropoutGrad:
  case OpId::GeluGrad:
  case OpId::SiluGrad:
  case OpId::SwiGLUGrad:
  case OpId::SoftmaxGrad:
  case OpId::AdamW:
  case OpId::Sgd:
  case OpId::GatherGrad:
  case OpId::AllReduce:
  case OpId::AllGather:
  case OpId::ReduceScatter:
  case OpId::AllToAll:
  case OpId::ShardSlice:
  case OpId::SendRecv:
  case OpId::Send:
  case OpId::Recv:
  case OpId::Opaque:
    return std::nullopt;
  }
  return std::nullopt;
}

static std::optional<ShapeValue> evaluate(const Value *V, unsigned Depth) {
  if (!V || Depth > MaxDepth || !isIntegerShapeTensor(V))
    return std::nullopt;
  std::optional<ShapeValue> Result;
  if (std::optional<std::vector<int64_t>> Ints = getConstantInts(V)) {
    Result.emplace();
    for (int64_t I : *Ints)
      Result->push_back(ShapeEntry::get(I));
  } else if (const Node *N = V->getDefiningNode()) {
    Result = evaluateNode(*N, Depth);
  }
  // The value must have as many entries as its (verified) type says.
  if (!Result || Result->size() > MaxShapeValueEntries)
    return std::nullopt;
  const TensorType &T = V->getType();
  Dim Expected = T.getRank() == 0 ? Dim::get(1) : T.getDim(0);
  if (!Expected.isUnknown() && Expected != Dim::get(Result->size()))
    return std::nullopt;
  return Result;
}

std::optional<ShapeValue> autopar::evaluateShapeValue(const Value *V) {
  return evaluate(V, 0);
}

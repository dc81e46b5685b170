//===- GradientRules.cpp - Per-op gradient rules for autodiff -------------===//
//
// One case per op in emitGradient. The rules assume static shapes (the
// autodiff pass checks them) and the operand types the verifier accepts.
// They use the ops every backend has where those say it well: Gemm with
// transposes for weight gradients, ReduceSum to undo broadcasting, Reshape
// and Transpose; the fused ...Grad ops of Ops.def where one kernel is what
// any runtime wants (norms, attention, activations, the embedding).
//
//===----------------------------------------------------------------------===//

#include "passes/GradientRules.h"

#include "ir/OpFacts.h"
#include "ir/OpRegistry.h"
#include "ir/Verifier.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <numeric>

using namespace autopar;
using namespace llvm;

bool autopar::isDifferentiableType(ElementType Ty) {
  return isFloatElementType(Ty);
}

static Error ruleError(const Node &N, const Twine &Why) {
  return createStringError(inconvertibleErrorCode(),
                           "node '" + N.getName() + "': " + Why);
}

//===----------------------------------------------------------------------===//
// GradBuilder
//===----------------------------------------------------------------------===//

Expected<SmallVector<Value *, 3>> GradBuilder::emit(OpId Op,
                                                    ArrayRef<Value *> Operands,
                                                    AttrDict Attrs,
                                                    unsigned NumResults) {
  if (Forward)
    for (StringRef Name : {"layer", "stage"})
      if (const Attribute *A = Forward->getAttr(Name))
        Attrs.set(Name, *A);
  SmallVector<TensorType, 3> Placeholder(NumResults, TensorType());
  Node *N = G.createNode(Op, Operands, Placeholder, std::move(Attrs));
  if (Forward && !Forward->getName().empty())
    N->setName(Forward->getName().str() + ".grad");
  std::string Problem;
  std::optional<SmallVector<TensorType, 1>> Types =
      inferNodeResultTypes(*N, [&](const Twine &Msg) { Problem = Msg.str(); });
  if (!Types) {
    std::string OpName = getOpInfo(Op).Name.str();
    N->erase();
    return createStringError(inconvertibleErrorCode(),
                             "gradient rule built an invalid " + OpName + ": " +
                                 Problem);
  }
  SmallVector<Value *, 3> Results;
  for (unsigned I = 0; I != NumResults; ++I) {
    N->getResult(I)->setType((*Types)[I]);
    Results.push_back(N->getResult(I));
  }
  return Results;
}

Expected<Value *> GradBuilder::emit1(OpId Op, ArrayRef<Value *> Operands,
                                     AttrDict Attrs) {
  Expected<SmallVector<Value *, 3>> R = emit(Op, Operands, std::move(Attrs));
  if (!R)
    return R.takeError();
  return R->front();
}

static AttrDict
attrs(std::initializer_list<std::pair<StringRef, Attribute>> L) {
  AttrDict D;
  for (const auto &[Name, A] : L)
    D.set(Name, A);
  return D;
}

Value *GradBuilder::ints(ArrayRef<int64_t> Values) {
  TensorType T = TensorType::get(ElementType::I64, {(int64_t)Values.size()});
  DenseTensor D(T, std::vector<int64_t>(Values.begin(), Values.end()));
  AttrDict A;
  A.set("value", Attribute::getTensor(std::move(D)));
  return G.createNode(OpId::Constant, {}, {T}, std::move(A))->getResult(0);
}

Value *GradBuilder::scalar(ElementType Ty, double V) {
  TensorType T(Ty, {});
  DenseTensor D(T, std::vector<double>{V});
  AttrDict A;
  A.set("value", Attribute::getTensor(std::move(D)));
  return G.createNode(OpId::Constant, {}, {T}, std::move(A))->getResult(0);
}

Expected<Value *> GradBuilder::zeros(const TensorType &Type) {
  SmallVector<int64_t, 4> Sizes = Type.getStaticSizes();
  TensorType One(Type.getElementType(), {Dim::get(1)});
  DenseTensor Zero(One, std::vector<double>{0.0});
  if (!isFloatElementType(Type.getElementType()))
    Zero = DenseTensor(One, std::vector<int64_t>{0});
  return emit1(OpId::ConstantOfShape, {ints(Sizes)},
               attrs({{"value", Attribute::getTensor(std::move(Zero))}}));
}

Expected<Value *> GradBuilder::reshape(Value *X, ArrayRef<int64_t> Sizes) {
  if (X->getType().hasStaticShape() &&
      ArrayRef<int64_t>(X->getType().getStaticSizes()) == Sizes)
    return X;
  return emit1(OpId::Reshape, {X, ints(Sizes)});
}

Expected<Value *> GradBuilder::transpose(Value *X, ArrayRef<int64_t> Perm) {
  return emit1(OpId::Transpose, {X},
               attrs({{"perm", Attribute::getIntList(Perm.vec())}}));
}

Expected<Value *> GradBuilder::sumToShape(Value *Grad,
                                          const TensorType &Target) {
  SmallVector<int64_t, 4> From = Grad->getType().getStaticSizes(),
                          To = Target.getStaticSizes();
  if (From == To)
    return Grad;
  unsigned Lead = From.size() - To.size();
  std::vector<int64_t> Axes;
  for (unsigned I = 0; I != From.size(); ++I)
    if (I < Lead || (To[I - Lead] == 1 && From[I] != 1))
      Axes.push_back(I);
  Value *Sum = Grad;
  if (!Axes.empty()) {
    Expected<Value *> R = emit1(OpId::ReduceSum, {Grad},
                                attrs({{"axes", Attribute::getIntList(Axes)},
                                       {"keepdims", Attribute::getInt(1)}}));
    if (!R)
      return R.takeError();
    Sum = *R;
  }
  return reshape(Sum, To);
}

Expected<Value *> GradBuilder::add(Value *A, Value *B) {
  return emit1(OpId::Add, {A, B});
}

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

namespace {

/// State of one rule application: the builder, the node, and where the
/// operand gradients go.
struct Rule {
  GradBuilder &B;
  const Node &N;
  ArrayRef<Value *> DY;
  ArrayRef<bool> Needed;
  SmallVectorImpl<Value *> &Out;

  Value *operand(unsigned I) const { return N.getOperand(I); }
  const TensorType &type(unsigned I) const {
    return N.getOperand(I)->getType();
  }
  Value *result(unsigned I) const { return N.getResult(I); }
  ElementType elem() const {
    return N.getResult(0)->getType().getElementType();
  }
  AttrDict forwardAttrs(std::initializer_list<StringRef> Names) const {
    AttrDict D;
    for (StringRef Name : Names)
      if (const Attribute *A = N.getAttr(Name))
        D.set(Name, *A);
    return D;
  }
  Error fail(const Twine &Why) const { return ruleError(N, Why); }

  /// Out[I] = sumToShape(G, operand I's type) when operand I is needed.
  Error setSummed(unsigned I, Expected<Value *> G) {
    if (!G)
      return G.takeError();
    Expected<Value *> S = B.sumToShape(*G, type(I));
    if (!S)
      return S.takeError();
    Out[I] = *S;
    return Error::success();
  }
  Error set(unsigned I, Expected<Value *> G) {
    if (!G)
      return G.takeError();
    Out[I] = *G;
    return Error::success();
  }
  Expected<Value *> mul(Value *X, Value *Y) {
    return B.emit1(OpId::Mul, {X, Y});
  }
  Expected<Value *> div(Value *X, Value *Y) {
    return B.emit1(OpId::Div, {X, Y});
  }
  Expected<Value *> neg(Value *X) { return B.emit1(OpId::Neg, {X}); }
};

} // namespace

static Error addGrad(Rule &R, bool Subtract) {
  if (R.Needed[0])
    if (Error E = R.setSummed(0, R.DY[0]))
      return E;
  if (!R.Needed[1])
    return Error::success();
  return Subtract ? R.setSummed(1, R.neg(R.DY[0])) : R.setSummed(1, R.DY[0]);
}

static Error mulGrad(Rule &R) {
  if (R.Needed[0])
    if (Error E = R.setSummed(0, R.mul(R.DY[0], R.operand(1))))
      return E;
  if (R.Needed[1])
    return R.setSummed(1, R.mul(R.DY[0], R.operand(0)));
  return Error::success();
}

static Error divGrad(Rule &R) {
  Value *DY = R.DY[0];
  if (R.Needed[0])
    if (Error E = R.setSummed(0, R.div(DY, R.operand(1))))
      return E;
  if (!R.Needed[1])
    return Error::success();
  // d(a/b)/db = -(a/b)/b.
  Expected<Value *> YOverB = R.div(R.result(0), R.operand(1));
  if (!YOverB)
    return YOverB.takeError();
  Expected<Value *> P = R.mul(DY, *YOverB);
  if (!P)
    return P.takeError();
  return R.setSummed(1, R.neg(*P));
}

/// dX = dY * Factor, for the elementwise functions without a fused op.
static Error chainGrad(Rule &R, Expected<Value *> Factor) {
  if (!Factor)
    return Factor.takeError();
  return R.set(0, R.mul(R.DY[0], *Factor));
}

static Error sqrtGrad(Rule &R) {
  Expected<Value *> TwoY = R.mul(R.result(0), R.B.scalar(R.elem(), 2.0));
  if (!TwoY)
    return TwoY.takeError();
  return R.set(0, R.div(R.DY[0], *TwoY));
}

static Error reciprocalGrad(Rule &R) {
  Expected<Value *> YY = R.mul(R.result(0), R.result(0));
  if (!YY)
    return YY.takeError();
  return chainGrad(R, R.neg(*YY));
}

/// tanh' = (1 - y)(1 + y); sigmoid' = y (1 - y).
static Error tanhOrSigmoidGrad(Rule &R, bool Tanh) {
  GradBuilder &B = R.B;
  Value *Y = R.result(0);
  ElementType Ty = R.elem();
  Expected<Value *> OneMinus = B.emit1(OpId::Sub, {B.scalar(Ty, 1.0), Y});
  if (!OneMinus)
    return OneMinus.takeError();
  Expected<Value *> Other =
      Tanh ? B.emit1(OpId::Add, {B.scalar(Ty, 1.0), Y}) : Expected<Value *>(Y);
  if (!Other)
    return Other.takeError();
  return chainGrad(R, R.mul(*OneMinus, *Other));
}

static Error reluGrad(Rule &R) {
  GradBuilder &B = R.B;
  ElementType Ty = R.elem();
  Expected<Value *> Pos =
      B.emit1(OpId::Greater, {R.operand(0), B.scalar(Ty, 0.0)});
  if (!Pos)
    return Pos.takeError();
  return R.set(0, B.emit1(OpId::Where, {*Pos, R.DY[0], B.scalar(Ty, 0.0)}));
}

/// erf'(x) = 2 / sqrt(pi) * exp(-x^2).
static Error erfGrad(Rule &R) {
  Value *X = R.operand(0);
  Expected<Value *> XX = R.mul(X, X);
  if (!XX)
    return XX.takeError();
  Expected<Value *> NegXX = R.neg(*XX);
  if (!NegXX)
    return NegXX.takeError();
  Expected<Value *> E = R.B.emit1(OpId::Exp, {*NegXX});
  if (!E)
    return E.takeError();
  return chainGrad(R, R.mul(*E, R.B.scalar(R.elem(), 2.0 / std::sqrt(M_PI))));
}

static Error castGrad(Rule &R) {
  ElementType From = R.operand(0)->getType().getElementType();
  return R.set(
      0, R.B.emit1(
             OpId::Cast, {R.DY[0]},
             attrs({{"to", Attribute::getString(getElementTypeName(From))}})));
}

/// Pow(X, p) with a constant scalar exponent p.
static Error powGrad(Rule &R) {
  const DenseTensor *P = getConstantValue(R.operand(1));
  if (!P || P->getType().getStaticNumElements() != std::optional<int64_t>(1) ||
      !P->isFloat())
    return R.fail("a gradient needs a constant scalar float exponent");
  double Exp = P->getFloats()[0];
  ElementType Ty = R.elem();
  Expected<Value *> Pm1 =
      R.B.emit1(OpId::Pow, {R.operand(0), R.B.scalar(Ty, Exp - 1)});
  if (!Pm1)
    return Pm1.takeError();
  Expected<Value *> F = R.mul(*Pm1, R.B.scalar(Ty, Exp));
  if (!F)
    return F.takeError();
  return R.set(0, R.mul(R.DY[0], *F));
}

/// X flattened to [rows, last]: the rows of a weight contraction.
static Expected<Value *> flattenRows(GradBuilder &B, Value *X) {
  SmallVector<int64_t, 4> S = X->getType().getStaticSizes();
  int64_t Last = S.back();
  int64_t Rows = std::accumulate(S.begin(), S.end() - 1, int64_t(1),
                                 std::multiplies<int64_t>());
  return B.reshape(X, {Rows, Last});
}

/// Linear(X, W, B?) and MatMul(X, W) with a rank-2 W: dX = dY W^T,
/// dW = X^T dY over all rows, dB = column sums of dY.
static Error weightContractionGrad(Rule &R) {
  GradBuilder &B = R.B;
  Expected<Value *> X2 = flattenRows(B, R.operand(0));
  if (!X2)
    return X2.takeError();
  Expected<Value *> DY2 = flattenRows(B, R.DY[0]);
  if (!DY2)
    return DY2.takeError();
  if (R.Needed[0]) {
    Expected<Value *> DX2 = B.emit1(OpId::Gemm, {*DY2, R.operand(1)},
                                    attrs({{"transB", Attribute::getInt(1)}}));
    if (!DX2)
      return DX2.takeError();
    if (Error E = R.set(0, B.reshape(*DX2, R.type(0).getStaticSizes())))
      return E;
  }
  if (R.Needed[1])
    if (Error E = R.set(1, B.emit1(OpId::Gemm, {*X2, *DY2},
                                   attrs({{"transA", Attribute::getInt(1)}}))))
      return E;
  if (R.N.getNumOperands() > 2 && R.operand(2) && R.Needed[2]) {
    Expected<Value *> Sum =
        B.emit1(OpId::ReduceSum, {*DY2},
                attrs({{"axes", Attribute::getIntList({0})},
                       {"keepdims", Attribute::getInt(0)}}));
    if (!Sum)
      return Sum.takeError();
    return R.set(2, B.reshape(*Sum, R.type(2).getStaticSizes()));
  }
  return Error::success();
}

/// Swaps the last two dimensions.
static Expected<Value *> transposeLast2(GradBuilder &B, Value *X) {
  unsigned Rank = X->getType().getRank();
  SmallVector<int64_t, 4> Perm(Rank);
  std::iota(Perm.begin(), Perm.end(), 0);
  std::swap(Perm[Rank - 1], Perm[Rank - 2]);
  return B.transpose(X, Perm);
}

static Error matMulGrad(Rule &R) {
  unsigned RA = R.type(0).getRank(), RB = R.type(1).getRank();
  if (RA < 2 || RB < 2)
    return R.fail("no gradient rule for a rank-1 operand");
  if (RB == 2)
    return weightContractionGrad(R);
  GradBuilder &B = R.B;
  if (R.Needed[0]) {
    Expected<Value *> BT = transposeLast2(B, R.operand(1));
    if (!BT)
      return BT.takeError();
    if (Error E = R.setSummed(0, B.emit1(OpId::MatMul, {R.DY[0], *BT})))
      return E;
  }
  if (R.Needed[1]) {
    Expected<Value *> AT = transposeLast2(B, R.operand(0));
    if (!AT)
      return AT.takeError();
    return R.setSummed(1, B.emit1(OpId::MatMul, {*AT, R.DY[0]}));
  }
  return Error::success();
}

// Y = op(A) op(B) + C with op a transpose where the flag says.
static Error gemmGrad(Rule &R) {
  for (StringRef Scale : {"alpha", "beta"})
    if (const Attribute *A = R.N.getAttr(Scale))
      if (A->getFloat() != 1.0)
        return R.fail("no gradient rule for " + Scale + " != 1");
  bool TA = R.N.getAttr("transA") && R.N.getAttr("transA")->getInt();
  bool TB = R.N.getAttr("transB") && R.N.getAttr("transB")->getInt();
  GradBuilder &B = R.B;
  Value *DY = R.DY[0], *A = R.operand(0), *Bv = R.operand(1);
  auto Gemm = [&](Value *X, Value *Y, bool TX, bool TY) {
    return B.emit1(OpId::Gemm, {X, Y},
                   attrs({{"transA", Attribute::getInt(TX)},
                          {"transB", Attribute::getInt(TY)}}));
  };
  if (R.Needed[0])
    if (Error E =
            R.set(0, TA ? Gemm(Bv, DY, TB, true) : Gemm(DY, Bv, false, !TB)))
      return E;
  if (R.Needed[1])
    if (Error E =
            R.set(1, TB ? Gemm(DY, A, true, TA) : Gemm(A, DY, !TA, false)))
      return E;
  if (R.N.getNumOperands() > 2 && R.operand(2) && R.Needed[2])
    return R.setSummed(2, DY);
  return Error::success();
}

/// Ops whose backward is one fused op Grad taking Operands (dY and what it
/// needs of the forward) and the forward's attributes Attrs, with the
/// gradients of the first NumOut forward operands as results.
static Error fusedGrad(Rule &R, OpId Grad, ArrayRef<Value *> Operands,
                       std::initializer_list<StringRef> Attrs,
                       unsigned NumOut) {
  const Node &N = R.N;
  for (unsigned I = 1; I < N.getNumResults(); ++I)
    if (R.DY[I])
      return R.fail("no gradient rule through result " + Twine(I));
  Expected<SmallVector<Value *, 3>> G =
      R.B.emit(Grad, Operands, R.forwardAttrs(Attrs), NumOut);
  if (!G)
    return G.takeError();
  for (unsigned I = 0; I != NumOut && I < N.getNumOperands(); ++I)
    if (R.Needed[I] && N.getOperand(I))
      R.Out[I] = (*G)[I];
  return Error::success();
}

/// Training-mode Dropout (a random stream, dropout-streams) multiplies by
/// its mask over 1 - ratio; in inference mode it is the identity.
static Error dropoutGrad(Rule &R) {
  const Node &N = R.N;
  std::optional<DropoutSetting> Setting = getDropoutSetting(N);
  if (!Setting)
    return R.fail("no gradient rule with a ratio or mode that is not a "
                  "constant");
  if (!N.getAttr("rng_stream")) {
    if (Setting->drops())
      return R.fail("no gradient rule in training mode without a random "
                    "stream (run dropout-streams before autodiff)");
    R.Out[0] = R.DY[0];
    return Error::success();
  }
  if (N.getNumResults() < 2)
    return R.fail("a training-mode Dropout needs its mask result "
                  "(dropout-streams adds it)");
  return R.set(
      0, R.B.emit1(OpId::DropoutGrad, {R.DY[0], N.getResult(1)},
                   attrs({{"ratio", Attribute::getFloat(Setting->Ratio)}})));
}

static Error attentionGrad(Rule &R) {
  const Node &N = R.N;
  if (R.type(0).getRank() != 4)
    return R.fail("no gradient rule for the 3-D form (reshape to "
                  "[batch, heads, seq, head_size] first)");
  for (unsigned I = 4; I < N.getNumOperands(); ++I)
    if (N.getOperand(I))
      return R.fail("no gradient rule with a key/value cache");
  if (const Attribute *Cap = N.getAttr("softcap"))
    if (Cap->getFloat() != 0)
      return R.fail("no gradient rule with softcap");
  // Dropout draws its mask from the node's random stream, which the
  // gradient draws again (or reads, when the forward kept it).
  bool Dropout = false;
  if (const Attribute *Drop = N.getAttr("dropout"))
    if (Drop->getFloat() != 0) {
      if (!N.getAttr("rng_stream"))
        return R.fail("dropout in training mode without a random stream "
                      "(run dropout-streams before autodiff)");
      Dropout = true;
    }
  SmallVector<Value *, 8> Operands{R.DY[0], R.operand(0), R.operand(1),
                                   R.operand(2)};
  Value *Mask = N.getNumOperands() > 3 ? N.getOperand(3) : nullptr;
  // AttentionWithProbs (materialize-attention) hands its probabilities to
  // the gradient, which then reads them instead of recomputing them (with
  // dropout: and its mask and dropped probabilities).
  if (N.getOp() == OpId::AttentionWithProbs) {
    Operands.append({Mask, N.getResult(1)});
    if (Dropout && N.getNumResults() != 4)
      return R.fail("AttentionWithProbs with dropout returns its mask and "
                    "dropped probabilities");
    if (Dropout)
      Operands.append({N.getResult(2), N.getResult(3)});
  } else if (Mask) {
    Operands.push_back(Mask);
  }
  return fusedGrad(R, OpId::AttentionGrad, Operands,
                   {"dropout", "is_causal", "kv_num_heads", "q_num_heads",
                    "rng_stream", "scale"},
                   3);
}

// Rotation by -theta undoes rotation by theta: the gradient is the same op
// with the sine negated. The tables and positions get no gradient.
static Error rotaryGrad(Rule &R) {
  Expected<Value *> NegSin = R.neg(R.operand(2));
  if (!NegSin)
    return NegSin.takeError();
  SmallVector<Value *, 4> Ops{R.DY[0], R.operand(1), *NegSin};
  if (R.N.getNumOperands() > 3 && R.operand(3))
    Ops.push_back(R.operand(3));
  return R.set(0, R.B.emit1(OpId::RotaryEmbedding, Ops,
                            R.forwardAttrs({"interleaved", "num_heads",
                                            "rotary_embedding_dim"})));
}

static Error reshapeLikeGrad(Rule &R) {
  return R.set(0, R.B.reshape(R.DY[0], R.type(0).getStaticSizes()));
}

static Error transposeGrad(Rule &R) {
  unsigned Rank = R.type(0).getRank();
  SmallVector<int64_t, 4> Perm;
  if (const Attribute *P = R.N.getAttr("perm"))
    Perm.assign(P->getIntList().begin(), P->getIntList().end());
  else
    for (unsigned I = 0; I != Rank; ++I)
      Perm.push_back(Rank - 1 - I);
  SmallVector<int64_t, 4> Inverse(Rank);
  for (unsigned I = 0; I != Rank; ++I)
    Inverse[Perm[I]] = I;
  return R.set(0, R.B.transpose(R.DY[0], Inverse));
}

/// Pad in constant mode with constant pads: dY padded by the negated pads
/// (the padding cropped, what the pads cropped zeros), along the same axes.
static Error padGrad(Rule &R) {
  if (const Attribute *Mode = R.N.getAttr("mode");
      Mode && Mode->getString() != "constant")
    return R.fail("no gradient rule for mode '" + Mode->getString() +
                  "' (only constant)");
  if (R.N.getNumOperands() > 2 && R.operand(2) && R.Needed[2])
    return R.fail("no gradient rule for a constant_value that needs one");
  const DenseTensor *Pads = getConstantValue(R.operand(1));
  if (!Pads || Pads->isFloat())
    return R.fail("a gradient needs constant pads");
  SmallVector<int64_t, 8> Negated;
  for (int64_t P : Pads->getInts())
    Negated.push_back(-P);
  SmallVector<Value *, 4> Operands = {R.DY[0], R.B.ints(Negated)};
  if (R.N.getNumOperands() > 3 && R.operand(3))
    Operands.append({nullptr, R.operand(3)});
  return R.set(0, R.B.emit1(OpId::Pad, Operands));
}

/// SpaceToDepth and DepthToSpace in DCR mode undo each other. DepthToSpace
/// in CRD mode reads channel c * b * b + k where SpaceToDepth writes k * C'
/// + c: its gradient is SpaceToDepth with the channels regrouped.
static Error depthSpaceGrad(Rule &R) {
  int64_t Block = R.N.getAttr("blocksize")->getInt();
  AttrDict Attrs = attrs({{"blocksize", Attribute::getInt(Block)}});
  if (R.N.getOp() == OpId::SpaceToDepth)
    return R.set(0, R.B.emit1(OpId::DepthToSpace, {R.DY[0]}, Attrs));
  Expected<Value *> G = R.B.emit1(OpId::SpaceToDepth, {R.DY[0]}, Attrs);
  const Attribute *Mode = R.N.getAttr("mode");
  if (!G || !Mode || Mode->getString() != "CRD")
    return R.set(0, std::move(G));
  SmallVector<int64_t, 4> X = R.type(0).getStaticSizes();
  Expected<Value *> Split = R.B.reshape(
      *G, {X[0], Block * Block, X[1] / (Block * Block), X[2], X[3]});
  if (!Split)
    return Split.takeError();
  Expected<Value *> Swapped = R.B.transpose(*Split, {0, 2, 1, 3, 4});
  if (!Swapped)
    return Swapped.takeError();
  return R.set(0, R.B.reshape(*Swapped, X));
}

/// NegativeLogLikelihoodLoss: its fused gradient, for the input only.
static Error nllLossGrad(Rule &R) {
  bool HasWeight = R.N.getNumOperands() > 2 && R.operand(2);
  if (HasWeight && R.Needed[2])
    return R.fail("no gradient rule for a weight that needs one");
  SmallVector<Value *, 4> Operands = {R.DY[0], R.operand(0), R.operand(1)};
  if (HasWeight)
    Operands.push_back(R.operand(2));
  return R.set(0, R.B.emit1(OpId::NegativeLogLikelihoodLossGrad, Operands,
                            R.forwardAttrs({"ignore_index", "reduction"})));
}

static int64_t normalizeAxis(int64_t Axis, unsigned Rank) {
  return Axis < 0 ? Axis + Rank : Axis;
}

static Error splitGrad(Rule &R) {
  SmallVector<Value *, 4> Parts;
  for (unsigned I = 0; I != R.N.getNumResults(); ++I) {
    Value *G = R.DY[I];
    if (!G) {
      Expected<Value *> Z = R.B.zeros(R.result(I)->getType());
      if (!Z)
        return Z.takeError();
      G = *Z;
    }
    Parts.push_back(G);
  }
  int64_t Axis =
      normalizeAxis(R.N.getAttr("axis") ? R.N.getAttr("axis")->getInt() : 0,
                    R.type(0).getRank());
  return R.set(0, R.B.emit1(OpId::Concat, Parts,
                            attrs({{"axis", Attribute::getInt(Axis)}})));
}

static Error concatGrad(Rule &R) {
  unsigned Rank = R.type(0).getRank();
  int64_t Axis = normalizeAxis(R.N.getAttr("axis")->getInt(), Rank);
  if (R.N.getNumOperands() == 1) {
    R.Out[0] = R.DY[0];
    return Error::success();
  }
  SmallVector<int64_t, 4> Sizes;
  for (unsigned I = 0; I != R.N.getNumOperands(); ++I)
    Sizes.push_back(R.type(I).getStaticSizes()[Axis]);
  Expected<SmallVector<Value *, 3>> Parts =
      R.B.emit(OpId::Split, {R.DY[0], R.B.ints(Sizes)},
               attrs({{"axis", Attribute::getInt(Axis)}}), Sizes.size());
  if (!Parts)
    return Parts.takeError();
  for (unsigned I = 0; I != Sizes.size(); ++I)
    if (R.Needed[I])
      R.Out[I] = (*Parts)[I];
  return Error::success();
}

/// Slice with unit steps: the gradient is dY padded with zeros, one
/// Concat per sliced axis.
static Error sliceGrad(Rule &R) {
  SmallVector<int64_t, 4> In = R.type(0).getStaticSizes();
  auto ConstInts = [&](unsigned I) -> std::optional<SmallVector<int64_t, 4>> {
    if (I >= R.N.getNumOperands() || !R.operand(I))
      return std::nullopt;
    const DenseTensor *T = getConstantValue(R.operand(I));
    if (!T || T->isFloat())
      return std::nullopt;
    return SmallVector<int64_t, 4>(T->getInts().begin(), T->getInts().end());
  };
  auto Starts = ConstInts(1), Ends = ConstInts(2), Axes = ConstInts(3),
       Steps = ConstInts(4);
  if (!Starts || !Ends)
    return R.fail("a gradient needs constant starts and ends");
  if (!Axes) {
    Axes.emplace();
    for (unsigned I = 0; I != Starts->size(); ++I)
      Axes->push_back(I);
  }
  if (Steps && any_of(*Steps, [](int64_t S) { return S != 1; }))
    return R.fail("no gradient rule for steps other than 1");
  Value *G = R.DY[0];
  SmallVector<int64_t, 4> Cur = G->getType().getStaticSizes();
  for (unsigned K = 0; K != Axes->size(); ++K) {
    int64_t Axis = normalizeAxis((*Axes)[K], In.size());
    int64_t Dim = In[Axis];
    auto Clamp = [&](int64_t V) {
      if (V < 0)
        V += Dim;
      return std::clamp<int64_t>(V, 0, Dim);
    };
    int64_t Begin = Clamp((*Starts)[K]);
    int64_t After = Dim - Begin - Cur[Axis];
    SmallVector<Value *, 3> Parts;
    for (int64_t Pad : {Begin, int64_t(-1), After}) {
      if (Pad == -1) {
        Parts.push_back(G);
        continue;
      }
      if (Pad == 0)
        continue;
      SmallVector<int64_t, 4> ZS = Cur;
      ZS[Axis] = Pad;
      Expected<Value *> Z =
          R.B.zeros(TensorType::get(G->getType().getElementType(), ZS));
      if (!Z)
        return Z.takeError();
      Parts.push_back(*Z);
    }
    if (Parts.size() > 1) {
      Expected<Value *> C = R.B.emit1(
          OpId::Concat, Parts, attrs({{"axis", Attribute::getInt(Axis)}}));
      if (!C)
        return C.takeError();
      G = *C;
    }
    Cur[Axis] = Dim;
  }
  R.Out[0] = G;
  return Error::success();
}

static Error reduceGrad(Rule &R) {
  SmallVector<int64_t, 4> In = R.type(0).getStaticSizes();
  SmallVector<int64_t, 4> Axes;
  if (const Attribute *A = R.N.getAttr("axes"))
    Axes.assign(A->getIntList().begin(), A->getIntList().end());
  else if (R.N.getNumOperands() > 1 && R.operand(1)) {
    const DenseTensor *T = getConstantValue(R.operand(1));
    if (!T)
      return R.fail("a gradient needs constant axes");
    Axes.assign(T->getInts().begin(), T->getInts().end());
  }
  if (Axes.empty())
    for (unsigned I = 0; I != In.size(); ++I)
      Axes.push_back(I);
  SmallVector<int64_t, 4> Kept = In;
  int64_t Count = 1;
  for (int64_t A : Axes) {
    A = normalizeAxis(A, In.size());
    Count *= In[A];
    Kept[A] = 1;
  }
  Expected<Value *> G = R.B.reshape(R.DY[0], Kept);
  if (!G)
    return G.takeError();
  Value *Scaled = *G;
  if (R.N.getOp() == OpId::ReduceMean) {
    Expected<Value *> M = R.mul(*G, R.B.scalar(R.elem(), 1.0 / Count));
    if (!M)
      return M.takeError();
    Scaled = *M;
  }
  return R.set(0, R.B.emit1(OpId::Expand, {Scaled, R.B.ints(In)}));
}

static Error whereGrad(Rule &R) {
  GradBuilder &B = R.B;
  Value *Zero = B.scalar(R.elem(), 0.0);
  if (R.Needed[1])
    if (Error E =
            R.setSummed(1, B.emit1(OpId::Where, {R.operand(0), R.DY[0], Zero})))
      return E;
  if (R.Needed[2])
    return R.setSummed(2, B.emit1(OpId::Where, {R.operand(0), Zero, R.DY[0]}));
  return Error::success();
}

static Error logSoftmaxGrad(Rule &R) {
  // dX = dY - softmax(X) * sum(dY, axis).
  GradBuilder &B = R.B;
  int64_t Axis = R.N.getAttr("axis") ? R.N.getAttr("axis")->getInt() : -1;
  Axis = normalizeAxis(Axis, R.type(0).getRank());
  Expected<Value *> Sum =
      B.emit1(OpId::ReduceSum, {R.DY[0]},
              attrs({{"axes", Attribute::getIntList({Axis})},
                     {"keepdims", Attribute::getInt(1)}}));
  if (!Sum)
    return Sum.takeError();
  Expected<Value *> P = B.emit1(OpId::Exp, {R.result(0)});
  if (!P)
    return P.takeError();
  Expected<Value *> M = R.mul(*P, *Sum);
  if (!M)
    return M.takeError();
  return R.set(0, B.emit1(OpId::Sub, {R.DY[0], *M}));
}

/// Per-rank tensor-parallel programs (localize-tp), with a gradient that is
/// whole on every rank (autodiff all-reduces partial ones first, except
/// into an AllGather, see Autodiff.cpp): an AllReduce of partial sums
/// passes it on; the gradient of a ReduceScatter is the AllGather of its
/// gradient, and conversely that of an AllGather (whose gradient is the
/// same on every rank) is the rank's block of it, as for a ShardSlice; an
/// AllToAll's moves the split back. ToOp is the op of the gradient.
static Error communicationGrad(Rule &R, OpId ToOp) {
  const Node &N = R.N;
  if (N.getOp() != OpId::ShardSlice && !N.getAttr("local"))
    return R.fail("a gradient needs the per-rank form (local = 1)");
  AttrDict A = R.forwardAttrs({"mesh", "axis", "dim"});
  if (ToOp == OpId::AllToAll) {
    // Moving the split back.
    A = R.forwardAttrs({"mesh", "axis", "local"});
    A.set("src_dim", *N.getAttr("dst_dim"));
    A.set("dst_dim", *N.getAttr("src_dim"));
  } else if (ToOp == OpId::AllGather) {
    A.set("local", Attribute::getInt(1));
  }
  return R.set(0, R.B.emit1(ToOp, {R.DY[0]}, std::move(A)));
}

Error autopar::emitGradient(GradBuilder &B, const Node &N,
                            ArrayRef<Value *> ResultGrads,
                            ArrayRef<bool> Needed,
                            SmallVectorImpl<Value *> &OperandGrads) {
  OperandGrads.assign(N.getNumOperands(), nullptr);
  for (unsigned I = 0; I != N.getNumOperands(); ++I)
    if (N.getOperand(I) && !N.getOperand(I)->getType().hasStaticShape())
      return ruleError(N, "gradients need static shapes");
  B.setForwardNode(&N);
  Rule R{B, N, ResultGrads, Needed, OperandGrads};
  if (!ResultGrads[0] && N.getOp() != OpId::Split)
    return ruleError(N, "the gradient reaches a result other than the first");
  Value *DY = ResultGrads[0];
  switch (getOpFacts(N.getOp()).Gradient) {
  case GradientRule::None:
    return ruleError(N, "no gradient rule for this op");
  case GradientRule::Add:
    return addGrad(R, /*Subtract=*/false);
  case GradientRule::Sub:
    return addGrad(R, /*Subtract=*/true);
  case GradientRule::Mul:
    return mulGrad(R);
  case GradientRule::Div:
    return divGrad(R);
  case GradientRule::Pow:
    return powGrad(R);
  case GradientRule::Neg:
    return R.set(0, R.neg(DY));
  case GradientRule::Dropout:
    return dropoutGrad(R);
  case GradientRule::Identity:
    R.Out[0] = DY;
    return Error::success();
  case GradientRule::Exp:
    return chainGrad(R, R.result(0));
  case GradientRule::Log:
    return R.set(0, R.div(DY, R.operand(0)));
  case GradientRule::Sqrt:
    return sqrtGrad(R);
  case GradientRule::Reciprocal:
    return reciprocalGrad(R);
  case GradientRule::Tanh:
    return tanhOrSigmoidGrad(R, /*Tanh=*/true);
  case GradientRule::Sigmoid:
    return tanhOrSigmoidGrad(R, /*Tanh=*/false);
  case GradientRule::Relu:
    return reluGrad(R);
  case GradientRule::Erf:
    return erfGrad(R);
  case GradientRule::Cast:
    return castGrad(R);
  case GradientRule::Where:
    return whereGrad(R);
  case GradientRule::Linear:
    return weightContractionGrad(R);
  case GradientRule::MatMul:
    return matMulGrad(R);
  case GradientRule::Gemm:
    return gemmGrad(R);
  case GradientRule::LayerNorm:
    return fusedGrad(R, OpId::LayerNormalizationGrad,
                     {DY, R.operand(0), R.operand(1)}, {"axis", "epsilon"}, 3);
  case GradientRule::RMSNorm:
    return fusedGrad(R, OpId::RMSNormalizationGrad,
                     {DY, R.operand(0), R.operand(1)}, {"axis", "epsilon"}, 2);
  case GradientRule::Attention:
    return attentionGrad(R);
  case GradientRule::Gelu:
    return fusedGrad(R, OpId::GeluGrad, {DY, R.operand(0)}, {"approximate"}, 1);
  case GradientRule::Silu:
    return fusedGrad(R, OpId::SiluGrad, {DY, R.operand(0)}, {}, 1);
  case GradientRule::SwiGLU:
    return fusedGrad(R, OpId::SwiGLUGrad, {DY, R.operand(0), R.operand(1)},
                     {"alpha"}, 2);
  case GradientRule::Softmax:
    return fusedGrad(R, OpId::SoftmaxGrad, {DY, R.result(0)},
                     {"axis", "mesh", "mesh_axis"}, 1);
  case GradientRule::LogSoftmax:
    return logSoftmaxGrad(R);
  case GradientRule::Gather:
    return fusedGrad(R, OpId::GatherGrad, {R.operand(0), R.operand(1), DY},
                     {"axis", "mesh", "mesh_axis"}, 1);
  case GradientRule::CrossEntropy:
    return R.set(0, B.emit1(OpId::CrossEntropyLossGrad,
                            {DY, N.getOperand(0), N.getOperand(1)},
                            R.forwardAttrs({"reduction", "ignore_index", "mesh",
                                            "mesh_axis"})));
  case GradientRule::Rotary:
    return rotaryGrad(R);
  case GradientRule::Reshape:
    return reshapeLikeGrad(R);
  case GradientRule::Expand:
    return R.setSummed(0, DY);
  case GradientRule::Transpose:
    return transposeGrad(R);
  case GradientRule::Split:
    return splitGrad(R);
  case GradientRule::Concat:
    return concatGrad(R);
  case GradientRule::Slice:
    return sliceGrad(R);
  case GradientRule::Pad:
    return padGrad(R);
  case GradientRule::DepthSpace:
    return depthSpaceGrad(R);
  case GradientRule::NllLoss:
    return nllLossGrad(R);
  case GradientRule::Reduce:
    return reduceGrad(R);
  case GradientRule::AllReduce:
    return R.set(0, DY);
  case GradientRule::AllGather:
    return communicationGrad(R, OpId::ShardSlice);
  case GradientRule::ReduceScatter:
  case GradientRule::ShardSlice:
    return communicationGrad(R, OpId::AllGather);
  case GradientRule::AllToAll:
    return communicationGrad(R, OpId::AllToAll);
  }
  return ruleError(N, "no gradient rule for this op");
}

void autopar::replaceStepOutputs(Graph &G, ArrayRef<Node *> Body, Value *Loss,
                                 ArrayRef<Value *> Grads,
                                 ArrayRef<Value *> Sums) {
  std::vector<std::string> GradNames;
  for (Value *Grad : Grads)
    GradNames.push_back(Grad->getName().str());
  G.setOutputs({});
  for (Node *N : reverse(Body))
    N->erase();
  G.renameValue(Loss, G.getUniqueName("loss"));
  SmallVector<Value *, 32> Outputs{Loss};
  for (unsigned I = 0; I != Grads.size(); ++I) {
    G.renameValue(Sums[I], G.getUniqueName(GradNames[I]));
    Outputs.push_back(Sums[I]);
  }
  G.setOutputs(Outputs);
}

Error autopar::addToRunningSum(GradBuilder &B, Value *&Sum, Value *X) {
  if (!Sum) {
    Sum = X;
    return Error::success();
  }
  Expected<Value *> Added = B.add(Sum, X);
  if (!Added)
    return Added.takeError();
  Node *Producer = X->getDefiningNode();
  Node *Add = (*Added)->getDefiningNode();
  if (Producer && Add && Add != Producer) {
    Graph &G = B.getGraph();
    G.getNodes().splice(std::next(Producer->getIterator()), G.getNodes(),
                        Add->getIterator());
  }
  Sum = *Added;
  return Error::success();
}

bool autopar::isNarrowingParamCast(const Node &N) {
  if (N.getOp() != OpId::Cast || N.getNumOperands() != 1 || !N.getOperand(0) ||
      !N.getOperand(0)->isParam() ||
      N.getOperand(0)->getType().getElementType() != ElementType::F32)
    return false;
  ElementType To = N.getResult(0)->getType().getElementType();
  return To == ElementType::BF16 || To == ElementType::F16;
}

void autopar::cloneForMicroBatch(Graph &G, Node *N,
                                 DenseMap<Value *, Value *> &Map,
                                 StringRef Suffix, StringRef NodeSuffix,
                                 DenseMap<Value *, Value *> &Shared, int64_t K,
                                 int64_t M) {
  if (N->getOp() == OpId::Constant)
    if (Value *C = Shared.lookup(N->getResult(0))) {
      Map[N->getResult(0)] = C;
      return;
    }
  SmallVector<Value *, 6> Operands;
  for (Value *V : N->getOperands())
    Operands.push_back(V ? (Map.lookup(V) ? Map.lookup(V) : V) : nullptr);
  SmallVector<TensorType, 3> Types;
  SmallVector<std::string, 3> Names;
  for (Value *R : N->getResults()) {
    Types.push_back(R->getType());
    Names.push_back(G.getUniqueName((R->getName() + Suffix).str()));
  }
  Node *C = G.createNode(N->getOp(), Operands, Types, N->getAttrs(), Names);
  if (!N->getName().empty())
    C->setName((N->getName() + NodeSuffix).str());
  if (C->getAttr("rng_stream")) {
    C->getAttrs().set("micro_batch", Attribute::getInt(K));
    C->getAttrs().set("micro_batches", Attribute::getInt(M));
  }
  for (unsigned I = 0; I != C->getNumResults(); ++I)
    Map[N->getResult(I)] = C->getResult(I);
  if (N->getOp() == OpId::Constant)
    Shared[N->getResult(0)] = C->getResult(0);
}

SmallPtrSet<const Node *, 32> autopar::getForwardNodes(const Graph &G) {
  SmallPtrSet<const Node *, 32> Forward;
  SmallVector<const Value *, 16> Work;
  for (const Value *Out : G.getOutputs())
    if (!Out->getName().startswith("grad."))
      Work.push_back(Out);
  while (!Work.empty()) {
    const Node *N = Work.pop_back_val()->getDefiningNode();
    if (!N || !Forward.insert(N).second)
      continue;
    for (const Value *O : N->getOperands())
      if (O)
        Work.push_back(O);
  }
  return Forward;
}

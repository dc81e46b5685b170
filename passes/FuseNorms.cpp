//===- FuseNorms.cpp - Fuse decomposed normalizations ---------------------===//
//
// Exporters without a LayerNormalization op (opset < 17) and every exporter
// of RMSNorm write the normalization over the last axis as elementwise ops.
// This pass recognizes those chains and replaces each by one canonical op:
//
//   LayerNorm: M = ReduceMean(X, [-1]); D = Sub(X, M);
//     V = ReduceMean(Pow(D, 2.0) | Mul(D, D), [-1]);
//     S = Sqrt(Add(V, eps)); Y = Div(D, S) | Mul(D, Reciprocal(S))
//     | Mul(D, Div(1.0, S)); Add(Mul(Y, gamma), beta)
//     -> LayerNormalization(X, gamma, beta){axis = -1, epsilon = eps}
//   RMSNorm: V = ReduceMean(Pow(X, 2.0) | Mul(X, X), [-1]);
//     S = Sqrt(Add(V, eps)); Y as above with X for D; Mul(Y, gamma)
//     -> RMSNormalization(X, gamma){axis = -1, epsilon = eps}
//
// Multiplications and additions match in either operand order, the
// reductions may give their axes as an attribute or a constant operand (as
// the last axis, -1 or rank - 1, with keepdims 1), and the numerator may be a
// second Sub(X, M) node equal to D (Megatron's exports compute it twice).
// Casts that keep the element type are looked through after Y. A cast of X
// to a wider type, with Y cast back to X's type before gamma (the mixed
// precision form of Hugging Face's RMSNorm and Megatron's LayerNorm), fuses
// into the op on the original X with stash_type naming the wider type, which
// is what ONNX's function bodies for these ops compute. Otherwise
// stash_type names X's own type, so the fused op computes in the precision
// the chain did; chains in a type that the op's stash_type cannot name
// (LayerNormalization in f16 or f64) are left alone.
//
// Both ops require a scale, so a chain without the gamma Mul is left alone
// (a Constant of ones would be exact, but it would put a weight-sized tensor
// into the IR that no model holds). gamma and beta must be vectors over the
// last axis (rank 1, the size of X's last dimension, provably). Every value
// inside the chain must be used only inside it; then the chain is replaced
// and erased, with the constants only it used. The fused node takes the ONNX
// node name and the value name of the chain's last node. The epsilon
// constant is a single element; its value, rounded to its element type,
// becomes the attribute as the shortest decimal that reads back to it, as the
// importer widens ONNX float attributes (an f32 1e-5 gives 1e-05).
//
// Assumes verified input; leaves verified output. Linear in the graph size.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionMatch.h"
#include "passes/Passes.h"

#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace autopar;
using namespace llvm;

namespace {

struct FuseNormsOptions {
  /// Fuse decomposed LayerNorms into LayerNormalization.
  bool LayerNorm = true;
  /// Fuse decomposed RMSNorms into RMSNormalization.
  bool RMSNorm = true;

  Error validate() const { return Error::success(); }
};

/// A recognized normalization chain.
struct NormChain {
  FusionMatch Match;
  /// The chain's last node, which the fused node replaces.
  Node *Root = nullptr;
  bool IsLayerNorm = false;
  /// The fused node's operands.
  Value *X = nullptr;
  Value *Scale = nullptr;
  Value *Bias = nullptr;
  double Epsilon = 0;
  /// The ONNX stash_type code of the type the chain computes in.
  int64_t StashType = 1;
  /// The Cast that widened X for a mixed precision chain, erased with the
  /// chain when nothing else uses it.
  Node *Widen = nullptr;
};

class FuseNormsPass : public Pass {
public:
  FuseNormsPass() {
    Options.bind("layer-norm", &Opts.LayerNorm,
                 "Fuse decomposed LayerNorms into LayerNormalization");
    Options.bind("rms-norm", &Opts.RMSNorm,
                 "Fuse decomposed RMSNorms into RMSNormalization");
  }

  StringRef getArgument() const override { return "fuse-norms"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      runOnGraph(*G);
    return success();
  }

private:
  void runOnGraph(Graph &G);
  std::optional<NormChain> matchChain(Node &Sqrt) const;

  FuseNormsOptions Opts;
};

} // namespace

/// True when N is ReduceMean over the last axis of its operand only, keeping
/// the reduced dimension.
static bool isLastAxisMean(const Node &N) {
  if (N.getOp() != OpId::ReduceMean)
    return false;
  if (const Attribute *K = N.getAttr("keepdims"); K && K->getInt() != 1)
    return false;
  int64_t Rank = N.getOperand(0)->getType().getRank();
  if (Rank == 0)
    return false;
  ArrayRef<int64_t> Axes;
  if (const Attribute *A = N.getAttr("axes")) {
    Axes = A->getIntList();
  } else if (N.getNumOperands() > 1 && N.getOperand(1)) {
    const DenseTensor *T = getConstantValue(N.getOperand(1));
    if (!T || T->isFloat())
      return false;
    Axes = T->getInts();
  }
  return Axes.size() == 1 && (Axes[0] == -1 || Axes[0] == Rank - 1);
}

/// The ONNX TensorProto code of a floating-point type that stash_type can
/// name.
static std::optional<int64_t> getStashTypeCode(ElementType Ty) {
  switch (Ty) {
  case ElementType::F32:
    return 1;
  case ElementType::F16:
    return 10;
  case ElementType::F64:
    return 11;
  case ElementType::BF16:
    return 16;
  default:
    return std::nullopt;
  }
}

/// The attribute value for a constant element of type Ty: the shortest
/// decimal that reads back as V in Ty, read as a double.
static double widenToAttribute(double V, ElementType Ty) {
  std::string Text;
  raw_string_ostream OS(Text);
  printFloat(OS, V, Ty);
  return std::strtod(OS.str().c_str(), nullptr);
}

std::optional<NormChain> FuseNormsPass::matchChain(Node &Sqrt) const {
  NormChain C;
  FusionMatch &M = C.Match;
  M.add(&Sqrt);
  Value *Std = Sqrt.getResult(0);

  // S = Sqrt(Add(V, eps)), V = ReduceMean(D^2, [-1]).
  Node *AddEps = getDefiningOp(Sqrt.getOperand(0), OpId::Add);
  if (!AddEps)
    return std::nullopt;
  M.add(AddEps);
  Value *Var = nullptr;
  std::optional<double> Eps;
  for (unsigned I : {1u, 0u})
    if ((Eps = getFloatScalarConstant(AddEps->getOperand(I)))) {
      Var = AddEps->getOperand(1 - I);
      break;
    }
  Node *VarMean = Var ? Var->getDefiningNode() : nullptr;
  if (!VarMean || !isLastAxisMean(*VarMean))
    return std::nullopt;
  M.add(VarMean);
  Node *Square = VarMean->getOperand(0)->getDefiningNode();
  if (!Square)
    return std::nullopt;
  Value *D;
  if (Square->getOp() == OpId::Pow &&
      isExponentConstant(Square->getOperand(1), 2))
    D = Square->getOperand(0);
  else if (Square->getOp() == OpId::Mul &&
           Square->getOperand(0) == Square->getOperand(1))
    D = Square->getOperand(0);
  else
    return std::nullopt;
  M.add(Square);

  // LayerNorm when D = Sub(X, ReduceMean(X, [-1])), else RMSNorm of D.
  Value *X = D;
  Value *Mean = nullptr;
  if (Node *Sub = getDefiningOp(D, OpId::Sub)) {
    Node *MeanNode = Sub->getOperand(1)->getDefiningNode();
    if (MeanNode && isLastAxisMean(*MeanNode) &&
        MeanNode->getOperand(0) == Sub->getOperand(0)) {
      C.IsLayerNorm = true;
      X = Sub->getOperand(0);
      Mean = MeanNode->getResult(0);
      M.add(Sub);
      M.add(MeanNode);
    }
  }
  if (C.IsLayerNorm ? !Opts.LayerNorm : !Opts.RMSNorm)
    return std::nullopt;
  const TensorType &XType = X->getType();
  if (!isFloatElementType(XType.getElementType()) || XType.getRank() == 0)
    return std::nullopt;

  // The value divided by S: D, or for a LayerNorm another Sub(X, M).
  auto IsNumerator = [&](Value *V) {
    if (V == D)
      return true;
    if (!C.IsLayerNorm)
      return false;
    Node *Sub = getDefiningOp(V, OpId::Sub);
    if (!Sub || Sub->getOperand(0) != X || Sub->getOperand(1) != Mean)
      return false;
    M.add(Sub);
    return true;
  };

  // Y = Div(D, S), or Mul(D, R) with R = Reciprocal(S) or Div(1.0, S).
  Node *User = getSingleUser(Std);
  if (!User)
    return std::nullopt;
  Node *Y;
  if (User->getOp() == OpId::Div && User->getOperand(1) == Std &&
      IsNumerator(User->getOperand(0))) {
    Y = User;
  } else if (User->getOp() == OpId::Reciprocal ||
             (User->getOp() == OpId::Div && User->getOperand(1) == Std &&
              isFloatScalarConstant(User->getOperand(0), 1.0))) {
    M.add(User);
    Value *Inv = User->getResult(0);
    Y = getSingleUser(Inv);
    if (!Y || Y->getOp() != OpId::Mul)
      return std::nullopt;
    Value *Numerator = getOtherOperand(*Y, Inv);
    if (!Numerator || Numerator == Inv || !IsNumerator(Numerator))
      return std::nullopt;
  } else {
    return std::nullopt;
  }
  M.add(Y);

  // Casts after Y: ones that keep the type, and one back to the type X was
  // widened from.
  Value *Outer = X;
  Value *Cur = Y->getResult(0);
  while (Node *Cast = getSingleUser(Cur)) {
    if (Cast->getOp() != OpId::Cast)
      break;
    ElementType To = Cast->getResult(0)->getType().getElementType();
    if (To != Cur->getType().getElementType()) {
      Node *Widen = getDefiningOp(X, OpId::Cast);
      if (Outer != X || !Widen ||
          Widen->getOperand(0)->getType().getElementType() != To)
        break;
      Outer = Widen->getOperand(0);
      C.Widen = Widen;
    }
    M.add(Cast);
    Cur = Cast->getResult(0);
  }

  // A vector over the last axis of Outer, defined outside the chain.
  const TensorType &OuterType = Outer->getType();
  if (!isFloatElementType(OuterType.getElementType()))
    return std::nullopt;
  const Dim &Channels = OuterType.getDim(OuterType.getRank() - 1);
  auto IsChannelVector = [&](Value *V) {
    if (!V || V == Cur || M.contains(V->getDefiningNode()))
      return false;
    const TensorType &T = V->getType();
    return T.getRank() == 1 && !Channels.isUnknown() && T.getDim(0) == Channels;
  };

  // Mul(Y, gamma), then for a LayerNorm optionally Add(., beta).
  Node *ScaleMul = getSingleUser(Cur);
  if (!ScaleMul || ScaleMul->getOp() != OpId::Mul)
    return std::nullopt;
  C.Scale = getOtherOperand(*ScaleMul, Cur);
  if (!IsChannelVector(C.Scale))
    return std::nullopt;
  M.add(ScaleMul);
  C.Root = ScaleMul;
  Cur = ScaleMul->getResult(0);
  if (C.IsLayerNorm) {
    Node *BiasAdd = getSingleUser(Cur);
    if (BiasAdd && BiasAdd->getOp() == OpId::Add) {
      Value *Bias = getOtherOperand(*BiasAdd, Cur);
      if (IsChannelVector(Bias)) {
        C.Bias = Bias;
        M.add(BiasAdd);
        C.Root = BiasAdd;
      }
    }
  }

  // The fused op computes in the chain's type, which stash_type must name.
  std::optional<int64_t> Stash = getStashTypeCode(XType.getElementType());
  if (!Stash)
    return std::nullopt;
  if (C.IsLayerNorm && *Stash != 1 && *Stash != 16)
    return std::nullopt;
  if (C.Root->getResult(0)->getType() != OuterType ||
      !M.isSelfContained(C.Root))
    return std::nullopt;
  C.X = Outer;
  C.StashType = *Stash;
  C.Epsilon =
      widenToAttribute(*Eps, AddEps->getResult(0)->getType().getElementType());
  return C;
}

void FuseNormsPass::runOnGraph(Graph &G) {
  // Each chain holds one Sqrt, so replacing a chain erases no other anchor.
  SmallVector<Node *, 16> Anchors;
  for (Node &N : G.getNodes())
    if (N.getOp() == OpId::Sqrt)
      Anchors.push_back(&N);
  for (Node *Sqrt : Anchors) {
    std::optional<NormChain> C = matchChain(*Sqrt);
    if (!C)
      continue;
    AttrDict Attrs;
    Attrs.set("axis", Attribute::getInt(-1));
    Attrs.set("epsilon", Attribute::getFloat(C->Epsilon));
    if (C->StashType != 1)
      Attrs.set("stash_type", Attribute::getInt(C->StashType));
    SmallVector<Value *, 3> Operands{C->X, C->Scale};
    if (C->Bias)
      Operands.push_back(C->Bias);
    C->Match.replace(C->Root,
                     C->IsLayerNorm ? OpId::LayerNormalization
                                    : OpId::RMSNormalization,
                     Operands, std::move(Attrs));
    if (C->Widen && !C->Widen->getResult(0)->hasUses())
      C->Widen->erase();
  }
}

std::unique_ptr<Pass> autopar::createFuseNormsPass() {
  return std::make_unique<FuseNormsPass>();
}

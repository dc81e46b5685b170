//===- FuseActivations.cpp - Fuse decomposed GELU, SiLU and SwiGLU --------===//
//
// Exporters write GELU, SiLU and SwiGLU as elementwise ops. This pass
// recognizes those chains and replaces each by one canonical op:
//
//   GELU, erf form: 0.5 * x * (1 + Erf(x / sqrt(2))), with Div(x, 1.4142135)
//     or Mul(x, 0.70710677)                                    -> Gelu(x)
//   GELU, tanh form: 0.5 * x * (1 + Tanh(T)) with
//     T = sqrt(2/pi) * (x + 0.044715 * x^3), x^3 as Pow(x, 3.0) or x * (x*x)
//     (PyTorch's approximate GELU, GPT-2's gelu_new), or
//     T = (sqrt(2/pi) * x) * (1 + 0.044715 * x * x) (Megatron's bias_gelu)
//                                          -> Gelu(x){approximate = "tanh"}
//   SiLU: Mul(x, Sigmoid(x))                                   -> Silu(x)
//   SwiGLU: Mul(Silu(a), b), once SiLU is fused          -> SwiGLU(a, b)
//
// The outer product may be written Mul(Mul(x, 1 + E), 0.5),
// Mul(Mul(0.5, 1 + E), x) or Mul(Mul(x, 0.5), 1 + E); multiplications and
// additions match in either operand order. Scaling by 0.5 is exact in binary
// floating point, so the three orders compute the same values. Every constant
// must be a single element equal to the exact value rounded to its element
// type (so 0.7978846 in f32 is sqrt(2/pi)). The chain's result must have x's
// type (no constant broadcasts it to a larger shape), and every value inside
// the chain must be used only inside it; then the chain is replaced and
// erased, with the constants only it used. The fused node takes the ONNX
// node name and the value name of the chain's last node.
//
// SwiGLU (ONNX's SwiGLU, alpha 1) multiplies without broadcasting, so the
// Mul fuses only when a, b and the product have one type with every
// dimension known (static or symbolic); the Silu must have no other use.
// A Silu of the input, or one this pass made, fuses alike.
//
// Assumes verified input; leaves verified output. Linear in the graph size.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionMatch.h"
#include "passes/Passes.h"

#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"

using namespace autopar;
using namespace llvm;

namespace {

struct FuseActivationsOptions {
  /// Fuse decomposed GELUs (erf and tanh forms) into Gelu.
  bool Gelu = true;
  /// Fuse Mul(x, Sigmoid(x)) into Silu.
  bool Silu = true;
  /// Fuse Mul(Silu(a), b) into SwiGLU(a, b).
  bool SwiGLU = true;

  Error validate() const { return Error::success(); }
};

class FuseActivationsPass : public Pass {
public:
  FuseActivationsPass() {
    Options.bind("gelu", &Opts.Gelu,
                 "Fuse decomposed GELUs (erf and tanh forms) into Gelu");
    Options.bind("silu", &Opts.Silu, "Fuse Mul(x, Sigmoid(x)) into Silu");
    Options.bind("swiglu", &Opts.SwiGLU, "Fuse Mul(Silu(a), b) into SwiGLU");
  }

  StringRef getArgument() const override { return "fuse-activations"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      runOnGraph(*G);
    return success();
  }

private:
  void runOnGraph(Graph &G);
  static void fuseSwiGLU(Graph &G);

  FuseActivationsOptions Opts;
};

} // namespace

// GELU's constants, to double precision.
static constexpr double Sqrt2 = 1.4142135623730951;
static constexpr double InvSqrt2 = 0.7071067811865475;
static constexpr double Sqrt2OverPi = 0.7978845608028654;
static constexpr double GeluCubeCoefficient = 0.044715;

/// If V = Mul(Y, c) or Mul(c, Y) with c a scalar constant equal to C, adds
/// the Mul to M and returns Y.
static Value *matchMulByConstant(Value *V, double C, FusionMatch &M) {
  Node *N = getDefiningOp(V, OpId::Mul);
  if (!N)
    return nullptr;
  for (unsigned I : {0u, 1u})
    if (isFloatScalarConstant(N->getOperand(I), C)) {
      M.add(N);
      return N->getOperand(1 - I);
    }
  return nullptr;
}

/// If V = Add(Y, 1.0) or Add(1.0, Y), adds the Add to M and returns Y.
static Value *matchAddOne(Value *V, FusionMatch &M) {
  Node *N = getDefiningOp(V, OpId::Add);
  if (!N)
    return nullptr;
  for (unsigned I : {0u, 1u})
    if (isFloatScalarConstant(N->getOperand(I), 1.0)) {
      M.add(N);
      return N->getOperand(1 - I);
    }
  return nullptr;
}

/// True when V = Mul(X, X); adds the Mul to M.
static bool matchSquare(Value *V, Value *X, FusionMatch &M) {
  Node *N = getDefiningOp(V, OpId::Mul);
  if (!N || N->getOperand(0) != X || N->getOperand(1) != X)
    return false;
  M.add(N);
  return true;
}

/// True when V = Pow(X, 3.0), Mul(X, X * X) or Mul(X * X, X); adds the nodes
/// to M.
static bool matchCube(Value *V, Value *X, FusionMatch &M) {
  Node *N = V->getDefiningNode();
  if (!N)
    return false;
  if (N->getOp() == OpId::Pow) {
    if (N->getOperand(0) != X || !isExponentConstant(N->getOperand(1), 3))
      return false;
    M.add(N);
    return true;
  }
  if (N->getOp() != OpId::Mul)
    return false;
  Value *Square = getOtherOperand(*N, X);
  if (!Square || Square == X || !matchSquare(Square, X, M))
    return false;
  M.add(N);
  return true;
}

/// True when V = 0.044715 * X * X in any association and order; adds the
/// nodes to M.
static bool matchCubeCoefficientTimesSquare(Value *V, Value *X,
                                            FusionMatch &M) {
  Node *N = getDefiningOp(V, OpId::Mul);
  if (!N)
    return false;
  for (unsigned I : {0u, 1u}) {
    Value *A = N->getOperand(I), *B = N->getOperand(1 - I);
    // Mul(Mul(X, c), X).
    FusionMatch Try = M;
    Try.add(N);
    if (B == X && matchMulByConstant(A, GeluCubeCoefficient, Try) == X) {
      M = Try;
      return true;
    }
    // Mul(c, Mul(X, X)).
    Try = M;
    Try.add(N);
    if (isFloatScalarConstant(B, GeluCubeCoefficient) &&
        matchSquare(A, X, Try)) {
      M = Try;
      return true;
    }
  }
  return false;
}

/// The x of the argument of GELU's tanh, In = sqrt(2/pi) * (x + 0.044715 x^3)
/// or (sqrt(2/pi) x) (1 + 0.044715 x^2); adds the nodes to M.
static Value *matchTanhArgument(Value *In, FusionMatch &M) {
  // sqrt(2/pi) * (x + 0.044715 * x^3).
  FusionMatch Scaled = M;
  if (Value *Sum = matchMulByConstant(In, Sqrt2OverPi, Scaled))
    if (Node *Add = getDefiningOp(Sum, OpId::Add))
      for (unsigned I : {0u, 1u}) {
        FusionMatch Try = Scaled;
        Try.add(Add);
        Value *X = Add->getOperand(I);
        Value *Cube = matchMulByConstant(Add->getOperand(1 - I),
                                         GeluCubeCoefficient, Try);
        if (Cube && matchCube(Cube, X, Try)) {
          M = Try;
          return X;
        }
      }
  // (sqrt(2/pi) * x) * (1 + 0.044715 * x * x).
  Node *Product = getDefiningOp(In, OpId::Mul);
  if (!Product)
    return nullptr;
  for (unsigned I : {0u, 1u}) {
    FusionMatch Try = M;
    Try.add(Product);
    Value *X = matchMulByConstant(Product->getOperand(I), Sqrt2OverPi, Try);
    if (!X)
      continue;
    Value *Quadratic = matchAddOne(Product->getOperand(1 - I), Try);
    if (Quadratic && matchCubeCoefficientTimesSquare(Quadratic, X, Try)) {
      M = Try;
      return X;
    }
  }
  return nullptr;
}

/// The x of the argument of GELU's erf, In = x / sqrt(2) or x * (1/sqrt(2));
/// adds the node to M.
static Value *matchErfArgument(Value *In, FusionMatch &M) {
  if (Node *Div = getDefiningOp(In, OpId::Div)) {
    if (!isFloatScalarConstant(Div->getOperand(1), Sqrt2))
      return nullptr;
    M.add(Div);
    return Div->getOperand(0);
  }
  return matchMulByConstant(In, InvSqrt2, M);
}

/// The root of 0.5 * X * (1 + E) where E is the result of the chain's
/// Erf or Tanh; adds the nodes to M.
static Node *matchGeluProduct(Value *E, Value *X, FusionMatch &M) {
  Node *AddOne = getSingleUser(E);
  if (!AddOne || AddOne->getOp() != OpId::Add)
    return nullptr;
  Value *OnePlus = AddOne->getResult(0);
  if (getOtherOperand(*AddOne, E) == E ||
      !isFloatScalarConstant(getOtherOperand(*AddOne, E), 1.0))
    return nullptr;
  M.add(AddOne);
  Node *First = getSingleUser(OnePlus);
  if (!First || First->getOp() != OpId::Mul)
    return nullptr;
  Value *Other = getOtherOperand(*First, OnePlus);
  if (!Other || Other == OnePlus)
    return nullptr;
  M.add(First);
  // Mul(Mul(0.5, X), 1 + E).
  if (Node *Half = getDefiningOp(Other, OpId::Mul)) {
    Value *C = getOtherOperand(*Half, X);
    if (C && C != X && isFloatScalarConstant(C, 0.5)) {
      M.add(Half);
      return First;
    }
  }
  // Mul(Mul(X, 1 + E), 0.5) and Mul(Mul(0.5, 1 + E), X): the second Mul
  // takes whichever of X and 0.5 the first did not.
  bool FirstTookX = Other == X;
  if (!FirstTookX && !isFloatScalarConstant(Other, 0.5))
    return nullptr;
  Node *Second = getSingleUser(First->getResult(0));
  if (!Second || Second->getOp() != OpId::Mul)
    return nullptr;
  Value *Factor = getOtherOperand(*Second, First->getResult(0));
  if (!Factor || Factor == First->getResult(0))
    return nullptr;
  if (FirstTookX ? !isFloatScalarConstant(Factor, 0.5) : Factor != X)
    return nullptr;
  M.add(Second);
  return Second;
}

/// Replaces the chain M rooted at Root by Op(X) when it is self-contained and
/// Root computes X's type.
static bool replaceChain(FusionMatch &M, Node *Root, Value *X, OpId Op,
                         AttrDict Attrs = AttrDict()) {
  if (!Root || !X || !isFloatElementType(X->getType().getElementType()) ||
      M.contains(X->getDefiningNode()) ||
      Root->getResult(0)->getType() != X->getType() || !M.isSelfContained(Root))
    return false;
  M.replace(Root, Op, {X}, std::move(Attrs));
  return true;
}

void FuseActivationsPass::runOnGraph(Graph &G) {
  // Each chain holds one Erf, Tanh or Sigmoid, so replacing a chain erases
  // no other anchor.
  SmallVector<Node *, 16> Anchors;
  for (Node &N : G.getNodes())
    if (N.getOp() == OpId::Erf || N.getOp() == OpId::Tanh ||
        N.getOp() == OpId::Sigmoid)
      Anchors.push_back(&N);
  for (Node *Anchor : Anchors) {
    FusionMatch M;
    M.add(Anchor);
    Value *In = Anchor->getOperand(0), *Out = Anchor->getResult(0);
    if (Anchor->getOp() == OpId::Sigmoid) {
      if (!Opts.Silu)
        continue;
      Node *Mul = getSingleUser(Out);
      if (!Mul || Mul->getOp() != OpId::Mul || getOtherOperand(*Mul, Out) != In)
        continue;
      M.add(Mul);
      replaceChain(M, Mul, In, OpId::Silu);
      continue;
    }
    if (!Opts.Gelu)
      continue;
    bool IsTanh = Anchor->getOp() == OpId::Tanh;
    Value *X = IsTanh ? matchTanhArgument(In, M) : matchErfArgument(In, M);
    if (!X)
      continue;
    Node *Root = matchGeluProduct(Out, X, M);
    AttrDict Attrs;
    if (IsTanh)
      Attrs.set("approximate", Attribute::getString("tanh"));
    replaceChain(M, Root, X, OpId::Gelu, std::move(Attrs));
  }
  if (Opts.SwiGLU)
    fuseSwiGLU(G);
}

/// True when T's dimensions are all static or symbolic: then two values of
/// type T have the same shape.
static bool isFullyKnown(const TensorType &T) {
  return llvm::none_of(T.getShape(),
                       [](const Dim &D) { return D.isUnknown(); });
}

void FuseActivationsPass::fuseSwiGLU(Graph &G) {
  // Each match holds one Silu, so replacing one erases no other.
  SmallVector<Node *, 16> Silus;
  for (Node &N : G.getNodes())
    if (N.getOp() == OpId::Silu)
      Silus.push_back(&N);
  for (Node *Silu : Silus) {
    Value *Gate = Silu->getResult(0);
    Node *Mul = getSingleUser(Gate);
    if (!Mul || Mul->getOp() != OpId::Mul)
      continue;
    Value *A = Silu->getOperand(0), *B = getOtherOperand(*Mul, Gate);
    const TensorType &T = Mul->getResult(0)->getType();
    if (B == Gate || A->getType() != T || B->getType() != T || !isFullyKnown(T))
      continue;
    FusionMatch M;
    M.add(Silu);
    M.add(Mul);
    if (M.isSelfContained(Mul))
      M.replace(Mul, OpId::SwiGLU, {A, B}, AttrDict());
  }
}

std::unique_ptr<Pass> autopar::createFuseActivationsPass() {
  return std::make_unique<FuseActivationsPass>();
}

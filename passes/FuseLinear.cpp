//===- FuseLinear.cpp - MatMul and bias Add into Linear
//--------------------===//
//
// Rewrites the affine layers that exporters spell as a MatMul by a weight and
// a bias Add into the canonical Linear(X, W, B?) op, the unit that tensor
// parallelism splits:
//   - MatMul(X, W) followed by Add(., B) or Add(B, .), where the MatMul's
//     result has no other use, becomes Linear(X, W, B);
//   - any other MatMul(X, W) becomes Linear(X, W);
//   - Gemm(A, W, C?) with alpha = beta = 1, transA = transB = 0 becomes
//     Linear(A, W, C?). A Gemm with transB = 1 is left alone: Linear has no
//     transposed form, and a Transpose node in front of the weight would only
//     move the problem.
// W is a weight: a rank-2 parameter, an Identity of one (an initializer that
// the exporter deduplicated), or Transpose(perm = [1, 0]) of either (then the
// Transpose's result is W). B (and C) is a rank-1 parameter or an Identity of
// one, with as many elements as W has columns, provably. X has rank 1 or
// more. The Linear keeps the ONNX node name and the result name of the last
// node it replaces; the replaced nodes are erased.
// Assumes its input verifies.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"

using namespace autopar;
using namespace llvm;

namespace {

struct FuseLinearOptions {
  /// Fuse the bias Add that follows a MatMul into the Linear.
  bool FuseBias = true;
  /// Rewrite Gemm nodes as well as MatMul nodes.
  bool FuseGemm = true;

  Error validate() const { return Error::success(); }
};

class FuseLinearPass : public Pass {
public:
  FuseLinearPass() {
    Options.bind("fuse-bias", &Opts.FuseBias,
                 "Fuse the bias Add that follows a MatMul");
    Options.bind("fuse-gemm", &Opts.FuseGemm,
                 "Rewrite Gemm (alpha = beta = 1, no transposes) as well");
  }

  StringRef getArgument() const override { return "fuse-linear"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs()) {
      // Rewriting erases the Add after a MatMul: collect the roots first.
      SmallVector<Node *, 16> Roots;
      for (Node &N : G->getNodes())
        if (N.getOp() == OpId::MatMul ||
            (N.getOp() == OpId::Gemm && Opts.FuseGemm))
          Roots.push_back(&N);
      for (Node *N : Roots) {
        if (N->getOp() == OpId::MatMul)
          fuseMatMul(*G, *N);
        else
          fuseGemm(*G, *N);
      }
    }
    return success();
  }

private:
  void fuseMatMul(Graph &G, Node &MatMul);
  void fuseGemm(Graph &G, Node &Gemm);

  FuseLinearOptions Opts;
};

} // namespace

/// True when V is a parameter or an Identity of one.
static bool isParamLike(const Value *V) {
  if (V->isParam())
    return true;
  const Node *Def = V->getDefiningNode();
  return Def && Def->getOp() == OpId::Identity && Def->getOperand(0)->isParam();
}

/// True when V can be Linear's W: a rank-2 parameter (or an Identity of one),
/// or such a value transposed.
static bool isWeight(const Value *V) {
  if (V->getType().getRank() != 2)
    return false;
  if (isParamLike(V))
    return true;
  const Node *Def = V->getDefiningNode();
  if (!Def || Def->getOp() != OpId::Transpose ||
      !isParamLike(Def->getOperand(0)))
    return false;
  // Transpose of a rank-2 value without perm reverses, i.e. swaps.
  const Attribute *Perm = Def->getAttr("perm");
  return !Perm || Perm->getIntList() == ArrayRef<int64_t>({1, 0});
}

/// True when B can be Linear's bias for weight W: a rank-1 parameter (or an
/// Identity of one) whose size provably equals W's columns.
static bool isBiasFor(const Value *B, const Value *W) {
  const TensorType &T = B->getType();
  const Dim &N = W->getType().getDim(1);
  return isParamLike(B) && T.getRank() == 1 && !N.isUnknown() &&
         T.getDim(0) == N &&
         T.getElementType() == W->getType().getElementType();
}

/// Creates Linear(Operands) in place of Root, whose single result it takes
/// over (name included), and erases Root.
static void replaceWithLinear(Graph &G, Node &Root,
                              ArrayRef<Value *> Operands) {
  Value *Old = Root.getResult(0);
  std::string Name = Old->getName().str();
  Node *Linear =
      G.createNode(OpId::Linear, Operands, {Old->getType()}, AttrDict(),
                   {G.getUniqueName(Name + ".linear")}, &Root);
  Linear->setName(Root.getName());
  Old->replaceAllUsesWith(Linear->getResult(0));
  Root.erase();
  G.renameValue(Linear->getResult(0), Name);
}

void FuseLinearPass::fuseMatMul(Graph &G, Node &MatMul) {
  Value *X = MatMul.getOperand(0), *W = MatMul.getOperand(1);
  if (X->getType().getRank() == 0 || !isWeight(W))
    return;
  Value *Product = MatMul.getResult(0);
  if (Opts.FuseBias && Product->getUsers().size() == 1 &&
      Product->getNumOutputUses() == 0) {
    Node *Add = Product->getUsers().front();
    if (Add->getOp() == OpId::Add &&
        Add->getResult(0)->getType() == Product->getType()) {
      Value *B = Add->getOperand(Add->getOperand(0) == Product ? 1 : 0);
      if (isBiasFor(B, W)) {
        replaceWithLinear(G, *Add, {X, W, B});
        MatMul.erase();
        return;
      }
    }
  }
  replaceWithLinear(G, MatMul, {X, W});
}

void FuseLinearPass::fuseGemm(Graph &G, Node &Gemm) {
  auto IntAttr = [&](StringRef Name) {
    const Attribute *A = Gemm.getAttr(Name);
    return A ? A->getInt() : 0;
  };
  auto FloatAttr = [&](StringRef Name) {
    const Attribute *A = Gemm.getAttr(Name);
    return A ? A->getFloat() : 1.0;
  };
  if (IntAttr("transA") != 0 || IntAttr("transB") != 0 ||
      FloatAttr("alpha") != 1.0 || FloatAttr("beta") != 1.0)
    return;
  Value *A = Gemm.getOperand(0), *W = Gemm.getOperand(1);
  if (!isWeight(W))
    return;
  SmallVector<Value *, 3> Operands = {A, W};
  if (Gemm.getNumOperands() > 2 && Gemm.getOperand(2)) {
    Value *C = Gemm.getOperand(2);
    if (!isBiasFor(C, W))
      return;
    Operands.push_back(C);
  }
  replaceWithLinear(G, Gemm, Operands);
}

std::unique_ptr<Pass> autopar::createFuseLinearPass() {
  return std::make_unique<FuseLinearPass>();
}

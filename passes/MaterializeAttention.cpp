//===- MaterializeAttention.cpp - Keep attention probabilities ------------===//
//
// `materialize-attention` lowers the plan's `attention=materialized` kernel
// in a training graph before autodiff: every Attention node in the form
// autodiff differentiates (4-D Q, K and V, no cache, no softcap, Y its only
// result) becomes AttentionWithProbs, which also returns its probabilities
// softmax(scale Q K^T + bias) [B, Hq, Sq, Skv], and with `dropout` the mask
// and the dropped probabilities too. Autodiff then hands them to
// AttentionGrad, which reads them instead of recomputing them: the backward
// keeps them from the forward, as the cost model prices the materialized
// kernel (cost/ActivationMemory.cpp: the attention core, Korthikanti et al.
// 2022's 5as^2b, of which the mask and the dropped probabilities are 3as^2b
// with dropout). Selective
// recomputation (recompute-attention, after autodiff) undoes it; flash
// attention never keeps them, so its plans do not run this pass. Nodes in
// another form are left as they are (autodiff names them if it cannot
// differentiate them).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/Graph.h"
#include "ir/OpRegistry.h"

using namespace autopar;
using namespace llvm;

namespace {

/// Attention as autodiff differentiates it, with nothing but Y.
bool isTrainingForm(const Node &N) {
  if (N.getOp() != OpId::Attention || N.getNumResults() != 1 ||
      N.getResult(0)->getType().getRank() != 4)
    return false;
  for (unsigned I = 4; I < N.getNumOperands(); ++I)
    if (N.getOperand(I))
      return false;
  if (const Attribute *A = N.getAttr("softcap"))
    if (!A->isa(Attribute::Kind::Float) || A->getFloat() != 0)
      return false;
  if (const Attribute *A = N.getAttr("dropout"))
    if (!A->isa(Attribute::Kind::Float))
      return false;
  return true;
}

/// ONNX attributes that AttentionWithProbs does not take (their values in
/// the training form change nothing).
bool isDroppedAttr(StringRef Name) {
  return Name == "softcap" || Name == "qk_matmul_output_mode" ||
         Name == "softmax_precision";
}

class MaterializeAttentionPass : public Pass {
public:
  StringRef getArgument() const override { return "materialize-attention"; }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    (void)Diag;
    for (const std::unique_ptr<Graph> &G : M.getGraphs()) {
      SmallVector<Node *, 8> Targets;
      for (Node &N : G->getNodes())
        if (isTrainingForm(N))
          Targets.push_back(&N);
      for (Node *N : Targets)
        materialize(*G, *N);
    }
    return success();
  }

private:
  static void materialize(Graph &G, Node &N) {
    AttrDict Attrs;
    for (const auto &[Name, Value] : N.getAttrs())
      if (!isDroppedAttr(Name))
        Attrs.set(Name, Value);
    bool Dropout = getAttentionDropout(N) > 0;
    if (!Dropout)
      Attrs.erase("dropout");
    // A sharding annotation names one sharding per result: the
    // probabilities (and the mask and dropped ones) split as Y's
    // [B, Hq, Sq] and keep their keys whole.
    if (const Attribute *A = N.getAttr("sharding"))
      if (A->isa(Attribute::Kind::Sharding)) {
        Sharding Probs = A->getSharding();
        if (!Probs.DimAxes.empty())
          Probs.DimAxes.back().clear();
        Attribute P = Attribute::getSharding(std::move(Probs));
        Attrs.set("sharding", Attribute::getList(
                                  Dropout ? std::vector<Attribute>{*A, P, P, P}
                                          : std::vector<Attribute>{*A, P}));
      }
    Value *Y = N.getResult(0);
    const TensorType &Q = N.getOperand(0)->getType(),
                     &K = N.getOperand(1)->getType();
    SmallVector<Dim, 4> Scores{Q.getDim(0), Q.getDim(1), Q.getDim(2),
                               K.getDim(2)};
    TensorType Probs(Y->getType().getElementType(), Scores);
    SmallVector<TensorType, 4> Types{Y->getType(), Probs};
    SmallVector<std::string, 3> Names{
        G.getUniqueName((Y->getName() + ".probs").str())};
    if (Dropout) {
      Types.push_back(TensorType(ElementType::Bool, Scores));
      Types.push_back(Probs);
      Names.push_back(G.getUniqueName((Y->getName() + ".mask").str()));
      Names.push_back(G.getUniqueName((Y->getName() + ".dropped").str()));
    }
    G.replaceNode(N, OpId::AttentionWithProbs, N.getOperands().take_front(4),
                  Types, std::move(Attrs), Names);
  }
};

} // namespace

std::unique_ptr<Pass> autopar::createMaterializeAttentionPass() {
  return std::make_unique<MaterializeAttentionPass>();
}

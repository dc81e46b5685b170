//===- Autodiff.cpp - Append a loss and the backward graph ----------------===//
//
// `autodiff` turns each forward graph into a training graph: it appends a
// loss and, in reverse order of the forward nodes, the gradient of every
// node that lies between a trainable parameter and the loss (rules in
// GradientRules.cpp).
//   - The loss: with `loss=""` (the default) the graph must be a language
//     model: first input token ids [batch, seq] (integer), first output
//     logits [batch, seq, vocab]. The loss is next-token cross-entropy, the
//     logits at position t against the id at t + 1, summed over the
//     batch * (seq - 1) predictions and divided by `loss-tokens` (0: this
//     graph's own prediction count, i.e. the mean). With several micro-batches
//     or data-parallel ranks, `loss-tokens` is the global batch's count, so
//     that the parts sum to the global mean. With `loss=NAME`, the scalar
//     output NAME is the loss.
//   - Trainable parameters are the float parameters the loss depends on
//     through differentiable operands. Gradients of a value used several
//     times are summed in reverse node order (deterministic).
//   - Outputs afterwards: `loss`, then `grad.<param>` for each trainable
//     parameter in parameter order, then the forward outputs.
//   - For a pipeline stage: `seed=1` has no loss; the gradient of the first
//     output is a new input `grad.<output>` of its type (what the next
//     stage sends back), and outputs start at the parameter gradients.
//     `input-grads=1` also differentiates with respect to the float inputs
//     (activations received from the previous stage) and outputs their
//     gradients `grad.<input>` after the parameters'. `seed-outputs=1`
//     (a rank of an interleaved pipeline, whose model chunks each send an
//     activation) also takes the gradient of every float output after the
//     first as a new input `grad.<output>`, with or without a loss.
//   - `tensor-parallel=AXIS`, for a per-rank program of a tensor-parallel
//     plan (after localize-tp): a node that splits a parallel loop its
//     operand lacks gives that operand this rank's partial sum of the
//     gradient; partial gradients are all-reduced over AXIS before the
//     producer's rule runs (an AllGather's are reduce-scattered instead),
//     and logits split over the vocabulary get the vocabulary-parallel
//     loss (`mesh`, `mesh_axis` on CrossEntropyLoss).
//   - `loss-scale=1` (fp16 loss scaling, GradScaler's scale(loss)): the
//     loss's gradient is a new f32[] input `optimizer.loss_scale` instead of
//     1, so every gradient is the scale times the true one (the loss output
//     is not scaled). A stage without a loss (seed=1) receives scaled
//     gradients and gets no input.
// Assumes static shapes (run after `--dim` binding and import-canonical).
//
//===----------------------------------------------------------------------===//

#include "passes/GradientRules.h"
#include "passes/Passes.h"
#include "passes/ShardGraph.h"

#include "ir/Diagnostics.h"
#include "ir/OpFacts.h"
#include "ir/OpLoops.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

using namespace autopar;
using namespace llvm;

namespace {

struct AutodiffOptions {
  /// Name of a scalar output to use as the loss; empty: next-token
  /// cross-entropy of the logits output.
  std::string Loss;
  /// Divisor of the summed cross-entropy; 0: the graph's prediction count.
  int64_t LossTokens = 0;
  /// No loss: the first output's gradient is a new input.
  bool Seed = false;
  /// Also output the gradients of the float inputs.
  bool InputGrads = false;
  /// Also seed every float output after the first: each one's gradient is
  /// a new input (a pipeline rank's other model chunks, vpp > 1).
  bool SeedOutputs = false;
  /// The tensor-parallel mesh axis of a per-rank program (localize-tp);
  /// empty: none.
  std::string TensorParallel;
  /// Loss scaling: the loss's gradient is a new f32[] input
  /// `optimizer.loss_scale` instead of 1 (clip-gradients{loss-scale=1}
  /// unscales the gradients).
  bool LossScale = false;

  Error validate() const {
    if (LossTokens < 0)
      return createStringError(inconvertibleErrorCode(),
                               "autodiff: loss-tokens must be >= 0");
    return Error::success();
  }
};

class AutodiffPass : public Pass {
public:
  AutodiffPass() {
    Options.bind("loss", &Opts.Loss,
                 "Scalar output to differentiate; empty: next-token "
                 "cross-entropy of the logits");
    Options.bind("loss-tokens", &Opts.LossTokens,
                 "Divisor of the summed cross-entropy (0: this graph's "
                 "prediction count)");
    Options.bind("seed", &Opts.Seed,
                 "No loss: the first output's gradient is an input "
                 "(a pipeline stage before the last)");
    Options.bind("input-grads", &Opts.InputGrads,
                 "Also output the gradients of the float inputs");
    Options.bind("seed-outputs", &Opts.SeedOutputs,
                 "Also take the gradients of the float outputs after the "
                 "first as inputs (the other model chunks of a pipeline "
                 "rank)");
    Options.bind("tensor-parallel", &Opts.TensorParallel,
                 "Mesh axis over which the program is split (localize-tp): "
                 "partial gradient sums are all-reduced over it");
    Options.bind("loss-scale", &Opts.LossScale,
                 "Seed the loss's gradient with a new input "
                 "optimizer.loss_scale (fp16 loss scaling)");
  }

  StringRef getArgument() const override { return "autodiff"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      if (failed(runOnGraph(*G, Diag)))
        return failure();
    return success();
  }

private:
  LogicalResult runOnGraph(Graph &G, DiagnosticEngine &Diag);
  Expected<Value *> buildLoss(Graph &G, GradBuilder &B);
  void findTensorParallelMesh(const Graph &G);
  bool isPartialContribution(const Node &N, unsigned Operand) const;

  /// The tensor-parallel mesh and axis size (1: not split).
  std::string TPMesh;
  int64_t TPSize = 1;

  AutodiffOptions Opts;
};

} // namespace

/// Next-token cross-entropy over the graph's first output.
Expected<Value *> AutodiffPass::buildLoss(Graph &G, GradBuilder &B) {
  auto Fail = [&](const Twine &Why) {
    return createStringError(inconvertibleErrorCode(),
                             "graph @" + G.getName() + ": " + Why);
  };
  if (!Opts.Loss.empty()) {
    for (Value *Out : G.getOutputs())
      if (Out->getName() == Opts.Loss) {
        if (Out->getType().getRank() != 0 ||
            !isDifferentiableType(Out->getType().getElementType()))
          return Fail("loss output '" + Opts.Loss +
                      "' must be a float scalar, got " + Out->getType().str());
        return Out;
      }
    return Fail("no output named '" + Opts.Loss + "' (loss=)");
  }
  if (G.getInputs().empty() || G.getOutputs().empty())
    return Fail("next-token loss needs token ids as the first input and "
                "logits as the first output (or name a scalar with loss=)");
  Value *Ids = G.getInputs().front().get();
  Value *Logits = G.getOutputs().front();
  const TensorType &IT = Ids->getType();
  TensorType LT = Logits->getType();
  // Logits split over the vocabulary: the vocabulary-parallel loss; split
  // over a token dimension: each rank's rows, the sum all-reduced.
  bool VocabParallel = false;
  int TokenSplit = -1;
  if (TPSize > 1 && Logits->getDefiningNode() && LT.getRank() == 3 &&
      LT.hasStaticShape()) {
    std::string Mesh;
    int Layout =
        getAnnotatedLayout(Logits->getDefiningNode()->getAttr("sharding"),
                           Logits->getResultIndex(), Opts.TensorParallel, Mesh);
    if (Layout == LayoutPartial)
      return Fail("the logits are a partial sum over axis '" +
                  Opts.TensorParallel +
                  "' (localize-tp all-reduces partial outputs)");
    VocabParallel = Layout == 2;
    if (Layout == 0 || Layout == 1) {
      TokenSplit = Layout;
      SmallVector<int64_t, 3> Whole = LT.getStaticSizes();
      Whole[Layout] *= TPSize;
      LT = TensorType::get(LT.getElementType(), Whole);
    }
  }
  if (isFloatElementType(IT.getElementType()) || IT.getRank() != 2 ||
      LT.getRank() != 3 || !IT.hasStaticShape() || !LT.hasStaticShape() ||
      !isDifferentiableType(LT.getElementType()) ||
      IT.getStaticSizes()[0] != LT.getStaticSizes()[0] ||
      IT.getStaticSizes()[1] != LT.getStaticSizes()[1])
    return Fail("next-token loss needs token ids [batch, seq] as the first "
                "input and logits [batch, seq, vocab] as the first output, "
                "static; got " +
                IT.str() + " and " + LT.str() +
                " (bind dimensions with --dim, or name a scalar with loss=)");
  int64_t Batch = IT.getStaticSizes()[0], Seq = IT.getStaticSizes()[1];
  if (Seq < 2)
    return Fail("next-token loss needs a sequence of 2 or more tokens");
  B.setForwardNode(nullptr);
  // Labels: the ids shifted left by one, the last position ignored.
  Expected<Value *> Next =
      B.emit1(OpId::Slice, {Ids, B.ints({1}), B.ints({Seq}), B.ints({1})});
  if (!Next)
    return Next.takeError();
  DenseTensor Ignore(TensorType::get(IT.getElementType(), {Batch, 1}),
                     std::vector<int64_t>(Batch, -100));
  AttrDict CA;
  CA.set("value", Attribute::getTensor(std::move(Ignore)));
  Value *Pad = G.createNode(OpId::Constant, {},
                            {TensorType::get(IT.getElementType(), {Batch, 1})},
                            std::move(CA))
                   ->getResult(0);
  AttrDict Axis;
  Axis.set("axis", Attribute::getInt(1));
  Expected<Value *> Labels = B.emit1(OpId::Concat, {*Next, Pad}, Axis);
  if (!Labels)
    return Labels.takeError();
  AttrDict LA;
  LA.set("reduction", Attribute::getString("sum"));
  LA.set("ignore_index", Attribute::getInt(-100));
  if (VocabParallel) {
    LA.set("mesh", Attribute::getString(TPMesh));
    LA.set("mesh_axis", Attribute::getString(Opts.TensorParallel));
  }

  // Narrow logits (mixed-precision): the loss is computed in fp32.
  Value *Scores = Logits;
  ElementType LossType = LT.getElementType();
  if (LossType == ElementType::BF16 || LossType == ElementType::F16) {
    AttrDict ToF32;
    ToF32.set("to", Attribute::getString("f32"));
    Expected<Value *> Up = B.emit1(OpId::Cast, {Logits}, std::move(ToF32));
    if (!Up)
      return Up.takeError();
    Scores = *Up;
    LossType = ElementType::F32;
  }
  AttrDict Group;
  Group.set("mesh", Attribute::getString(TPMesh));
  Group.set("axis", Attribute::getString(Opts.TensorParallel));
  if (TokenSplit >= 0) {
    AttrDict Slice = Group;
    Slice.set("dim", Attribute::getInt(TokenSplit));
    Labels = B.emit1(OpId::ShardSlice, {*Labels}, std::move(Slice));
    if (!Labels)
      return Labels.takeError();
  }
  Expected<Value *> Sum =
      B.emit1(OpId::CrossEntropyLoss, {Scores, *Labels}, LA);
  if (!Sum)
    return Sum.takeError();
  if (TokenSplit >= 0) {
    Sum = B.emit1(OpId::AllReduce, {*Sum}, std::move(Group));
    if (!Sum)
      return Sum.takeError();
  }
  int64_t Tokens = Opts.LossTokens ? Opts.LossTokens : Batch * (Seq - 1);
  Expected<Value *> Loss =
      B.emit1(OpId::Mul, {*Sum, B.scalar(LossType, 1.0 / double(Tokens))});
  if (!Loss)
    return Loss.takeError();
  G.renameValue(*Loss, G.getUniqueName("loss"));
  return *Loss;
}

void AutodiffPass::findTensorParallelMesh(const Graph &G) {
  TPSize = 1;
  if (Opts.TensorParallel.empty())
    return;
  for (const Mesh &M : G.getMeshes())
    if (std::optional<int64_t> S = M.getAxisSize(Opts.TensorParallel)) {
      TPMesh = M.Name;
      TPSize = *S;
      return;
    }
}

/// True when N's gradient with respect to operand Operand is this rank's
/// partial sum: N splits a parallel loop over the tensor-parallel axis that
/// the operand does not have (a column-parallel matmul's input, a sequence-
/// parallel norm's weight), so each rank sees only its part of the uses.
bool AutodiffPass::isPartialContribution(const Node &N,
                                         unsigned Operand) const {
  if (TPSize <= 1 || !N.getAttr("sharding") || isCommunicationOp(N.getOp()) ||
      N.getOp() == OpId::ShardSlice)
    return false;
  std::optional<OpLoops> L = getOpLoops(N);
  LoopSplit Split = getAnnotatedSplit(N, L, Opts.TensorParallel);
  if (!L || Split.Degree <= 1 || Split.Loop == OpLoops::NoLoop ||
      L->Kinds[Split.Loop] != LoopKind::Parallel ||
      Operand >= L->Operands.size())
    return false;
  return !is_contained(L->Operands[Operand], Split.Loop);
}

LogicalResult AutodiffPass::runOnGraph(Graph &G, DiagnosticEngine &Diag) {
  findTensorParallelMesh(G);
  GradBuilder B(G);
  auto Report = [&](Error E, const Node *At = nullptr) {
    std::string Msg = "autodiff: " + toString(std::move(E));
    if (At)
      Diag.error(*At, Msg);
    else
      Diag.error(G.getLoc(), Msg);
    return failure();
  };
  Value *Loss = nullptr, *Seeded = nullptr, *SeedGrad = nullptr;
  if (Opts.Seed) {
    if (G.getOutputs().empty() ||
        !isDifferentiableType(G.getOutputs()[0]->getType().getElementType()))
      return Report(createStringError(
          inconvertibleErrorCode(),
          "graph @" + G.getName() + ": seed=1 needs a float first output"));
    Seeded = G.getOutputs()[0];
    SeedGrad = G.addInput(G.getUniqueName("grad." + Seeded->getName().str()),
                          Seeded->getType());
  } else {
    Expected<Value *> LossOr = buildLoss(G, B);
    if (!LossOr)
      return Report(LossOr.takeError());
    Loss = *LossOr;
  }
  // seed-outputs: the other float outputs' gradients are inputs too.
  SmallVector<std::pair<Value *, Value *>, 4> Seeds;
  if (Seeded)
    Seeds.push_back({Seeded, SeedGrad});
  if (Opts.SeedOutputs)
    for (Value *Out : G.getOutputs().drop_front())
      if (isDifferentiableType(Out->getType().getElementType()) &&
          Out != G.getOutputs()[0] &&
          none_of(Seeds, [&](const auto &S) { return S.first == Out; }))
        Seeds.push_back(
            {Out, G.addInput(G.getUniqueName("grad." + Out->getName().str()),
                             Out->getType())});
  SmallVector<Value *, 4> DiffInputs;
  if (Opts.InputGrads)
    for (const std::unique_ptr<Value> &In : G.getInputs())
      if (none_of(Seeds, [&](const auto &S) { return S.second == In.get(); }) &&
          isDifferentiableType(In->getType().getElementType()))
        DiffInputs.push_back(In.get());

  // Values that depend on a float parameter: only they need gradients. A
  // frozen parameter (`frozen = true`) is not trained: it gets no gradient.
  DenseSet<const Value *> Varies;
  for (const std::unique_ptr<Value> &P : G.getParams())
    if (isDifferentiableType(P->getType().getElementType()) && !P->isFrozen())
      Varies.insert(P.get());
  Varies.insert(DiffInputs.begin(), DiffInputs.end());
  for (Node &N : G.getNodes()) {
    bool AnyVaries = false;
    for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I)
      AnyVaries |= N.getOperand(I) && Varies.count(N.getOperand(I)) &&
                   isGradientOperand(N.getOp(), I);
    if (AnyVaries)
      for (Value *R : N.getResults())
        if (isDifferentiableType(R->getType().getElementType()))
          Varies.insert(R);
  }

  DenseMap<const Value *, Value *> Grads;
  // Tensor parallelism: gradients that are this rank's partial sums. A sum
  // of partial and whole contributions scales the whole ones by 1 / size,
  // so that the all-reduce adds them once.
  DenseSet<const Value *> PartialGrads;
  auto Accumulate = [&](Value *V, Value *G, bool Partial) -> Error {
    auto [It, New] = Grads.try_emplace(V, G);
    if (New) {
      if (Partial)
        PartialGrads.insert(V);
      return Error::success();
    }
    B.setForwardNode(V->getDefiningNode());
    bool Was = PartialGrads.count(V);
    Value *Old = It->second;
    if (Was != Partial) {
      Value *&Whole = Was ? G : Old;
      Expected<Value *> Scaled =
          B.emit1(OpId::Mul, {Whole, B.scalar(Whole->getType().getElementType(),
                                              1.0 / double(TPSize))});
      if (!Scaled)
        return Scaled.takeError();
      Whole = *Scaled;
      PartialGrads.insert(V);
    }
    Expected<Value *> Sum = B.add(Old, G);
    if (!Sum)
      return Sum.takeError();
    It->second = *Sum;
    return Error::success();
  };
  // A partial gradient summed over the axis (what a value's producer needs).
  auto MakeWhole = [&](Value *V) -> Error {
    if (!PartialGrads.erase(V))
      return Error::success();
    B.setForwardNode(V->getDefiningNode());
    AttrDict A;
    A.set("mesh", Attribute::getString(TPMesh));
    A.set("axis", Attribute::getString(Opts.TensorParallel));
    Expected<Value *> Sum = B.emit1(OpId::AllReduce, {Grads[V]}, std::move(A));
    if (!Sum)
      return Sum.takeError();
    Grads[V] = *Sum;
    return Error::success();
  };
  B.setForwardNode(nullptr);
  if (Loss && !Opts.LossScale)
    Grads[Loss] = B.scalar(Loss->getType().getElementType(), 1.0);
  if (Loss && Opts.LossScale) {
    if (G.isNameUsed("optimizer.loss_scale"))
      return Report(createStringError(inconvertibleErrorCode(),
                                      "graph @" + G.getName() +
                                          ": %optimizer.loss_scale is already "
                                          "defined"));
    if (Loss->getType() != TensorType(ElementType::F32, {}))
      return Report(createStringError(
          inconvertibleErrorCode(),
          "graph @" + G.getName() + ": loss-scale=1 needs an f32[] loss, got " +
              Loss->getType().str()));
    Grads[Loss] =
        G.addInput("optimizer.loss_scale", TensorType(ElementType::F32, {}));
  }
  for (auto &[Out, Grad] : Seeds)
    Grads[Out] = Grad;

  // The loss nodes come after the forward ones; walk everything backwards.
  SmallVector<Node *, 64> All;
  for (Node &N : G.getNodes())
    All.push_back(&N);
  for (Node *N : reverse(All)) {
    bool Any = false;
    for (Value *R : N->getResults())
      Any |= Grads.count(R) != 0;
    if (!Any)
      continue;
    // The gradient of an AllGather's whole result from partial sums is the
    // ReduceScatter of them (Megatron-LM's sequence parallelism); other
    // partial gradients are all-reduced first.
    if (N->getOp() == OpId::AllGather && PartialGrads.count(N->getResult(0)) &&
        Varies.count(N->getOperand(0))) {
      B.setForwardNode(N);
      AttrDict A;
      for (StringRef Name : {"mesh", "axis", "dim"})
        if (const Attribute *Copy = N->getAttr(Name))
          A.set(Name, *Copy);
      A.set("local", Attribute::getInt(1));
      Expected<Value *> Scattered =
          B.emit1(OpId::ReduceScatter, {Grads[N->getResult(0)]}, std::move(A));
      if (!Scattered)
        return Report(Scattered.takeError(), N);
      if (Error E = Accumulate(N->getOperand(0), *Scattered, false))
        return Report(std::move(E));
      continue;
    }
    SmallVector<Value *, 3> ResultGrads;
    for (Value *R : N->getResults()) {
      if (PartialGrads.count(R)) {
        std::string Mesh;
        if (getAnnotatedLayout(N->getAttr("sharding"), R->getResultIndex(),
                               Opts.TensorParallel, Mesh) >= 0)
          return Report(createStringError(inconvertibleErrorCode(),
                                          "partial gradient sums of a value "
                                          "split over axis '" +
                                              Opts.TensorParallel + "'"),
                        N);
        if (Error E = MakeWhole(R))
          return Report(std::move(E), N);
      }
      ResultGrads.push_back(Grads.lookup(R));
    }
    SmallVector<bool, 4> Needed;
    bool AnyNeeded = false;
    for (Value *Op : N->getOperands()) {
      Needed.push_back(Op && Varies.count(Op));
      AnyNeeded |= Needed.back();
    }
    if (!AnyNeeded)
      continue;
    SmallVector<Value *, 4> OperandGrads;
    if (Error E = emitGradient(B, *N, ResultGrads, Needed, OperandGrads))
      return Report(std::move(E), N);
    for (unsigned I = 0; I != N->getNumOperands(); ++I)
      if (Needed[I] && OperandGrads[I])
        if (Error E = Accumulate(N->getOperand(I), OperandGrads[I],
                                 isPartialContribution(*N, I)))
          return Report(std::move(E));
  }

  // Outputs: loss, parameter gradients, input gradients, forward outputs.
  SmallVector<Value *, 32> Outputs;
  if (Loss)
    Outputs.push_back(Loss);
  DenseSet<const Value *> Named;
  SmallVector<Value *, 32> Differentiated;
  for (const std::unique_ptr<Value> &P : G.getParams())
    Differentiated.push_back(P.get());
  Differentiated.append(DiffInputs.begin(), DiffInputs.end());
  for (Value *P : Differentiated) {
    if (Error E = MakeWhole(P))
      return Report(std::move(E));
    Value *Grad = Grads.lookup(P);
    if (!Grad) {
      if (!P->isInput())
        continue;
      // An input whose value no differentiable path uses: zero gradient.
      B.setForwardNode(nullptr);
      Expected<Value *> Zero = B.zeros(P->getType());
      if (!Zero)
        return Report(Zero.takeError());
      Grad = *Zero;
    }
    std::string Name = G.getUniqueName("grad." + P->getName().str());
    // A value can be the gradient of two parameters (Add(p, q)), or a
    // forward value (Identity); give each gradient its own value.
    if (Grad->isInput() || Grad->isParam() || Named.count(Grad) ||
        any_of(G.getOutputs(), [&](Value *O) { return O == Grad; })) {
      B.setForwardNode(nullptr);
      Expected<Value *> Copy = B.emit1(OpId::Identity, {Grad});
      if (!Copy)
        return Report(Copy.takeError());
      Grad = *Copy;
    }
    G.renameValue(Grad, Name);
    Named.insert(Grad);
    Outputs.push_back(Grad);
  }
  for (Value *Out : G.getOutputs())
    if (Out != Loss)
      Outputs.push_back(Out);
  G.setOutputs(Outputs);
  return success();
}

std::unique_ptr<Pass> autopar::createAutodiffPass() {
  return std::make_unique<AutodiffPass>();
}

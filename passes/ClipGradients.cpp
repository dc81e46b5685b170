//===- ClipGradients.cpp - Global-norm gradient clipping ------------------===//
//
// `clip-gradients` clips a training graph's gradients by their global L2
// norm over every rank of the job, as torch.nn.utils.clip_grad_norm_ does
// on the whole model (Megatron-LM's clip_grad_norm_fp32 across its model-
// and data-parallel groups). It runs after `autodiff` (and
// `accumulate-micro-batches` or `schedule-pipeline`, and `insert-grad-sync`
// when data parallel) and before `insert-optimizer`:
//   - each output `grad.<p>` contributes its sum of squares (in f32), times
//     a weight that makes the sum over all ranks count every logical
//     gradient element once. The weight is 1 / the size of every axis of the
//     graph's first mesh, other than `pp`, that does not split p: a
//     `local = 1` parameter whose `sharding` names the axis holds its own
//     block there (tensor-parallel shards, ZeRO shards, whose padding rows
//     are zero), any other holds the whole gradient on each rank of the
//     axis (a norm's weight under tensor parallelism, every gradient that
//     data parallelism all-reduced). Pipeline ranks hold different
//     parameters (weight 1 over `pp`), except those that schedule-pipeline
//     ties (`tied_holders = K`: a tied embedding, rotary tables; every
//     holder has the same summed gradient), counted 1 / K on each;
//   - the sum is all-reduced over each axis of the mesh larger than one in
//     turn (a sum over every rank of the job: the same bits on all);
//   - `grad_norm` = sqrt of it, a new output (the norm before clipping, as
//     clip_grad_norm_ returns it); the coefficient is min(1, max_norm /
//     (grad_norm + 1e-6)) with max_norm a new f32[] graph input
//     `optimizer.max_grad_norm` the runtime binds (+infinity: no clipping,
//     the coefficient is exactly 1 and the gradients are unchanged bit for
//     bit);
//   - every `grad.<p>` output becomes the gradient times the coefficient
//     (the unclipped value is renamed `grad.<p>.unclipped`).
// With `loss-scale=1` (fp16 loss scaling, after autodiff{loss-scale=1}) it
// also does what GradScaler's unscale_ and step do:
//   - every gradient is first multiplied by 1 / `optimizer.loss_scale` (the
//     f32[] input autodiff added, or a new one on a pipeline stage without
//     the loss; the scaled value is renamed `grad.<p>.scaled`), so that the
//     norm, the clipping and the step see the true gradients;
//   - `found_inf` = the all-reduced sum of squares times 0, a new output:
//     0 when every gradient of every rank is finite, NaN otherwise (an
//     infinite or NaN element makes its square sum, and so the sum over all
//     ranks, infinite or NaN). It reuses the norm's reductions, so it costs
//     no pass over the gradients and no collective, and every rank has the
//     same bits; insert-optimizer gives it to every step as `skip`. (A sum
//     of squares that overflows f32 from finite gradients, a norm above
//     1.8e19, also skips; torch would step with it.)
// Assumes gradients whole over every axis that does not split their
// parameter (what autodiff{tensor-parallel} and insert-grad-sync leave), and
// per-rank programs (a whole-model program's mesh of several devices would
// count its gradients only a fraction).
//
//===----------------------------------------------------------------------===//

#include "passes/GradientRules.h"
#include "passes/Passes.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/STLExtras.h"

using namespace autopar;
using namespace llvm;

namespace {

struct ClipGradientsOptions {
  /// Unscale the gradients by `optimizer.loss_scale` and output
  /// `found_inf` (fp16 loss scaling).
  bool LossScale = false;
};

class ClipGradientsPass : public Pass {
public:
  ClipGradientsPass() {
    Options.bind("loss-scale", &Opts.LossScale,
                 "Unscale the gradients by the input optimizer.loss_scale and "
                 "output found_inf (0, or NaN when a gradient is not finite)");
  }

  StringRef getArgument() const override { return "clip-gradients"; }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      if (Error E = runOnGraph(*G)) {
        Diag.error(G->getLoc(), "clip-gradients: graph @" + G->getName() +
                                    ": " + toString(std::move(E)));
        return failure();
      }
    return success();
  }

private:
  Error runOnGraph(Graph &G);
  Error unscale(Graph &G, GradBuilder &B,
                ArrayRef<std::pair<Value *, unsigned>> Grads);

  ClipGradientsOptions Opts;
};

} // namespace

/// The weight of P's squared gradient on this rank: 1 / the sizes of the
/// axes of Cluster (but `pp`) that hold P's gradient whole, and 1 / its
/// tied holders.
static double getNormWeight(const Value &P, const Mesh *Cluster) {
  double Weight = 1;
  if (const Attribute *Tied = P.getAttrs().get("tied_holders"))
    Weight /= double(std::max<int64_t>(1, Tied->getInt()));
  if (!Cluster)
    return Weight;
  const Attribute *Local = P.getAttrs().get("local");
  const Attribute *Layout = P.getAttrs().get("sharding");
  bool IsShard = Local && Local->getInt() == 1 && Layout &&
                 Layout->isa(Attribute::Kind::Sharding);
  for (const auto &[Axis, Size] : Cluster->Axes) {
    if (Size <= 1 || Axis == "pp")
      continue;
    bool Splits = IsShard && any_of(Layout->getSharding().DimAxes,
                                    [&](const std::vector<std::string> &Axes) {
                                      return is_contained(Axes, Axis);
                                    });
    if (!Splits)
      Weight /= double(Size);
  }
  return Weight;
}

/// V in element type Ty (V itself when it is already).
static Expected<Value *> castTo(GradBuilder &B, Value *V, ElementType Ty) {
  if (V->getType().getElementType() == Ty)
    return V;
  AttrDict To;
  To.set("to", Attribute::getString(getElementTypeName(Ty)));
  return B.emit1(OpId::Cast, {V}, To);
}

/// Every gradient output times the f32 scalar Factor (cast to its type);
/// the gradient before is renamed `<name><Suffix>`.
static Error scaleGradients(Graph &G, GradBuilder &B,
                            ArrayRef<std::pair<Value *, unsigned>> Grads,
                            Value *Factor, StringRef Suffix) {
  for (auto [P, I] : Grads) {
    Value *Grad = G.getOutputs()[I];
    Expected<Value *> By = castTo(B, Factor, Grad->getType().getElementType());
    if (!By)
      return By.takeError();
    Expected<Value *> Scaled = B.emit1(OpId::Mul, {Grad, *By});
    if (!Scaled)
      return Scaled.takeError();
    std::string Name = Grad->getName().str();
    G.renameValue(Grad, G.getUniqueName((Name + Suffix).str()));
    G.renameValue(*Scaled, Name);
    G.setOutput(I, *Scaled);
  }
  return Error::success();
}

/// Loss scaling: every `grad.<p>` output becomes the gradient times 1 /
/// `optimizer.loss_scale` (the scaled one renamed `grad.<p>.scaled`).
Error ClipGradientsPass::unscale(Graph &G, GradBuilder &B,
                                 ArrayRef<std::pair<Value *, unsigned>> Grads) {
  Value *Scale = G.lookupValue("optimizer.loss_scale");
  if (Scale && (!Scale->isInput() ||
                Scale->getType() != TensorType(ElementType::F32, {})))
    return createStringError(inconvertibleErrorCode(),
                             "%optimizer.loss_scale is not an f32[] input");
  if (!Scale)
    Scale =
        G.addInput("optimizer.loss_scale", TensorType(ElementType::F32, {}));
  // torch's inv_scale: the reciprocal (exact for the powers of 2 dynamic
  // scaling uses).
  Expected<Value *> Inverse =
      B.emit1(OpId::Div, {B.scalar(ElementType::F32, 1.0), Scale});
  if (!Inverse)
    return Inverse.takeError();
  G.renameValue(*Inverse, G.getUniqueName("grad_inv_scale"));
  return scaleGradients(G, B, Grads, *Inverse, ".scaled");
}

Error ClipGradientsPass::runOnGraph(Graph &G) {
  auto Fail = [](const Twine &Why) {
    return createStringError(inconvertibleErrorCode(), Why);
  };
  SmallVector<std::pair<Value *, unsigned>, 32> Grads; // (param, output)
  for (unsigned I = 0; I != G.getOutputs().size(); ++I) {
    StringRef Name = G.getOutputs()[I]->getName();
    if (!Name.consume_front("grad."))
      continue;
    Value *P = G.lookupValue(Name);
    if (!P || !P->isParam())
      continue; // a received activation's gradient (input-grads)
    Grads.push_back({P, I});
  }
  if (Grads.empty()) {
    if (any_of(G.getParams(),
               [](const std::unique_ptr<Value> &P) { return P->isFrozen(); }))
      return Error::success();
    return Fail("has no gradient outputs (grad.<param>); run autodiff first");
  }
  for (StringRef Name : {"optimizer.max_grad_norm", "grad_norm", "found_inf"})
    if (G.isNameUsed(Name))
      return Fail("%" + Name + " is already defined (clipped twice?)");
  const Mesh *Cluster = G.getMeshes().empty() ? nullptr : &G.getMeshes()[0];

  GradBuilder B(G);
  if (Opts.LossScale)
    if (Error E = unscale(G, B, Grads))
      return E;
  AttrDict Scalar;
  Scalar.set("keepdims", Attribute::getInt(0));
  Value *Total = nullptr;
  for (auto [P, I] : Grads) {
    Expected<Value *> Grad = castTo(B, G.getOutputs()[I], ElementType::F32);
    if (!Grad)
      return Grad.takeError();
    Expected<Value *> Squares = B.emit1(OpId::ReduceSumSquare, {*Grad}, Scalar);
    if (!Squares)
      return Squares.takeError();
    if (double W = getNormWeight(*P, Cluster); W != 1) {
      Squares = B.emit1(OpId::Mul, {*Squares, B.scalar(ElementType::F32, W)});
      if (!Squares)
        return Squares.takeError();
    }
    if (!Total) {
      Total = *Squares;
      continue;
    }
    Expected<Value *> Sum = B.add(Total, *Squares);
    if (!Sum)
      return Sum.takeError();
    Total = *Sum;
  }
  // A sum over every rank: one axis after the other.
  if (Cluster)
    for (const auto &[Axis, Size] : Cluster->Axes) {
      if (Size <= 1)
        continue;
      AttrDict CA;
      CA.set("mesh", Attribute::getString(Cluster->Name));
      CA.set("axis", Attribute::getString(Axis));
      Expected<Value *> Summed = B.emit1(OpId::AllReduce, {Total}, CA);
      if (!Summed)
        return Summed.takeError();
      Total = *Summed;
    }
  Expected<Value *> Norm = B.emit1(OpId::Sqrt, {Total});
  if (!Norm)
    return Norm.takeError();
  G.renameValue(*Norm, "grad_norm");
  // Loss scaling: 0 when the sum is finite, NaN otherwise.
  Value *FoundInf = nullptr;
  if (Opts.LossScale) {
    Expected<Value *> Found =
        B.emit1(OpId::Mul, {Total, B.scalar(ElementType::F32, 0.0)});
    if (!Found)
      return Found.takeError();
    FoundInf = *Found;
    G.renameValue(FoundInf, "found_inf");
  }
  // clip_coef = max_norm / (total_norm + 1e-6), clamped to 1.
  Value *MaxNorm =
      G.addInput("optimizer.max_grad_norm", TensorType(ElementType::F32, {}));
  Expected<Value *> Denominator =
      B.emit1(OpId::Add, {*Norm, B.scalar(ElementType::F32, 1e-6)});
  if (!Denominator)
    return Denominator.takeError();
  Expected<Value *> Ratio = B.emit1(OpId::Div, {MaxNorm, *Denominator});
  if (!Ratio)
    return Ratio.takeError();
  Expected<Value *> Coef =
      B.emit1(OpId::Min, {*Ratio, B.scalar(ElementType::F32, 1.0)});
  if (!Coef)
    return Coef.takeError();
  G.renameValue(*Coef, G.getUniqueName("grad_clip_coef"));
  if (Error E = scaleGradients(G, B, Grads, *Coef, ".unclipped"))
    return E;
  SmallVector<Value *, 32> Outputs(G.getOutputs().begin(),
                                   G.getOutputs().end());
  Outputs.push_back(*Norm);
  if (FoundInf)
    Outputs.push_back(FoundInf);
  G.setOutputs(Outputs);
  return Error::success();
}

std::unique_ptr<Pass> autopar::createClipGradientsPass() {
  return std::make_unique<ClipGradientsPass>();
}

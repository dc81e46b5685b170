//===- InsertOptimizer.cpp - Append the optimizer step --------------------===//
//
// `insert-optimizer` appends one optimizer node per trainable parameter to
// a training graph (after `autodiff`, and `insert-grad-sync` when data
// parallel): for every output `grad.<p>` naming a parameter p, an
// `AdamW(p, grad, m, v, hyperparameters...)` (or `Sgd`) node whose results
// the runtime writes back into p and its moments. The moments are new
// parameters `adamw.m.<p>` and `adamw.v.<p>` with `init = "zeros"`; the
// hyperparameters are new f32[] graph inputs named `optimizer.lr`,
// `optimizer.beta1`, `optimizer.beta2`, `optimizer.eps`,
// `optimizer.weight_decay` and `optimizer.step` (AdamW) or `optimizer.lr`
// and `optimizer.weight_decay` (SGD), which the runtime binds from its
// options, so one program serves any learning-rate schedule. Outputs do not
// change. `states=host|nvme` (optimizer offload, ZeRO-Offload) annotates
// the moments `placement`, `params=host|nvme` the parameters too (ZeRO-3
// with parameter offload): where they live between uses; the step itself
// is the same. A parameter that insert-grad-sync sharded (ZeRO) is updated as
// the shard it is, with moments of the shard's type and annotations
// (`sharding`, `local`), so each rank keeps only its part of the optimizer
// state. When the graph has `found_inf` (clip-gradients{loss-scale=1}),
// every step reads it as its `skip` operand: a step whose gradients are not
// all finite changes nothing (GradScaler's skipped optimizer.step()).
//
//===----------------------------------------------------------------------===//

#include "passes/GradientRules.h"
#include "passes/Passes.h"

#include "ir/Diagnostics.h"

using namespace autopar;
using namespace llvm;

namespace {

struct InsertOptimizerOptions {
  /// "adamw" or "sgd".
  std::string Optimizer = "adamw";
  /// Where the optimizer states and the parameters live: "device", "host"
  /// or "nvme".
  std::string States = "device", Params = "device";

  Error validate() const {
    for (const std::string *P : {&States, &Params})
      if (*P != "device" && *P != "host" && *P != "nvme")
        return createStringError(inconvertibleErrorCode(),
                                 "insert-optimizer: states and params must "
                                 "be device, host or nvme, got '" +
                                     *P + "'");
    if (Optimizer != "adamw" && Optimizer != "sgd")
      return createStringError(inconvertibleErrorCode(),
                               "insert-optimizer: optimizer must be adamw or "
                               "sgd, got '" +
                                   Optimizer + "'");
    return Error::success();
  }
};

class InsertOptimizerPass : public Pass {
public:
  InsertOptimizerPass() {
    Options.bind("optimizer", &Opts.Optimizer, "adamw or sgd");
    Options.bind("states", &Opts.States,
                 "Where optimizer states live: device, host or nvme");
    Options.bind("params", &Opts.Params,
                 "Where parameters live: device, host or nvme");
  }

  StringRef getArgument() const override { return "insert-optimizer"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      if (Error E = runOnGraph(*G)) {
        Diag.error(G->getLoc(), "insert-optimizer: graph @" + G->getName() +
                                    ": " + toString(std::move(E)));
        return failure();
      }
    return success();
  }

private:
  Error runOnGraph(Graph &G);

  InsertOptimizerOptions Opts;
};

} // namespace

Error InsertOptimizerPass::runOnGraph(Graph &G) {
  auto Fail = [](const Twine &Why) {
    return createStringError(inconvertibleErrorCode(), Why);
  };
  SmallVector<std::pair<Value *, Value *>, 32> Pairs; // (param, grad)
  for (Value *Out : G.getOutputs()) {
    StringRef Name = Out->getName();
    if (!Name.consume_front("grad."))
      continue;
    Value *P = G.lookupValue(Name);
    if (!P || !P->isParam())
      return Fail("output %" + Out->getName() + " names no parameter");
    Pairs.push_back({P, Out});
  }
  if (Pairs.empty()) {
    // Every parameter frozen (`frozen = true`, --freeze): nothing to step.
    if (any_of(G.getParams(),
               [](const std::unique_ptr<Value> &P) { return P->isFrozen(); }))
      return Error::success();
    return Fail("has no gradient outputs (grad.<param>); run autodiff first");
  }

  bool Adam = Opts.Optimizer == "adamw";
  SmallVector<Value *, 6> Hyper;
  static const StringRef AdamNames[] = {"lr",  "beta1",        "beta2",
                                        "eps", "weight_decay", "step"};
  static const StringRef SgdNames[] = {"lr", "weight_decay"};
  for (StringRef H :
       Adam ? ArrayRef<StringRef>(AdamNames) : ArrayRef<StringRef>(SgdNames)) {
    std::string Name = ("optimizer." + H).str();
    if (G.isNameUsed(Name))
      return Fail("%" + Name + " is already defined");
    Hyper.push_back(G.addInput(Name, TensorType(ElementType::F32, {})));
  }
  // Loss scaling's verdict, when the graph has it.
  Value *Skip = G.lookupValue("found_inf");
  if (Skip && Skip->getType() != TensorType(ElementType::F32, {}))
    return Fail("%found_inf is not an f32 scalar");
  GradBuilder B(G);
  for (auto [P, Grad] : Pairs) {
    if (Opts.Params != "device")
      P->getAttrs().set("placement", Attribute::getString(Opts.Params));
    SmallVector<Value *, 10> Operands{P, Grad};
    if (Adam)
      for (StringRef Moment : {"m", "v"}) {
        std::string Name =
            G.getUniqueName(("adamw." + Moment + "." + P->getName()).str());
        Value *M = G.addParam(Name, P->getType());
        M->getAttrs().set("init", Attribute::getString("zeros"));
        for (StringRef Copied : {"sharding", "local", "pieces", "logical_rows"})
          if (const Attribute *A = P->getAttrs().get(Copied))
            M->getAttrs().set(Copied, *A);
        if (Opts.States != "device")
          M->getAttrs().set("placement", Attribute::getString(Opts.States));
        Operands.push_back(M);
      }
    Operands.append(Hyper.begin(), Hyper.end());
    if (Skip)
      Operands.push_back(Skip);
    Expected<SmallVector<Value *, 3>> R = B.emit(
        Adam ? OpId::AdamW : OpId::Sgd, Operands, AttrDict(), Adam ? 3 : 1);
    if (!R)
      return R.takeError();
    for (unsigned I = 0; I != R->size(); ++I)
      G.renameValue(
          (*R)[I],
          G.getUniqueName(
              (Operands[I == 0 ? 0 : I + 1]->getName() + ".next").str()));
  }
  return Error::success();
}

std::unique_ptr<Pass> autopar::createInsertOptimizerPass() {
  return std::make_unique<InsertOptimizerPass>();
}

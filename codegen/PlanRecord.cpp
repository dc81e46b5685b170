//===- PlanRecord.cpp - A plan as read back from plan.json ----------------===//

#include "codegen/PlanRecord.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"

#include <tuple>

using namespace autopar;
using namespace llvm;

StringRef autopar::getOffloadDevice(OffloadKind K) {
  switch (K) {
  case OffloadKind::None:
    return "";
  case OffloadKind::OptimizerCpu:
  case OffloadKind::AllCpu:
    return "cpu";
  case OffloadKind::OptimizerNvme:
  case OffloadKind::AllNvme:
    return "nvme";
  }
  llvm_unreachable("unknown offload kind");
}

bool autopar::offloadsParameters(OffloadKind K) {
  return K == OffloadKind::AllCpu || K == OffloadKind::AllNvme;
}

namespace {
/// Reads typed values out of the document; every error names the file and
/// the dotted key.
class Reader {
public:
  explicit Reader(StringRef FileName) : FileName(FileName) {}

  Error error(const Twine &Key, const Twine &Message) const {
    return createStringError(inconvertibleErrorCode(),
                             FileName + ": '" + Key + "' " + Message);
  }

  Expected<const json::Value *> get(const json::Object &O, StringRef Prefix,
                                    StringRef Key) const {
    const json::Value *V = O.get(Key);
    if (!V)
      return error(Prefix + Key, "is missing");
    return V;
  }

  Expected<const json::Object *> object(const json::Object &O, StringRef Prefix,
                                        StringRef Key) const {
    Expected<const json::Value *> V = get(O, Prefix, Key);
    if (!V)
      return V.takeError();
    if (const json::Object *Obj = (*V)->getAsObject())
      return Obj;
    return error(Prefix + Key, "is not an object");
  }

  Error string(const json::Object &O, StringRef Prefix, StringRef Key,
               std::string &Out) const {
    Expected<const json::Value *> V = get(O, Prefix, Key);
    if (!V)
      return V.takeError();
    Optional<StringRef> S = (*V)->getAsString();
    if (!S)
      return error(Prefix + Key, "is not a string");
    Out = S->str();
    return Error::success();
  }

  Error integer(const json::Object &O, StringRef Prefix, StringRef Key,
                int64_t Min, int64_t &Out) const {
    Expected<const json::Value *> V = get(O, Prefix, Key);
    if (!V)
      return V.takeError();
    return integerValue(**V, Prefix + Key, Min, Out);
  }

  Error integerValue(const json::Value &V, const Twine &Key, int64_t Min,
                     int64_t &Out) const {
    Optional<int64_t> I = V.getAsInteger();
    if (!I)
      return error(Key, "is not an integer");
    if (*I < Min)
      return error(Key,
                   "is " + Twine(*I) + ", expected at least " + Twine(Min));
    Out = *I;
    return Error::success();
  }

  Error number(const json::Object &O, StringRef Prefix, StringRef Key,
               double &Out) const {
    Expected<const json::Value *> V = get(O, Prefix, Key);
    if (!V)
      return V.takeError();
    Optional<double> D = (*V)->getAsNumber();
    if (!D)
      return error(Prefix + Key, "is not a number");
    Out = *D;
    return Error::success();
  }

  Error boolean(const json::Object &O, StringRef Prefix, StringRef Key,
                bool &Out) const {
    Expected<const json::Value *> V = get(O, Prefix, Key);
    if (!V)
      return V.takeError();
    Optional<bool> B = (*V)->getAsBoolean();
    if (!B)
      return error(Prefix + Key, "is not a boolean");
    Out = *B;
    return Error::success();
  }

  Error integers(const json::Object &O, StringRef Prefix, StringRef Key,
                 int64_t Min, std::vector<int64_t> &Out) const {
    Expected<const json::Value *> V = get(O, Prefix, Key);
    if (!V)
      return V.takeError();
    const json::Array *A = (*V)->getAsArray();
    if (!A)
      return error(Prefix + Key, "is not an array");
    if (A->empty())
      return error(Prefix + Key, "is empty");
    Out.clear();
    for (size_t I = 0; I != A->size(); ++I) {
      int64_t X = 0;
      if (Error E = integerValue((*A)[I], Prefix + Key + "[" + Twine(I) + "]",
                                 Min, X))
        return E;
      Out.push_back(X);
    }
    return Error::success();
  }

private:
  StringRef FileName;
};
} // namespace

Expected<PlanRecord> autopar::parsePlanJSON(StringRef Text,
                                            StringRef FileName) {
  Expected<json::Value> Doc = json::parse(Text);
  if (!Doc)
    return createStringError(
        inconvertibleErrorCode(),
        FileName + ": not valid JSON: " + toString(Doc.takeError()));
  const json::Object *Top = Doc->getAsObject();
  if (!Top)
    return createStringError(inconvertibleErrorCode(),
                             FileName + ": the document is not an object");
  Reader Rd(FileName);
  PlanRecord R;
  R.FileName = FileName.str();
  if (Error E = Rd.string(*Top, "", "autopar_version", R.AutoparVersion))
    return E;
  if (Error E = Rd.string(*Top, "", "model", R.Model))
    return E;
  if (Error E = Rd.string(*Top, "", "model_sha256", R.ModelSha256))
    return E;
  if (Error E = Rd.integer(*Top, "", "global_batch", 1, R.GlobalBatch))
    return E;

  Expected<const json::Object *> Cluster = Rd.object(*Top, "", "cluster");
  if (!Cluster)
    return Cluster.takeError();
  const json::Object &C = **Cluster;
  if (Error E = Rd.string(C, "cluster.", "name", R.Cluster.Name))
    return E;
  if (Error E = Rd.integer(C, "cluster.", "num_gpus", 1, R.Cluster.NumGpus))
    return E;
  if (Error E =
          Rd.integer(C, "cluster.", "gpus_per_node", 1, R.Cluster.GpusPerNode))
    return E;

  Expected<const json::Object *> Shape = Rd.object(*Top, "", "model_shape");
  if (!Shape)
    return Shape.takeError();
  const json::Object &S = **Shape;
  auto &RS = R.Shape;
  // Hidden size, heads and vocabulary are 0 for a model that has none (a
  // CNN): its launch files leave the transformer arguments out.
  for (auto [Key, Out, Min] :
       {std::tuple<StringRef, int64_t *, int64_t>{"layers", &RS.Layers, 1},
        {"hidden", &RS.Hidden, 0},
        {"heads", &RS.Heads, 0},
        {"seq_length", &RS.SeqLength, 1},
        {"vocab", &RS.Vocab, 0}})
    if (Error E = Rd.integer(S, "model_shape.", Key, Min, *Out))
      return E;
  if (Error E = Rd.integers(S, "model_shape.", "layers_per_stage", 0,
                            RS.LayersPerStage))
    return E;

  Expected<const json::Object *> PlanObj = Rd.object(*Top, "", "plan");
  if (!PlanObj)
    return PlanObj.takeError();
  const json::Object &P = **PlanObj;
  auto &RP = R.Plan;
  for (auto [Key, Out] : {std::pair<StringRef, int64_t *>{"tp", &RP.TP},
                          {"pp", &RP.PP},
                          {"dp", &RP.DP},
                          {"vpp", &RP.VPP},
                          {"mbs", &RP.MicroBatchSize},
                          {"num_microbatches", &RP.NumMicroBatches}})
    if (Error E = Rd.integer(P, "plan.", Key, 1, *Out))
      return E;
  if (Error E = Rd.integer(P, "plan.", "zero_stage", 0, RP.ZeroStage))
    return E;
  if (RP.ZeroStage > 3)
    return Rd.error("plan.zero_stage",
                    "is " + Twine(RP.ZeroStage) + ", expected 0 to 3");

  std::string Name;
  if (Error E = Rd.string(P, "plan.", "schedule", Name))
    return E;
  std::optional<ScheduleKind> Kind = parseScheduleName(Name);
  if (!Kind)
    return Rd.error("plan.schedule", "is '" + Name +
                                         "', expected gpipe, 1f1b or "
                                         "interleaved");
  RP.Schedule = *Kind;

  if (Error E = Rd.string(P, "plan.", "offload", Name))
    return E;
  bool Found = false;
  for (OffloadKind K :
       {OffloadKind::None, OffloadKind::OptimizerCpu,
        OffloadKind::OptimizerNvme, OffloadKind::AllCpu, OffloadKind::AllNvme})
    if (Name == getOffloadName(K)) {
      RP.Offload = K;
      Found = true;
    }
  if (!Found)
    return Rd.error("plan.offload",
                    "is '" + Name +
                        "', expected none, optimizer-cpu, optimizer-nvme, "
                        "cpu or nvme");

  if (Error E = Rd.string(P, "plan.", "recompute", Name))
    return E;
  Found = false;
  for (Recompute K : {Recompute::None, Recompute::Selective, Recompute::Full})
    if (Name == getRecomputeName(K)) {
      RP.Recomputation = K;
      Found = true;
    }
  if (!Found)
    return Rd.error("plan.recompute",
                    "is '" + Name + "', expected none, selective or full");

  if (Error E =
          Rd.boolean(P, "plan.", "sequence_parallel", RP.SequenceParallel))
    return E;
  // Plans written before the precision was recorded trained in bf16.
  if (P.get("precision")) {
    if (Error E = Rd.string(P, "plan.", "precision", Name))
      return E;
    std::optional<Precision> Prec = parsePrecision(Name);
    if (!Prec || *Prec == Precision::TF32)
      return Rd.error("plan.precision",
                      "is '" + Name + "', expected bf16, fp16 or fp32");
    RP.TrainPrecision = *Prec;
  }
  if (P.get("attention")) {
    if (Error E = Rd.string(P, "plan.", "attention", Name))
      return E;
    std::optional<AttentionKernel> Kernel = parseAttentionKernel(Name);
    if (!Kernel)
      return Rd.error("plan.attention",
                      "is '" + Name + "', expected flash or materialized");
    RP.Attention = *Kernel;
  }
  if (P.get("dp_overlap"))
    if (Error E = Rd.boolean(P, "plan.", "dp_overlap", RP.DpOverlap))
      return E;
  if (Error E = Rd.integers(P, "plan.", "stage_layers", 0, RP.StageLayers))
    return E;
  if (Error E = Rd.number(P, "plan.", "step_time_s", RP.StepTimeSeconds))
    return E;
  return R;
}

Error autopar::checkBatchInvariants(const PlanRecord &R) {
  Error All = Error::success();
  auto Fail = [&](const Twine &Message) {
    All = joinErrors(std::move(All),
                     createStringError(inconvertibleErrorCode(),
                                       R.FileName + ": " + Message));
  };
  const auto &P = R.Plan;
  int64_t Batch = P.MicroBatchSize * P.NumMicroBatches * P.DP;
  if (R.GlobalBatch != Batch)
    Fail("global_batch " + Twine(R.GlobalBatch) +
         " != plan.mbs * plan.num_microbatches * plan.dp = " +
         Twine(P.MicroBatchSize) + " * " + Twine(P.NumMicroBatches) + " * " +
         Twine(P.DP) + " = " + Twine(Batch));
  int64_t Gpus = P.TP * P.PP * P.DP;
  if (R.Cluster.NumGpus != Gpus)
    Fail("plan.tp * plan.pp * plan.dp = " + Twine(P.TP) + " * " + Twine(P.PP) +
         " * " + Twine(P.DP) + " = " + Twine(Gpus) + " != cluster.num_gpus " +
         Twine(R.Cluster.NumGpus));
  if (R.Cluster.NumGpus > R.Cluster.GpusPerNode &&
      R.Cluster.NumGpus % R.Cluster.GpusPerNode != 0)
    Fail("cluster.num_gpus " + Twine(R.Cluster.NumGpus) +
         " is not a whole number of nodes of cluster.gpus_per_node " +
         Twine(R.Cluster.GpusPerNode));
  int64_t Stages = P.PP * P.VPP;
  const auto &LPS = R.Shape.LayersPerStage;
  if (int64_t(LPS.size()) != Stages)
    Fail("model_shape.layers_per_stage has " + Twine(LPS.size()) +
         " entries, expected plan.pp * plan.vpp = " + Twine(Stages));
  int64_t Sum = 0;
  for (int64_t L : LPS)
    Sum += L;
  if (Sum != R.Shape.Layers)
    Fail("model_shape.layers_per_stage sums to " + Twine(Sum) +
         ", expected model_shape.layers " + Twine(R.Shape.Layers));
  if (int64_t(P.StageLayers.size()) != Stages)
    Fail("plan.stage_layers has " + Twine(P.StageLayers.size()) +
         " entries, expected plan.pp * plan.vpp = " + Twine(Stages));
  if (R.Shape.Heads % P.TP != 0)
    Fail("model_shape.heads " + Twine(R.Shape.Heads) +
         " is not divisible by plan.tp " + Twine(P.TP));
  if (P.Schedule == ScheduleKind::Interleaved) {
    if (P.VPP < 2)
      Fail("the interleaved schedule needs plan.vpp >= 2, got " + Twine(P.VPP));
    if (P.NumMicroBatches % P.PP != 0)
      Fail("the interleaved schedule needs plan.num_microbatches (" +
           Twine(P.NumMicroBatches) + ") to be a multiple of plan.pp (" +
           Twine(P.PP) + ")");
  } else if (P.VPP != 1) {
    Fail("the " + getScheduleName(P.Schedule) +
         " schedule needs plan.vpp == 1, got " + Twine(P.VPP));
  }
  if (offloadsParameters(P.Offload) && P.ZeroStage != 3)
    Fail("plan.offload " + getOffloadName(P.Offload) +
         " offloads parameters, which needs plan.zero_stage 3, got " +
         Twine(P.ZeroStage));
  if (P.Offload != OffloadKind::None && P.ZeroStage == 0)
    Fail("plan.offload " + getOffloadName(P.Offload) +
         " needs plan.zero_stage >= 1");
  return All;
}

//===- Plan.cpp - A parallelization plan as IR module attributes ----------===//

#include "ir/Plan.h"

#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FormatVariadic.h"

#include <tuple>

using namespace autopar;
using namespace llvm;

static Error planError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message);
}

//===----------------------------------------------------------------------===//
// Names of the knobs' values
//===----------------------------------------------------------------------===//

namespace {
/// The values a knob of enum type T may take, with their names.
template <typename T> struct KnobValues;

template <> struct KnobValues<ScheduleKind> {
  static constexpr std::pair<ScheduleKind, const char *> All[] = {
      {ScheduleKind::GPipe, "gpipe"},
      {ScheduleKind::OneFOneB, "1f1b"},
      {ScheduleKind::Interleaved, "interleaved"}};
};
template <> struct KnobValues<Recompute> {
  static constexpr std::pair<Recompute, const char *> All[] = {
      {Recompute::None, "none"},
      {Recompute::Selective, "selective"},
      {Recompute::Full, "full"}};
};
template <> struct KnobValues<OffloadKind> {
  static constexpr std::pair<OffloadKind, const char *> All[] = {
      {OffloadKind::None, "none"},
      {OffloadKind::OptimizerCpu, "optimizer-cpu"},
      {OffloadKind::OptimizerNvme, "optimizer-nvme"},
      {OffloadKind::AllCpu, "cpu"},
      {OffloadKind::AllNvme, "nvme"}};
};
/// TF32 is a GEMM precision, not one a plan trains in.
template <> struct KnobValues<Precision> {
  static constexpr std::pair<Precision, const char *> All[] = {
      {Precision::BF16, "bf16"},
      {Precision::FP16, "fp16"},
      {Precision::FP32, "fp32"}};
};
template <> struct KnobValues<AttentionKernel> {
  static constexpr std::pair<AttentionKernel, const char *> All[] = {
      {AttentionKernel::Flash, "flash"},
      {AttentionKernel::Materialized, "materialized"}};
};

template <typename T> StringRef nameOf(T V) {
  for (const auto &[K, Name] : KnobValues<T>::All)
    if (K == V)
      return Name;
  llvm_unreachable("a knob value without a name");
}

template <typename T> std::optional<T> valueOf(StringRef Name) {
  for (const auto &[K, N] : KnobValues<T>::All)
    if (Name == N)
      return K;
  return std::nullopt;
}

/// "a, b or c".
template <typename T> std::string expectedNames() {
  std::string S;
  size_t N = std::size(KnobValues<T>::All);
  for (size_t I = 0; I != N; ++I)
    S += (I == 0       ? ""
          : I + 1 == N ? " or "
                       : ", ") +
         std::string(KnobValues<T>::All[I].second);
  return S;
}
} // namespace

StringRef autopar::getScheduleName(ScheduleKind K) { return nameOf(K); }
std::optional<ScheduleKind> autopar::parseScheduleName(StringRef Name) {
  return valueOf<ScheduleKind>(Name);
}
StringRef autopar::getRecomputeName(Recompute R) { return nameOf(R); }
std::optional<Recompute> autopar::parseRecompute(StringRef Name) {
  return valueOf<Recompute>(Name);
}
StringRef autopar::getOffloadName(OffloadKind K) { return nameOf(K); }
std::optional<OffloadKind> autopar::parseOffloadName(StringRef Name) {
  return valueOf<OffloadKind>(Name);
}
StringRef autopar::getAttentionKernelName(AttentionKernel K) {
  return nameOf(K);
}
std::optional<AttentionKernel> autopar::parseAttentionKernel(StringRef Name) {
  return valueOf<AttentionKernel>(Name);
}

static const char *const PrecisionNames[NumPrecisions] = {"fp32", "tf32",
                                                          "bf16", "fp16"};
StringRef autopar::getPrecisionName(Precision P) {
  return PrecisionNames[static_cast<unsigned>(P)];
}
std::optional<Precision> autopar::parsePrecision(StringRef Name) {
  for (unsigned P = 0; P < NumPrecisions; ++P)
    if (Name == PrecisionNames[P])
      return static_cast<Precision>(P);
  return std::nullopt;
}

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

//===----------------------------------------------------------------------===//
// One knob's value as text (--fix) and as an attribute, by its type
//===----------------------------------------------------------------------===//

namespace {
/// Text and attribute forms of integer knobs (bounded by the row's Min and
/// Max), on/off knobs and enum knobs.
struct KnobCodec {
  // --fix text.
  static Error parse(StringRef Key, StringRef Text, int64_t Min, int64_t Max,
                     int64_t &Out) {
    int64_t V;
    if (Text.getAsInteger(10, V) || V < Min || V > Max) {
      if (Min == 0 && Max <= 8) {
        std::string Range;
        for (int64_t I = Min; I <= Max; ++I)
          Range += (I == Min   ? ""
                    : I == Max ? " or "
                               : ", ") +
                   std::to_string(I);
        return planError("--fix " + Key + "=" + Text + ": expected " + Range);
      }
      return planError("--fix " + Key + "=" + Text +
                       ": expected a positive integer");
    }
    Out = V;
    return Error::success();
  }
  static Error parse(StringRef Key, StringRef Text, int64_t Min, int64_t Max,
                     unsigned &Out) {
    int64_t V;
    if (Error E = parse(Key, Text, Min, Max, V))
      return E;
    Out = unsigned(V);
    return Error::success();
  }
  static Error parse(StringRef Key, StringRef Text, int64_t, int64_t,
                     bool &Out) {
    if (Text == "on" || Text == "true" || Text == "1")
      Out = true;
    else if (Text == "off" || Text == "false" || Text == "0")
      Out = false;
    else
      return planError("--fix " + Key + "=" + Text + ": expected on or off");
    return Error::success();
  }
  template <typename T>
  static Error parse(StringRef Key, StringRef Text, int64_t, int64_t, T &Out) {
    std::optional<T> V = valueOf<T>(Text);
    if (!V)
      return planError("--fix " + Key + "=" + Text + ": expected " +
                       expectedNames<T>());
    Out = *V;
    return Error::success();
  }

  static std::string text(int64_t V) { return std::to_string(V); }
  static std::string text(unsigned V) { return std::to_string(V); }
  static std::string text(bool V) { return V ? "on" : "off"; }
  template <typename T> static std::string text(T V) { return nameOf(V).str(); }

  static Attribute attr(int64_t V) { return Attribute::getInt(V); }
  static Attribute attr(unsigned V) { return Attribute::getInt(V); }
  static Attribute attr(bool V) { return Attribute::getBool(V); }
  template <typename T> static Attribute attr(T V) {
    return Attribute::getString(nameOf(V));
  }

  // Attribute form; Key is the dotted key for messages.
  static Error read(const Attribute &A, const Twine &Key, int64_t Min,
                    int64_t Max, int64_t &Out) {
    if (!A.isa(Attribute::Kind::Int))
      return planError("'" + Key + "' is not an integer");
    int64_t V = A.getInt();
    if (V < Min)
      return planError("'" + Key + "' is " + Twine(V) + ", expected at least " +
                       Twine(Min));
    if (V > Max)
      return planError("'" + Key + "' is " + Twine(V) + ", expected " +
                       Twine(Min) + " to " + Twine(Max));
    Out = V;
    return Error::success();
  }
  static Error read(const Attribute &A, const Twine &Key, int64_t Min,
                    int64_t Max, unsigned &Out) {
    int64_t V;
    if (Error E = read(A, Key, Min, Max, V))
      return E;
    Out = unsigned(V);
    return Error::success();
  }
  static Error read(const Attribute &A, const Twine &Key, int64_t, int64_t,
                    bool &Out) {
    if (!A.isa(Attribute::Kind::Bool))
      return planError("'" + Key + "' is not a boolean");
    Out = A.getBool();
    return Error::success();
  }
  template <typename T>
  static Error read(const Attribute &A, const Twine &Key, int64_t, int64_t,
                    T &Out) {
    if (!A.isa(Attribute::Kind::String))
      return planError("'" + Key + "' is not a string");
    std::optional<T> V = valueOf<T>(A.getString());
    if (!V)
      return planError("'" + Key + "' is '" + A.getString() + "', expected " +
                       expectedNames<T>());
    Out = *V;
    return Error::success();
  }
};
} // namespace

std::string PlanConfig::str() const {
  std::string S;
#define PLAN_KNOB(FixKey, AttrKey, Type, Field, Default, Min, Max, IsOptional) \
  S += (S.empty() ? "" : ",") + std::string(FixKey) + "=" +                    \
       KnobCodec::text(Field);
#include "ir/PlanKnobs.def"
  return S;
}

std::string PlanFixes::str() const {
  std::string S;
#define PLAN_KNOB(FixKey, AttrKey, Type, Field, Default, Min, Max, IsOptional) \
  if (Field)                                                                   \
    S += (S.empty() ? "" : ",") + std::string(FixKey) + "=" +                  \
         KnobCodec::text(*Field);
#include "ir/PlanKnobs.def"
  return S;
}

void PlanFixes::applyTo(PlanConfig &C) const {
#define PLAN_KNOB(FixKey, AttrKey, Type, Field, Default, Min, Max, IsOptional) \
  if (Field)                                                                   \
    C.Field = *Field;
#include "ir/PlanKnobs.def"
}

std::string autopar::getPlanKnobKeys() {
  std::string S;
#define PLAN_KNOB(FixKey, AttrKey, Type, Field, Default, Min, Max, IsOptional) \
  S += (S.empty() ? "" : ", ") + std::string(FixKey);
#include "ir/PlanKnobs.def"
  return S;
}

Expected<PlanFixes> PlanFixes::parse(StringRef Text) {
  PlanFixes F;
  SmallVector<StringRef, 8> Items;
  Text.split(Items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef Item : Items) {
    auto [Key, Val] = Item.split('=');
    Key = Key.trim();
    Val = Val.trim();
    bool Known = false;
#define PLAN_KNOB(FixKey, AttrKey, Type, Field, Default, Min, Max, IsOptional) \
  if (Key == FixKey) {                                                         \
    Known = true;                                                              \
    Type V{};                                                                  \
    if (Error E = KnobCodec::parse(Key, Val, Min, Max, V))                     \
      return E;                                                                \
    F.Field = V;                                                               \
  }
#include "ir/PlanKnobs.def"
    if (!Known)
      return planError("--fix: unknown key '" + Key +
                       "' (keys: " + getPlanKnobKeys() + ")");
  }
  return F;
}

//===----------------------------------------------------------------------===//
// Attributes as JSON
//===----------------------------------------------------------------------===//

json::Value autopar::attributeToJSON(const Attribute &A) {
  switch (A.getKind()) {
  case Attribute::Kind::Int:
    return A.getInt();
  case Attribute::Kind::Float:
    return A.getFloat();
  case Attribute::Kind::String:
    return A.getString();
  case Attribute::Kind::Bool:
    return A.getBool();
  case Attribute::Kind::IntList:
    return json::Array(A.getIntList());
  case Attribute::Kind::FloatList:
    return json::Array(A.getFloatList());
  case Attribute::Kind::List: {
    json::Array Out;
    for (const Attribute &E : A.getList())
      Out.push_back(attributeToJSON(E));
    return Out;
  }
  case Attribute::Kind::Dict: {
    json::Object Out;
    for (const NamedAttribute &E : A.getDict())
      Out[E.first] = attributeToJSON(E.second);
    return Out;
  }
  case Attribute::Kind::Tensor:
  case Attribute::Kind::Sharding:
    break;
  }
  llvm_unreachable("a dense tensor or sharding has no JSON form");
}

Attribute autopar::attributeFromJSON(const json::Value &V) {
  if (Optional<bool> B = V.getAsBoolean())
    return Attribute::getBool(*B);
  if (Optional<int64_t> I = V.getAsInteger())
    return Attribute::getInt(*I);
  if (Optional<double> D = V.getAsNumber())
    return Attribute::getFloat(*D);
  if (Optional<StringRef> S = V.getAsString())
    return Attribute::getString(*S);
  if (const json::Object *O = V.getAsObject()) {
    AttrDict D;
    for (const auto &KV : *O)
      D.set(KV.first.str(), attributeFromJSON(KV.second));
    return Attribute::getDict(std::move(D));
  }
  if (const json::Array *A = V.getAsArray()) {
    bool Ints = true, Numbers = true;
    for (const json::Value &E : *A) {
      Ints &= E.getAsInteger().hasValue();
      Numbers &= E.getAsNumber().hasValue();
    }
    if (Ints) {
      std::vector<int64_t> L;
      for (const json::Value &E : *A)
        L.push_back(*E.getAsInteger());
      return Attribute::getIntList(std::move(L));
    }
    if (Numbers) {
      std::vector<double> L;
      for (const json::Value &E : *A)
        L.push_back(*E.getAsNumber());
      return Attribute::getFloatList(std::move(L));
    }
    std::vector<Attribute> L;
    for (const json::Value &E : *A)
      L.push_back(attributeFromJSON(E));
    return Attribute::getList(std::move(L));
  }
  // null: an empty dict.
  return Attribute::getDict(AttrDict());
}

//===----------------------------------------------------------------------===//
// Encoding
//===----------------------------------------------------------------------===//

static Attribute intList(ArrayRef<int64_t> V) {
  return Attribute::getIntList(std::vector<int64_t>(V.begin(), V.end()));
}

static Attribute stringList(ArrayRef<std::string> V) {
  if (V.empty())
    return Attribute::getIntList({});
  std::vector<Attribute> L;
  for (const std::string &S : V)
    L.push_back(Attribute::getString(S));
  return Attribute::getList(std::move(L));
}

/// The keys of the records' numeric fields, for the encoder and the
/// decoder alike.
/// OmitZero keys are written only when not 0 (the share of Opaque ops, which
/// most models have none of).
struct PredictionKey {
  const char *Key;
  double PlanPredicted::*Field;
  bool OmitZero;
};
static constexpr PredictionKey PredictionKeys[] = {
    {"step_time_s", &PlanPredicted::StepSeconds, false},
    {"tokens_per_s", &PlanPredicted::TokensPerSecond, false},
    {"model_tflops_per_gpu", &PlanPredicted::ModelTflopsPerGpu, false},
    {"hw_tflops_per_gpu", &PlanPredicted::HardwareTflopsPerGpu, false},
    {"mfu", &PlanPredicted::Mfu, false},
    {"hfu", &PlanPredicted::Hfu, false},
    {"bubble_fraction", &PlanPredicted::BubbleFraction, false},
    {"peak_memory_per_gpu_bytes", &PlanPredicted::PeakMemoryBytes, false},
    {"memory_capacity_bytes", &PlanPredicted::MemoryCapacityBytes, false},
    {"opaque_fraction", &PlanPredicted::OpaqueFraction, true}};

static constexpr std::pair<const char *, int64_t StageMemory::*>
    StageMemoryKeys[] = {{"weights_bytes", &StageMemory::Weights},
                         {"gradients_bytes", &StageMemory::Gradients},
                         {"optimizer_bytes", &StageMemory::Optimizer},
                         {"activations_bytes", &StageMemory::Activations},
                         {"allowance_bytes", &StageMemory::Allowance},
                         {"offloaded_bytes", &StageMemory::Offloaded},
                         {"total_bytes", &StageMemory::Total}};

/// With the least value each may take: hidden size, heads and vocabulary
/// are 0 for a model that has none (a CNN), whose launch files leave the
/// transformer arguments out.
static constexpr std::tuple<const char *, int64_t ModelShape::*, int64_t>
    ModelShapeKeys[] = {{"layers", &ModelShape::Layers, 1},
                        {"hidden", &ModelShape::Hidden, 0},
                        {"heads", &ModelShape::Heads, 0},
                        {"seq_length", &ModelShape::SeqLength, 1},
                        {"vocab", &ModelShape::Vocab, 0}};

AttrDict autopar::encodePlanConfig(const PlanConfig &C,
                                   const PlanPredicted &P) {
  AttrDict D;
#define PLAN_KNOB(FixKey, AttrKey, Type, Field, Default, Min, Max, IsOptional) \
  D.set(AttrKey, KnobCodec::attr(C.Field));
#include "ir/PlanKnobs.def"
  D.set("num_microbatches", Attribute::getInt(C.MicroBatches));
  std::vector<int64_t> Stages(C.StageUnits.begin(), C.StageUnits.end());
  D.set("stage_layers", Attribute::getIntList(std::move(Stages)));
  for (const auto &[Key, Field, OmitZero] : PredictionKeys)
    if (!OmitZero || P.*Field != 0)
      D.set(Key, Attribute::getFloat(P.*Field));
  return D;
}

AttrDict autopar::encodePlan(const PlanRecord &R) {
  AttrDict D;
  D.set("autopar_version", Attribute::getString(R.AutoparVersion));
  D.set("model", Attribute::getString(R.Model));
  D.set("model_sha256", Attribute::getString(R.ModelSha256));
  D.set("global_batch", Attribute::getInt(R.GlobalBatch));
  D.set("cluster", R.Cluster);
  if (R.Inputs) {
    const PlanInputs &I = *R.Inputs;
    AttrDict In;
    In.set("global_batch", Attribute::getInt(I.GlobalBatch));
    In.set("fix", Attribute::getString(I.Fix));
    In.set("dims", stringList(I.Dims));
    In.set("batch_dim", Attribute::getString(I.BatchDim));
    if (!I.Freeze.empty())
      In.set("freeze", stringList(I.Freeze));
    In.set("tp_across_nodes", Attribute::getBool(I.TpAcrossNodes));
    In.set("top", Attribute::getInt(I.Top));
    D.set("inputs", Attribute::getDict(std::move(In)));
  }
  const ModelShape &S = R.Shape;
  AttrDict Shape;
  for (const auto &[Key, Field, Min] : ModelShapeKeys)
    Shape.set(Key, Attribute::getInt(S.*Field));
  Shape.set("layers_per_stage", intList(S.LayersPerStage));
  D.set("model_shape", Attribute::getDict(std::move(Shape)));
  D.set("plan", Attribute::getDict(encodePlanConfig(R.Config, R.Predicted)));
  if (!R.Memory.empty()) {
    std::vector<Attribute> Stages;
    for (const StageMemory &M : R.Memory) {
      AttrDict E;
      for (const auto &[Key, Field] : StageMemoryKeys)
        E.set(Key, Attribute::getInt(M.*Field));
      Stages.push_back(Attribute::getDict(std::move(E)));
    }
    D.set("predicted_memory", Attribute::getList(std::move(Stages)));
  }
  if (!R.TrainingPipelines.empty())
    D.set("training_pipelines", stringList(R.TrainingPipelines));
  return D;
}

//===----------------------------------------------------------------------===//
// Decoding
//===----------------------------------------------------------------------===//

namespace {
/// Reads typed values out of one dict; every error names the dotted key.
class DictReader {
public:
  DictReader(const AttrDict &D, StringRef Prefix) : D(D), Prefix(Prefix) {}

  std::string key(StringRef K) const { return (Prefix + K).str(); }
  bool has(StringRef K) const { return D.get(K) != nullptr; }

  Expected<const Attribute *> get(StringRef K) const {
    if (const Attribute *A = D.get(K))
      return A;
    return planError("'" + key(K) + "' is missing");
  }

  Expected<const AttrDict *> dict(StringRef K) const {
    Expected<const Attribute *> A = get(K);
    if (!A)
      return A.takeError();
    if (!(*A)->isa(Attribute::Kind::Dict))
      return planError("'" + key(K) + "' is not an object");
    return &(*A)->getDict();
  }

  Error string(StringRef K, std::string &Out) const {
    Expected<const Attribute *> A = get(K);
    if (!A)
      return A.takeError();
    if (!(*A)->isa(Attribute::Kind::String))
      return planError("'" + key(K) + "' is not a string");
    Out = (*A)->getString().str();
    return Error::success();
  }

  Error integer(StringRef K, int64_t Min, int64_t &Out) const {
    Expected<const Attribute *> A = get(K);
    if (!A)
      return A.takeError();
    return KnobCodec::read(**A, key(K), Min, INT64_MAX, Out);
  }

  Error number(StringRef K, double &Out) const {
    Expected<const Attribute *> A = get(K);
    if (!A)
      return A.takeError();
    if ((*A)->isa(Attribute::Kind::Int))
      Out = double((*A)->getInt());
    else if ((*A)->isa(Attribute::Kind::Float))
      Out = (*A)->getFloat();
    else
      return planError("'" + key(K) + "' is not a number");
    return Error::success();
  }

  Error boolean(StringRef K, bool &Out) const {
    Expected<const Attribute *> A = get(K);
    if (!A)
      return A.takeError();
    return KnobCodec::read(**A, key(K), 0, 0, Out);
  }

  /// A non-empty list of integers of at least Min.
  Error integers(StringRef K, int64_t Min, std::vector<int64_t> &Out) const {
    Expected<const Attribute *> A = get(K);
    if (!A)
      return A.takeError();
    if (!(*A)->isa(Attribute::Kind::IntList))
      return planError("'" + key(K) + "' is not an array of integers");
    ArrayRef<int64_t> L = (*A)->getIntList();
    if (L.empty())
      return planError("'" + key(K) + "' is empty");
    Out.clear();
    for (size_t I = 0; I != L.size(); ++I) {
      if (L[I] < Min)
        return planError("'" + key(K) + "[" + Twine(I) + "]' is " +
                         Twine(L[I]) + ", expected at least " + Twine(Min));
      Out.push_back(L[I]);
    }
    return Error::success();
  }

  Error strings(StringRef K, std::vector<std::string> &Out) const {
    Expected<const Attribute *> A = get(K);
    if (!A)
      return A.takeError();
    Out.clear();
    if ((*A)->isa(Attribute::Kind::IntList) && (*A)->getIntList().empty())
      return Error::success();
    if (!(*A)->isa(Attribute::Kind::List))
      return planError("'" + key(K) + "' is not an array of strings");
    for (const Attribute &E : (*A)->getList()) {
      if (!E.isa(Attribute::Kind::String))
        return planError("'" + key(K) + "' is not an array of strings");
      Out.push_back(E.getString().str());
    }
    return Error::success();
  }

  /// Errors for keys not in Known.
  Error onlyKeys(ArrayRef<StringRef> Known) const {
    for (const NamedAttribute &E : D)
      if (!is_contained(Known, StringRef(E.first)))
        return planError("'" + key(E.first) + "' is not a key of a plan");
    return Error::success();
  }

private:
  const AttrDict &D;
  std::string Prefix;
};
} // namespace

static Error decodeConfig(const AttrDict &Dict, PlanConfig &C,
                          PlanPredicted &P) {
  DictReader Rd(Dict, "plan.");
#define PLAN_KNOB(FixKey, AttrKey, Type, Field, Default, Min, Max, IsOptional) \
  if (!IsOptional || Rd.has(AttrKey)) {                                        \
    Expected<const Attribute *> A = Rd.get(AttrKey);                           \
    if (!A)                                                                    \
      return A.takeError();                                                    \
    if (Error E = KnobCodec::read(**A, Rd.key(AttrKey), Min, Max, C.Field))    \
      return E;                                                                \
  }
#include "ir/PlanKnobs.def"
  if (Error E = Rd.integer("num_microbatches", 1, C.MicroBatches))
    return E;
  std::vector<int64_t> Stages;
  if (Error E = Rd.integers("stage_layers", 0, Stages))
    return E;
  C.StageUnits.assign(Stages.begin(), Stages.end());
  // The step time is required; the other predictions may be left out of a
  // plan written by hand.
  for (const auto &[Key, Field, OmitZero] : PredictionKeys)
    if (Field == &PlanPredicted::StepSeconds || Rd.has(Key))
      if (Error E = Rd.number(Key, P.*Field))
        return E;
  // A key nothing reads (a misspelt knob of a plan pinned by hand) is an
  // error, not a choice silently left at its default.
  SmallVector<StringRef, 32> Known = {"num_microbatches", "stage_layers"};
#define PLAN_KNOB(FixKey, AttrKey, Type, Field, Default, Min, Max, IsOptional) \
  Known.push_back(AttrKey);
#include "ir/PlanKnobs.def"
  for (const auto &Entry : PredictionKeys)
    Known.push_back(Entry.Key);
  return Rd.onlyKeys(Known);
}

static Error decodeInputs(const AttrDict &Dict, PlanInputs &I) {
  DictReader Rd(Dict, "inputs.");
  if (Error E = Rd.integer("global_batch", 1, I.GlobalBatch))
    return E;
  if (Error E = Rd.string("fix", I.Fix))
    return E;
  if (Error E = Rd.strings("dims", I.Dims))
    return E;
  if (Error E = Rd.string("batch_dim", I.BatchDim))
    return E;
  if (Error E = Rd.boolean("tp_across_nodes", I.TpAcrossNodes))
    return E;
  if (Rd.has("freeze"))
    if (Error E = Rd.strings("freeze", I.Freeze))
      return E;
  if (Rd.has("top")) {
    int64_t Top;
    if (Error E = Rd.integer("top", 1, Top))
      return E;
    I.Top = unsigned(Top);
  }
  return Rd.onlyKeys({"global_batch", "fix", "dims", "batch_dim", "freeze",
                      "tp_across_nodes", "top"});
}

static Error decodeMemory(const Attribute &A, std::vector<StageMemory> &Out) {
  if (!A.isa(Attribute::Kind::List))
    return planError("'predicted_memory' is not an array of objects");
  for (size_t I = 0; I != A.getList().size(); ++I) {
    const Attribute &E = A.getList()[I];
    if (!E.isa(Attribute::Kind::Dict))
      return planError("'predicted_memory' is not an array of objects");
    std::string Prefix = ("predicted_memory[" + Twine(I) + "].").str();
    DictReader Rd(E.getDict(), Prefix);
    StageMemory M;
    for (const auto &[Key, Field] : StageMemoryKeys)
      if (Error Err = Rd.integer(Key, 0, M.*Field))
        return Err;
    Out.push_back(M);
  }
  return Error::success();
}

Expected<PlanRecord> autopar::decodePlan(const AttrDict &Attrs) {
  DictReader Rd(Attrs, "");
  PlanRecord R;
  if (Error E = Rd.onlyKeys({"autopar_version", "model", "model_sha256",
                             "global_batch", "cluster", "inputs", "model_shape",
                             "plan", "predicted_memory", "training_pipelines"}))
    return E;
  if (Error E = Rd.string("autopar_version", R.AutoparVersion))
    return E;
  if (Error E = Rd.string("model", R.Model))
    return E;
  if (Error E = Rd.string("model_sha256", R.ModelSha256))
    return E;
  if (Error E = Rd.integer("global_batch", 1, R.GlobalBatch))
    return E;

  Expected<const AttrDict *> Cluster = Rd.dict("cluster");
  if (!Cluster)
    return Cluster.takeError();
  R.Cluster = Attribute::getDict(**Cluster);
  DictReader C(**Cluster, "cluster.");
  if (Error E = C.string("name", R.ClusterName))
    return E;
  if (Error E = C.integer("num_gpus", 1, R.NumGpus))
    return E;
  if (Error E = C.integer("gpus_per_node", 1, R.GpusPerNode))
    return E;

  if (Rd.has("inputs")) {
    Expected<const AttrDict *> In = Rd.dict("inputs");
    if (!In)
      return In.takeError();
    R.Inputs.emplace();
    if (Error E = decodeInputs(**In, *R.Inputs))
      return E;
  }

  Expected<const AttrDict *> Shape = Rd.dict("model_shape");
  if (!Shape)
    return Shape.takeError();
  DictReader S(**Shape, "model_shape.");
  for (const auto &[Key, Field, Min] : ModelShapeKeys)
    if (Error E = S.integer(Key, Min, R.Shape.*Field))
      return E;
  if (Error E = S.integers("layers_per_stage", 0, R.Shape.LayersPerStage))
    return E;

  Expected<const AttrDict *> Plan = Rd.dict("plan");
  if (!Plan)
    return Plan.takeError();
  if (Error E = decodeConfig(**Plan, R.Config, R.Predicted))
    return E;

  if (const Attribute *M = Attrs.get("predicted_memory"))
    if (Error E = decodeMemory(*M, R.Memory))
      return E;
  if (Rd.has("training_pipelines"))
    if (Error E = Rd.strings("training_pipelines", R.TrainingPipelines))
      return E;
  return R;
}

Expected<PlanRecord> autopar::getModulePlan(const Module &M) {
  if (M.getAttrs().empty())
    return planError("the module records no plan (no module attributes)");
  return decodePlan(M.getAttrs());
}

Error autopar::checkPlanInvariants(const PlanRecord &R, StringRef Prefix) {
  Error All = Error::success();
  auto Fail = [&](const Twine &Message) {
    All = joinErrors(std::move(All), planError(Prefix + Message));
  };
  const PlanConfig &P = R.Config;
  int64_t Batch = P.getGlobalBatch();
  if (R.GlobalBatch != Batch)
    Fail("global_batch " + Twine(R.GlobalBatch) +
         " != plan.mbs * plan.num_microbatches * plan.dp = " +
         Twine(P.MicroBatch) + " * " + Twine(P.MicroBatches) + " * " +
         Twine(P.DP) + " = " + Twine(Batch));
  int64_t Gpus = P.getNumGpus();
  if (R.NumGpus != Gpus)
    Fail("plan.tp * plan.pp * plan.dp = " + Twine(P.TP) + " * " + Twine(P.PP) +
         " * " + Twine(P.DP) + " = " + Twine(Gpus) + " != cluster.num_gpus " +
         Twine(R.NumGpus));
  if (R.NumGpus > R.GpusPerNode && R.NumGpus % R.GpusPerNode != 0)
    Fail("cluster.num_gpus " + Twine(R.NumGpus) +
         " is not a whole number of nodes of cluster.gpus_per_node " +
         Twine(R.GpusPerNode));
  int64_t Stages = int64_t(P.PP) * P.VPP;
  const std::vector<int64_t> &LPS = R.Shape.LayersPerStage;
  if (int64_t(LPS.size()) != Stages)
    Fail("model_shape.layers_per_stage has " + Twine(LPS.size()) +
         " entries, expected plan.pp * plan.vpp = " + Twine(Stages));
  int64_t Sum = 0;
  for (int64_t L : LPS)
    Sum += L;
  if (Sum != R.Shape.Layers)
    Fail("model_shape.layers_per_stage sums to " + Twine(Sum) +
         ", expected model_shape.layers " + Twine(R.Shape.Layers));
  if (int64_t(P.StageUnits.size()) != Stages)
    Fail("plan.stage_layers has " + Twine(P.StageUnits.size()) +
         " entries, expected plan.pp * plan.vpp = " + Twine(Stages));
  if (R.Shape.Heads % P.TP != 0)
    Fail("model_shape.heads " + Twine(R.Shape.Heads) +
         " is not divisible by plan.tp " + Twine(P.TP));
  if (P.Schedule == ScheduleKind::Interleaved) {
    if (P.VPP < 2)
      Fail("the interleaved schedule needs plan.vpp >= 2, got " + Twine(P.VPP));
    if (P.MicroBatches % P.PP != 0)
      Fail("the interleaved schedule needs plan.num_microbatches (" +
           Twine(P.MicroBatches) + ") to be a multiple of plan.pp (" +
           Twine(P.PP) + ")");
  } else if (P.VPP != 1) {
    Fail("the " + getScheduleName(P.Schedule) +
         " schedule needs plan.vpp == 1, got " + Twine(P.VPP));
  }
  if (P.GradReduce != Precision::FP32 && P.GradReduce != P.TrainPrecision)
    Fail("plan.grad_reduce " + getPrecisionName(P.GradReduce) +
         " must be fp32 or plan.precision " +
         getPrecisionName(P.TrainPrecision));
  if (offloadsParameters(P.Offload) && P.Zero != 3)
    Fail("plan.offload " + getOffloadName(P.Offload) +
         " offloads parameters, which needs plan.zero_stage 3, got " +
         Twine(P.Zero));
  if (P.Offload != OffloadKind::None && P.Zero == 0)
    Fail("plan.offload " + getOffloadName(P.Offload) +
         " needs plan.zero_stage >= 1");
  if (!R.Memory.empty() && R.Memory.size() != P.PP)
    Fail("predicted_memory has " + Twine(R.Memory.size()) +
         " entries, expected plan.pp = " + Twine(P.PP));
  return All;
}

//===----------------------------------------------------------------------===//
// plan.json
//===----------------------------------------------------------------------===//

std::string autopar::planToJSON(const PlanRecord &R) {
  return formatv("{0:2}", attributeToJSON(Attribute::getDict(encodePlan(R))))
             .str() +
         "\n";
}

Expected<PlanRecord> autopar::parsePlanJSON(StringRef Text,
                                            StringRef FileName) {
  Expected<json::Value> Doc = json::parse(Text);
  if (!Doc)
    return planError(FileName +
                     ": not valid JSON: " + toString(Doc.takeError()));
  if (!Doc->getAsObject())
    return planError(FileName + ": the document is not an object");
  Attribute A = attributeFromJSON(*Doc);
  Expected<PlanRecord> R = decodePlan(A.getDict());
  if (!R)
    return planError(FileName + ": " + toString(R.takeError()));
  R->FileName = FileName.str();
  return R;
}

//===- TrainingCostTest.cpp - The per-op model against published formulas -===//
//
// A GPT graph written the way exporters spell it (LayerNorm, fused QKV
// Linear and Split, heads by Reshape/Transpose, MatMul scores, scale, mask,
// Softmax, Dropout, MatMul, projection, Dropout, residual; MLP with GELU)
// must give, from the per-op rules alone:
// - Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
//   Transformer Models"), Table 2: activation bytes per layer sbh(34 +
//   5as/h) without parallelism, sbh(10 + 24/t + 5as/(ht)) with tensor
//   parallelism, sbh(34/t + 5as/(ht)) with sequence parallelism too,
//   34sbh/t with selective recomputation, 2sbh (2sbh/t) with full.
// - Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training
//   on GPU Clusters Using Megatron-LM"), section 5.1: 96Bslh^2(1 + s/6h +
//   V/16lh) FLOPs per iteration with full recomputation.
//
//===----------------------------------------------------------------------===//

#include "cost/ActivationMemory.h"
#include "cost/GemmEfficiency.h"
#include "cost/HeldParams.h"
#include "cost/OpCost.h"
#include "ir/Graph.h"
#include "ir/OpLoops.h"
#include "ir/Parser.h"
#include "planner/ModelProfile.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

using namespace autopar;
using namespace llvm;

namespace {

struct GptShape {
  int64_t B, S, H, A, V, L;
  bool FusedAttention = false;
  /// The fused Attention drops its probabilities (fuse-attention's form of
  /// the unfused graph's Dropout).
  bool AttentionDropout = false;
};

/// One layer in the text form; %x{I} in, %x{I+1} out.
std::string layerText(const GptShape &G, int I) {
  int64_t D = G.H / G.A;
  std::string T = R"(
  %ln1_{0} = LayerNormalization(%x{0}, %g1_{0}, %be1_{0}) {axis = -1} : f32[{B}, {S}, {H}]
  %qkv_{0} = Linear(%ln1_{0}, %wqkv_{0}, %bqkv_{0}) : f32[{B}, {S}, {H3}]
  %q_{0}, %k_{0}, %v_{0} = Split(%qkv_{0}, %sizes) {axis = 2} : f32[{B}, {S}, {H}], f32[{B}, {S}, {H}], f32[{B}, {S}, {H}]
  %qr_{0} = Reshape(%q_{0}, %heads) : f32[{B}, {S}, {A}, {D}]
  %kr_{0} = Reshape(%k_{0}, %heads) : f32[{B}, {S}, {A}, {D}]
  %vr_{0} = Reshape(%v_{0}, %heads) : f32[{B}, {S}, {A}, {D}]
  %qt_{0} = Transpose(%qr_{0}) {perm = [0, 2, 1, 3]} : f32[{B}, {A}, {S}, {D}]
  %kt_{0} = Transpose(%kr_{0}) {perm = [0, 2, 1, 3]} : f32[{B}, {A}, {S}, {D}]
  %vt_{0} = Transpose(%vr_{0}) {perm = [0, 2, 1, 3]} : f32[{B}, {A}, {S}, {D}]
)";
  if (G.FusedAttention && G.AttentionDropout)
    T +=
        R"(  %ctx_{0} = Attention(%qt_{0}, %kt_{0}, %vt_{0}) {dropout = 0.1, is_causal = 1} : f32[{B}, {A}, {S}, {D}]
)";
  else if (G.FusedAttention)
    T +=
        R"(  %ctx_{0} = Attention(%qt_{0}, %kt_{0}, %vt_{0}) {is_causal = 1} : f32[{B}, {A}, {S}, {D}]
)";
  else
    T +=
        R"(  %ktt_{0} = Transpose(%kt_{0}) {perm = [0, 1, 3, 2]} : f32[{B}, {A}, {D}, {S}]
  %sc_{0} = MatMul(%qt_{0}, %ktt_{0}) : f32[{B}, {A}, {S}, {S}]
  %scd_{0} = Div(%sc_{0}, %scale) : f32[{B}, {A}, {S}, {S}]
  %scm_{0} = Add(%scd_{0}, %mask) : f32[{B}, {A}, {S}, {S}]
  %p_{0} = Softmax(%scm_{0}) {axis = -1} : f32[{B}, {A}, {S}, {S}]
  %pd_{0} = Dropout(%p_{0}, %ratio, %train) : f32[{B}, {A}, {S}, {S}]
  %ctx_{0} = MatMul(%pd_{0}, %vt_{0}) : f32[{B}, {A}, {S}, {D}]
)";
  T +=
      R"(  %ct_{0} = Transpose(%ctx_{0}) {perm = [0, 2, 1, 3]} : f32[{B}, {S}, {A}, {D}]
  %cm_{0} = Reshape(%ct_{0}, %merged) : f32[{B}, {S}, {H}]
  %o_{0} = Linear(%cm_{0}, %wo_{0}, %bo_{0}) : f32[{B}, {S}, {H}]
  %od_{0} = Dropout(%o_{0}, %ratio, %train) : f32[{B}, {S}, {H}]
  %r_{0} = Add(%x{0}, %od_{0}) : f32[{B}, {S}, {H}]
  %ln2_{0} = LayerNormalization(%r_{0}, %g2_{0}, %be2_{0}) {axis = -1} : f32[{B}, {S}, {H}]
  %f1_{0} = Linear(%ln2_{0}, %w1_{0}, %bf1_{0}) : f32[{B}, {S}, {H4}]
  %ge_{0} = Gelu(%f1_{0}) : f32[{B}, {S}, {H4}]
  %f2_{0} = Linear(%ge_{0}, %w2_{0}, %bf2_{0}) : f32[{B}, {S}, {H}]
  %fd_{0} = Dropout(%f2_{0}, %ratio, %train) : f32[{B}, {S}, {H}]
  %x{1} = Add(%r_{0}, %fd_{0}) : f32[{B}, {S}, {H}]
)";
  std::string Params = R"(  param %g1_{0}: f32[{H}]
  param %be1_{0}: f32[{H}]
  param %wqkv_{0}: f32[{H}, {H3}]
  param %bqkv_{0}: f32[{H3}]
  param %wo_{0}: f32[{H}, {H}]
  param %bo_{0}: f32[{H}]
  param %g2_{0}: f32[{H}]
  param %be2_{0}: f32[{H}]
  param %w1_{0}: f32[{H}, {H4}]
  param %bf1_{0}: f32[{H4}]
  param %w2_{0}: f32[{H4}, {H}]
  param %bf2_{0}: f32[{H}]
)";
  std::string All = Params + T;
  // Substitute the names (formatv would need every brace escaped).
  StringMap<std::string> Subst = {
      {"{0}", std::to_string(I)},        {"{1}", std::to_string(I + 1)},
      {"{B}", std::to_string(G.B)},      {"{S}", std::to_string(G.S)},
      {"{H}", std::to_string(G.H)},      {"{H3}", std::to_string(3 * G.H)},
      {"{H4}", std::to_string(4 * G.H)}, {"{A}", std::to_string(G.A)},
      {"{D}", std::to_string(D)}};
  std::string Out;
  for (size_t P = 0; P < All.size();) {
    bool Done = false;
    if (All[P] == '{')
      for (const auto &E : Subst)
        if (StringRef(All).substr(P).startswith(E.getKey())) {
          Out += E.getValue();
          P += E.getKey().size();
          Done = true;
          break;
        }
    if (!Done)
      Out += All[P++];
  }
  return Out;
}

/// Pattern with {N} replaced by Args[N] and {{ by {.
std::string fillList(StringRef Pattern, const std::vector<int64_t> &A) {
  std::string Out;
  for (size_t P = 0; P < Pattern.size(); ++P) {
    if (Pattern.substr(P).startswith("{{")) {
      Out += '{';
      ++P;
    } else if (Pattern[P] == '{' && P + 2 < Pattern.size() &&
               Pattern[P + 2] == '}' && isdigit(Pattern[P + 1])) {
      Out += std::to_string(A[Pattern[P + 1] - '0']);
      P += 2;
    } else {
      Out += Pattern[P];
    }
  }
  return Out;
}

template <typename... Ts> std::string fill(StringRef Pattern, Ts... Args) {
  return fillList(Pattern, {int64_t(Args)...});
}

std::string gptText(const GptShape &G) {
  int64_t D = G.H / G.A;
  std::string T = fill("graph @gpt(%ids: i64[{0}, {1}]) {{\n", G.B, G.S);
  T += fill("  param %wte: f32[{0}, {1}]\n  param %wpe: f32[{2}, {1}]\n"
            "  param %mask: f32[{2}, {2}]\n  param %gf: f32[{1}]\n"
            "  param %bf: f32[{1}]\n",
            G.V, G.H, G.S);
  T += fill("  %sizes = Constant() {{value = dense<i64[3], [{0}, {0}, "
            "{0}]>} : i64[3]\n",
            G.H);
  T += fill("  %heads = Constant() {{value = dense<i64[4], [{0}, {1}, {2}, "
            "{3}]>} : i64[4]\n",
            G.B, G.S, G.A, D);
  T += fill("  %merged = Constant() {{value = dense<i64[3], [{0}, {1}, "
            "{2}]>} : i64[3]\n",
            G.B, G.S, G.H);
  T += "  %scale = Constant() {value = dense<f32[], [8.0]>} : f32[]\n";
  T += "  %ratio = Constant() {value = dense<f32[], [0.1]>} : f32[]\n";
  T += "  %train = Constant() {value = dense<bool[], [true]>} : bool[]\n";
  T +=
      fill("  %emb = Gather(%wte, %ids) : f32[{0}, {1}, {2}]\n", G.B, G.S, G.H);
  T += fill("  %x0 = Add(%emb, %wpe) : f32[{0}, {1}, {2}]\n", G.B, G.S, G.H);
  for (int I = 0; I != G.L; ++I)
    T += layerText(G, I);
  T += fill("  %lnf = LayerNormalization(%x{0}, %gf, %bf) {{axis = -1} : "
            "f32[{1}, {2}, {3}]\n",
            G.L, G.B, G.S, G.H);
  T += fill("  %wt = Transpose(%wte) {{perm = [1, 0]} : f32[{0}, {1}]\n", G.H,
            G.V);
  T += fill("  %logits = MatMul(%lnf, %wt) : f32[{0}, {1}, {2}]\n", G.B, G.S,
            G.V);
  T += "  return %logits\n}\n";
  return T;
}

class GptModel {
public:
  explicit GptModel(const GptShape &G) : Shape(G) {
    auto Buf = MemoryBuffer::getMemBufferCopy(gptText(G), "gpt.air");
    SM.AddNewSourceBuffer(std::move(Buf), SMLoc());
    DiagnosticEngine Diag(&SM, "gpt.air", errs());
    M = parseModule(SM, Diag);
  }
  bool ok() const { return M && M->getGraphs().size() == 1; }
  Graph &graph() { return *M->getGraphs().front(); }

  /// The nodes of layer I: results named with the suffix _I, plus the add
  /// that defines %x{I+1}.
  std::vector<const Node *> layer(int I) {
    std::vector<const Node *> Out;
    std::string Suffix = "_" + std::to_string(I);
    std::string Next = "x" + std::to_string(I + 1);
    for (const Node &N : graph().getNodes()) {
      StringRef Name = N.getResult(0)->getName();
      if (Name.endswith(Suffix) || Name == Next)
        Out.push_back(&N);
    }
    return Out;
  }

  GptShape Shape;

private:
  SourceMgr SM;
  std::unique_ptr<Module> M;
};

/// A module from its text form, whose locations point into SM; null (with
/// the diagnostics on stderr) when it does not parse.
std::unique_ptr<Module> parseText(SourceMgr &SM, const char *Text,
                                  StringRef Name) {
  SM.AddNewSourceBuffer(MemoryBuffer::getMemBufferCopy(Text, Name), SMLoc());
  DiagnosticEngine Diag(&SM, Name, errs());
  return parseModule(SM, Diag);
}

/// Megatron-LM's layout: QKV and the first MLP product split their output
/// columns, the projections their contraction, heads in between; with
/// sequence parallelism the norms, dropouts and residual adds split the
/// sequence.
LoopSplit megatronSplit(const Node &N, int64_t T, bool SequenceParallel) {
  StringRef Name = N.getResult(0)->getName().split('_').first;
  static const StringMap<int> HeadLoop = {
      {"qkv", 2}, {"q", 2},  {"qr", 2},  {"kr", 2}, {"vr", 2},  {"qt", 2},
      {"kt", 2},  {"vt", 2}, {"ktt", 1}, {"sc", 1}, {"scd", 1}, {"scm", 1},
      {"p", 1},   {"pd", 1}, {"ctx", 1}, {"ct", 1}, {"cm", 2},  {"f1", 2},
      {"ge", 2},  {"o", 3},  {"f2", 3}};
  auto It = HeadLoop.find(Name);
  if (It != HeadLoop.end())
    return {It->second, T};
  bool IsSeqOp = Name == "ln1" || Name == "ln2" || Name == "od" ||
                 Name == "fd" || Name == "r" || Name.startswith("x");
  if (SequenceParallel && IsSeqOp)
    return {1, T};
  return {};
}

double layerActivationBytes(GptModel &M, int64_t T, bool SP, Recompute R,
                            const CostSettings &Settings) {
  GradientFlow Flow(M.graph());
  std::vector<const Node *> Nodes = M.layer(0);
  // Check that every chosen split is legal.
  for (const Node *N : Nodes) {
    LoopSplit Split = megatronSplit(*N, T, SP);
    if (Split.Degree > 1) {
      std::optional<OpLoops> Loops = getOpLoops(*N);
      EXPECT_TRUE(Loops && canSplitLoop(*N, *Loops, Split.Loop, T))
          << N->getResult(0)->getName().str();
    }
  }
  return savedActivationBytes(
      Nodes, [&](const Node &N) { return megatronSplit(N, T, SP); }, R, Flow,
      Settings);
}

// s=2048, b=2, h=1536, a=16: the LayerNorm statistics (8 bytes per row for
// two norms) are the only bytes the formulas leave out, 16sb against
// 34sbh: 0.03%.
constexpr double Tolerance = 1e-3;

TEST(TrainingCost, KorthikantiActivationsPerLayer) {
  GptShape G{/*B=*/2,  /*S=*/2048, /*H=*/1536,
             /*A=*/16, /*V=*/1024, /*L=*/1};
  GptModel M(G);
  ASSERT_TRUE(M.ok());
  CostSettings Bf16;
  double sbh = double(G.S) * G.B * G.H, as_h = double(G.A) * G.S / G.H;

  double None = layerActivationBytes(M, 1, false, Recompute::None, Bf16);
  EXPECT_NEAR(None / (sbh * (34 + 5 * as_h)), 1.0, Tolerance);

  for (int64_t T : {2, 4, 8}) {
    double Tp = layerActivationBytes(M, T, false, Recompute::None, Bf16);
    EXPECT_NEAR(Tp / (sbh * (10 + 24.0 / T + 5 * as_h / T)), 1.0, Tolerance)
        << "t=" << T;
    double Sp = layerActivationBytes(M, T, true, Recompute::None, Bf16);
    EXPECT_NEAR(Sp / (sbh * (34.0 / T + 5 * as_h / T)), 1.0, Tolerance)
        << "t=" << T;
    double Full = layerActivationBytes(M, T, true, Recompute::Full, Bf16);
    EXPECT_NEAR(Full / (2 * sbh / T), 1.0, Tolerance) << "t=" << T;
  }
  double Full = layerActivationBytes(M, 1, false, Recompute::Full, Bf16);
  EXPECT_NEAR(Full / (2 * sbh), 1.0, Tolerance);

  // fuse-attention's Attention {dropout} keeps what the unfused softmax and
  // dropout kept: the probabilities, the mask and the dropped probabilities.
  GptShape FG = G;
  FG.FusedAttention = FG.AttentionDropout = true;
  GptModel FM(FG);
  ASSERT_TRUE(FM.ok());
  for (int64_t T : {1, 8}) {
    double Fused = layerActivationBytes(FM, T, false, Recompute::None, Bf16);
    EXPECT_NEAR(Fused / (sbh * (10 + 24.0 / T + 5 * as_h / T)), 1.0, Tolerance)
        << "t=" << T;
  }
}

TEST(TrainingCost, RecomputedLayerHoldsGatheredValuesWhole) {
  // A layer recomputed for its backward gathers its values again: under
  // sequence parallelism the two LayerNorm outputs the products read are
  // whole (2sbh bytes each), not the split copies a kept layer holds.
  GptShape G{/*B=*/2,  /*S=*/2048, /*H=*/1536,
             /*A=*/16, /*V=*/1024, /*L=*/1};
  GptModel M(G);
  ASSERT_TRUE(M.ok());
  CostSettings Bf16;
  GradientFlow Flow(M.graph());
  std::vector<const Node *> Nodes = M.layer(0);
  double sbh = double(G.S) * G.B * G.H;
  for (int64_t T : {2, 8}) {
    for (bool SP : {false, true}) {
      double Kept = layerActivationBytes(M, T, SP, Recompute::None, Bf16);
      double Recomputed = recomputedActivationBytes(
          Nodes, [&](const Node &N) { return megatronSplit(N, T, SP); }, Flow,
          Bf16);
      double Gathered = SP ? 2 * 2 * sbh * (1 - 1.0 / T) : 0;
      EXPECT_NEAR(Recomputed / (Kept + Gathered), 1.0, Tolerance)
          << "t=" << T << " sp=" << SP;
    }
  }
}

TEST(TrainingCost, SelectiveRecomputationDropsTheAttentionCore) {
  // With the fused Attention op: the core's probabilities are the 2as^2b
  // term (no attention dropout); selective recomputation removes it.
  GptShape G{2, 2048, 1536, 16, 1024, 1, /*FusedAttention=*/true};
  GptModel M(G);
  ASSERT_TRUE(M.ok());
  CostSettings Bf16;
  double sbh = double(G.S) * G.B * G.H, as_h = double(G.A) * G.S / G.H;
  double None = layerActivationBytes(M, 1, false, Recompute::None, Bf16);
  EXPECT_NEAR(None / (sbh * (34 + 2 * as_h)), 1.0, Tolerance);
  for (int64_t T : {1, 4, 8}) {
    double Sel = layerActivationBytes(M, T, true, Recompute::Selective, Bf16);
    EXPECT_NEAR(Sel / (34 * sbh / T), 1.0, Tolerance) << "t=" << T;
  }
  // A fused kernel keeps the output and the log-sum-exp, not the scores;
  // its output is the output projection's input, kept once (34sbh has it).
  CostSettings Flash;
  Flash.Attention = AttentionKernel::Flash;
  double Fused = layerActivationBytes(M, 1, false, Recompute::None, Flash);
  EXPECT_NEAR(Fused / (34 * sbh), 1.0, 2e-3);
}

TEST(TrainingCost, NarayananFlopsPerIteration) {
  // 1.7B-like, scaled down in vocabulary and layers to keep the test fast.
  GptShape G{/*B=*/1, /*S=*/2048, /*H=*/2304, /*A=*/24, /*V=*/51200,
             /*L=*/4};
  GptModel M(G);
  ASSERT_TRUE(M.ok());
  GradientFlow Flow(M.graph());
  DeviceSpec Device = *lookupDevice("a100-80gb");
  CostSettings Settings;
  double ProductFlops = 0, AllFlops = 0;
  for (const Node &N : M.graph().getNodes()) {
    NodeCost C =
        getNodeCost(N, getOpLoops(N), LoopSplit(), Device, Settings, Flow);
    // Full recomputation runs each layer's forward twice; the head's once.
    bool InLayer = N.getResult(0)->getName() != "logits";
    double Iteration = C.FwdFlops * (InLayer ? 2 : 1) + C.BwdFlops;
    AllFlops += Iteration;
    if (N.getOp() == OpId::MatMul || N.getOp() == OpId::Linear)
      ProductFlops += Iteration;
  }
  double B = G.B, s = G.S, l = G.L, h = G.H, V = G.V;
  double Formula =
      96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  // The formula counts the products; the per-op model must agree on them
  // exactly and add little for the rest (norms, softmax, GELU, dropout).
  EXPECT_NEAR(ProductFlops / Formula, 1.0, 1e-9);
  EXPECT_GT(AllFlops, ProductFlops);
  EXPECT_LT(AllFlops / Formula, 1.03);
}

TEST(TrainingCost, TensorParallelSplitDividesTime) {
  GptShape G{1, 2048, 4096, 32, 1024, 1};
  GptModel M(G);
  ASSERT_TRUE(M.ok());
  GradientFlow Flow(M.graph());
  DeviceSpec Device = *lookupDevice("a100-80gb");
  CostSettings Settings;
  for (const Node *N : M.layer(0)) {
    if (N->getOp() != OpId::Linear)
      continue;
    std::optional<OpLoops> Loops = getOpLoops(*N);
    NodeCost Whole = getNodeCost(*N, Loops, {}, Device, Settings, Flow);
    NodeCost Half = getNodeCost(*N, Loops, megatronSplit(*N, 2, false), Device,
                                Settings, Flow);
    EXPECT_DOUBLE_EQ(Half.FwdFlops * 2, Whole.FwdFlops);
    EXPECT_LT(Half.FwdSeconds, Whole.FwdSeconds);
    EXPECT_GT(Half.FwdSeconds, Whole.FwdSeconds / 2.5);
    EXPECT_GT(Whole.BwdSeconds, 1.5 * Whole.FwdSeconds);
  }
}

// A convolution costs the GEMM of its im2col form: [N * output positions,
// in-channels * kernel] x [in-channels * kernel, out-channels].
TEST(TrainingCost, ConvolutionCostsItsIm2colGemm) {
  const char *Text =
      R"(graph @cnn(%x: f32[8, 64, 56, 56], %rows: f32[25088, 576]) {
  param %w: f32[128, 64, 3, 3]
  param %wm: f32[576, 128]
  %y = Conv(%x, %w, _) {pads = [1, 1, 1, 1]} : f32[8, 128, 56, 56]
  %z = MatMul(%rows, %wm) : f32[25088, 128]
  return %y, %z
}
)";
  SourceMgr SM;
  std::unique_ptr<Module> M = parseText(SM, Text, "cnn.air");
  ASSERT_TRUE(M && M->getGraphs().size() == 1);
  Graph &G = *M->getGraphs().front();
  GradientFlow Flow(G);
  CostSettings Settings;
  for (const char *Name : {"a100-80gb", "cpu"}) {
    DeviceSpec Device = *lookupDevice(Name);
    const Node *Conv = nullptr, *Gemm = nullptr;
    for (const Node &N : G.getNodes())
      (N.getOp() == OpId::Conv ? Conv : Gemm) = &N;
    ASSERT_TRUE(Conv && Gemm);
    NodeCost C =
        getNodeCost(*Conv, getOpLoops(*Conv), {}, Device, Settings, Flow);
    NodeCost R =
        getNodeCost(*Gemm, getOpLoops(*Gemm), {}, Device, Settings, Flow);
    EXPECT_DOUBLE_EQ(C.FwdFlops, 2.0 * 25088 * 576 * 128);
    EXPECT_DOUBLE_EQ(C.FwdFlops, R.FwdFlops);
    // The same GEMM; the convolution moves its own (smaller) input.
    EXPECT_NEAR(C.FwdSeconds, R.FwdSeconds, 0.05 * R.FwdSeconds) << Name;
  }
}

// A concatenation splits along its axis only when its pieces are equal:
// ranks hold their block of each piece (a fused QKV), which a [pieces,
// n / pieces] view expresses; unequal pieces (an Inception block's
// branches) keep the axis whole.
TEST(TrainingCost, ConcatSplitsItsAxisOnlyForEqualPieces) {
  const char *Text =
      R"(graph @cat(%a: f32[2, 4], %b: f32[2, 4], %c: f32[2, 2]) {
  %equal = Concat(%a, %b) {axis = 1} : f32[2, 8]
  %unequal = Concat(%a, %c) {axis = 1} : f32[2, 6]
  return %equal, %unequal
}
)";
  SourceMgr SM;
  std::unique_ptr<Module> M = parseText(SM, Text, "cat.air");
  ASSERT_TRUE(M && M->getGraphs().size() == 1);
  for (const Node &N : M->getGraphs().front()->getNodes()) {
    std::optional<OpLoops> L = getOpLoops(N);
    ASSERT_TRUE(L);
    int Axis = L->Results[0][1];
    ASSERT_NE(Axis, OpLoops::NoLoop);
    bool Equal = N.getResult(0)->getName() == "equal";
    EXPECT_EQ(L->Kinds[Axis], Equal ? LoopKind::Parallel : LoopKind::Fixed);
    EXPECT_EQ(L->Kinds[L->Results[0][0]], LoopKind::Parallel);
  }
}

// Attention priced kernel by kernel. Materialized: Q K^T, the softmax and
// P V each a kernel whose times add, the scores written once and read three
// times forward. Flash: one kernel over Q, K, V and the output, a causal
// mask skipping blocks (1.75x), the backward recomputing Q K^T in time but
// not in model FLOPs.
TEST(TrainingCost, AttentionKernelsFlashAndMaterialized) {
  const char *Text =
      R"(graph @attn(%x: f32[1, 16, 2048, 128]) {
  param %pq: f32[1, 16, 2048, 128]
  param %pk: f32[1, 16, 2048, 128]
  param %pv: f32[1, 16, 2048, 128]
  %q = Add(%x, %pq) : f32[1, 16, 2048, 128]
  %k = Add(%x, %pk) : f32[1, 16, 2048, 128]
  %v = Add(%x, %pv) : f32[1, 16, 2048, 128]
  %causal = Attention(%q, %k, %v) {is_causal = 1} : f32[1, 16, 2048, 128]
  %full = Attention(%q, %k, %v) : f32[1, 16, 2048, 128]
  %dropped = Attention(%q, %k, %v) {dropout = 0.1} : f32[1, 16, 2048, 128]
  return %causal, %full, %dropped
}
)";
  SourceMgr SM;
  std::unique_ptr<Module> M = parseText(SM, Text, "attn.air");
  ASSERT_TRUE(M && M->getGraphs().size() == 1);
  Graph &G = *M->getGraphs().front();
  GradientFlow Flow(G);
  // The kernels' isolated rates; the sustained fraction is checked last.
  DeviceSpec Device = *lookupDevice("a100-80gb");
  Device.SustainedFraction = 1;
  CostSettings Mat, Flash;
  Flash.Attention = AttentionKernel::Flash;
  const Node *Causal = nullptr, *Full = nullptr, *Dropped = nullptr;
  for (const Node &N : G.getNodes())
    if (N.getOp() == OpId::Attention) {
      StringRef Name = N.getResult(0)->getName();
      (Name == "causal" ? Causal : Name == "full" ? Full : Dropped) = &N;
    }
  ASSERT_TRUE(Causal && Full && Dropped);
  auto Cost = [&](const Node *N, const CostSettings &S) {
    return getNodeCost(*N, getOpLoops(*N), {}, Device, S, Flow);
  };
  double IO = 4.0 * 16 * 2048 * 128 * 2, S = 16.0 * 2048 * 2048 * 2;
  double Bw = Device.achievableHbmBytesPerSec();
  double QK = gemmSeconds(Device, Precision::BF16, 2048, 2048, 128, 16);
  double PV = gemmSeconds(Device, Precision::BF16, 2048, 128, 2048, 16);

  NodeCost M1 = Cost(Full, Mat);
  EXPECT_DOUBLE_EQ(M1.FwdBytes, IO + 4 * S);
  EXPECT_GE(M1.FwdSeconds, QK + PV + 2 * S / Bw);
  EXPECT_DOUBLE_EQ(M1.BwdFlops, 2 * M1.FwdFlops);
  // The materialized path computes every score: a causal mask saves nothing.
  EXPECT_DOUBLE_EQ(Cost(Causal, Mat).FwdSeconds, M1.FwdSeconds);

  NodeCost F1 = Cost(Full, Flash), FC = Cost(Causal, Flash);
  EXPECT_DOUBLE_EQ(F1.FwdBytes, IO);
  EXPECT_DOUBLE_EQ(F1.FwdFlops, M1.FwdFlops);
  EXPECT_DOUBLE_EQ(F1.BwdFlops, 2 * F1.FwdFlops);
  EXPECT_NEAR(F1.FwdSeconds, QK + PV + Device.KernelLaunchSec, 1e-12);
  EXPECT_LT(F1.FwdSeconds, M1.FwdSeconds);
  EXPECT_NEAR((FC.FwdSeconds - Device.KernelLaunchSec) * 1.75,
              F1.FwdSeconds - Device.KernelLaunchSec, 1e-9);
  // Backward: five products (Q K^T again, dV, dP, dQ, dK) to forward's two.
  EXPECT_NEAR(F1.BwdSeconds / F1.FwdSeconds, 2.5, 0.2);
  EXPECT_GT(M1.BwdSeconds, F1.BwdSeconds);

  // Dropout on materialized probabilities is one more kernel each way (it
  // reads P, writes the dropped P and a byte of mask per score); flash
  // drops inside its kernel.
  NodeCost MD = Cost(Dropped, Mat);
  double Pass = 2 * S + S / 2;
  EXPECT_DOUBLE_EQ(MD.FwdBytes, M1.FwdBytes + Pass);
  EXPECT_DOUBLE_EQ(MD.BwdBytes, M1.BwdBytes + Pass);
  EXPECT_NEAR(MD.FwdSeconds - M1.FwdSeconds, Pass / Bw + Device.KernelLaunchSec,
              1e-12);
  EXPECT_DOUBLE_EQ(MD.FwdFlops, M1.FwdFlops);
  EXPECT_DOUBLE_EQ(Cost(Dropped, Flash).FwdSeconds, F1.FwdSeconds);

  // Inside a training step every kernel runs at the device's sustained
  // fraction of its isolated rate.
  DeviceSpec InStep = *lookupDevice("a100-80gb");
  ASSERT_LT(InStep.SustainedFraction, 1);
  NodeCost Slow = getNodeCost(*Full, getOpLoops(*Full), {}, InStep, Mat, Flow);
  EXPECT_DOUBLE_EQ(Slow.FwdSeconds * InStep.SustainedFraction, M1.FwdSeconds);
  EXPECT_DOUBLE_EQ(Slow.BwdSeconds * InStep.SustainedFraction, M1.BwdSeconds);
  EXPECT_DOUBLE_EQ(Slow.FwdFlops, M1.FwdFlops);
}

TEST(TrainingCost, GradientFlowSkipsDataAndIntegers) {
  GptModel M({1, 16, 64, 4, 32, 1});
  ASSERT_TRUE(M.ok());
  GradientFlow Flow(M.graph());
  for (const Node &N : M.graph().getNodes()) {
    StringRef Name = N.getResult(0)->getName();
    if (Name == "sizes" || Name == "scale") {
      EXPECT_FALSE(Flow.needsGrad(N.getResult(0)) ||
                   Flow.isActivation(N.getResult(0)));
    }
    if (Name == "emb" || Name == "logits") {
      EXPECT_TRUE(Flow.needsGrad(N.getResult(0)) &&
                  Flow.isActivation(N.getResult(0)));
    }
    if (Name == "wt") {
      // The tied head's weight transpose is computed once, not per step.
      EXPECT_TRUE(Flow.needsGrad(N.getResult(0)));
      EXPECT_FALSE(Flow.isActivation(N.getResult(0)));
    }
  }
  EXPECT_FALSE(Flow.needsGrad(M.graph().getInputs()[0].get()));
}

// The parameters units hold: a tied head holds the embedding table through
// its transpose (split as the head splits it), the embedding unit the
// position table behind a Gather at constant positions (whole).
TEST(TrainingCost, UnitsHoldParametersBehindDerivedValues) {
  const char *Text =
      R"(graph @tied(%ids: i64[2, 4]) {
  param %wte: f32[16, 8]
  param %wpe: f32[4, 8]
  %pos = Constant() {value = dense<i64[4], [0, 1, 2, 3]>} : i64[4]
  %p = Gather(%wpe, %pos) : f32[4, 8]
  %e = Gather(%wte, %ids) : f32[2, 4, 8]
  %h = Add(%e, %p) : f32[2, 4, 8]
  %wt = Transpose(%wte) {perm = [1, 0]} : f32[8, 16]
  %logits = MatMul(%h, %wt) : f32[2, 4, 16]
  return %logits
}
)";
  SourceMgr SM;
  std::unique_ptr<Module> M = parseText(SM, Text, "tied.air");
  ASSERT_TRUE(M && M->getGraphs().size() == 1);
  const Graph &G = *M->getGraphs().front();
  GradientFlow Flow(G);
  std::vector<const Node *> Embedding, Head;
  for (const Node &N : G.getNodes()) {
    StringRef Name = N.getResult(0)->getName();
    if (Name == "e" || Name == "h")
      Embedding.push_back(&N);
    if (Name == "logits")
      Head.push_back(&N);
  }
  auto Unsplit = [](unsigned) { return LoopSplit(); };
  std::vector<HeldParam> E = getHeldParams(Embedding, Unsplit, Flow);
  ASSERT_EQ(E.size(), 2u);
  EXPECT_EQ(E[0].Param->getName(), "wte");
  EXPECT_EQ(E[1].Param->getName(), "wpe");
  EXPECT_EQ(sumElements(E), 16 * 8 + 4 * 8);
  // The head splits its output columns (the vocabulary) in two: half the
  // table.
  std::optional<OpLoops> L = getOpLoops(*Head[0]);
  ASSERT_TRUE(L);
  LoopSplit Columns{L->Results[0][2], 2};
  std::vector<HeldParam> H = getHeldParams(
      Head, [&](unsigned) { return Columns; }, Flow);
  ASSERT_EQ(H.size(), 1u);
  EXPECT_EQ(H[0].Param->getName(), "wte");
  EXPECT_EQ(H[0].Elements, 16 * 8 / 2);
}

// Frozen parameters (no gradient flows into them) are left out of the
// trained ones and held at their own bytes: an int8 weight split as its
// MatMulInteger splits it, a bool mask read by two Wheres once, and a
// dequantized weight's int8 values and f32 scale behind the product's
// operand, whole. A rank holding two units that read one frozen parameter
// keeps it once (heldFrozenBytes).
TEST(TrainingCost, FrozenParametersAreHeldAtTheirOwnBytes) {
  const char *Text =
      R"(graph @frozen(%x: f32[4, 8], %c: u8[4, 8]) {
  param %w: f32[8, 8]
  param %b: i8[8, 8]
  param %mask: bool[4, 8]
  param %q: i8[8, 8]
  param %qs: f32[]
  %wd = DequantizeLinear(%q, %qs) : f32[8, 8]
  %y = MatMul(%x, %w) : f32[4, 8]
  %yi = MatMulInteger(%c, %b) : i32[4, 8]
  %z = Where(%mask, %y, %x) : f32[4, 8]
  %z2 = Where(%mask, %z, %y) : f32[4, 8]
  %d = MatMul(%z2, %wd) : f32[4, 8]
  return %yi, %d
}
)";
  SourceMgr SM;
  std::unique_ptr<Module> M = parseText(SM, Text, "frozen.air");
  ASSERT_TRUE(M && M->getGraphs().size() == 1);
  const Graph &G = *M->getGraphs().front();
  GradientFlow Flow(G);
  std::vector<const Node *> Nodes;
  const Node *Integer = nullptr;
  for (const Node &N : G.getNodes()) {
    if (N.getOp() == OpId::DequantizeLinear)
      continue;
    Nodes.push_back(&N);
    if (N.getOp() == OpId::MatMulInteger)
      Integer = &N;
  }
  ASSERT_TRUE(Integer);
  auto Unsplit = [](unsigned) { return LoopSplit(); };
  std::vector<HeldParam> Trained = getHeldParams(Nodes, Unsplit, Flow);
  ASSERT_EQ(Trained.size(), 1u);
  EXPECT_EQ(Trained[0].Param->getName(), "w");
  EXPECT_EQ(sumElements(Trained), 64);
  std::vector<HeldParam> Frozen = getFrozenParams(Nodes, Unsplit, Flow);
  ASSERT_EQ(Frozen.size(), 4u);
  EXPECT_EQ(Frozen[0].Param->getName(), "b");
  EXPECT_EQ(Frozen[1].Param->getName(), "mask");
  // %b 64 bytes, %mask 32 (once), %q 64 and %qs 4.
  EXPECT_EQ(sumFrozenBytes(Frozen), 64 + 32 + 64 + 4);
  EXPECT_EQ(getFrozenParamBytes(Nodes, Unsplit, Flow), 64 + 32 + 64 + 4);
  for (const HeldParam &H : Frozen) {
    if (H.Param->getName() == "qs") {
      EXPECT_EQ(getFrozenBytes(H), 4);
    }
  }
  // MatMulInteger split over its output columns holds half its weight.
  std::optional<OpLoops> L = getOpLoops(*Integer);
  ASSERT_TRUE(L);
  LoopSplit Columns{L->Results[0][1], 2};
  std::vector<const Node *> Only{Integer};
  EXPECT_EQ(getFrozenParamBytes(
                Only, [&](unsigned) { return Columns; }, Flow),
            32);
  EXPECT_TRUE(getHeldParams(Only, Unsplit, Flow).empty());

  // Two units read the mask: a rank holding both keeps it once.
  std::vector<UnitCost> Costs(2);
  HeldParam Mask = Frozen[1];
  for (UnitCost &C : Costs) {
    C.FrozenBytes = 32 + 10;
    C.SharedFrozen = {Mask};
  }
  std::vector<std::pair<unsigned, unsigned>> Both{{0, 2}}, Second{{1, 2}};
  EXPECT_EQ(heldFrozenBytes(Costs, Both), 32 + 10 + 10);
  EXPECT_EQ(heldFrozenBytes(Costs, Second), 32 + 10);
  EXPECT_EQ(heldParamElements(Costs, Both), 0);
}

// A chain's backward: a = x * w, b = Tanh(a), y = b * b. The excess is what
// the gradients of activations add to what the chain keeps at its worst
// node: at y's backward, dy (arriving) and db (made; b read twice is one
// gradient).
TEST(TrainingCost, BackwardExcessCountsActivationGradients) {
  const char *Text =
      R"(graph @chain(%x: f32[256]) {
  param %w: f32[256]
  %a = Mul(%x, %w) : f32[256]
  %b = Tanh(%a) : f32[256]
  %y = Mul(%b, %b) : f32[256]
  return %y
}
)";
  SourceMgr SM;
  std::unique_ptr<Module> M = parseText(SM, Text, "chain.air");
  ASSERT_TRUE(M && M->getGraphs().size() == 1);
  const Graph &G = *M->getGraphs().front();
  GradientFlow Flow(G);
  std::vector<const Node *> Nodes;
  for (const Node &N : G.getNodes())
    Nodes.push_back(&N);
  CostSettings Settings;
  Settings.Compute = Precision::FP32;
  auto Unsplit = [](const Node &) { return LoopSplit(); };
  double Saved =
      savedActivationBytes(Nodes, Unsplit, Recompute::None, Flow, Settings);
  double Excess = backwardExcessBytes(Nodes, Unsplit, Flow, Settings);
  // At the last Mul's backward: dy (arriving) and db (made) on top of all
  // that is kept; then Tanh frees b's share as it makes da.
  EXPECT_EQ(Excess, 2 * 256 * 4);
  EXPECT_GT(Saved, 0);
}

} // namespace

//===- AutodiffTest.cpp - Gradient rules against finite differences -------===//
//
// Each case is a forward program whose float parameters are the variables:
// its output Y is reduced to a scalar l = sum(Y * R) with a fixed random R
// (an input), so every element of Y's gradient matters. The autodiff pass
// appends the backward; the CPU executor runs it. Every gradient element is
// compared with the central difference (l(p + h) - l(p - h)) / 2h of the
// forward program, in fp32, within a tolerance that fp32 differences allow
// and a wrong rule does not meet.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestSupport.h"

#include "passes/PassManager.h"

#include <cmath>

using namespace autopar;
using namespace autopar::test;
using namespace llvm;

namespace {

std::unique_ptr<Module> parse(StringRef Text, SourceMgr &SM) {
  SM.AddNewSourceBuffer(MemoryBuffer::getMemBufferCopy(Text, "case.air"),
                        SMLoc());
  DiagnosticEngine Diag(&SM, "case.air");
  std::unique_ptr<Module> M = parseModule(SM, Diag);
  if (!M || failed(verifyModule(*M, Diag)))
    return nullptr;
  return M;
}

std::vector<HostTensor> run(const Graph &G, ArrayRef<HostTensor> Inputs) {
  CpuBackend Backend;
  Expected<std::unique_ptr<Executor>> Exec =
      Executor::create(G, Backend, ExecutorOptions());
  if (!Exec) {
    ADD_FAILURE() << toString(Exec.takeError());
    return {};
  }
  Expected<std::vector<HostTensor>> Out = (*Exec)->run(Inputs);
  if (!Out) {
    ADD_FAILURE() << toString(Out.takeError());
    return {};
  }
  return std::move(*Out);
}

/// Sets every float parameter of G to seeded random values; returns them.
std::vector<std::vector<float>> randomizeParams(Graph &G, uint64_t Seed) {
  Random R(Seed);
  std::vector<std::vector<float>> Values;
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    if (!isFloatElementType(P->getType().getElementType())) {
      Values.emplace_back();
      continue;
    }
    std::vector<float> V = R.vector(*P->getType().getStaticNumElements());
    Values.push_back(V);
  }
  return Values;
}

void setParams(Graph &G, const std::vector<std::vector<float>> &Values) {
  for (unsigned I = 0; I != G.getParams().size(); ++I) {
    Value *P = G.getParams()[I].get();
    if (Values[I].empty())
      continue;
    DenseTensor D(P->getType(),
                  std::vector<double>(Values[I].begin(), Values[I].end()));
    P->setWeightSource(WeightSource::getInline(std::move(D)));
  }
}

double lossOf(Graph &G, const std::vector<std::vector<float>> &Values,
              ArrayRef<HostTensor> Inputs) {
  setParams(G, Values);
  std::vector<HostTensor> Out = run(G, Inputs);
  return Out.empty() ? NAN : floatsOf(Out[0])[0];
}

/// Checks the autodiff gradients of Text's graph (output `l`, inputs given)
/// against central differences with step H; Before (passes) runs on both
/// first.
void checkGradients(StringRef Text, std::vector<HostTensor> Inputs,
                    double Tolerance = 2e-2, double H = 1e-2,
                    StringRef Before = "") {
  SourceMgr FwdSM, BwdSM;
  std::unique_ptr<Module> Fwd = parse(Text, FwdSM), Bwd = parse(Text, BwdSM);
  ASSERT_TRUE(Fwd && Bwd) << "invalid case:\n" << Text.str();
  if (!Before.empty()) {
    PassManager First;
    ASSERT_FALSE(bool(First.addPipeline(Before)));
    DiagnosticEngine Diag(&FwdSM, "case.air");
    ASSERT_TRUE(succeeded(First.run(*Fwd, Diag)));
    ASSERT_TRUE(succeeded(First.run(*Bwd, Diag)));
  }
  Graph &FG = *Fwd->getGraphs().front(), &BG = *Bwd->getGraphs().front();
  std::vector<std::vector<float>> Values = randomizeParams(FG, 7);
  setParams(BG, Values);
  PassManager PM;
  ASSERT_FALSE(bool(PM.addPipeline("autodiff{loss=l}")));
  DiagnosticEngine Diag(&BwdSM, "case.air");
  ASSERT_TRUE(succeeded(PM.run(*Bwd, Diag))) << Text.str();
  ASSERT_TRUE(succeeded(verifyModule(*Bwd, Diag)));
  std::vector<HostTensor> Out = run(BG, Inputs);
  ASSERT_FALSE(Out.empty());

  unsigned NumChecked = 0;
  for (unsigned P = 0; P != FG.getParams().size(); ++P) {
    if (Values[P].empty())
      continue;
    std::string Name = "grad." + FG.getParams()[P]->getName().str();
    const HostTensor *Grad = nullptr;
    for (unsigned I = 0; I != BG.getOutputs().size(); ++I)
      if (BG.getOutputs()[I]->getName() == Name)
        Grad = &Out[I];
    ASSERT_NE(Grad, nullptr) << "no output " << Name;
    std::vector<float> Analytic = floatsOf(*Grad);
    ASSERT_EQ(Analytic.size(), Values[P].size());
    double Scale = 1;
    for (float G : Analytic)
      Scale = std::max(Scale, double(std::fabs(G)));
    for (size_t E = 0; E != Values[P].size(); ++E) {
      std::vector<std::vector<float>> Plus = Values, Minus = Values;
      Plus[P][E] += float(H);
      Minus[P][E] -= float(H);
      double Numeric =
          (lossOf(FG, Plus, Inputs) - lossOf(FG, Minus, Inputs)) / (2 * H);
      EXPECT_NEAR(Analytic[E], Numeric, Tolerance * Scale)
          << Name << "[" << E << "]";
      ++NumChecked;
    }
  }
  EXPECT_GT(NumChecked, 0u);
}

HostTensor randomF32(ArrayRef<int64_t> Shape, uint64_t Seed) {
  Random R(Seed);
  return f32(Shape, R.vector(getNumElements(Shape)));
}

/// The program text of l = sum(BODY's %y * %r), with %r of Y's type.
std::string program(StringRef Params, StringRef Inputs, StringRef Body,
                    StringRef YType) {
  return ("graph @case(%r: " + YType + Inputs + ") {\n" + Params + Body +
          "  %yr = Mul(%y, %r) : " + YType +
          "\n  %l = ReduceSum(%yr) {keepdims = 0} : f32[]\n  return %l\n}\n")
      .str();
}

} // namespace

TEST(AutodiffTest, LinearWithBias) {
  checkGradients(program("  param %w: f32[4, 3]\n  param %b: f32[3]\n"
                         "  param %x: f32[2, 2, 4]\n",
                         "", "  %y = Linear(%x, %w, %b) : f32[2, 2, 3]\n",
                         "f32[2, 2, 3]"),
                 {randomF32({2, 2, 3}, 1)});
}

TEST(AutodiffTest, BatchedMatMulBroadcast) {
  checkGradients(program("  param %a: f32[2, 3, 4]\n  param %b: f32[1, 4, 2]\n",
                         "", "  %y = MatMul(%a, %b) : f32[2, 3, 2]\n",
                         "f32[2, 3, 2]"),
                 {randomF32({2, 3, 2}, 2)});
}

TEST(AutodiffTest, GemmTransposes) {
  for (const char *Flags :
       {"transA = 0, transB = 0", "transA = 1, transB = 0",
        "transA = 0, transB = 1", "transA = 1, transB = 1"}) {
    bool TA = StringRef(Flags).contains("transA = 1"),
         TB = StringRef(Flags).contains("transB = 1");
    std::string A = TA ? "f32[4, 3]" : "f32[3, 4]";
    std::string B = TB ? "f32[2, 4]" : "f32[4, 2]";
    SCOPED_TRACE(Flags);
    checkGradients(program("  param %a: " + A + "\n  param %b: " + B +
                               "\n  param %c: f32[2]\n",
                           "",
                           std::string("  %y = Gemm(%a, %b, %c) {") + Flags +
                               "} : f32[3, 2]\n",
                           "f32[3, 2]"),
                   {randomF32({3, 2}, 3)});
  }
}

TEST(AutodiffTest, ElementwiseBroadcast) {
  for (const char *Op : {"Add", "Sub", "Mul", "Div"}) {
    SCOPED_TRACE(Op);
    // Div's divisor stays away from zero: exp of the parameter.
    std::string Body = std::string("  %e = Exp(%b) : f32[1, 3]\n  %y = ") + Op +
                       "(%a, %e) : f32[2, 3]\n";
    checkGradients(program("  param %a: f32[2, 3]\n  param %b: f32[1, 3]\n", "",
                           Body, "f32[2, 3]"),
                   {randomF32({2, 3}, 4)});
  }
}

TEST(AutodiffTest, UnaryFunctions) {
  for (const char *Op : {"Neg", "Tanh", "Sigmoid", "Erf", "Silu", "Relu"}) {
    SCOPED_TRACE(Op);
    checkGradients(program("  param %a: f32[2, 5]\n", "",
                           std::string("  %y = ") + Op + "(%a) : f32[2, 5]\n",
                           "f32[2, 5]"),
                   {randomF32({2, 5}, 5)});
  }
  // Log and Sqrt on positive values; Pow with a constant exponent.
  for (const char *Op : {"Log", "Sqrt", "Reciprocal"}) {
    SCOPED_TRACE(Op);
    checkGradients(program("  param %a: f32[2, 5]\n", "",
                           std::string("  %e = Exp(%a) : f32[2, 5]\n  %y = ") +
                               Op + "(%e) : f32[2, 5]\n",
                           "f32[2, 5]"),
                   {randomF32({2, 5}, 6)});
  }
  checkGradients(
      program("  param %a: f32[2, 5]\n", "",
              "  %p = Constant() {value = dense<f32[], [3.0]>} : f32[]\n"
              "  %y = Pow(%a, %p) : f32[2, 5]\n",
              "f32[2, 5]"),
      {randomF32({2, 5}, 7)});
}

TEST(AutodiffTest, Gelu) {
  for (const char *Mode : {"none", "tanh"}) {
    SCOPED_TRACE(Mode);
    checkGradients(program("  param %a: f32[3, 4]\n", "",
                           std::string("  %y = Gelu(%a) {approximate = \"") +
                               Mode + "\"} : f32[3, 4]\n",
                           "f32[3, 4]"),
                   {randomF32({3, 4}, 8)});
  }
}

TEST(AutodiffTest, SwiGLU) {
  checkGradients(program("  param %a: f32[2, 4]\n  param %b: f32[2, 4]\n", "",
                         "  %y = SwiGLU(%a, %b) : f32[2, 4]\n", "f32[2, 4]"),
                 {randomF32({2, 4}, 9)});
}

TEST(AutodiffTest, SoftmaxAndLogSoftmax) {
  for (const char *Op : {"Softmax", "LogSoftmax"})
    for (int Axis : {1, -1}) {
      SCOPED_TRACE(std::string(Op) + " axis " + std::to_string(Axis));
      checkGradients(program("  param %a: f32[2, 3, 4]\n", "",
                             std::string("  %y = ") + Op + "(%a) {axis = " +
                                 std::to_string(Axis) + "} : f32[2, 3, 4]\n",
                             "f32[2, 3, 4]"),
                     {randomF32({2, 3, 4}, 10)});
    }
}

TEST(AutodiffTest, Norms) {
  checkGradients(
      program("  param %x: f32[2, 3, 6]\n  param %g: f32[6]\n  param %b: "
              "f32[6]\n",
              "",
              "  %y = LayerNormalization(%x, %g, %b) {axis = -1, epsilon = "
              "1e-05} : f32[2, 3, 6]\n",
              "f32[2, 3, 6]"),
      {randomF32({2, 3, 6}, 11)});
  checkGradients(program("  param %x: f32[2, 3, 6]\n  param %g: f32[6]\n", "",
                         "  %y = RMSNormalization(%x, %g) {axis = -1, epsilon "
                         "= 1e-05} : f32[2, 3, 6]\n",
                         "f32[2, 3, 6]"),
                 {randomF32({2, 3, 6}, 12)});
}

TEST(AutodiffTest, CausalAttentionWithGroupedHeads) {
  // Four query heads share two key/value heads; causal, scaled.
  checkGradients(
      program("  param %q: f32[1, 4, 3, 2]\n  param %k: f32[1, 2, 3, 2]\n"
              "  param %v: f32[1, 2, 3, 2]\n",
              "",
              "  %y = Attention(%q, %k, %v) {is_causal = 1, scale = 0.5} : "
              "f32[1, 4, 3, 2]\n",
              "f32[1, 4, 3, 2]"),
      {randomF32({1, 4, 3, 2}, 13)});
}

// Sequence 40: two causal blocks of query rows in the kernels (32 and 8),
// the first's products without the keys after row 31.
TEST(AutodiffTest, CausalAttentionOverSeveralBlocks) {
  checkGradients(
      program("  param %q: f32[1, 2, 40, 2]\n  param %k: f32[1, 1, 40, 2]\n"
              "  param %v: f32[1, 1, 40, 2]\n",
              "",
              "  %y = Attention(%q, %k, %v) {is_causal = 1} : "
              "f32[1, 2, 40, 2]\n",
              "f32[1, 2, 40, 2]"),
      {randomF32({1, 2, 40, 2}, 15)});
}

// Training-mode dropout: the masks are a function of the step, the stream
// and the element (dropout-streams numbers them), so the loss is a smooth
// function of the parameters and central differences check the gradients
// through Dropout, flash attention's dropout (the gradient draws the mask
// again) and the materialized kernel's (the gradient reads the kept mask
// and dropped probabilities).
TEST(AutodiffTest, TrainingDropout) {
  checkGradients(program("  param %a: f32[4, 8]\n", "",
                         "  %ratio = Constant() {value = dense<f32[], [0.5]>} "
                         ": f32[]\n"
                         "  %on = Constant() {value = dense<bool[], [true]>} "
                         ": bool[]\n"
                         "  %t = Tanh(%a) : f32[4, 8]\n"
                         "  %y = Dropout(%t, %ratio, %on) : f32[4, 8]\n",
                         "f32[4, 8]"),
                 {randomF32({4, 8}, 18)}, 2e-2, 1e-2, "dropout-streams");
  std::string Attention =
      program("  param %q: f32[1, 2, 4, 2]\n  param %k: f32[1, 2, 4, 2]\n"
              "  param %v: f32[1, 2, 4, 2]\n",
              "",
              "  %y = Attention(%q, %k, %v) {dropout = 0.5, is_causal = 1} : "
              "f32[1, 2, 4, 2]\n",
              "f32[1, 2, 4, 2]");
  checkGradients(Attention, {randomF32({1, 2, 4, 2}, 19)}, 2e-2, 1e-2,
                 "dropout-streams");
  checkGradients(Attention, {randomF32({1, 2, 4, 2}, 19)}, 2e-2, 1e-2,
                 "dropout-streams,materialize-attention");
}

TEST(AutodiffTest, AttentionWithBoolMask) {
  std::vector<uint8_t> Mask{1, 0, 1, 1, 1, 0, 0, 1, 1};
  checkGradients(
      program("  param %q: f32[1, 2, 3, 2]\n  param %k: f32[1, 2, 3, 2]\n"
              "  param %v: f32[1, 2, 3, 2]\n",
              ", %m: bool[1, 1, 3, 3]",
              "  %y = Attention(%q, %k, %v, %m) : f32[1, 2, 3, 2]\n",
              "f32[1, 2, 3, 2]"),
      {randomF32({1, 2, 3, 2}, 14), boolean({1, 1, 3, 3}, Mask)});
}

TEST(AutodiffTest, RotaryEmbedding) {
  // cos/sin tables of 4 positions x 2 (half the head size 4); positions.
  checkGradients(
      program("  param %x: f32[1, 2, 3, 4]\n",
              ", %c: f32[4, 2], %s: f32[4, 2], %pos: i64[1, 3]",
              "  %y = RotaryEmbedding(%x, %c, %s, %pos) : f32[1, 2, 3, 4]\n",
              "f32[1, 2, 3, 4]"),
      {randomF32({1, 2, 3, 4}, 15), randomF32({4, 2}, 16),
       randomF32({4, 2}, 17), i64({1, 3}, {0, 2, 1})});
}

TEST(AutodiffTest, EmbeddingGather) {
  checkGradients(program("  param %e: f32[5, 3]\n", ", %i: i64[2, 3]",
                         "  %y = Gather(%e, %i) : f32[2, 3, 3]\n",
                         "f32[2, 3, 3]"),
                 {randomF32({2, 3, 3}, 18), i64({2, 3}, {0, 4, 4, 1, 0, 2})});
}

TEST(AutodiffTest, Layouts) {
  checkGradients(
      program("  param %a: f32[2, 6]\n", "",
              "  %s = Constant() {value = dense<i64[3], [2, 3, 2]>} : i64[3]\n"
              "  %rs = Reshape(%a, %s) : f32[2, 3, 2]\n"
              "  %t = Transpose(%rs) {perm = [2, 0, 1]} : f32[2, 2, 3]\n"
              "  %p0, %p1 = Split(%t) {axis = 2, num_outputs = 2} : "
              "f32[2, 2, 2], f32[2, 2, 1]\n"
              "  %c = Concat(%p1, %p0, %p1) {axis = 2} : f32[2, 2, 4]\n"
              "  %st = Constant() {value = dense<i64[1], [1]>} : i64[1]\n"
              "  %en = Constant() {value = dense<i64[1], [3]>} : i64[1]\n"
              "  %ax = Constant() {value = dense<i64[1], [2]>} : i64[1]\n"
              "  %y = Slice(%c, %st, %en, %ax) : f32[2, 2, 2]\n",
              "f32[2, 2, 2]"),
      {randomF32({2, 2, 2}, 19)});
}

// DepthToSpace in both modes, SpaceToDepth back, and a Pad that pads and
// crops.
TEST(AutodiffTest, DepthSpaceAndPad) {
  checkGradients(
      program("  param %a: f32[1, 8, 2, 3]\n  param %b: f32[1, 8, 2, 3]\n", "",
              "  %crd = DepthToSpace(%a) {blocksize = 2, mode = \"CRD\"} : "
              "f32[1, 2, 4, 6]\n"
              "  %dcr = DepthToSpace(%b) {blocksize = 2} : f32[1, 2, 4, 6]\n"
              "  %sum = Add(%crd, %dcr) : f32[1, 2, 4, 6]\n"
              "  %s = SpaceToDepth(%sum) {blocksize = 2} : f32[1, 8, 2, 3]\n"
              "  %p = Constant() {value = dense<i64[4], [1, -1, 0, 2]>} : "
              "i64[4]\n"
              "  %ax = Constant() {value = dense<i64[2], [2, 3]>} : i64[2]\n"
              "  %y = Pad(%s, %p, _, %ax) : f32[1, 8, 3, 4]\n",
              "f32[1, 8, 3, 4]"),
      {randomF32({1, 8, 3, 4}, 23)});
}

// ONNX's SoftmaxCrossEntropyLoss as the importer lowers it: LogSoftmax over
// the classes (axis 1) and NegativeLogLikelihoodLoss, with class weights
// and an ignored class, per element and as the weighted mean.
TEST(AutodiffTest, NegativeLogLikelihoodLoss) {
  HostTensor Target = i64({3, 2}, {0, 4, 1, 2, 3, 1});
  HostTensor Weight = f32({5}, {0.5f, 1.0f, 2.0f, 0.25f, 1.5f});
  for (StringRef Reduction : {"none", "mean"}) {
    bool None = Reduction == "none";
    std::string Y = None ? "f32[3, 2]" : "f32[]";
    checkGradients(
        program("  param %x: f32[3, 5, 2]\n", ", %t: i64[3, 2], %w: f32[5]",
                "  %lp = LogSoftmax(%x) {axis = 1} : f32[3, 5, 2]\n"
                "  %y = NegativeLogLikelihoodLoss(%lp, %t, %w) "
                "{ignore_index = 1, reduction = \"" +
                    Reduction.str() + "\"} : " + Y + "\n",
                Y),
        {randomF32(None ? ArrayRef<int64_t>{3, 2} : ArrayRef<int64_t>(), 24),
         Target, Weight});
  }
}

TEST(AutodiffTest, ReductionsWhereExpand) {
  checkGradients(
      program("  param %a: f32[2, 3]\n  param %b: f32[2, 3]\n",
              ", %m: bool[2, 3]",
              "  %rm = ReduceMean(%a) {axes = [1], keepdims = 1} : f32[2, 1]\n"
              "  %sh = Constant() {value = dense<i64[2], [2, 3]>} : i64[2]\n"
              "  %ex = Expand(%rm, %sh) : f32[2, 3]\n"
              "  %y = Where(%m, %ex, %b) : f32[2, 3]\n",
              "f32[2, 3]"),
      {randomF32({2, 3}, 20), boolean({2, 3}, {1, 0, 1, 0, 0, 1})});
}

// The default loss: next-token cross-entropy of a tiny language model.
TEST(AutodiffTest, NextTokenCrossEntropy) {
  const char *Text = "graph @lm(%ids: i64[2, 4]) {\n"
                     "  param %emb: f32[6, 3]\n"
                     "  param %w: f32[3, 6]\n"
                     "  %x = Gather(%emb, %ids) : f32[2, 4, 3]\n"
                     "  %logits = Linear(%x, %w) : f32[2, 4, 6]\n"
                     "  return %logits\n"
                     "}\n";
  SourceMgr SM;
  std::unique_ptr<Module> M = parse(Text, SM);
  ASSERT_TRUE(M);
  Graph &G = *M->getGraphs().front();
  std::vector<std::vector<float>> Values = randomizeParams(G, 3);
  setParams(G, Values);
  PassManager PM;
  ASSERT_FALSE(bool(PM.addPipeline("autodiff")));
  DiagnosticEngine Diag(&SM, "lm.air");
  ASSERT_TRUE(succeeded(PM.run(*M, Diag)));
  HostTensor Ids = i64({2, 4}, {1, 5, 2, 0, 3, 3, 4, 1});
  std::vector<HostTensor> Out = run(G, {Ids});
  ASSERT_EQ(Out.size(), 4u); // loss, grad.emb, grad.w, logits
  // The loss by hand from the logits: mean over the 2 x 3 predictions.
  std::vector<float> Logits = floatsOf(Out[3]);
  std::vector<int64_t> IdV = elementsOf<int64_t>(Ids);
  double Sum = 0;
  for (int B = 0; B != 2; ++B)
    for (int T = 0; T != 3; ++T) {
      const float *Row = &Logits[(B * 4 + T) * 6];
      double Max = *std::max_element(Row, Row + 6), Z = 0;
      for (int C = 0; C != 6; ++C)
        Z += std::exp(Row[C] - Max);
      Sum += Max + std::log(Z) - Row[IdV[B * 4 + T + 1]];
    }
  EXPECT_NEAR(floatsOf(Out[0])[0], Sum / 6, 1e-5);
}

TEST(AutodiffTest, AdamWMatchesTorchFormula) {
  // The parameter and its moments are parameters: the step overwrites them.
  const char *Text =
      "graph @opt(%lr: f32[], %b1: f32[], %b2: f32[], %eps: f32[], %wd: "
      "f32[], %t: f32[], %g: f32[3]) {\n"
      "  param %p: f32[3] = dense<f32[3], [1.0, -2.0, 0.5]>\n"
      "  param %m: f32[3] = dense<f32[3], [0.01, 0.0, -0.1]>\n"
      "  param %v: f32[3] = dense<f32[3], [0.001, 0.002, 0.5]>\n"
      "  %p2, %m2, %v2 = AdamW(%p, %g, %m, %v, %lr, %b1, %b2, %eps, %wd, %t) "
      ": f32[3], f32[3], f32[3]\n"
      "  return %p2, %m2, %v2\n"
      "}\n";
  std::vector<float> P{1, -2, 0.5f}, G{0.1f, -0.3f, 2}, M{0.01f, 0, -0.1f},
      V{0.001f, 0.002f, 0.5f};
  float Lr = 0.01f, B1 = 0.9f, B2 = 0.999f, Eps = 1e-8f, Wd = 0.1f, T = 3;
  std::vector<HostTensor> Out = runProgram(
      Text, {f32({}, {Lr}), f32({}, {B1}), f32({}, {B2}), f32({}, {Eps}),
             f32({}, {Wd}), f32({}, {T}), f32({3}, G)});
  ASSERT_EQ(Out.size(), 3u);
  for (int I = 0; I != 3; ++I) {
    double Param = P[I] * (1 - double(Lr) * Wd);
    double Mean = B1 * M[I] + (1 - B1) * G[I];
    double Sq = B2 * V[I] + (1 - B2) * double(G[I]) * G[I];
    double Denom = std::sqrt(Sq) / std::sqrt(1 - std::pow(B2, T)) + Eps;
    Param -= Lr / (1 - std::pow(B1, T)) * Mean / Denom;
    EXPECT_NEAR(floatsOf(Out[0])[I], Param, 1e-6);
    EXPECT_NEAR(floatsOf(Out[1])[I], Mean, 1e-7);
    EXPECT_NEAR(floatsOf(Out[2])[I], Sq, 1e-7);
  }
}

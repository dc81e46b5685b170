//===- RuntimeExecutorTest.cpp - Binding programs to a backend ------------===//
//
// What the executor adds to the kernels: static shapes required, parameters
// loaded from inline data, external files or the seeded initialiser,
// inputs checked, buffers freed after their last use, and repeatable runs.
// Also the single-rank communicator of the CPU backend.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestSupport.h"

#include "runtime/ParamInit.h"
#include "runtime/cpu/CpuCommunicator.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cmath>

using namespace autopar;
using namespace autopar::test;
using namespace llvm;

namespace {

/// A parsed program and a CPU backend to run it on.
class ExecutorTest : public ::testing::Test {
protected:
  const Graph &parse(StringRef Text) {
    SM.AddNewSourceBuffer(MemoryBuffer::getMemBufferCopy(Text, "test.air"),
                          SMLoc());
    DiagnosticEngine Diag(&SM, "test.air");
    M = parseModule(SM, Diag);
    EXPECT_TRUE(M && succeeded(verifyModule(*M, Diag)));
    return *M->getGraphs().front();
  }
  std::unique_ptr<Executor> create(const Graph &G,
                                   ExecutorOptions Options = {}) {
    Expected<std::unique_ptr<Executor>> X = Executor::create(G, B, Options);
    if (!X) {
      ADD_FAILURE() << toString(X.takeError());
      return nullptr;
    }
    std::unique_ptr<Executor> Result = std::move(*X);
    return Result;
  }

  SourceMgr SM;
  std::unique_ptr<Module> M;
  CpuBackend B;
};

TEST_F(ExecutorTest, NeedsStaticShapes) {
  const Graph &G = parse(R"(
graph @g(%x: f32[batch, 4]) {
  %y = Neg(%x) : f32[batch, 4]
  return %y
})");
  Expected<std::unique_ptr<Executor>> X =
      Executor::create(G, B, ExecutorOptions());
  ASSERT_FALSE(bool(X));
  EXPECT_EQ(toString(X.takeError()),
            "value '%x': type f32[batch, 4] is not static; the runtime needs "
            "static shapes (bind the symbols with --dim when importing)");
}

TEST_F(ExecutorTest, ChecksInputs) {
  const Graph &G = parse(R"(
graph @g(%x: f32[2]) {
  %y = Neg(%x) : f32[2]
  return %y
})");
  std::unique_ptr<Executor> X = create(G);
  ASSERT_TRUE(X);
  Expected<std::vector<HostTensor>> R = X->run({f32({3}, {1, 2, 3})});
  ASSERT_FALSE(bool(R));
  EXPECT_EQ(toString(R.takeError()),
            "value '%x': input of type f32[3] given for f32[2]");
  Expected<std::vector<HostTensor>> None = X->run({});
  ASSERT_FALSE(bool(None));
  EXPECT_EQ(toString(None.takeError()),
            "the graph takes 1 inputs; 0 were given");
}

TEST_F(ExecutorTest, LoadsInlineAndExternalParameters) {
  SmallString<128> Dir;
  ASSERT_FALSE(sys::fs::createUniqueDirectory("autopar-runtime", Dir));
  SmallString<128> File(Dir);
  sys::path::append(File, "w.bin");
  {
    std::error_code EC;
    raw_fd_ostream OS(File, EC);
    ASSERT_FALSE(EC);
    float Values[3] = {-1, 10, 20};
    OS.write(reinterpret_cast<const char *>(Values), sizeof(Values));
  }
  const Graph &G = parse(R"(
graph @g(%x: f32[2]) {
  param %b: f32[2] = dense<f32[2], [1.0, 2.0]>
  param %w: f32[2] = external<"w.bin", offset = 4, length = 8>
  %y = Add(%x, %b) : f32[2]
  %z = Mul(%y, %w) : f32[2]
  return %z, %b
})");
  ExecutorOptions Options;
  Options.WeightsDir = std::string(Dir);
  std::unique_ptr<Executor> X = create(G, Options);
  ASSERT_TRUE(X);
  Expected<std::vector<HostTensor>> R = X->run({f32({2}, {0.5f, 1})});
  ASSERT_TRUE(bool(R)) << toString(R.takeError());
  expectNear(floatsOf((*R)[0]), {15, 60}, 0);
  expectNear(floatsOf((*R)[1]), {1, 2}, 0);

  // Without the file, loading fails naming the parameter and the file.
  ASSERT_FALSE(sys::fs::remove(File));
  Expected<std::unique_ptr<Executor>> Missing = Executor::create(G, B, Options);
  ASSERT_FALSE(bool(Missing));
  EXPECT_EQ(toString(Missing.takeError()),
            ("parameter 'w': external data file '" + File +
             "' is missing (running needs it)")
                .str());
  sys::fs::remove_directories(Dir);
}

TEST_F(ExecutorTest, InitialisesParametersWithoutData) {
  const Graph &G = parse(R"(
graph @g() {
  param %w: f32[4000]
  param %v: f32[4000]
  param %h: bf16[3]
  param %steps: i64[3]
  return %w, %v, %h, %steps
})");
  std::unique_ptr<Executor> X = create(G);
  ASSERT_TRUE(X);
  Expected<std::vector<HostTensor>> R = X->run({});
  ASSERT_TRUE(bool(R)) << toString(R.takeError());
  std::vector<float> W = floatsOf((*R)[0]), V = floatsOf((*R)[1]);
  double Sum = 0, Squares = 0;
  for (float F : W) {
    Sum += F;
    Squares += double(F) * F;
  }
  EXPECT_NEAR(Sum / W.size(), 0, 0.002);
  EXPECT_NEAR(std::sqrt(Squares / W.size()), InitStdDev, 0.002);
  EXPECT_NE(W, V);
  EXPECT_EQ(elementsOf<int64_t>((*R)[3]), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ((*R)[2].Bytes.size(), 6u);

  // Keyed by name and seed: the same in another executor, different with
  // another seed.
  std::unique_ptr<Executor> Again = create(G);
  Expected<std::vector<HostTensor>> R2 = Again->run({});
  ASSERT_TRUE(bool(R2));
  EXPECT_EQ(floatsOf((*R2)[0]), W);
  ExecutorOptions Seeded;
  Seeded.InitSeed = 7;
  std::unique_ptr<Executor> Other = create(G, Seeded);
  Expected<std::vector<HostTensor>> R3 = Other->run({});
  ASSERT_TRUE(bool(R3));
  EXPECT_NE(floatsOf((*R3)[0]), W);
}

TEST_F(ExecutorTest, FollowsInitAnnotations) {
  const Graph &G = parse(R"(
graph @g() {
  param %moment: f32[3]
  param %positions: i64[2]
  return %moment, %positions
})");
  // Set through the API: the test does not depend on Annotations.def.
  G.getParams()[0]->getAttrs().set("init", Attribute::getString("zeros"));
  std::unique_ptr<Executor> X = create(G);
  ASSERT_TRUE(X);
  Expected<std::vector<HostTensor>> R = X->run({});
  ASSERT_TRUE(bool(R));
  expectNear(floatsOf((*R)[0]), {0, 0, 0}, 0);

  G.getParams()[1]->getAttrs().set("init", Attribute::getString("normal"));
  Expected<std::unique_ptr<Executor>> Bad =
      Executor::create(G, B, ExecutorOptions());
  ASSERT_FALSE(bool(Bad));
  EXPECT_EQ(toString(Bad.takeError()),
            "parameter 'positions': init \"normal\" needs a float type, not "
            "i64[2]");
  G.getParams()[1]->getAttrs().set("init", Attribute::getString("ones"));
  Bad = Executor::create(G, B, ExecutorOptions());
  ASSERT_FALSE(bool(Bad));
  EXPECT_EQ(toString(Bad.takeError()),
            "parameter 'positions': unknown init \"ones\" (zeros or normal)");
}

TEST_F(ExecutorTest, CountsGradientsAtThePeak) {
  // %g0 + %g1 (the micro-batches' gradients of %w) is what Sgd reads; the
  // sum takes %g0's buffer (it dies there). At the peak (%h, %g0, %g1 live,
  // and the two scalars) two are gradients; %h, which %y reads at the end,
  // is not. The other values peak on their own at %x, %h and the scalars:
  // 2 x 1024 + 8 bytes.
  const Graph &G = parse(R"(
graph @g(%x: f32[256], %lr: f32[], %wd: f32[]) {
  param %w: f32[256]
  %h = Neg(%x) : f32[256]
  %g0 = Mul(%h, %x) : f32[256]
  %g1 = Exp(%h) : f32[256]
  %g = Add(%g0, %g1) : f32[256]
  %w.next = Sgd(%w, %g, %lr, %wd) : f32[256]
  %y = Neg(%h) : f32[256]
  return %w.next, %y
})");
  std::unique_ptr<Executor> X = create(G);
  ASSERT_TRUE(X);
  Random Gen(3);
  Expected<std::vector<HostTensor>> R =
      X->run({f32({256}, Gen.vector(256)), f32({}, {0.1f}), f32({}, {0.0f})});
  ASSERT_TRUE(bool(R)) << toString(R.takeError());
  EXPECT_EQ(X->getPeakActivationBytes(), 3u * 1024 + 8);
  EXPECT_EQ(X->getPeakGradientBytes(), 2u * 1024);
  EXPECT_EQ(X->getPeakNonGradientBytes(), 2u * 1024 + 8);
}

TEST_F(ExecutorTest, FreesAfterLastUseAndRepeats) {
  // A chain holds at most two [1024] buffers at a time; %x is still needed
  // by the last node, so three.
  const Graph &G = parse(R"(
graph @g(%x: f32[1024]) {
  %a = Neg(%x) : f32[1024]
  %b = Exp(%a) : f32[1024]
  %c = Tanh(%b) : f32[1024]
  %d = Add(%c, %x) : f32[1024]
  return %d
})");
  std::unique_ptr<Executor> X = create(G);
  ASSERT_TRUE(X);
  Random Gen(11);
  HostTensor In = f32({1024}, Gen.vector(1024));
  Expected<std::vector<HostTensor>> R1 = X->run({In});
  ASSERT_TRUE(bool(R1));
  EXPECT_EQ(X->getPeakActivationBytes(), 3u * 4096);
  Expected<std::vector<HostTensor>> R2 = X->run({In});
  ASSERT_TRUE(bool(R2));
  EXPECT_EQ((*R1)[0].Bytes, (*R2)[0].Bytes);
  std::vector<float> XF = floatsOf(In), D = floatsOf((*R1)[0]);
  for (size_t I = 0; I != XF.size(); ++I)
    EXPECT_NEAR(D[I], std::tanh(std::exp(-XF[I])) + XF[I], 1e-6);
}

TEST_F(ExecutorTest, OutputsNotReadAreFreedAfterTheirLastUse) {
  // %a and %b are outputs too: read back, they live to the end (four
  // [1024] buffers at the last node, %d taking %c's); not read, %a dies at
  // %b and %b at %c, so three at most, and they come back empty.
  const Graph &G = parse(R"(
graph @g(%x: f32[1024]) {
  %a = Neg(%x) : f32[1024]
  %b = Exp(%a) : f32[1024]
  %c = Tanh(%b) : f32[1024]
  %d = Add(%c, %x) : f32[1024]
  return %d, %a, %b
})");
  std::unique_ptr<Executor> X = create(G);
  ASSERT_TRUE(X);
  Random Gen(12);
  HostTensor In = f32({1024}, Gen.vector(1024));
  Expected<std::vector<HostTensor>> All = X->run({In});
  ASSERT_TRUE(bool(All));
  EXPECT_EQ(X->getPeakActivationBytes(), 4u * 4096);
  EXPECT_EQ((*All)[1].Bytes.size(), 4096u);
  X->setReadOutputs({0});
  Expected<std::vector<HostTensor>> First = X->run({In});
  ASSERT_TRUE(bool(First));
  EXPECT_EQ(X->getPeakActivationBytes(), 3u * 4096);
  ASSERT_EQ(First->size(), 3u);
  EXPECT_EQ((*First)[0].Bytes, (*All)[0].Bytes);
  EXPECT_TRUE((*First)[1].Bytes.empty());
  EXPECT_TRUE((*First)[2].Bytes.empty());
  EXPECT_EQ((*First)[2].Shape, (*All)[2].Shape);
}

// Consecutive AdamW steps with the same hyper-parameters run as one
// multi-tensor loop whose chunks span parameters (70000 elements, then 3,
// then 100000); they give the bits of the same steps run one by one (a
// node between them keeps them apart), over two steps.
TEST_F(ExecutorTest, AdamWStepsRunAsOneGroup) {
  std::string Params, Steps, Apart;
  const char *Sizes[] = {"70000", "3", "100000"};
  for (int K = 0; K != 3; ++K) {
    std::string Ty = std::string("f32[") + Sizes[K] + "]",
                N = std::to_string(K);
    Params += "  param %p" + N + ": " + Ty + " {init = \"normal\"}\n";
    Params += "  param %m" + N + ": " + Ty + " {init = \"zeros\"}\n";
    Params += "  param %v" + N + ": " + Ty + " {init = \"zeros\"}\n";
    std::string Step = "  %p" + N + "n, %m" + N + "n, %v" + N + "n = AdamW(%p" +
                       N + ", %g" + N + ", %m" + N + ", %v" + N +
                       ", %lr, %b1, %b2, %eps, %wd, %t) : " + Ty + ", " + Ty +
                       ", " + Ty + "\n";
    Steps += Step;
    Apart += Step + "  %x" + N + " = Neg(%lr) : f32[]\n";
  }
  auto Program = [&](const std::string &Body) {
    return "graph @g(%g0: f32[70000], %g1: f32[3], %g2: f32[100000], %lr: "
           "f32[], %b1: f32[], %b2: f32[], %eps: f32[], %wd: f32[], %t: "
           "f32[]) {\n" +
           Params + Body + "  return %p0n, %m1n, %v2n, %p2n, %p1n\n}\n";
  };
  std::vector<std::vector<HostTensor>> Results;
  for (bool Grouped : {true, false}) {
    const std::string &Body = Grouped ? Steps : Apart;
    SM = SourceMgr();
    const Graph &G = parse(Program(Body));
    std::unique_ptr<Executor> X = create(G);
    ASSERT_TRUE(X);
    EXPECT_EQ(X->getStepGroupCount(), Grouped ? 1u : 0u);
    Random Gen(21);
    std::vector<HostTensor> In = {f32({70000}, Gen.vector(70000)),
                                  f32({3}, Gen.vector(3)),
                                  f32({100000}, Gen.vector(100000)),
                                  f32({}, {0.01f}),
                                  f32({}, {0.9f}),
                                  f32({}, {0.999f}),
                                  f32({}, {1e-8f}),
                                  f32({}, {0.1f}),
                                  f32({}, {1.0f})};
    ASSERT_TRUE(bool(X->run(In)));
    In.back() = f32({}, {2.0f});
    Expected<std::vector<HostTensor>> Out = X->run(In);
    ASSERT_TRUE(bool(Out));
    Results.push_back(std::move(*Out));
  }
  ASSERT_EQ(Results[0].size(), 5u);
  for (size_t I = 0; I != 5; ++I) {
    std::vector<float> A = floatsOf(Results[0][I]), B = floatsOf(Results[1][I]);
    ASSERT_EQ(A.size(), B.size());
    size_t Differ = 0;
    while (Differ != A.size() && A[Differ] == B[Differ])
      ++Differ;
    EXPECT_EQ(Differ, A.size()) << "output " << I << " element " << Differ
                                << ": " << A[Differ] << " and " << B[Differ];
  }
}

// A Linear and the Gelu or residual Add right after it run fused (the
// epilogue on blocks of 512 of the 600 rows of a [600, 2048] result) and
// give the bits of the same nodes run apart (a node between them).
TEST_F(ExecutorTest, LinearEpiloguesRunFused) {
  auto Program = [](bool Apart) {
    auto Between = [&](int K) {
      return Apart ? "  %z" + std::to_string(K) + " = Neg(%b) : f32[2048]\n"
                   : std::string();
    };
    return "graph @g(%x: f32[600, 64], %w: f32[64, 2048], %b: f32[2048], %r: "
           "f32[600, 2048]) {\n"
           "  %y = Linear(%x, %w, %b) : f32[600, 2048]\n" +
           Between(0) +
           "  %g = Gelu(%y) : f32[600, 2048]\n"
           "  %y2 = Linear(%x, %w) : f32[600, 2048]\n" +
           Between(1) +
           "  %s = Add(%r, %y2) : f32[600, 2048]\n"
           "  return %g, %s, %y\n}\n";
  };
  Random Gen(22);
  std::vector<HostTensor> In = {f32({600, 64}, Gen.vector(600 * 64)),
                                f32({64, 2048}, Gen.vector(64 * 2048)),
                                f32({2048}, Gen.vector(2048)),
                                f32({600, 2048}, Gen.vector(600 * 2048))};
  std::vector<std::vector<HostTensor>> Results;
  for (bool Apart : {false, true}) {
    SM = SourceMgr();
    const Graph &G = parse(Program(Apart));
    std::unique_ptr<Executor> X = create(G);
    ASSERT_TRUE(X);
    EXPECT_EQ(X->getStepGroupCount(), Apart ? 0u : 2u);
    Expected<std::vector<HostTensor>> Out = X->run(In);
    ASSERT_TRUE(bool(Out));
    Results.push_back(std::move(*Out));
  }
  for (size_t I = 0; I != 3; ++I)
    EXPECT_EQ(Results[0][I].Bytes, Results[1][I].Bytes) << "output " << I;
  // And the fused results are right.
  std::vector<float> Y = floatsOf(Results[0][2]), G = floatsOf(Results[0][0]);
  for (size_t I = 0; I < Y.size(); I += 997)
    EXPECT_NEAR(G[I], 0.5 * Y[I] * (1 + std::erf(Y[I] / std::sqrt(2.0))),
                1e-5 * (1 + std::fabs(Y[I])));
}

TEST_F(ExecutorTest, ReshapesViewTheirOperand) {
  // %v and %w view %a's bytes (a reshape with a constant shape copies
  // nothing): %a, %v and %w are one buffer, kept while %w (an output) is,
  // so the peak is two buffers (%x and %a, then %a and %b) and the shapes
  // (24 bytes), not three buffers.
  const Graph &G = parse(R"(
graph @g(%x: f32[4, 256]) {
  %s1 = Constant() {value = dense<i64[1], [1024]>} : i64[1]
  %s2 = Constant() {value = dense<i64[2], [2, 512]>} : i64[2]
  %a = Neg(%x) : f32[4, 256]
  %v = Reshape(%a, %s1) : f32[1024]
  %w = Reshape(%v, %s2) : f32[2, 512]
  %b = Exp(%a) : f32[4, 256]
  return %w, %b
})");
  std::unique_ptr<Executor> X = create(G);
  ASSERT_TRUE(X);
  Random Gen(5);
  HostTensor In = f32({4, 256}, Gen.vector(1024));
  for (int Run = 0; Run != 2; ++Run) {
    Expected<std::vector<HostTensor>> R = X->run({In});
    ASSERT_TRUE(bool(R)) << toString(R.takeError());
    EXPECT_EQ(X->getPeakActivationBytes(), 2u * 4096 + 24);
    EXPECT_EQ((*R)[0].Shape, (SmallVector<int64_t, 4>{2, 512}));
    std::vector<float> XF = floatsOf(In), W = floatsOf((*R)[0]),
                       B = floatsOf((*R)[1]);
    for (size_t I = 0; I != XF.size(); ++I) {
      EXPECT_EQ(W[I], -XF[I]);
      EXPECT_NEAR(B[I], std::exp(-XF[I]), 1e-6);
    }
  }
}

TEST_F(ExecutorTest, AddsIntoAnOperandThatDies) {
  // %s takes %a's buffer (its last use there): the peak is %x and %a, not
  // three buffers.
  const Graph &G = parse(R"(
graph @g(%x: f32[1024]) {
  %a = Exp(%x) : f32[1024]
  %s = Add(%a, %x) : f32[1024]
  return %s
})");
  std::unique_ptr<Executor> X = create(G);
  ASSERT_TRUE(X);
  Random Gen(7);
  HostTensor In = f32({1024}, Gen.vector(1024));
  Expected<std::vector<HostTensor>> R = X->run({In});
  ASSERT_TRUE(bool(R)) << toString(R.takeError());
  EXPECT_EQ(X->getPeakActivationBytes(), 2u * 4096);
  std::vector<float> XF = floatsOf(In), S = floatsOf((*R)[0]);
  for (size_t I = 0; I != XF.size(); ++I)
    EXPECT_NEAR(S[I], std::exp(XF[I]) + XF[I], 1e-5);
}

TEST_F(ExecutorTest, AddsIntoNoTensorAViewShares) {
  // %t cannot take %v's buffer: %v views %s, which %u reads after %t.
  const Graph &G = parse(R"(
graph @h(%x: f32[1024]) {
  %shape = Constant() {value = dense<i64[2], [32, 32]>} : i64[2]
  %s = Exp(%x) : f32[1024]
  %v = Reshape(%s, %shape) : f32[32, 32]
  %t = Add(%v, %v) : f32[32, 32]
  %u = Neg(%s) : f32[1024]
  return %t, %u
})");
  std::unique_ptr<Executor> X = create(G);
  ASSERT_TRUE(X);
  Random Gen(7);
  HostTensor In = f32({1024}, Gen.vector(1024));
  Expected<std::vector<HostTensor>> R = X->run({In});
  ASSERT_TRUE(bool(R)) << toString(R.takeError());
  std::vector<float> XF = floatsOf(In), T = floatsOf((*R)[0]),
                     U = floatsOf((*R)[1]);
  for (size_t I = 0; I != XF.size(); ++I) {
    EXPECT_NEAR(T[I], 2 * std::exp(XF[I]), 1e-5);
    EXPECT_NEAR(U[I], -std::exp(XF[I]), 1e-5);
  }
}

TEST(RuntimeCpu, SingleRankCommunicator) {
  CpuBackend B;
  Communicator &C = B.getCommunicator();
  EXPECT_EQ(C.getRank(), 0);
  EXPECT_EQ(C.getNumRanks(), 1);
  float In[2] = {1, 2}, Out[2] = {0, 0};
  Tensor TIn(ElementType::F32, {2}, In), TOut(ElementType::F32, {2}, Out);
  std::chrono::milliseconds Timeout(100);
  EXPECT_FALSE(bool(C.allReduce(TIn, TOut, {0}, Timeout)));
  EXPECT_EQ(Out[1], 2);
  EXPECT_EQ(toString(C.allGather(TIn, TOut, {0, 1}, 0, Timeout)),
            "all-gather: a single-rank job has only rank 0; the group has 2 "
            "ranks");
  EXPECT_EQ(toString(C.send(TIn, 1, Timeout)),
            "send to rank 1: a single-rank job has no other rank");
}

} // namespace

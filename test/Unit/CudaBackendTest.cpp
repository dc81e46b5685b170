//===- CudaBackendTest.cpp - The CUDA backend against the CPU backend -----===//
//
// Each test runs a small program on random inputs through the executor on
// both backends and compares the outputs. Tests that need a device skip
// (GTEST_SKIP) when cudaGetDeviceCount finds none, as on CI; the others
// (options, the allocator's sizes, the no-device error) run everywhere the
// CUDA backend is built.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestSupport.h"

#include "runtime/BackendFactory.h"
#include "runtime/cpu/KernelSupport.h"
#include "runtime/cuda/CudaAllocator.h"
#include "runtime/cuda/CudaBackend.h"

#include <cmath>

using namespace autopar;
using namespace autopar::test;

namespace {

/// The process's CUDA backend, created once; null (with the reason) when
/// there is no device.
CudaBackend *getDevice(std::string &Why) {
  static std::unique_ptr<CudaBackend> Device;
  static std::string Reason;
  static bool Tried = false;
  if (!Tried) {
    Tried = true;
    llvm::Expected<std::unique_ptr<CudaBackend>> B =
        CudaBackend::create(CudaBackendOptions());
    if (B)
      Device = std::move(*B);
    else
      Reason = llvm::toString(B.takeError());
  }
  Why = Reason;
  return Device.get();
}

#define REQUIRE_DEVICE(B)                                                      \
  std::string Why;                                                             \
  CudaBackend *B = getDevice(Why);                                             \
  if (!B)                                                                      \
  GTEST_SKIP() << Why

/// Runs Text's graph on B; the outputs, or the error in *Error.
std::vector<HostTensor> runOn(Backend &B, llvm::StringRef Text,
                              const std::vector<HostTensor> &Inputs,
                              std::string *Error = nullptr) {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Text, "test.air"),
                        llvm::SMLoc());
  std::string Diagnostics;
  llvm::raw_string_ostream OS(Diagnostics);
  DiagnosticEngine Diag(&SM, "test.air", OS);
  std::unique_ptr<Module> M = parseModule(SM, Diag);
  if (!M || failed(verifyModule(*M, Diag))) {
    ADD_FAILURE() << "invalid test program:\n" << OS.str();
    return {};
  }
  llvm::Expected<std::unique_ptr<Executor>> Exec =
      Executor::create(*M->getGraphs().front(), B, ExecutorOptions());
  if (!Exec) {
    std::string Message = llvm::toString(Exec.takeError());
    if (Error)
      *Error = Message;
    else
      ADD_FAILURE() << Message;
    return {};
  }
  llvm::Expected<std::vector<HostTensor>> Results = (*Exec)->run(Inputs);
  if (!Results) {
    std::string Message = llvm::toString(Results.takeError());
    if (Error)
      *Error = Message;
    else
      ADD_FAILURE() << Message;
    return {};
  }
  return std::move(*Results);
}

/// The elements of a float tensor (f32, f16 or bf16) as floats.
std::vector<float> asFloats(const HostTensor &H) {
  std::vector<float> V;
  size_t Size = getElementSize(H.Elem);
  for (size_t I = 0; I + Size <= H.Bytes.size(); I += Size) {
    if (H.Elem == ElementType::F32) {
      float F;
      std::memcpy(&F, &H.Bytes[I], 4);
      V.push_back(F);
    } else if (H.Elem == ElementType::BF16 || H.Elem == ElementType::F16) {
      uint16_t Bits;
      std::memcpy(&Bits, &H.Bytes[I], 2);
      V.push_back(H.Elem == ElementType::BF16 ? bfloat16ToFloat(Bits)
                                              : halfToFloat(Bits));
    } else {
      V.push_back(float(H.Bytes[I]));
    }
  }
  return V;
}

/// Expects Got's floats within Tolerance of Want's, relative to
/// max(1, |want|) (NaN where Want has NaN).
void expectNear(const HostTensor &Want, const HostTensor &Got, size_t O,
                float Tolerance) {
  std::vector<float> W = asFloats(Want), G = asFloats(Got);
  ASSERT_EQ(W.size(), G.size()) << "output " << O;
  for (size_t I = 0; I != W.size(); ++I) {
    if (std::isnan(W[I])) {
      EXPECT_TRUE(std::isnan(G[I])) << "output " << O << " element " << I;
      continue;
    }
    EXPECT_NEAR(G[I], W[I], Tolerance * std::max(1.0f, std::fabs(W[I])))
        << "output " << O << " element " << I;
  }
}

/// Runs Text on the CPU and on the device and compares every output:
/// floats within Tolerance relative to max(1, |cpu|), others exactly.
void compareWithCpu(llvm::StringRef Text, const std::vector<HostTensor> &In,
                    float Tolerance = 2e-5f) {
  // The CPU first, so that the programs are checked without a device too.
  CpuBackend Cpu;
  std::vector<HostTensor> Want = runOn(Cpu, Text, In);
  ASSERT_FALSE(Want.empty());
  REQUIRE_DEVICE(Device);
  std::vector<HostTensor> Got = runOn(*Device, Text, In);
  ASSERT_EQ(Want.size(), Got.size());
  for (size_t O = 0; O != Want.size(); ++O) {
    ASSERT_EQ(Want[O].Elem, Got[O].Elem) << "output " << O;
    ASSERT_EQ(Want[O].Bytes.size(), Got[O].Bytes.size()) << "output " << O;
    if (!isFloatElementType(Want[O].Elem)) {
      EXPECT_EQ(Want[O].Bytes, Got[O].Bytes) << "output " << O;
      continue;
    }
    expectNear(Want[O], Got[O], O, Tolerance);
  }
}

/// Runs Template with every `$T` f32 on the CPU and bf16 on the device,
/// from the same inputs (In's bf16 tensors widened for the CPU), and
/// compares the float outputs as compareWithCpu does: a bf16 kernel
/// against the f32 CPU kernel the CPU backend has.
void compareBfloat16WithCpu(llvm::StringRef Template,
                            const std::vector<HostTensor> &In,
                            float Tolerance) {
  auto Spell = [&](llvm::StringRef Type) {
    std::string Text;
    for (llvm::StringRef Rest = Template; !Rest.empty();) {
      auto [Head, Tail] = Rest.split("$T");
      Text += Head.str();
      if (Head.size() != Rest.size())
        Text += Type.str();
      Rest = Tail;
    }
    return Text;
  };
  std::vector<HostTensor> Wide;
  for (const HostTensor &H : In)
    Wide.push_back(H.Elem == ElementType::BF16 ? f32(H.Shape, asFloats(H)) : H);
  CpuBackend Cpu;
  std::vector<HostTensor> Want = runOn(Cpu, Spell("f32"), Wide);
  ASSERT_FALSE(Want.empty());
  REQUIRE_DEVICE(Device);
  std::vector<HostTensor> Got = runOn(*Device, Spell("bf16"), In);
  ASSERT_EQ(Want.size(), Got.size());
  for (size_t O = 0; O != Want.size(); ++O) {
    EXPECT_EQ(Got[O].Elem, ElementType::BF16) << "output " << O;
    expectNear(Want[O], Got[O], O, Tolerance);
  }
}

HostTensor randomF32(llvm::ArrayRef<int64_t> Shape, uint64_t Seed,
                     float Scale = 1) {
  Random R(Seed);
  std::vector<float> V = R.vector(size_t(getNumElements(Shape)));
  for (float &X : V)
    X *= Scale;
  return f32(Shape, V);
}

HostTensor randomBF16(llvm::ArrayRef<int64_t> Shape, uint64_t Seed) {
  Random R(Seed);
  std::vector<uint16_t> V;
  for (int64_t I = 0, N = getNumElements(Shape); I != N; ++I)
    V.push_back(floatToBfloat16(R.next()));
  return makeTensor<uint16_t>(ElementType::BF16, Shape, V);
}

HostTensor indices(llvm::ArrayRef<int64_t> Shape, int64_t Below,
                   uint64_t Seed) {
  Random R(Seed);
  std::vector<int64_t> V;
  for (int64_t I = 0, N = getNumElements(Shape); I != N; ++I)
    V.push_back(int64_t((R.next() + 1) / 2 * float(Below)) % Below);
  return i64(Shape, V);
}

HostTensor scalar(float V) { return f32({}, {V}); }

} // namespace

//===----------------------------------------------------------------------===//
// Without a device
//===----------------------------------------------------------------------===//

TEST(CudaBackendTest, BackendOptionNamesTheChoice) {
  EXPECT_TRUE(isCudaBackendBuilt());
  EXPECT_FALSE(bool(checkBackendName("cpu")));
  EXPECT_FALSE(bool(checkBackendName("cuda")));
  llvm::Error E = checkBackendName("tpu");
  EXPECT_EQ(llvm::toString(std::move(E)),
            "--backend must be cpu or cuda, not 'tpu'");
}

TEST(CudaBackendTest, NoDeviceIsAnError) {
  llvm::Expected<int> Count = getCudaDeviceCount();
  if (Count) {
    EXPECT_GT(*Count, 0);
    return;
  }
  std::string Message = llvm::toString(Count.takeError());
  EXPECT_EQ(Message.rfind("no CUDA device", 0), 0u) << Message;
  BackendChoice C;
  C.Name = "cuda";
  llvm::Expected<std::unique_ptr<Backend>> B = createBackend(C);
  ASSERT_FALSE(bool(B));
  Message = llvm::toString(B.takeError());
  EXPECT_EQ(Message.rfind("--backend cuda: no CUDA device", 0), 0u) << Message;
}

TEST(CudaBackendTest, AllocatorRoundsSizes) {
  EXPECT_EQ(CudaAllocator::roundSize(0), 512u);
  EXPECT_EQ(CudaAllocator::roundSize(1), 512u);
  EXPECT_EQ(CudaAllocator::roundSize(513), 1024u);
  EXPECT_EQ(CudaAllocator::roundSize(1 << 20), size_t(1) << 20);
  EXPECT_EQ(CudaAllocator::roundSize((1 << 20) + 1), size_t(2) << 20);
  EXPECT_EQ(CudaAllocator::roundSize((5 << 20) + 7), size_t(6) << 20);
}

//===----------------------------------------------------------------------===//
// Kernels against the CPU backend
//===----------------------------------------------------------------------===//

TEST(CudaBackendTest, Elementwise) {
  compareWithCpu(
      R"(
graph @g(%a: f32[2, 1, 3], %b: f32[4, 1], %c: f32[2, 4, 3]) {
  %add = Add(%a, %b) : f32[2, 4, 3]
  %sub = Sub(%c, %a) : f32[2, 4, 3]
  %mul = Mul(%c, %b) : f32[2, 4, 3]
  %div = Div(%c, %add) : f32[2, 4, 3]
  %two = Constant() {value = dense<i64[], [2]>} : i64[]
  %pow = Pow(%c, %two) : f32[2, 4, 3]
  %less = Less(%a, %b) : bool[2, 4, 3]
  %eq = Equal(%c, %c) : bool[2, 4, 3]
  %gt = Greater(%c, %add) : bool[2, 4, 3]
  %and = And(%less, %gt) : bool[2, 4, 3]
  %where = Where(%less, %c, %mul) : f32[2, 4, 3]
  %sum = Sum(%a, %b, %c) : f32[2, 4, 3]
  return %add, %sub, %mul, %div, %pow, %less, %eq, %and, %where, %sum
})",
      {randomF32({2, 1, 3}, 1), randomF32({4, 1}, 2), randomF32({2, 4, 3}, 3)});
}

TEST(CudaBackendTest, Unary) {
  compareWithCpu(R"(
graph @g(%x: f32[3, 50]) {
  %a = Neg(%x) : f32[3, 50]
  %b = Abs(%x) : f32[3, 50]
  %e = Exp(%x) : f32[3, 50]
  %s = Sqrt(%b) : f32[3, 50]
  %l = Log(%e) : f32[3, 50]
  %t = Tanh(%x) : f32[3, 50]
  %f = Erf(%x) : f32[3, 50]
  %g = Sigmoid(%x) : f32[3, 50]
  %r = Relu(%x) : f32[3, 50]
  %k = LeakyRelu(%x) {alpha = 0.2} : f32[3, 50]
  %ge = Gelu(%x) : f32[3, 50]
  %gt = Gelu(%x) {approximate = "tanh"} : f32[3, 50]
  %si = Silu(%x) : f32[3, 50]
  %rc = Reciprocal(%e) : f32[3, 50]
  return %a, %b, %e, %s, %l, %t, %f, %g, %r, %k, %ge, %gt, %si, %rc
})",
                 {randomF32({3, 50}, 4, 3)});
}

// Issue 22's unary functions: rounding, trigonometric, activations with
// their attributes, Clip with bounds read from the device, IsNaN and IsInf.
TEST(CudaBackendTest, UnaryMath) {
  compareWithCpu(R"(
graph @g(%x: f32[3, 50], %u: f32[3, 50]) {
  %lo = Constant() {value = dense<f32[], [-0.5]>} : f32[]
  %hi = Constant() {value = dense<f32[], [1.25]>} : f32[]
  %ceil = Ceil(%x) : f32[3, 50]
  %floor = Floor(%x) : f32[3, 50]
  %round = Round(%x) : f32[3, 50]
  %sign = Sign(%x) : f32[3, 50]
  %sin = Sin(%x) : f32[3, 50]
  %cos = Cos(%x) : f32[3, 50]
  %tan = Tan(%u) : f32[3, 50]
  %asin = Asin(%u) : f32[3, 50]
  %acos = Acos(%u) : f32[3, 50]
  %atan = Atan(%x) : f32[3, 50]
  %sinh = Sinh(%x) : f32[3, 50]
  %cosh = Cosh(%x) : f32[3, 50]
  %asinh = Asinh(%x) : f32[3, 50]
  %absx = Abs(%x) : f32[3, 50]
  %one = Constant() {value = dense<f32[], [1.0]>} : f32[]
  %g = Add(%absx, %one) : f32[3, 50]
  %acosh = Acosh(%g) : f32[3, 50]
  %atanh = Atanh(%u) : f32[3, 50]
  %softplus = Softplus(%x) : f32[3, 50]
  %softsign = Softsign(%x) : f32[3, 50]
  %elu = Elu(%x) {alpha = 0.5} : f32[3, 50]
  %selu = Selu(%x) : f32[3, 50]
  %celu = Celu(%x) {alpha = 2.0} : f32[3, 50]
  %hsig = HardSigmoid(%x) {alpha = 0.3, beta = 0.4} : f32[3, 50]
  %hswish = HardSwish(%x) : f32[3, 50]
  %mish = Mish(%x) : f32[3, 50]
  %trelu = ThresholdedRelu(%x) {alpha = 0.5} : f32[3, 50]
  %shrink = Shrink(%x) {bias = 0.25, lambd = 0.6} : f32[3, 50]
  %clip = Clip(%x, %lo, %hi) : f32[3, 50]
  %clipmax = Clip(%x, _, %hi) : f32[3, 50]
  %logx = Log(%x) : f32[3, 50]
  %nan = IsNaN(%logx) : bool[3, 50]
  %inf = IsInf(%logx) {detect_positive = 0} : bool[3, 50]
  return %ceil, %floor, %round, %sign, %sin, %cos, %tan, %asin, %acos, %atan, %sinh, %cosh, %asinh, %acosh, %atanh, %softplus, %softsign, %elu, %selu, %celu, %hsig, %hswish, %mish, %trelu, %shrink, %clip, %clipmax, %nan, %inf
})",
                 {randomF32({3, 50}, 21, 3), randomF32({3, 50}, 22, 0.9f)});
}

// Issue 22's binary and variadic ops on floats; the integer ones run on the
// host (small operands), and on the device they are an error naming the
// node.
TEST(CudaBackendTest, BinaryMathAndVariadic) {
  compareWithCpu(
      R"(
graph @g(%a: f32[2, 1, 3], %b: f32[4, 1], %c: f32[2, 4, 3], %n: i64[4], %m: i64[4]) {
  %min = Min(%a, %b, %c) : f32[2, 4, 3]
  %max = Max(%a, %b, %c) : f32[2, 4, 3]
  %mean = Mean(%a, %b, %c) : f32[2, 4, 3]
  %three = Constant() {value = dense<f32[], [3.0]>} : f32[]
  %shift = Add(%b, %three) : f32[4, 1]
  %fmod = Mod(%c, %shift) {fmod = 1} : f32[2, 4, 3]
  %ge = GreaterOrEqual(%a, %b) : bool[2, 4, 3]
  %le = LessOrEqual(%c, %a) : bool[2, 4, 3]
  %xor = Xor(%ge, %le) : bool[2, 4, 3]
  %prelu = PRelu(%c, %b) : f32[2, 4, 3]
  %imod = Mod(%n, %m) : i64[4]
  %band = BitwiseAnd(%n, %m) : i64[4]
  return %min, %max, %mean, %fmod, %ge, %le, %xor, %prelu, %imod, %band
})",
      {randomF32({2, 1, 3}, 23), randomF32({4, 1}, 24),
       randomF32({2, 4, 3}, 25), i64({4}, {7, -7, 9, 12}),
       i64({4}, {3, 3, -4, 5})});
}

// The Reduce ops the device runs; ReduceProd and ReduceLogSumExp, which it
// does not, name the node; ArgMax and Hardmax have no CUDA kernel either.
TEST(CudaBackendTest, ReductionsOfIssue22) {
  compareWithCpu(R"(
graph @g(%x: f32[4, 6, 70]) {
  %last = Constant() {value = dense<i64[1], [-1]>} : i64[1]
  %min = ReduceMin(%x, %last) : f32[4, 6, 1]
  %min0 = ReduceMin(%x) {axes = [0], keepdims = 0} : f32[6, 70]
  %l1 = ReduceL1(%x) {axes = [1, 2], keepdims = 0} : f32[4]
  %l2 = ReduceL2(%x, %last) {keepdims = 0} : f32[4, 6]
  %sq = ReduceSumSquare(%x) {axes = [0]} : f32[1, 6, 70]
  %abs = Abs(%x) : f32[4, 6, 70]
  %logsum = ReduceLogSum(%abs, %last) {keepdims = 0} : f32[4, 6]
  return %min, %min0, %l1, %l2, %sq, %logsum
})",
                 {randomF32({4, 6, 70}, 26)});
  REQUIRE_DEVICE(Device);
  for (llvm::StringRef Op : {"ReduceProd", "ReduceLogSumExp"}) {
    std::string Error;
    runOn(*Device,
          ("graph @g(%x: f32[2, 3]) {\n  %y = " + Op +
           "(%x) {keepdims = 0} : f32[] loc(\"r\")\n  return %y\n}")
              .str(),
          {randomF32({2, 3}, 27)}, &Error);
    EXPECT_NE(Error.find(("node 'r' (" + Op + "): no CUDA kernel").str()),
              std::string::npos)
        << Error;
  }
  std::string Error;
  runOn(*Device, R"(
graph @g(%x: f32[2, 3]) {
  %y = ArgMax(%x) : i64[1, 3] loc("arg")
  return %y
})",
        {randomF32({2, 3}, 28)}, &Error);
  EXPECT_NE(Error.find("node 'arg' (ArgMax): no CUDA kernel"),
            std::string::npos)
      << Error;
}

TEST(CudaBackendTest, SoftmaxAndNorms) {
  compareWithCpu(R"(
graph @g(%x: f32[2, 3, 40], %s: f32[40], %b: f32[40], %dy: f32[2, 3, 40]) {
  %sm = Softmax(%x) : f32[2, 3, 40]
  %s1 = Softmax(%x) {axis = 1} : f32[2, 3, 40]
  %ls = LogSoftmax(%x) : f32[2, 3, 40]
  %sg = SoftmaxGrad(%dy, %sm) {axis = -1} : f32[2, 3, 40]
  %y, %mean, %inv = LayerNormalization(%x, %s, %b) {epsilon = 0.001} : f32[2, 3, 40], f32[2, 3, 1], f32[2, 3, 1]
  %r = RMSNormalization(%x, %s) {epsilon = 1e-06} : f32[2, 3, 40]
  %dx, %ds, %db = LayerNormalizationGrad(%dy, %x, %s) {axis = -1, epsilon = 0.001} : f32[2, 3, 40], f32[40], f32[40]
  %rdx, %rds = RMSNormalizationGrad(%dy, %x, %s) {axis = -1, epsilon = 1e-06} : f32[2, 3, 40], f32[40]
  return %sm, %s1, %ls, %sg, %y, %mean, %inv, %r, %dx, %ds, %db, %rdx, %rds
})",
                 {randomF32({2, 3, 40}, 5, 4), randomF32({40}, 6),
                  randomF32({40}, 7), randomF32({2, 3, 40}, 8)},
                 1e-4f);
}

TEST(CudaBackendTest, Gemms) {
  compareWithCpu(R"(
graph @g(%x: f32[2, 1, 3, 4], %w: f32[3, 4, 5], %w2: f32[4, 5], %b: f32[5], %a: f32[4, 3], %bt: f32[5, 4], %c: f32[5], %v: f32[4]) {
  %y = MatMul(%x, %w) : f32[2, 3, 3, 5]
  %l = Linear(%x, %w2, %b) : f32[2, 1, 3, 5]
  %n = Linear(%x, %w2, _) : f32[2, 1, 3, 5]
  %g = Gemm(%a, %bt, %c) {alpha = 0.5, beta = 2.0, transA = 1, transB = 1} : f32[3, 5]
  %h = Gemm(%a, %bt, _) {transA = 1, transB = 1} : f32[3, 5]
  %mv = MatMul(%x, %v) : f32[2, 1, 3]
  %vm = MatMul(%v, %w2) : f32[5]
  return %y, %l, %n, %g, %h, %mv, %vm
})",
                 {randomF32({2, 1, 3, 4}, 9), randomF32({3, 4, 5}, 10),
                  randomF32({4, 5}, 11), randomF32({5}, 12),
                  randomF32({4, 3}, 13), randomF32({5, 4}, 14),
                  randomF32({5}, 15), randomF32({4}, 16)},
                 1e-4f);
}

// Attention (the flash kernels: Attention and a probs-less AttentionGrad)
// against the CPU kernel: causal multi-head, grouped-query with a bool mask
// (one row all masked: zeros), a float mask broadcast over heads, and the
// gradients of each.
TEST(CudaBackendTest, AttentionAndItsGradient) {
  std::vector<uint8_t> Keep(5 * 6, 1);
  for (int J = 0; J != 6; ++J)
    Keep[2 * 6 + J] = 0; // Row 2 keeps no key.
  Keep[0 * 6 + 5] = Keep[3 * 6 + 1] = 0;
  compareWithCpu(R"(
graph @g(%q: f32[2, 4, 5, 8], %k: f32[2, 4, 5, 8], %v: f32[2, 4, 5, 8], %kg: f32[2, 2, 6, 8], %vg: f32[2, 2, 6, 3], %keep: bool[5, 6], %add: f32[2, 1, 5, 6], %dy: f32[2, 4, 5, 8], %dyg: f32[2, 4, 5, 3]) {
  %c = Attention(%q, %k, %v) {is_causal = 1} : f32[2, 4, 5, 8]
  %g = Attention(%q, %kg, %vg, %keep) {scale = 0.3} : f32[2, 4, 5, 3]
  %f = Attention(%q, %kg, %vg, %add) {is_causal = 1} : f32[2, 4, 5, 3]
  %dq, %dk, %dv = AttentionGrad(%dy, %q, %k, %v) {is_causal = 1} : f32[2, 4, 5, 8], f32[2, 4, 5, 8], f32[2, 4, 5, 8]
  %gq, %gk, %gv = AttentionGrad(%dyg, %q, %kg, %vg, %keep) {scale = 0.3} : f32[2, 4, 5, 8], f32[2, 2, 6, 8], f32[2, 2, 6, 3]
  %fq, %fk, %fv = AttentionGrad(%dyg, %q, %kg, %vg, %add) {is_causal = 1} : f32[2, 4, 5, 8], f32[2, 2, 6, 8], f32[2, 2, 6, 3]
  return %c, %g, %f, %dq, %dk, %dv, %gq, %gk, %gv, %fq, %fk, %fv
})",
                 {randomF32({2, 4, 5, 8}, 41), randomF32({2, 4, 5, 8}, 42),
                  randomF32({2, 4, 5, 8}, 43), randomF32({2, 2, 6, 8}, 44),
                  randomF32({2, 2, 6, 3}, 45), boolean({5, 6}, Keep),
                  randomF32({2, 1, 5, 6}, 46), randomF32({2, 4, 5, 8}, 47),
                  randomF32({2, 4, 5, 3}, 48)},
                 1e-4f);
}

/// A [Rows, Cols] bool mask keeping about three keys in four, and no key of
/// row Masked.
HostTensor keepMask(int64_t Rows, int64_t Cols, int64_t Masked, uint64_t Seed) {
  Random R(Seed);
  std::vector<uint8_t> Keep;
  for (int64_t I = 0; I != Rows * Cols; ++I)
    Keep.push_back(I / Cols != Masked && R.next() > -0.5f);
  return boolean({Rows, Cols}, Keep);
}

// The flash kernels over sequences longer than their tiles (150 rows and
// keys: tiles of 32 keys and blocks of 16 query rows, the last ones
// partial, a block's rows spanning two query heads): grouped-query
// attention 4:2 with D = 64, causal; 8:1 with D = 128 and a bool mask
// whose last dimension (140) is shorter than the keys and whose row 77
// keeps none; a float mask broadcast over heads, causal; causal with fewer
// query rows than keys; and the gradients of each.
TEST(CudaBackendTest, FlashAttentionLongSequences) {
  compareWithCpu(
      R"(
graph @g(%q: f32[2, 4, 150, 64], %k: f32[2, 2, 150, 64], %v: f32[2, 2, 150, 64], %dy: f32[2, 4, 150, 64], %q8: f32[1, 8, 150, 128], %k8: f32[1, 1, 150, 128], %v8: f32[1, 1, 150, 128], %dy8: f32[1, 8, 150, 128], %keep: bool[150, 140], %add: f32[1, 1, 150, 150], %qs: f32[2, 4, 40, 64], %dys: f32[2, 4, 40, 64]) {
  %c = Attention(%q, %k, %v) {is_causal = 1} : f32[2, 4, 150, 64]
  %cq, %ck, %cv = AttentionGrad(%dy, %q, %k, %v) {is_causal = 1} : f32[2, 4, 150, 64], f32[2, 2, 150, 64], f32[2, 2, 150, 64]
  %m = Attention(%q8, %k8, %v8, %keep) : f32[1, 8, 150, 128]
  %mq, %mk, %mv = AttentionGrad(%dy8, %q8, %k8, %v8, %keep) : f32[1, 8, 150, 128], f32[1, 1, 150, 128], f32[1, 1, 150, 128]
  %f = Attention(%q8, %k8, %v8, %add) {is_causal = 1, scale = 0.1} : f32[1, 8, 150, 128]
  %fq, %fk, %fv = AttentionGrad(%dy8, %q8, %k8, %v8, %add) {is_causal = 1, scale = 0.1} : f32[1, 8, 150, 128], f32[1, 1, 150, 128], f32[1, 1, 150, 128]
  %s = Attention(%qs, %k, %v) {is_causal = 1} : f32[2, 4, 40, 64]
  %sq, %sk, %sv = AttentionGrad(%dys, %qs, %k, %v) {is_causal = 1} : f32[2, 4, 40, 64], f32[2, 2, 150, 64], f32[2, 2, 150, 64]
  return %c, %cq, %ck, %cv, %m, %mq, %mk, %mv, %f, %fq, %fk, %fv, %s, %sq, %sk, %sv
})",
      {randomF32({2, 4, 150, 64}, 81), randomF32({2, 2, 150, 64}, 82),
       randomF32({2, 2, 150, 64}, 83), randomF32({2, 4, 150, 64}, 84),
       randomF32({1, 8, 150, 128}, 85), randomF32({1, 1, 150, 128}, 86),
       randomF32({1, 1, 150, 128}, 87), randomF32({1, 8, 150, 128}, 88),
       keepMask(150, 140, 77, 89), randomF32({1, 1, 150, 150}, 90, 3),
       randomF32({2, 4, 40, 64}, 91), randomF32({2, 4, 40, 64}, 92)},
      1e-4f);
}

// The flash kernels in bf16 (f32 inside) against the f32 CPU kernel on the
// same values: grouped-query 4:2, causal, with a bool mask that keeps no
// key of row 3, and its gradient; 8:1 with D = 128 and a float mask.
TEST(CudaBackendTest, FlashAttentionBfloat16) {
  compareBfloat16WithCpu(
      R"(
graph @g(%q: $T[2, 4, 150, 64], %k: $T[2, 2, 150, 64], %v: $T[2, 2, 150, 64], %dy: $T[2, 4, 150, 64], %keep: bool[150, 150], %q8: $T[1, 8, 70, 128], %k8: $T[1, 1, 70, 128], %v8: $T[1, 1, 70, 128], %add: $T[70, 70]) {
  %c = Attention(%q, %k, %v, %keep) {is_causal = 1} : $T[2, 4, 150, 64]
  %cq, %ck, %cv = AttentionGrad(%dy, %q, %k, %v, %keep) {is_causal = 1} : $T[2, 4, 150, 64], $T[2, 2, 150, 64], $T[2, 2, 150, 64]
  %m = Attention(%q8, %k8, %v8, %add) : $T[1, 8, 70, 128]
  return %c, %cq, %ck, %cv, %m
})",
      {randomBF16({2, 4, 150, 64}, 101), randomBF16({2, 2, 150, 64}, 102),
       randomBF16({2, 2, 150, 64}, 103), randomBF16({2, 4, 150, 64}, 104),
       keepMask(150, 150, 3, 105), randomBF16({1, 8, 70, 128}, 106),
       randomBF16({1, 1, 70, 128}, 107), randomBF16({1, 1, 70, 128}, 108),
       randomBF16({70, 70}, 109)},
      // bf16 keeps 8 bits: the results' rounding.
      2e-2f);
}

// The flash forward and gradient hold no [Sq, Skv] scores: on a fresh
// backend, the peak of device memory in use is their operands and results
// (and the gradient's 2 x [B, Hq, Sq] statistics), far below the 8 MiB of
// f32 scores that AttentionWithProbs, run last, adds.
TEST(CudaBackendTest, FlashAttentionHoldsNoScores) {
  REQUIRE_DEVICE(Device);
  const int64_t Bytes = 2 * 1024 * 64 * 4, Scores = 2 * 1024 * 1024 * 4;
  std::vector<HostTensor> In = {
      randomF32({1, 2, 1024, 64}, 111), randomF32({1, 2, 1024, 64}, 112),
      randomF32({1, 2, 1024, 64}, 113), randomF32({1, 2, 1024, 64}, 114)};
  auto PeakOf = [&](llvm::StringRef Text) -> int64_t {
    llvm::Expected<std::unique_ptr<CudaBackend>> B =
        CudaBackend::create(CudaBackendOptions());
    if (!B) {
      ADD_FAILURE() << llvm::toString(B.takeError());
      return -1;
    }
    EXPECT_FALSE(runOn(**B, Text, In).empty());
    return int64_t((*B)->getStats().PeakBytesInUse);
  };
  int64_t Forward = PeakOf(R"(
graph @g(%q: f32[1, 2, 1024, 64], %k: f32[1, 2, 1024, 64], %v: f32[1, 2, 1024, 64], %dy: f32[1, 2, 1024, 64]) {
  %y = Attention(%q, %k, %v) {is_causal = 1} : f32[1, 2, 1024, 64]
  return %y
})");
  int64_t Gradient = PeakOf(R"(
graph @g(%q: f32[1, 2, 1024, 64], %k: f32[1, 2, 1024, 64], %v: f32[1, 2, 1024, 64], %dy: f32[1, 2, 1024, 64]) {
  %dq, %dk, %dv = AttentionGrad(%dy, %q, %k, %v) {is_causal = 1} : f32[1, 2, 1024, 64], f32[1, 2, 1024, 64], f32[1, 2, 1024, 64]
  return %dq, %dk, %dv
})");
  int64_t Materialized = PeakOf(R"(
graph @g(%q: f32[1, 2, 1024, 64], %k: f32[1, 2, 1024, 64], %v: f32[1, 2, 1024, 64], %dy: f32[1, 2, 1024, 64]) {
  %y, %p = AttentionWithProbs(%q, %k, %v) {is_causal = 1} : f32[1, 2, 1024, 64], f32[1, 2, 1024, 1024]
  return %y
})");
  // Four operands and a result; four operands, three results and 16 KiB
  // of statistics; each with 1 MiB to spare.
  EXPECT_GT(Forward, 0);
  EXPECT_LE(Forward, 5 * Bytes + (1 << 20));
  EXPECT_LE(Gradient, 7 * Bytes + (1 << 20));
  EXPECT_GE(Materialized, Scores);
}

// RotaryEmbedding against the CPU kernel: 4-D with position ids into
// [max position, R / 2] caches, 3-D with per-token caches and a partial,
// interleaved rotary dimension.
TEST(CudaBackendTest, RotaryEmbedding) {
  compareWithCpu(R"(
graph @g(%x: f32[2, 3, 5, 8], %cos: f32[16, 4], %sin: f32[16, 4], %pos: i64[2, 5], %x3: f32[2, 5, 24], %c3: f32[2, 5, 2], %s3: f32[2, 5, 2]) {
  %y = RotaryEmbedding(%x, %cos, %sin, %pos) : f32[2, 3, 5, 8]
  %y3 = RotaryEmbedding(%x3, %c3, %s3) {interleaved = 1, num_heads = 3, rotary_embedding_dim = 4} : f32[2, 5, 24]
  return %y, %y3
})",
                 {randomF32({2, 3, 5, 8}, 51), randomF32({16, 4}, 52),
                  randomF32({16, 4}, 53),
                  i64({2, 5}, {0, 3, 7, 15, 2, 9, 1, 1, 4, 12}),
                  randomF32({2, 5, 24}, 54), randomF32({2, 5, 2}, 55),
                  randomF32({2, 5, 2}, 56)});
}

TEST(CudaBackendTest, Layouts) {
  compareWithCpu(R"(
graph @g(%x: f32[2, 3, 4], %y: f32[2, 2, 4]) {
  %t = Transpose(%x) {perm = [2, 0, 1]} : f32[4, 2, 3]
  %shape = Constant() {value = dense<i64[4], [2, 2, 3, 4]>} : i64[4]
  %e = Expand(%x, %shape) : f32[2, 2, 3, 4]
  %c = Concat(%x, %y) {axis = 1} : f32[2, 5, 4]
  %sizes = Constant() {value = dense<i64[2], [1, 3]>} : i64[2]
  %s0, %s1 = Split(%x, %sizes) {axis = 2} : f32[2, 3, 1], f32[2, 3, 3]
  %starts = Constant() {value = dense<i64[2], [3, 1]>} : i64[2]
  %ends = Constant() {value = dense<i64[2], [0, 3]>} : i64[2]
  %axes = Constant() {value = dense<i64[2], [2, 1]>} : i64[2]
  %steps = Constant() {value = dense<i64[2], [-1, 1]>} : i64[2]
  %sl = Slice(%x, %starts, %ends, %axes, %steps) : f32[2, 2, 3]
  %rs = Constant() {value = dense<i64[2], [6, -1]>} : i64[2]
  %r = Reshape(%x, %rs) : f32[6, 4]
  %axes2 = Constant() {value = dense<i64[1], [1]>} : i64[1]
  %rsum = ReduceSum(%x, %axes2) {keepdims = 0} : f32[2, 4]
  %rmean = ReduceMean(%x) {axes = [0, 1]} : f32[1, 1, 4]
  %rmax = ReduceMax(%x) {axes = [2]} : f32[2, 3, 1]
  %ci = Cast(%x) {to = "i32"} : i32[2, 3, 4]
  %cb = Cast(%x) {to = "bf16"} : bf16[2, 3, 4]
  %cf = Cast(%cb) {to = "f32"} : f32[2, 3, 4]
  %tri = Trilu(%x) {upper = 0} : f32[2, 3, 4]
  return %t, %e, %c, %s0, %s1, %sl, %r, %rsum, %rmean, %rmax, %ci, %cf, %tri
})",
                 {randomF32({2, 3, 4}, 17, 5), randomF32({2, 2, 4}, 18)});
}

TEST(CudaBackendTest, GatherAndShapeArithmetic) {
  compareWithCpu(R"(
graph @g(%table: f32[10, 6], %ids: i64[2, 3], %dy: f32[2, 3, 6]) {
  %e = Gather(%table, %ids) : f32[2, 3, 6]
  %cols = Constant() {value = dense<i64[2], [5, -1]>} : i64[2]
  %c = Gather(%table, %cols) {axis = 1} : f32[10, 2]
  %dt = GatherGrad(%table, %ids, %dy) : f32[10, 6]
  %shape = Shape(%e) : i64[3]
  %zero = Constant() {value = dense<i64[], [0]>} : i64[]
  %first = Gather(%shape, %zero) : i64[]
  %ax = Constant() {value = dense<i64[1], [0]>} : i64[1]
  %one = Unsqueeze(%first, %ax) : i64[1]
  %rest = Constant() {value = dense<i64[1], [18]>} : i64[1]
  %new = Concat(%one, %rest) {axis = 0} : i64[2]
  %flat = Reshape(%e, %new) : f32[2, 18]
  return %e, %c, %dt, %new, %flat
})",
                 {randomF32({10, 6}, 19), indices({2, 3}, 10, 20),
                  randomF32({2, 3, 6}, 21)},
                 1e-5f);
}

TEST(CudaBackendTest, LossAndGradients) {
  compareWithCpu(R"(
graph @g(%z: f32[2, 3, 7], %labels: i64[2, 3], %x: f32[2, 3, 7], %u: f32[2, 3, 7], %dy: f32[2, 3, 7]) {
  %mean = CrossEntropyLoss(%z, %labels) {ignore_index = 2} : f32[]
  %sum = CrossEntropyLoss(%z, %labels) {reduction = "sum"} : f32[]
  %one = Constant() {value = dense<f32[], [1.5]>} : f32[]
  %dz = CrossEntropyLossGrad(%one, %z, %labels) {ignore_index = 2} : f32[2, 3, 7]
  %gg = GeluGrad(%dy, %x) : f32[2, 3, 7]
  %gt = GeluGrad(%dy, %x) {approximate = "tanh"} : f32[2, 3, 7]
  %sg = SiluGrad(%dy, %x) : f32[2, 3, 7]
  %sw = SwiGLU(%x, %u) : f32[2, 3, 7]
  %da, %db = SwiGLUGrad(%dy, %x, %u) : f32[2, 3, 7], f32[2, 3, 7]
  return %mean, %sum, %dz, %gg, %gt, %sg, %sw, %da, %db
})",
                 {randomF32({2, 3, 7}, 22, 3), indices({2, 3}, 7, 23),
                  randomF32({2, 3, 7}, 24, 2), randomF32({2, 3, 7}, 25),
                  randomF32({2, 3, 7}, 26)},
                 1e-5f);
}

// Materialized attention (AttentionWithProbs keeps the probabilities,
// AttentionGrad reads them) against the CPU kernels, and against the
// gradient that recomputes them: the flash kernels, and the probabilities
// whole in scratch (recompute-attention's `attention_kernel =
// "materialized"`).
TEST(CudaBackendTest, AttentionWithKeptProbabilities) {
  compareWithCpu(R"(
graph @g(%q: f32[2, 4, 5, 8], %kg: f32[2, 2, 5, 8], %vg: f32[2, 2, 5, 3], %dy: f32[2, 4, 5, 3]) {
  %y, %p = AttentionWithProbs(%q, %kg, %vg) {is_causal = 1, scale = 0.3} : f32[2, 4, 5, 3], f32[2, 4, 5, 5]
  %dq, %dk, %dv = AttentionGrad(%dy, %q, %kg, %vg, _, %p) {is_causal = 1, scale = 0.3} : f32[2, 4, 5, 8], f32[2, 2, 5, 8], f32[2, 2, 5, 3]
  %rq, %rk, %rv = AttentionGrad(%dy, %q, %kg, %vg) {is_causal = 1, scale = 0.3} : f32[2, 4, 5, 8], f32[2, 2, 5, 8], f32[2, 2, 5, 3]
  %my = Attention(%q, %kg, %vg) {attention_kernel = "materialized", is_causal = 1, scale = 0.3} : f32[2, 4, 5, 3]
  %mq, %mk, %mv = AttentionGrad(%dy, %q, %kg, %vg) {attention_kernel = "materialized", is_causal = 1, scale = 0.3} : f32[2, 4, 5, 8], f32[2, 2, 5, 8], f32[2, 2, 5, 3]
  return %y, %p, %dq, %dk, %dv, %rq, %rk, %rv, %my, %mq, %mk, %mv
})",
                 {randomF32({2, 4, 5, 8}, 61), randomF32({2, 2, 5, 8}, 62),
                  randomF32({2, 2, 5, 3}, 63), randomF32({2, 4, 5, 3}, 64)},
                 1e-4f);
}

// Training-mode dropout (the nodes' random streams): Dropout, DropoutGrad,
// and attention's dropout in every kernel (materialized with the mask kept,
// recomputed in scratch, flash) draw the CPU's masks, so the results match
// the CPU's; masks exactly.
TEST(CudaBackendTest, Dropout) {
  compareWithCpu(R"(
graph @g(%x: f32[3, 7, 40], %dx: f32[3, 7, 40], %q: f32[2, 4, 5, 8], %kg: f32[2, 2, 5, 8], %vg: f32[2, 2, 5, 3], %dy: f32[2, 4, 5, 3]) {
  %ratio = Constant() {value = dense<f32[], [0.25]>} : f32[]
  %on = Constant() {value = dense<bool[], [true]>} : bool[]
  %d, %mask = Dropout(%x, %ratio, %on) {rng_stream = 3} : f32[3, 7, 40], bool[3, 7, 40]
  %g = DropoutGrad(%dx, %mask) {ratio = 0.25} : f32[3, 7, 40]
  %y, %p, %m, %pd = AttentionWithProbs(%q, %kg, %vg) {dropout = 0.2, is_causal = 1, rng_stream = 4, scale = 0.3} : f32[2, 4, 5, 3], f32[2, 4, 5, 5], bool[2, 4, 5, 5], f32[2, 4, 5, 5]
  %dq, %dk, %dv = AttentionGrad(%dy, %q, %kg, %vg, _, %p, %m, %pd) {dropout = 0.2, is_causal = 1, rng_stream = 4, scale = 0.3} : f32[2, 4, 5, 8], f32[2, 2, 5, 8], f32[2, 2, 5, 3]
  %fy = Attention(%q, %kg, %vg) {dropout = 0.2, is_causal = 1, rng_stream = 4, scale = 0.3} : f32[2, 4, 5, 3]
  %rq, %rk, %rv = AttentionGrad(%dy, %q, %kg, %vg) {dropout = 0.2, is_causal = 1, rng_stream = 4, scale = 0.3} : f32[2, 4, 5, 8], f32[2, 2, 5, 8], f32[2, 2, 5, 3]
  %my = Attention(%q, %kg, %vg) {attention_kernel = "materialized", dropout = 0.2, is_causal = 1, rng_stream = 4, scale = 0.3} : f32[2, 4, 5, 3]
  %mq, %mk, %mv = AttentionGrad(%dy, %q, %kg, %vg) {attention_kernel = "materialized", dropout = 0.2, is_causal = 1, rng_stream = 4, scale = 0.3} : f32[2, 4, 5, 8], f32[2, 2, 5, 8], f32[2, 2, 5, 3]
  return %d, %mask, %g, %y, %p, %m, %pd, %dq, %dk, %dv, %fy, %rq, %rk, %rv, %my, %mq, %mk, %mv
})",
                 {randomF32({3, 7, 40}, 71), randomF32({3, 7, 40}, 72),
                  randomF32({2, 4, 5, 8}, 73), randomF32({2, 2, 5, 8}, 74),
                  randomF32({2, 2, 5, 3}, 75), randomF32({2, 4, 5, 3}, 76)},
                 1e-4f);
}

// The vocabulary-parallel forms (CudaShardedOps.cpp) on one rank, where the
// group is the rank alone: the unsplit ops' results, as on the CPU.
TEST(CudaBackendTest, VocabularyParallelOnOneRank) {
  compareWithCpu(R"(
graph @g(%table: f32[10, 6], %ids: i64[2, 3], %dy: f32[2, 3, 6], %z: f32[2, 3, 10], %labels: i64[2, 3], %x: f32[4, 6]) {
  mesh @m = [tp = 1]
  %e = Gather(%table, %ids) {mesh = "m", mesh_axis = "tp"} : f32[2, 3, 6]
  %dt = GatherGrad(%table, %ids, %dy) {mesh = "m", mesh_axis = "tp"} : f32[10, 6]
  %loss = CrossEntropyLoss(%z, %labels) {ignore_index = 2, mesh = "m", mesh_axis = "tp"} : f32[]
  %one = Constant() {value = dense<f32[], [1.5]>} : f32[]
  %dz = CrossEntropyLossGrad(%one, %z, %labels) {ignore_index = 2, mesh = "m", mesh_axis = "tp"} : f32[2, 3, 10]
  %s = ShardSlice(%x) {axis = "tp", dim = 1, mesh = "m"} : f32[4, 6]
  return %e, %dt, %loss, %dz, %s
})",
                 {randomF32({10, 6}, 71), indices({2, 3}, 10, 72),
                  randomF32({2, 3, 6}, 73), randomF32({2, 3, 10}, 74, 3),
                  indices({2, 3}, 10, 75), randomF32({4, 6}, 76)},
                 1e-5f);
}

TEST(CudaBackendTest, Optimizers) {
  compareWithCpu(R"(
graph @g(%g: f32[3, 5], %lr: f32[], %b1: f32[], %b2: f32[], %eps: f32[], %wd: f32[], %t: f32[]) {
  param %p: f32[3, 5] = dense<f32[3, 5], [0.1, 0.2, 0.3, 0.4, 0.5, -0.1, -0.2, -0.3, -0.4, -0.5, 1.0, 2.0, 3.0, 4.0, 5.0]>
  param %m: f32[3, 5] {init = "zeros"}
  param %v: f32[3, 5] {init = "zeros"}
  param %q: f32[3, 5] = dense<f32[3, 5], [1.0, 2.0, 3.0, 4.0, 5.0, 0.1, 0.2, 0.3, 0.4, 0.5, -0.1, -0.2, -0.3, -0.4, -0.5]>
  %p2, %m2, %v2 = AdamW(%p, %g, %m, %v, %lr, %b1, %b2, %eps, %wd, %t) : f32[3, 5], f32[3, 5], f32[3, 5]
  %q2 = Sgd(%q, %g, %lr, %wd) : f32[3, 5]
  return %p2, %m2, %v2, %q2
})",
                 {randomF32({3, 5}, 27), scalar(0.01f), scalar(0.9f),
                  scalar(0.999f), scalar(1e-8f), scalar(0.1f), scalar(3)});
}

TEST(CudaBackendTest, Bfloat16) {
  compareWithCpu(R"(
graph @g(%x: bf16[4, 64], %w: bf16[64, 32], %b: bf16[32], %s: bf16[32], %labels: i64[4]) {
  %y = Linear(%x, %w, %b) : bf16[4, 32]
  %a = Gelu(%y) : bf16[4, 32]
  %n, %mean, %inv = LayerNormalization(%a, %s, %b) : bf16[4, 32], f32[4, 1], f32[4, 1]
  %sm = Softmax(%n) : bf16[4, 32]
  %loss = CrossEntropyLoss(%y, %labels) {reduction = "sum"} : bf16[]
  %dl = Constant() {value = dense<bf16[], [0.5]>} : bf16[]
  %dz = CrossEntropyLossGrad(%dl, %y, %labels) {reduction = "sum"} : bf16[4, 32]
  return %y, %a, %n, %sm, %loss, %dz
})",
                 {randomBF16({4, 64}, 28), randomBF16({64, 32}, 29),
                  randomBF16({32}, 30), randomBF16({32}, 31),
                  indices({4}, 32, 32)},
                 // bf16 keeps 8 bits: one unit in the last place, and a
                 // different summation order in the GEMM.
                 2e-2f);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(CudaBackendTest, IndexErrorsNameTheNode) {
  REQUIRE_DEVICE(Device);
  std::string Error;
  runOn(*Device, R"(
graph @g(%table: f32[10, 6], %ids: i64[3]) {
  %e = Gather(%table, %ids) : f32[3, 6] loc("embed")
  return %e
})",
        {randomF32({10, 6}, 1), i64({3}, {1, 12, 2})}, &Error);
  EXPECT_NE(Error.find("node 'embed' (Gather): an index is out of range for "
                       "dimension 0 of size 10"),
            std::string::npos)
      << Error;
  // The backend recovers: the next run is clean.
  std::vector<HostTensor> Out = runOn(*Device, R"(
graph @g(%x: f32[2]) {
  %y = Neg(%x) : f32[2]
  return %y
})",
                                      {f32({2}, {1, 2})});
  ASSERT_EQ(Out.size(), 1u);
  expectNear(floatsOf(Out[0]), {-1, -2});
}

TEST(CudaBackendTest, MissingKernelsNameTheOp) {
  REQUIRE_DEVICE(Device);
  std::string Error;
  runOn(*Device, R"(
graph @g(%x: f32[1, 2, 5, 5], %w: f32[3, 2, 3, 3]) {
  %y = Conv(%x, %w, _) {pads = [1, 1, 1, 1]} : f32[1, 3, 5, 5] loc("conv")
  return %y
})",
        {randomF32({1, 2, 5, 5}, 1), randomF32({3, 2, 3, 3}, 2)}, &Error);
  EXPECT_NE(Error.find("node 'conv' (Conv): no CUDA kernel"), std::string::npos)
      << Error;
}

// Head dimensions over the flash kernels' limit are an error naming the
// node and the limit.
TEST(CudaBackendTest, FlashAttentionLimitNamesTheNode) {
  REQUIRE_DEVICE(Device);
  std::string Error;
  runOn(*Device, R"(
graph @g(%q: f32[1, 1, 4, 300], %k: f32[1, 1, 4, 300], %v: f32[1, 1, 4, 8]) {
  %y = Attention(%q, %k, %v) : f32[1, 1, 4, 8] loc("attn")
  return %y
})",
        {randomF32({1, 1, 4, 300}, 1), randomF32({1, 1, 4, 300}, 2),
         randomF32({1, 1, 4, 8}, 3)},
        &Error);
  EXPECT_NE(Error.find("node 'attn' (Attention): the CUDA flash-attention "
                       "kernel takes head dimensions from 1 to 256; Q's is "
                       "300 and V's 8"),
            std::string::npos)
      << Error;
}

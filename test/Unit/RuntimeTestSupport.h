//===- RuntimeTestSupport.h - Running small programs in tests ---*- C++ -*-===//
//
// The runtime unit tests write a program as .air text, run it once on the
// CPU backend through the executor, and compare the outputs with values
// computed in the test. Inputs and outputs are HostTensors built from and
// read back as plain vectors; Random gives reproducible data.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TEST_UNIT_RUNTIMETESTSUPPORT_H
#define AUTOPAR_TEST_UNIT_RUNTIMETESTSUPPORT_H

#include "runtime/Executor.h"
#include "runtime/cpu/CpuBackend.h"

#include "ir/Graph.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cstring>
#include <string>
#include <vector>

namespace autopar {
namespace test {

/// Reproducible uniform floats in [-1, 1) (a 64-bit LCG).
class Random {
public:
  explicit Random(uint64_t Seed) : State(Seed) {}
  float next() {
    State = State * 6364136223846793005ULL + 1442695040888963407ULL;
    return float(State >> 40) / float(1 << 23) - 1.0f;
  }
  std::vector<float> vector(size_t N) {
    std::vector<float> V(N);
    for (float &X : V)
      X = next();
    return V;
  }

private:
  uint64_t State;
};

template <typename T>
HostTensor makeTensor(ElementType Elem, llvm::ArrayRef<int64_t> Shape,
                      llvm::ArrayRef<T> Values) {
  HostTensor H;
  H.Elem = Elem;
  H.Shape.assign(Shape.begin(), Shape.end());
  H.Bytes.resize(Values.size() * sizeof(T));
  if (!Values.empty())
    std::memcpy(H.Bytes.data(), Values.data(), H.Bytes.size());
  return H;
}

inline HostTensor f32(llvm::ArrayRef<int64_t> Shape,
                      llvm::ArrayRef<float> Values) {
  return makeTensor<float>(ElementType::F32, Shape, Values);
}
inline HostTensor i64(llvm::ArrayRef<int64_t> Shape,
                      llvm::ArrayRef<int64_t> Values) {
  return makeTensor<int64_t>(ElementType::I64, Shape, Values);
}
inline HostTensor boolean(llvm::ArrayRef<int64_t> Shape,
                          llvm::ArrayRef<uint8_t> Values) {
  return makeTensor<uint8_t>(ElementType::Bool, Shape, Values);
}

template <typename T> std::vector<T> elementsOf(const HostTensor &H) {
  std::vector<T> V(H.Bytes.size() / sizeof(T));
  if (!V.empty())
    std::memcpy(V.data(), H.Bytes.data(), H.Bytes.size());
  return V;
}
inline std::vector<float> floatsOf(const HostTensor &H) {
  return elementsOf<float>(H);
}

/// Parses and verifies Text, runs its graph once and returns the outputs,
/// or the run's error message in Error.
inline std::vector<HostTensor> runProgram(llvm::StringRef Text,
                                          std::vector<HostTensor> Inputs,
                                          std::string *Error = nullptr,
                                          bool Verify = true, int Threads = 1) {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Text, "test.air"),
                        llvm::SMLoc());
  std::string Diagnostics;
  llvm::raw_string_ostream OS(Diagnostics);
  DiagnosticEngine Diag(&SM, "test.air", OS);
  std::unique_ptr<Module> M = parseModule(SM, Diag);
  if (!M || (Verify && failed(verifyModule(*M, Diag)))) {
    ADD_FAILURE() << "invalid test program:\n" << OS.str();
    return {};
  }
  CpuBackendOptions Options;
  Options.BlasThreads = Threads;
  CpuBackend Backend(Options);
  llvm::Expected<std::unique_ptr<Executor>> Exec =
      Executor::create(*M->getGraphs().front(), Backend, ExecutorOptions());
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
  if (Error)
    ADD_FAILURE() << "expected an error, the program ran";
  std::vector<HostTensor> Outputs = std::move(*Results);
  return Outputs;
}

/// Expects Actual to equal Expected within Tolerance, element by element.
inline void expectNear(llvm::ArrayRef<float> Actual,
                       llvm::ArrayRef<float> Expected,
                       float Tolerance = 1e-5f) {
  ASSERT_EQ(Actual.size(), Expected.size());
  for (size_t I = 0; I != Actual.size(); ++I)
    EXPECT_NEAR(Actual[I], Expected[I], Tolerance) << "at element " << I;
}

} // namespace test
} // namespace autopar

#endif // AUTOPAR_TEST_UNIT_RUNTIMETESTSUPPORT_H

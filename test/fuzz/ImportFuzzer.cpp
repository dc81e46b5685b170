//===- ImportFuzzer.cpp - libFuzzer target for the ONNX importer ----------===//
//
// Feeds arbitrary bytes to the binary model reader and the importer, then
// checks that what was imported verifies and round-trips through the text
// form. Each model is imported twice: for planning, and with its weights
// loaded (--load-weights), whose sizes are untrusted. Any crash, sanitizer
// report or broken round trip is a bug. Built with clang when AUTOPAR_FUZZ
// is on; scripts/test.sh runs it.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"
#include "frontend/ModelReader.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include "onnx/onnx_pb.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace autopar;
using namespace llvm;

static std::string print(const Module &M) {
  std::string Text;
  raw_string_ostream OS(Text);
  printModule(OS, M);
  return OS.str();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  StringRef Bytes(reinterpret_cast<const char *>(Data), Size);
  DiagnosticEngine Diag(nullptr, "fuzz.onnx", nulls());
  std::unique_ptr<onnx::ModelProto> Model =
      parseModelProto(Bytes, /*AsText=*/false, "fuzz.onnx", Diag);
  if (!Model)
    return 0;
  for (bool LoadWeights : {false, true}) {
    ImportOptions Options;
    Options.LoadWeights = LoadWeights;
    // External data must stay inside the model's folder: a fresh one.
    std::unique_ptr<Module> M = importModelProto(
        *Model, "/nonexistent-fuzz-dir/fuzz.onnx", Options, Diag);
    if (!M)
      continue;
    std::string Text = print(*M);
    SourceMgr SM;
    SM.AddNewSourceBuffer(MemoryBuffer::getMemBufferCopy(Text, "printed"),
                          SMLoc());
    DiagnosticEngine TextDiag(&SM, "printed", errs());
    std::unique_ptr<Module> Reparsed = parseModule(SM, TextDiag);
    if (!Reparsed || print(*Reparsed) != Text) {
      errs() << "imported module does not round-trip:\n" << Text;
      abort();
    }
  }
  return 0;
}

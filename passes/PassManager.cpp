//===- PassManager.cpp - Running pipelines of passes ----------------------===//

#include "passes/PassManager.h"
#include "passes/PassRegistry.h"

#include "ir/Graph.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

#include <chrono>

using namespace autopar;
using namespace llvm;

static Error pipelineError(size_t Column, const Twine &Message) {
  return createStringError(
      inconvertibleErrorCode(),
      ("pipeline column " + Twine(Column + 1) + ": " + Message).str());
}

static bool isPassNameChar(char C) {
  return isAlnum(C) || C == '-' || C == '_';
}

Expected<std::vector<PipelineElement>>
autopar::parsePipelineText(StringRef Text) {
  std::vector<PipelineElement> Elements;
  size_t Pos = 0, End = Text.size();
  auto SkipSpaces = [&] {
    while (Pos < End && isSpace(Text[Pos]))
      ++Pos;
  };
  SkipSpaces();
  if (Pos == End)
    return Elements;
  while (true) {
    SkipSpaces();
    size_t Start = Pos;
    while (Pos < End && isPassNameChar(Text[Pos]))
      ++Pos;
    if (Pos == Start)
      return pipelineError(Pos, "expected a pass name");
    PipelineElement E;
    E.Argument = Text.slice(Start, Pos).str();
    SkipSpaces();
    if (Pos < End && Text[Pos] == '{') {
      ++Pos;
      while (true) {
        while (Pos < End && (isSpace(Text[Pos]) || Text[Pos] == ','))
          ++Pos;
        if (Pos < End && Text[Pos] == '}') {
          ++Pos;
          break;
        }
        size_t KeyStart = Pos;
        while (Pos < End && isPassNameChar(Text[Pos]))
          ++Pos;
        if (Pos == KeyStart)
          return pipelineError(Pos, "expected an option name or '}' in the "
                                    "options of '" +
                                        E.Argument + "'");
        std::string Key = Text.slice(KeyStart, Pos).str();
        if (Pos >= End || Text[Pos] != '=')
          return pipelineError(Pos, "expected '=' after option '" + Key + "'");
        ++Pos;
        size_t ValueStart = Pos;
        while (Pos < End && !isSpace(Text[Pos]) && Text[Pos] != ',' &&
               Text[Pos] != '}' && Text[Pos] != '{')
          ++Pos;
        if (Pos == ValueStart)
          return pipelineError(Pos,
                               "expected a value for option '" + Key + "'");
        E.Options.push_back({Key, Text.slice(ValueStart, Pos).str()});
      }
    }
    Elements.push_back(std::move(E));
    SkipSpaces();
    if (Pos == End)
      return Elements;
    if (Text[Pos] != ',')
      return pipelineError(Pos, "expected ',' between passes");
    ++Pos;
  }
}

Error PassManager::addPipeline(StringRef Text) {
  Expected<std::vector<PipelineElement>> Elements = parsePipelineText(Text);
  if (!Elements)
    return Elements.takeError();
  for (const PipelineElement &E : *Elements) {
    if (StringRef Expansion = lookupPipeline(E.Argument); !Expansion.empty()) {
      if (!E.Options.empty())
        return createStringError(inconvertibleErrorCode(),
                                 "pipeline '" + E.Argument +
                                     "' takes no options");
      if (Error Err = addPipeline(Expansion))
        return Err;
      continue;
    }
    const PassRegistration *R = lookupPass(E.Argument);
    if (!R) {
      std::string Known;
      for (const PassRegistration &Reg : getRegisteredPasses())
        Known += (Known.empty() ? "" : ", ") + Reg.Argument;
      return createStringError(inconvertibleErrorCode(),
                               "unknown pass '" + E.Argument +
                                   "' (registered passes: " + Known + ")");
    }
    std::unique_ptr<Pass> P = R->Create();
    for (const auto &[Key, Value] : E.Options)
      if (Error Err = P->getOptions().set(E.Argument, Key, Value))
        return Err;
    if (Error Err = P->validateOptions())
      return createStringError(inconvertibleErrorCode(),
                               "pass '" + E.Argument +
                                   "': " + toString(std::move(Err)));
    addPass(std::move(P));
  }
  return Error::success();
}

void PassManager::printPipeline(raw_ostream &OS) const {
  interleave(
      Passes, OS,
      [&](const std::unique_ptr<Pass> &P) {
        OS << P->getArgument();
        P->getOptions().printValues(OS);
      },
      ",");
}

LogicalResult PassManager::run(Module &M, DiagnosticEngine &Diag) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<std::string, double>> Timings;
  LogicalResult Result = success();
  for (const std::unique_ptr<Pass> &P : Passes) {
    Clock::time_point Start = Clock::now();
    LogicalResult PassResult = P->run(M, Diag);
    Timings.push_back(
        {P->getArgument().str(),
         std::chrono::duration<double>(Clock::now() - Start).count()});
    if (failed(PassResult)) {
      Diag.error(SMLoc(), "pass '" + P->getArgument() + "' failed");
      Result = failure();
      break;
    }
    if (Options.PrintIRAfterAll) {
      *Options.IRDumpStream << "// -----// IR Dump After " << P->getArgument()
                            << " //----- //\n";
      printModule(*Options.IRDumpStream, M);
    }
    if (Options.VerifyEach && failed(verifyModule(M, Diag))) {
      Diag.error(SMLoc(), "pass '" + P->getArgument() +
                              "' left invalid IR; this is a bug in the pass");
      Result = failure();
      break;
    }
  }
  if (Options.TimePasses) {
    raw_ostream &OS = *Options.TimingStream;
    double Total = 0;
    for (const auto &T : Timings)
      Total += T.second;
    OS << "===" << std::string(70, '-') << "===\n"
       << "                      ... Pass execution timing report ...\n"
       << "===" << std::string(70, '-') << "===\n"
       << format("  Total Execution Time: %.4f seconds\n\n", Total)
       << "   ---Wall Time---  --- Name ---\n";
    for (const auto &T : Timings)
      OS << format("   %.4f (%5.1f%%)  ", T.second,
                   Total > 0 ? 100 * T.second / Total : 0.0)
         << T.first << '\n';
    OS << format("   %.4f (100.0%%)  Total\n", Total);
  }
  return Result;
}

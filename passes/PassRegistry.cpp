//===- PassRegistry.cpp - Finding passes by name --------------------------===//

#include "passes/PassRegistry.h"
#include "passes/Passes.h"

#include <algorithm>
#include <cassert>
#include <vector>

using namespace autopar;
using namespace llvm;

static std::vector<PassRegistration> &getRegistry() {
  static std::vector<PassRegistration> Registry = [] {
    std::vector<PassRegistration> R = {
#define PASS(Argument, Class, Description)                                     \
  {Argument, Description, create##Class},
#include "passes/Passes.def"
    };
    std::sort(R.begin(), R.end(),
              [](const PassRegistration &A, const PassRegistration &B) {
                return A.Argument < B.Argument;
              });
    return R;
  }();
  return Registry;
}

ArrayRef<PassRegistration> autopar::getRegisteredPasses() {
  return getRegistry();
}

const PassRegistration *autopar::lookupPass(StringRef Argument) {
  for (const PassRegistration &R : getRegistry())
    if (R.Argument == Argument)
      return &R;
  return nullptr;
}

void autopar::registerPass(StringRef Argument, StringRef Description,
                           std::function<std::unique_ptr<Pass>()> Create) {
  assert(!lookupPass(Argument) && "pass registered twice");
  std::vector<PassRegistration> &R = getRegistry();
  PassRegistration Entry{Argument.str(), Description.str(), std::move(Create)};
  R.insert(std::upper_bound(
               R.begin(), R.end(), Entry,
               [](const PassRegistration &A, const PassRegistration &B) {
                 return A.Argument < B.Argument;
               }),
           std::move(Entry));
}

namespace {
struct PipelineInfo {
  StringRef Name, Text, Description;
};
} // namespace

static const PipelineInfo Pipelines[] = {
#define PIPELINE(Name, Text, Description) {Name, Text, Description},
#include "passes/Pipelines.def"
};

StringRef autopar::lookupPipeline(StringRef Name) {
  for (const PipelineInfo &P : Pipelines)
    if (P.Name == Name)
      return P.Text;
  return "";
}

void autopar::printRegisteredPasses(raw_ostream &OS) {
  for (const PassRegistration &R : getRegistry()) {
    OS << "    " << R.Argument << " - " << R.Description << '\n';
    R.Create()->getOptions().printHelp(OS, 8);
  }
  OS << "\nNamed pipelines:\n";
  for (const PipelineInfo &P : Pipelines)
    OS << "    " << P.Name << " - " << P.Description << "\n        = " << P.Text
       << '\n';
}

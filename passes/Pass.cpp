//===- Pass.cpp - The pass interface and pass options ---------------------===//

#include "passes/Pass.h"

#include "ir/Attributes.h"
#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"

#include <cerrno>
#include <cstdlib>

using namespace autopar;
using namespace llvm;

Pass::~Pass() = default;

LogicalResult GraphPass::run(Module &M, DiagnosticEngine &Diag) {
  (void)Diag;
  for (const std::unique_ptr<Graph> &G : M.getGraphs())
    runOnGraph(*G);
  return success();
}

void PassOptionBinder::bind(StringRef Name, bool *Field,
                            StringRef Description) {
  Bindings.push_back({Name.str(), Field, Description.str()});
}
void PassOptionBinder::bind(StringRef Name, int64_t *Field,
                            StringRef Description) {
  Bindings.push_back({Name.str(), Field, Description.str()});
}
void PassOptionBinder::bind(StringRef Name, double *Field,
                            StringRef Description) {
  Bindings.push_back({Name.str(), Field, Description.str()});
}
void PassOptionBinder::bind(StringRef Name, std::string *Field,
                            StringRef Description) {
  Bindings.push_back({Name.str(), Field, Description.str()});
}

static Error optionError(StringRef PassName, const Twine &Message) {
  return createStringError(inconvertibleErrorCode(),
                           ("pass '" + PassName + "': " + Message).str());
}

Error PassOptionBinder::set(StringRef PassName, StringRef Name,
                            StringRef Text) {
  auto It = find_if(Bindings, [&](const Binding &B) { return B.Name == Name; });
  if (It == Bindings.end()) {
    std::string Valid;
    for (const Binding &B : Bindings)
      Valid += (Valid.empty() ? "" : ", ") + B.Name;
    return optionError(
        PassName,
        "unknown option '" + Name + "' (" +
            (Valid.empty() ? "it has no options" : "options: " + Valid) + ")");
  }
  auto Bad = [&](StringRef Kind) {
    return optionError(PassName, "option '" + Name + "' expects " + Kind +
                                     ", got '" + Text + "'");
  };
  if (auto **B = std::get_if<bool *>(&It->Field)) {
    if (Text == "true" || Text == "1")
      **B = true;
    else if (Text == "false" || Text == "0")
      **B = false;
    else
      return Bad("true or false");
  } else if (auto **I = std::get_if<int64_t *>(&It->Field)) {
    if (Text.getAsInteger(10, **I))
      return Bad("an integer");
  } else if (auto **D = std::get_if<double *>(&It->Field)) {
    std::string S = Text.str();
    char *End;
    errno = 0;
    double V = std::strtod(S.c_str(), &End);
    if (S.empty() || *End != '\0' || errno == ERANGE)
      return Bad("a number");
    **D = V;
  } else {
    *std::get<std::string *>(It->Field) = Text.str();
  }
  return Error::success();
}

void PassOptionBinder::printValues(raw_ostream &OS) const {
  if (Bindings.empty())
    return;
  OS << '{';
  interleave(
      Bindings, OS,
      [&](const Binding &B) {
        OS << B.Name << '=';
        if (auto *const *Bool = std::get_if<bool *>(&B.Field))
          OS << (**Bool ? "true" : "false");
        else if (auto *const *I = std::get_if<int64_t *>(&B.Field))
          OS << **I;
        else if (auto *const *D = std::get_if<double *>(&B.Field))
          printFloat(OS, **D);
        else
          OS << *std::get<std::string *>(B.Field);
      },
      " ");
  OS << '}';
}

void PassOptionBinder::printHelp(raw_ostream &OS, unsigned Indent) const {
  for (const Binding &B : Bindings) {
    StringRef Kind = std::holds_alternative<bool *>(B.Field)      ? "bool"
                     : std::holds_alternative<int64_t *>(B.Field) ? "int"
                     : std::holds_alternative<double *>(B.Field)  ? "number"
                                                                  : "string";
    OS.indent(Indent) << B.Name << "=<" << Kind << "> - " << B.Description
                      << '\n';
  }
}

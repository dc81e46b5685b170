//===- OutputFiles.cpp - Write outputs whole or not at all ----------------===//

#include "driver/OutputFiles.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <vector>

using namespace autopar;
using namespace llvm;

Error autopar::writeOutputFiles(
    ArrayRef<std::pair<std::string, std::string>> Files) {
  std::vector<std::optional<sys::fs::TempFile>> Temps;
  auto DiscardAll = [&] {
    for (std::optional<sys::fs::TempFile> &T : Temps)
      if (T)
        consumeError(T->discard());
  };
  for (const auto &[Path, Text] : Files) {
    if (Path == "-") {
      Temps.emplace_back();
      continue;
    }
    Expected<sys::fs::TempFile> Temp =
        sys::fs::TempFile::create(Path + ".tmp-%%%%%%");
    if (!Temp) {
      DiscardAll();
      return createStringError(inconvertibleErrorCode(),
                               "cannot create a temporary file beside '" +
                                   Path + "': " + toString(Temp.takeError()));
    }
    Temps.emplace_back(std::move(*Temp));
    raw_fd_ostream OS(Temps.back()->FD, /*shouldClose=*/false);
    OS << Text;
    OS.flush();
    if (OS.has_error()) {
      std::string Message = OS.error().message();
      OS.clear_error();
      DiscardAll();
      return createStringError(inconvertibleErrorCode(),
                               "cannot write '" + Path + "': " + Message);
    }
  }
  for (unsigned I = 0; I != Files.size(); ++I) {
    if (!Temps[I]) {
      outs() << Files[I].second;
      outs().flush();
      continue;
    }
    if (Error E = Temps[I]->keep(Files[I].first)) {
      std::string Message = toString(std::move(E));
      for (unsigned J = I + 1; J != Files.size(); ++J)
        if (Temps[J])
          consumeError(Temps[J]->discard());
      return createStringError(inconvertibleErrorCode(), "cannot write '" +
                                                             Files[I].first +
                                                             "': " + Message);
    }
  }
  return Error::success();
}

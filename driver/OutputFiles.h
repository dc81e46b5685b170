//===- OutputFiles.h - Write outputs whole or not at all --------*- C++ -*-===//
//
// Every file a tool writes goes through a temporary file beside it that is
// renamed into place, so that a failed run leaves no partial output. A set
// of files is written to temporaries first and renamed only when all of
// them were written.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_OUTPUTFILES_H
#define AUTOPAR_DRIVER_OUTPUTFILES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <utility>

namespace autopar {

/// Writes each (path, text); `-` is standard output. Errors name the path.
llvm::Error
writeOutputFiles(llvm::ArrayRef<std::pair<std::string, std::string>> Files);

} // namespace autopar

#endif // AUTOPAR_DRIVER_OUTPUTFILES_H

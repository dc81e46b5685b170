//===- WeightFile.cpp - A plan's own copy of the model's inline weights ---===//

#include "weights/WeightFile.h"

#include "weights/TensorBytes.h"

#include "ir/Graph.h"

#include "llvm/Support/MathExtras.h"

using namespace autopar;
using namespace llvm;

/// Tensors start at multiples of this many bytes (a cache line; what
/// mmap-based readers and vectorized copies like).
static constexpr size_t Alignment = 64;

std::string autopar::externalizeInlineWeights(Module &M, StringRef FileName) {
  std::string File;
  for (const std::unique_ptr<Graph> &G : M.getGraphs())
    for (const std::unique_ptr<Value> &P : G->getParams()) {
      const std::optional<WeightSource> &S = P->getWeightSource();
      if (!S || S->SourceKind != WeightSource::Kind::Inline || !S->Data)
        continue;
      std::vector<uint8_t> Bytes = encodeTensorBytes(*S->Data);
      File.resize(alignTo(File.size(), Alignment), '\0');
      int64_t Offset = int64_t(File.size());
      File.append(Bytes.begin(), Bytes.end());
      P->setWeightSource(
          WeightSource::getExternal(FileName, Offset, int64_t(Bytes.size())));
    }
  return File;
}

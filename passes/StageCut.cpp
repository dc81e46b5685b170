//===- StageCut.cpp - Contiguous stage cuts under time and memory ---------===//
//
// Greedy packing under a time threshold (each stage as long as the
// threshold and its memory allow) decides whether a threshold is reachable
// with the stages available; a binary search on the threshold finds the
// smallest. Greedy packing is optimal for a threshold when a shorter prefix
// never fits worse (Fits is monotone), so the cut minimizes the slowest
// stage.
//
//===----------------------------------------------------------------------===//

#include "passes/StageCut.h"

#include <algorithm>

using namespace autopar;
using namespace llvm;

std::optional<std::vector<unsigned>>
autopar::cutStages(ArrayRef<double> Time, unsigned Chunks,
                   function_ref<bool(unsigned, unsigned, unsigned)> Fits) {
  unsigned U = Time.size();
  if (U < Chunks || Chunks == 0)
    return std::nullopt;
  // Greedy: each chunk as long as the threshold and its memory allow.
  auto Pack = [&](double T) -> std::optional<std::vector<unsigned>> {
    std::vector<unsigned> Sizes;
    unsigned Begin = 0;
    double Sum = 0;
    for (unsigned I = 0; I != U; ++I) {
      if (Time[I] > T || !Fits(Sizes.size(), I, I + 1))
        return std::nullopt;
      if (I != Begin &&
          (Sum + Time[I] > T || !Fits(Sizes.size(), Begin, I + 1) ||
           U - I < Chunks - Sizes.size())) {
        Sizes.push_back(I - Begin);
        Begin = I;
        Sum = 0;
        if (Sizes.size() >= Chunks)
          return std::nullopt;
      }
      Sum += Time[I];
    }
    Sizes.push_back(U - Begin);
    if (Sizes.size() > Chunks)
      return std::nullopt;
    // Fewer chunks than needed: split the last ones (smaller chunks fit).
    while (Sizes.size() < Chunks) {
      unsigned Last = Sizes.size() - 1;
      unsigned Widest = Last;
      for (unsigned J = 0; J != Sizes.size(); ++J)
        if (Sizes[J] > Sizes[Widest])
          Widest = J;
      if (Sizes[Widest] < 2)
        return std::nullopt;
      unsigned Half = Sizes[Widest] / 2;
      Sizes[Widest] -= Half;
      Sizes.insert(Sizes.begin() + Widest + 1, Half);
    }
    return Sizes;
  };
  double Lo = *std::max_element(Time.begin(), Time.end());
  double Hi = 0;
  for (double T : Time)
    Hi += T;
  std::optional<std::vector<unsigned>> Best = Pack(Hi);
  if (!Best)
    return std::nullopt;
  for (unsigned Iter = 0; Iter != 60 && Hi - Lo > 1e-12 * Hi; ++Iter) {
    double Mid = (Lo + Hi) / 2;
    if (std::optional<std::vector<unsigned>> P = Pack(Mid)) {
      Best = std::move(P);
      Hi = Mid;
    } else {
      Lo = Mid;
    }
  }
  return Best;
}

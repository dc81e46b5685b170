//===- PipelineOrder.cpp - The order a pipeline schedule runs in ----------===//

#include "ir/PipelineOrder.h"

#include <algorithm>

using namespace autopar;

namespace {
/// Writes one rank's order.
class OrderWriter {
public:
  OrderWriter(unsigned Stages, unsigned VirtualStages, unsigned MicroBatches,
              unsigned Rank)
      : P(Stages), V(VirtualStages), M(MicroBatches), Rank(Rank) {}

  std::vector<PipelineAction> write(ScheduleKind Kind) {
    Out.reserve(size_t(2) * V * M);
    switch (Kind) {
    case ScheduleKind::GPipe:
      writeGPipe();
      break;
    case ScheduleKind::OneFOneB:
      writeOneFOneB();
      break;
    case ScheduleKind::Interleaved:
      writeInterleaved();
      break;
    }
    return std::move(Out);
  }

private:
  void emit(unsigned Stage, unsigned MicroBatch, bool Backward) {
    Out.push_back({Stage, MicroBatch, Backward});
  }

  void writeGPipe() {
    for (unsigned I = 0; I != M; ++I)
      emit(Rank, I, false);
    for (unsigned I = 0; I != M; ++I)
      emit(Rank, I, true);
  }

  /// Megatron-LM's forward_backward_pipelining_without_interleaving: rank r
  /// runs min(p - r - 1, m) warm-up forwards, then one forward and one
  /// backward in turn, then the remaining backwards.
  void writeOneFOneB() {
    unsigned Warmup = std::min(P - Rank - 1, M);
    unsigned Remaining = M - Warmup;
    for (unsigned I = 0; I != Warmup; ++I)
      emit(Rank, I, false);
    for (unsigned I = 0; I != Remaining; ++I) {
      emit(Rank, Warmup + I, false);
      emit(Rank, I, true);
    }
    for (unsigned I = Remaining; I != M; ++I)
      emit(Rank, I, true);
  }

  /// Megatron-LM's forward_backward_pipelining_with_interleaving: the K-th
  /// forward (backward) of the rank runs chunk (K mod pv) / p (counted from
  /// the last chunk for backwards) on micro-batch (K / pv) * p + K mod p.
  void emitInterleaved(unsigned K, bool Backward) {
    unsigned InGroup = K % (P * V);
    unsigned Chunk = InGroup / P;
    if (Backward)
      Chunk = V - 1 - Chunk;
    unsigned MicroBatch = K / (P * V) * P + InGroup % P;
    emit(Chunk * P + Rank, MicroBatch, Backward);
  }

  void writeInterleaved() {
    unsigned Total = M * V;
    // With as many micro-batches as ranks Megatron-LM runs every forward
    // first; otherwise the first rank's warm-up covers the other chunks of
    // the first group and the round trip to the last rank.
    unsigned Warmup = Total;
    if (M != P)
      Warmup = std::min((P - Rank - 1) * 2 + (V - 1) * P, Total);
    unsigned Remaining = Total - Warmup;
    for (unsigned K = 0; K != Warmup; ++K)
      emitInterleaved(K, false);
    for (unsigned K = 0; K != Remaining; ++K) {
      emitInterleaved(Warmup + K, false);
      emitInterleaved(K, true);
    }
    for (unsigned K = Remaining; K != Total; ++K)
      emitInterleaved(K, true);
  }

  unsigned P, V, M, Rank;
  std::vector<PipelineAction> Out;
};
} // namespace

std::vector<PipelineAction> autopar::getRankOrder(ScheduleKind Kind,
                                                  unsigned Stages,
                                                  unsigned VirtualStages,
                                                  unsigned MicroBatches,
                                                  unsigned Rank) {
  return OrderWriter(Stages, VirtualStages, MicroBatches, Rank).write(Kind);
}

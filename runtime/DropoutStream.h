//===- DropoutStream.h - Where a node's dropout mask comes from -*- C++ -*-===//
//
// A node that draws a dropout mask carries `rng_stream` (the dropout-streams
// pass numbers them in the model's order) and, once cloned per micro-batch,
// `micro_batch` and `micro_batches`. Its mask is a function of the run's
// seed, the step, the stream, the global micro-batch (this replica's
// micro-batches follow those of the replicas before it) and each element's
// index in the whole tensor of the micro-batch (DropoutMask.h): the same
// masks whatever the tensor, pipeline or data parallelism of the plan, and
// the same in a forward recomputed for the backward. Both backends resolve
// a node's block here and hand it to their kernels (KernelArgs::Dropout).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_DROPOUTSTREAM_H
#define AUTOPAR_RUNTIME_DROPOUTSTREAM_H

#include "runtime/DropoutMask.h"
#include "runtime/KernelArgs.h"

namespace autopar {

/// Whether N draws a dropout mask: it has `rng_stream`.
bool drawsDropoutMask(const Node &N);

/// The block of A's random tensor on this rank: Dropout's result (laid out
/// as its `sharding` says), the probabilities [B, Hq, Sq, Skv] of Attention,
/// AttentionWithProbs and AttentionGrad (batch, heads and queries split as
/// Q is); the ratio is Dropout's constant operand or the `dropout`
/// attribute.
llvm::Expected<DropoutBlock> getDropoutBlock(const KernelArgs &A,
                                             const Communicator &Comm,
                                             const StepRandom &R);

/// An attention node's dropout for its kernel: A.Dropout, null without a
/// `dropout` ratio; an error when it has one but no random stream.
llvm::Expected<const DropoutBlock *>
getAttentionDropoutBlock(const KernelArgs &A);

/// The mask's key for Ratio in [0, 1).
DropoutKey makeDropoutKey(const StepRandom &R, int64_t Stream,
                          int64_t MicroBatch, double Ratio);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_DROPOUTSTREAM_H

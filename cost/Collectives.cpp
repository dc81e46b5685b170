//===- Collectives.cpp - Time of collectives on a cluster -----------------===//
//
// Notation: a group of n ranks, k per node, over m = n/k nodes; the
// intra-node level has bandwidth Bi and per-step latency ai, the inter-node
// level Be and ae (Cluster::IntraNode, InterNode: per GPU, per direction);
// S bytes in the nccl-tests convention; L0 the base latency of a call.
// Every algorithm costs L0 + latency + bandwidth term under each protocol
// the transport has (NCCL: LL, LL128, Simple), and a call takes the fastest
// pair; docs/CostModel.md derives each one.
//
//===----------------------------------------------------------------------===//

#include "cost/Collectives.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

using namespace autopar;

namespace {

constexpr double Infinity = std::numeric_limits<double>::infinity();

/// NCCL's tree all-reduce reaches 0.92 of the bus bandwidth of its links
/// (tuning.cc, "busBw * .92" for tree all-reduce), and moves 2S through
/// them (algorithm bandwidth = bus bandwidth / 2).
constexpr double TreeBandwidthFraction = 0.92;

/// A latency and a bandwidth term, summed or overlapped by the caller.
struct Phase {
  double Latency = 0;
  double Transfer = 0;
  double seconds() const { return Latency + Transfer; }
};

/// One of NCCL's protocols, from its tuning model (src/graph/tuning.cc,
/// NCCL 2.18: baseLat, hwLat and the bandwidth refinements of
/// ncclTopoTuneModel). The cluster's links carry the LL protocol's ring
/// latencies (0.6 us per NVLink hop, 2.7 us per network hop, 6.6 us per
/// call for the catalog GPUs) and the Simple protocol's bandwidth, so each
/// protocol is given relative to those: its latencies as multiples of LL's
/// ring figures, its bandwidth as a share of the link's.
struct Protocol {
  CollectiveProtocol Id;
  /// Multipliers of the call's base latency, the intra-node and the
  /// inter-node hop latency: for rings (and what is built of them) and for
  /// trees.
  double RingBase, RingIntraHop, RingInterHop;
  double TreeBase, TreeIntraHop, TreeInterHop;
};

// tuning.cc's figures in microseconds, divided by LL's ring figures.
constexpr double LLBase = 6.6, LLIntra = 0.6, LLInter = 2.7;
constexpr Protocol NcclProtocols[] = {
    {CollectiveProtocol::LL, 1, 1, 1, 6.8 / LLBase, 0.6 / LLIntra,
     5.0 / LLInter},
    {CollectiveProtocol::LL128, 14.0 / LLBase, 1.9 / LLIntra, 4.0 / LLInter,
     14.0 / LLBase, 1.25 / LLIntra, 8.5 / LLInter},
    {CollectiveProtocol::Simple, 8.4 / LLBase, 3.4 / LLIntra, 14.0 / LLInter, 0,
     28 / LLIntra, 28 / LLInter}};
/// A transport with one protocol: the links' figures as they are.
constexpr Protocol SingleProtocol[] = {
    {CollectiveProtocol::Single, 1, 1, 1, 1, 1, 1}};

/// The share of the link bandwidth a protocol moves payload at (tuning.cc):
/// LL sends 8 bytes of data per 16 and runs at a quarter of the bus
/// bandwidth for all-reduce or across nodes, a third otherwise; LL128 at
/// 120/128 (NCCL uses 0.92); Simple at all of it. Trees: 1/3.8 for LL, 7/9
/// in one node and 120/128 across nodes for LL128 (on top of the tree's own
/// 0.92, TreeBandwidthFraction).
double bandwidthShare(CollectiveProtocol P, bool Tree, Collective C,
                      bool SpansNodes) {
  switch (P) {
  case CollectiveProtocol::LL:
    if (Tree)
      return 1 / 3.8;
    return SpansNodes || C == Collective::AllReduce ? 1.0 / 4 : 1.0 / 3;
  case CollectiveProtocol::LL128:
    if (Tree)
      return SpansNodes ? 120.0 / 128 : 7.0 / 9;
    return 0.92;
  case CollectiveProtocol::Simple:
  case CollectiveProtocol::Single:
    return 1;
  }
  llvm_unreachable("unknown protocol");
}

/// The group against the cluster's links, under one protocol.
struct Shape {
  double N, K, M;
  double Bi, Ai, Be, Ae;
  /// The call's base latency.
  double L0;

  Shape(const Cluster &Cl, CommGroup G, Collective C, const Protocol &P,
        bool Tree)
      : N(G.Size), K(G.RanksPerNode), M(G.numNodes()) {
    double Share = bandwidthShare(P.Id, Tree, C, M > 1);
    Bi = Cl.IntraNode.BytesPerSec * Share;
    Be = Cl.InterNode.BytesPerSec * Share;
    Ai = Cl.IntraNode.LatencySec * (Tree ? P.TreeIntraHop : P.RingIntraHop);
    Ae = Cl.InterNode.LatencySec * (Tree ? P.TreeInterHop : P.RingInterHop);
    L0 = Cl.CollectiveLatencySec * (Tree ? P.TreeBase : P.RingBase);
  }

  bool spansNodes() const { return M > 1; }
  /// The link a flat ring's every step waits for: the slower of the two
  /// levels once the ring leaves a node.
  double ringBandwidth() const {
    if (!spansNodes())
      return Bi;
    return K == 1 ? Be : std::min(Bi, Be);
  }
  double ringLatency() const {
    if (!spansNodes())
      return Ai;
    return K == 1 ? Ae : std::max(Ai, Ae);
  }
};

/// Ring over P ranks moving a Factor share of S per rank in Steps steps
/// (Thakur et al. 2005: all-reduce 2(p-1) steps of S/p, all-gather and
/// reduce-scatter p-1 steps of S/p).
Phase ring(double Steps, double Latency, double BytesPerRank,
           double Bandwidth) {
  return {Steps * Latency, BytesPerRank / Bandwidth};
}

Phase ringAllReduce(double P, double S, double Latency, double Bandwidth) {
  return ring(2 * (P - 1), Latency, 2 * (P - 1) / P * S, Bandwidth);
}
Phase ringAllGather(double P, double S, double Latency, double Bandwidth) {
  return ring(P - 1, Latency, (P - 1) / P * S, Bandwidth);
}

/// Double binary tree over M nodes with a chain of K ranks in each:
/// latency 2((K-1) ai + log2(M) ae) as in NCCL's tuning model; the
/// pipelined tree moves 2S through the slower of NVLink and the node's K
/// NIC rails (NCCL builds one tree per channel, the channels spread over
/// the NICs).
Phase treeAllReduce(const Shape &Sh, double S) {
  double Hops = Sh.M > 1 ? std::ceil(std::log2(Sh.M)) : 0;
  double Latency = 2 * ((Sh.K - 1) * Sh.Ai + Hops * Sh.Ae);
  double Bandwidth = Sh.M == 1   ? Sh.Bi
                     : Sh.K == 1 ? Sh.Be
                                 : std::min(Sh.Bi, Sh.K * Sh.Be);
  return {Latency, 2 * S / (TreeBandwidthFraction * Bandwidth)};
}

/// Phases whose transfers are pipelined over chunks (intra-node and
/// inter-node links busy at once, as NCCL's rings that cross nodes on every
/// rail are): latencies add, the slowest transfer sets the pace.
double pipelined(std::initializer_list<Phase> Phases) {
  double Latency = 0, Transfer = 0;
  for (const Phase &P : Phases) {
    Latency += P.Latency;
    Transfer = std::max(Transfer, P.Transfer);
  }
  return Latency + Transfer;
}

double hierarchical(const Shape &Sh, const Shape &TreeSh, Collective C,
                    double S) {
  double K = Sh.K, M = Sh.M;
  // Each rank's rail carries 1/K of the data between nodes.
  double Rail = S / K;
  switch (C) {
  case Collective::AllReduce: {
    // Reduce-scatter in the node, all-reduce of S/K across nodes on each
    // rail (ring or tree, whichever is faster), all-gather in the node.
    Phase Intra = ringAllGather(K, S, Sh.Ai, Sh.Bi);
    Phase Ring = ringAllReduce(M, Rail, Sh.Ae, Sh.Be);
    Shape Rails = TreeSh;
    Rails.K = 1;
    Phase Tree = treeAllReduce(Rails, Rail);
    Phase Inter = Tree.seconds() < Ring.seconds() ? Tree : Ring;
    return pipelined({Intra, Inter, Intra});
  }
  case Collective::AllGather:
  case Collective::ReduceScatter:
    // All-gather of S/K across nodes on each rail, then of S in the node
    // (reduce-scatter: the same phases reversed).
    return pipelined({ringAllGather(M, Rail, Sh.Ae, Sh.Be),
                      ringAllGather(K, S, Sh.Ai, Sh.Bi)});
  case Collective::Broadcast: {
    // Scatter in the root's node, a pipelined chain of S/K across nodes on
    // each rail, all-gather in every node.
    Phase Intra = ringAllGather(K, S, Sh.Ai, Sh.Bi);
    Phase Inter{(M - 1) * Sh.Ae, Rail / Sh.Be};
    return pipelined({Intra, Inter, Intra});
  }
  case Collective::AllToAll:
  case Collective::SendRecv:
    return Infinity;
  }
  llvm_unreachable("unknown collective");
}

double flatRing(const Shape &Sh, Collective C, double S) {
  double B = Sh.ringBandwidth(), A = Sh.ringLatency();
  switch (C) {
  case Collective::AllReduce:
    return ringAllReduce(Sh.N, S, A, B).seconds();
  case Collective::AllGather:
  case Collective::ReduceScatter:
    return ringAllGather(Sh.N, S, A, B).seconds();
  case Collective::Broadcast:
    // A pipelined chain: n-1 steps to fill, then S at link speed.
    return (Sh.N - 1) * A + S / B;
  case Collective::AllToAll:
  case Collective::SendRecv:
    return Infinity;
  }
  llvm_unreachable("unknown collective");
}

/// Pairwise exchange (Thakur et al. 2005: (p-1) alpha + (p-1)/p S beta).
/// Each rank sends S/n to every other rank; the part for its own node goes
/// over NVLink while the rest leaves through its NIC share.
double pairwise(const Shape &Sh, double S) {
  double Latency = (Sh.K - 1) * Sh.Ai + (Sh.N - Sh.K) * Sh.Ae;
  double Intra = (Sh.K - 1) / Sh.N * S / Sh.Bi;
  double Inter = Sh.N > Sh.K ? (Sh.N - Sh.K) / Sh.N * S / Sh.Be : 0;
  return Latency + std::max(Intra, Inter);
}

double direct(const Shape &Sh, double S) {
  if (Sh.spansNodes())
    return Sh.Ae + S / Sh.Be;
  return Sh.Ai + S / Sh.Bi;
}

void checkGroup(const Cluster &Cl, CommGroup G, double Bytes) {
  (void)Cl;
  (void)G;
  (void)Bytes;
  assert(G.Size >= 1 && G.RanksPerNode >= 1 && "empty group");
  assert(G.Size % G.RanksPerNode == 0 && "ranks split unevenly over nodes");
  assert(G.RanksPerNode <= Cl.GpusPerNode && "more ranks than a node holds");
  assert(Bytes >= 0 && "negative size");
}

} // namespace

llvm::StringRef autopar::getCollectiveName(Collective C) {
  switch (C) {
  case Collective::AllReduce:
    return "all-reduce";
  case Collective::AllGather:
    return "all-gather";
  case Collective::ReduceScatter:
    return "reduce-scatter";
  case Collective::AllToAll:
    return "all-to-all";
  case Collective::SendRecv:
    return "send-recv";
  case Collective::Broadcast:
    return "broadcast";
  }
  llvm_unreachable("unknown collective");
}

llvm::StringRef autopar::getCollectiveAlgorithmName(CollectiveAlgorithm A) {
  switch (A) {
  case CollectiveAlgorithm::Ring:
    return "ring";
  case CollectiveAlgorithm::Tree:
    return "tree";
  case CollectiveAlgorithm::Hierarchical:
    return "hierarchical";
  case CollectiveAlgorithm::Pairwise:
    return "pairwise";
  case CollectiveAlgorithm::Direct:
    return "direct";
  }
  llvm_unreachable("unknown algorithm");
}

CommGroup autopar::getRankGroup(unsigned Size, unsigned Stride,
                                unsigned GpusPerNode) {
  assert(Size >= 1 && Stride >= 1 && GpusPerNode >= 1 && "empty group");
  // Members of the group a node can hold; groups that do not tile the
  // nodes (3 ranks on nodes of 8: ranks 6, 7 | 8) straddle a boundary.
  unsigned PerNode = std::max(1u, GpusPerNode / Stride);
  return {Size, std::gcd(Size, PerNode)};
}

double autopar::getBusBandwidthFactor(Collective C, unsigned GroupSize) {
  double N = GroupSize;
  switch (C) {
  case Collective::AllReduce:
    return 2 * (N - 1) / N;
  case Collective::AllGather:
  case Collective::ReduceScatter:
  case Collective::AllToAll:
    return (N - 1) / N;
  case Collective::SendRecv:
  case Collective::Broadcast:
    return 1;
  }
  llvm_unreachable("unknown collective");
}

namespace {
/// One algorithm under one protocol, base latency included.
double algorithmSeconds(const Cluster &Cl, Collective C, double Bytes,
                        CommGroup G, CollectiveAlgorithm A, const Protocol &P) {
  Shape Sh(Cl, G, C, P, /*Tree=*/false);
  switch (A) {
  case CollectiveAlgorithm::Ring:
    return Sh.L0 + flatRing(Sh, C, Bytes);
  case CollectiveAlgorithm::Tree:
    if (C != Collective::AllReduce)
      return Infinity;
    {
      Shape TreeSh(Cl, G, C, P, /*Tree=*/true);
      return TreeSh.L0 + treeAllReduce(TreeSh, Bytes).seconds();
    }
  case CollectiveAlgorithm::Hierarchical:
    if (!Sh.spansNodes() || Sh.K <= 1)
      return Infinity;
    return Sh.L0 +
           hierarchical(Sh, Shape(Cl, G, C, P, /*Tree=*/true), C, Bytes);
  case CollectiveAlgorithm::Pairwise:
    return C == Collective::AllToAll ? Sh.L0 + pairwise(Sh, Bytes) : Infinity;
  case CollectiveAlgorithm::Direct:
    return C == Collective::SendRecv ? Sh.L0 + direct(Sh, Bytes) : Infinity;
  }
  llvm_unreachable("unknown algorithm");
}

llvm::ArrayRef<Protocol> protocolsOf(const Cluster &Cl) {
  if (Cl.Device.Protocols == CollectiveProtocols::Nccl)
    return NcclProtocols;
  return SingleProtocol;
}
} // namespace

double autopar::collectiveSeconds(const Cluster &Cl, Collective C, double Bytes,
                                  CommGroup G, CollectiveAlgorithm A) {
  checkGroup(Cl, G, Bytes);
  if (G.Size == 1)
    return 0;
  double Best = Infinity;
  for (const Protocol &P : protocolsOf(Cl))
    Best = std::min(Best, algorithmSeconds(Cl, C, Bytes, G, A, P));
  return Best;
}

CollectiveCost autopar::estimateCollective(const Cluster &Cl, Collective C,
                                           double Bytes, CommGroup G) {
  checkGroup(Cl, G, Bytes);
  llvm::ArrayRef<Protocol> Protocols = protocolsOf(Cl);
  if (G.Size == 1)
    return {0,
            C == Collective::AllToAll   ? CollectiveAlgorithm::Pairwise
            : C == Collective::SendRecv ? CollectiveAlgorithm::Direct
                                        : CollectiveAlgorithm::Ring,
            Protocols.front().Id};
  CollectiveCost Best{Infinity, CollectiveAlgorithm::Ring,
                      Protocols.front().Id};
  for (CollectiveAlgorithm A :
       {CollectiveAlgorithm::Ring, CollectiveAlgorithm::Tree,
        CollectiveAlgorithm::Hierarchical, CollectiveAlgorithm::Pairwise,
        CollectiveAlgorithm::Direct})
    for (const Protocol &P : Protocols) {
      double Seconds = algorithmSeconds(Cl, C, Bytes, G, A, P);
      if (Seconds < Best.Seconds)
        Best = {Seconds, A, P.Id};
    }
  assert(Best.Seconds < Infinity && "no algorithm applies");
  return Best;
}

double autopar::collectiveSeconds(const Cluster &Cl, Collective C, double Bytes,
                                  CommGroup G) {
  return estimateCollective(Cl, C, Bytes, G).Seconds;
}

double autopar::bucketedCollectiveSeconds(const Cluster &Cl, Collective C,
                                          double Bytes, double CapBytes,
                                          CommGroup G) {
  if (Bytes <= 0)
    return 0;
  if (CapBytes <= 0 || Bytes <= CapBytes)
    return collectiveSeconds(Cl, C, Bytes, G);
  double Full = std::floor(Bytes / CapBytes);
  double Rest = Bytes - Full * CapBytes;
  return Full * collectiveSeconds(Cl, C, CapBytes, G) +
         (Rest > 0 ? collectiveSeconds(Cl, C, Rest, G) : 0);
}

double autopar::verifyTransferSeconds(const Cluster &Cl, double Bytes) {
  // ISA-L's crc32_iscsi on one core over 4-64 MiB buffers: 27-35 GB/s in
  // two runs of bench/crc32c-rate.sh on the 2-core Sapphire Rapids KVM
  // machine (2026-12-06). Only the CPU backend checks its messages
  // (ir/BackendCapabilities.def), so this is the only rate needed.
  constexpr double CrcBytesPerSec = 31e9;
  double Copy = Cl.Device.achievableHbmBytesPerSec();
  return 2 * Bytes / CrcBytesPerSec + (Copy > 0 ? Bytes / Copy : 0);
}

//===- Collectives.h - Time of collectives on a cluster ---------*- C++ -*-===//
//
// An alpha-beta model of NCCL-style collectives over the two levels of a
// cluster (NVLink inside a node, the NICs between nodes): each algorithm
// costs a latency per step plus bytes over the bandwidth of the level it
// crosses, and a collective takes the fastest applicable algorithm, as
// NCCL's tuner does. docs/CostModel.md ("Collectives") gives every formula
// and its source (Thakur et al. 2005, NCCL's tuning model, nccl-tests'
// PERFORMANCE.md).
//
// Sizes follow the nccl-tests "size" convention: the full buffer
// (all-reduce's tensor, all-gather's output, reduce-scatter's input,
// all-to-all's send buffer per rank, broadcast's buffer, point-to-point's
// message).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COST_COLLECTIVES_H
#define AUTOPAR_COST_COLLECTIVES_H

#include "cost/Cluster.h"

#include "llvm/ADT/StringRef.h"

namespace autopar {

enum class Collective {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  SendRecv,
  Broadcast
};
/// How many kinds there are: the size of an array indexed by Collective.
constexpr unsigned NumCollectives = unsigned(Collective::Broadcast) + 1;

/// How much longer compute takes while collectives overlap it: NCCL's
/// kernels hold SMs and share HBM bandwidth with the compute kernels. Lee et
/// al. 2025, "Characterizing Compute-Communication Overlap in
/// GPU-Accelerated Distributed Deep Learning" (arXiv:2507.03114), measured
/// GPT and Llama training on A100, H100, MI250 and MI210: "overlapping
/// computation and communication can result in an average computational
/// slowdown of 18.9%, with a maximum of 40.0% slowdown". NCCL issue #1428
/// (A100, a GEMM from 1.18 to 2.08 ms under an overlapping AllGather) is
/// such a case. The planner charges it on the compute that hides
/// data-parallel collectives (planner/Search.cpp, the step's tail).
constexpr double OverlappedComputeSlowdown = 0.189;

enum class CollectiveAlgorithm {
  /// One ring through every rank, node after node: every step waits for
  /// the slowest link of the ring.
  Ring,
  /// NCCL's double binary tree: a chain inside each node, a tree over the
  /// nodes, pipelined. All-reduce only.
  Tree,
  /// Two levels for a group that spans nodes: inside each node, then
  /// between nodes on every NIC rail in parallel (1/k of the data each),
  /// then inside each node again.
  Hierarchical,
  /// All-to-all: every rank sends to every other rank directly.
  Pairwise,
  /// Point-to-point: one message.
  Direct
};

/// The protocol a collective runs under: NCCL's three (tuning.cc), or the
/// one of a transport without a choice (Cluster's CollectiveProtocols).
enum class CollectiveProtocol { LL, LL128, Simple, Single };

llvm::StringRef getCollectiveName(Collective C);
llvm::StringRef getCollectiveAlgorithmName(CollectiveAlgorithm A);

/// The ranks of one collective: Size ranks, RanksPerNode of them in each
/// node they occupy (RanksPerNode == Size: the group lives in one node).
/// Size is a multiple of RanksPerNode; a send/recv pair has Size 2.
struct CommGroup {
  unsigned Size = 1;
  unsigned RanksPerNode = 1;

  unsigned numNodes() const { return Size / RanksPerNode; }
};

/// The group of Size ranks spaced Stride apart in rank order (tensor
/// parallelism: stride 1; data parallelism: stride tp, as Megatron-LM orders
/// ranks) on nodes of GpusPerNode ranks. A group that falls unevenly on its
/// nodes (12 data-parallel ranks over nodes of 8: 8 + 4) is priced as the
/// even layout with the largest count per node that divides both (3 nodes
/// of 4): no node has more NIC rails than its fewest-ranked node, which
/// sets the pace. Likewise groups that do not tile the nodes, some of
/// which straddle a node boundary (tp 3 on nodes of 8: ranks 6, 7 | 8):
/// the straddling group sets the pace.
CommGroup getRankGroup(unsigned Size, unsigned Stride, unsigned GpusPerNode);

/// nccl-tests' bus-bandwidth factor: busbw = factor * size / time. It is
/// 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and
/// all-to-all, 1 for send/recv and broadcast.
double getBusBandwidthFactor(Collective C, unsigned GroupSize);

/// Seconds one algorithm takes under its fastest protocol, or +infinity
/// where it does not apply (a tree for anything but all-reduce,
/// hierarchical inside one node, ...).
double collectiveSeconds(const Cluster &Cl, Collective C, double Bytes,
                         CommGroup G, CollectiveAlgorithm A);

struct CollectiveCost {
  double Seconds = 0;
  CollectiveAlgorithm Algorithm = CollectiveAlgorithm::Ring;
  CollectiveProtocol Protocol = CollectiveProtocol::Simple;
};
/// The fastest applicable algorithm and protocol, and its time (ties go to
/// the earlier algorithm, then protocol, of the enums). Size-1 groups cost
/// 0.
CollectiveCost estimateCollective(const Cluster &Cl, Collective C, double Bytes,
                                  CommGroup G);
/// estimateCollective's seconds.
double collectiveSeconds(const Cluster &Cl, Collective C, double Bytes,
                         CommGroup G);
/// What `verify-transfers=on` adds to one point-to-point message of Bytes:
/// a CRC32C of the bytes at the sender and at the receiver, and the
/// receiver's copy out of its checked buffer (at the device's memory
/// bandwidth).
double verifyTransferSeconds(const Cluster &Cl, double Bytes);

/// Bytes moved in buckets of at most CapBytes, one collective each (the
/// full buckets and the rest): each pays its latency.
double bucketedCollectiveSeconds(const Cluster &Cl, Collective C, double Bytes,
                                 double CapBytes, CommGroup G);

} // namespace autopar

#endif // AUTOPAR_COST_COLLECTIVES_H

//===- CollectivesTest.cpp - The alpha-beta collective model --------------===//

#include "cost/Collectives.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace autopar;

namespace {

const Collective AllCollectives[] = {
    Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
    Collective::AllToAll,  Collective::SendRecv,  Collective::Broadcast};

Cluster cluster(llvm::StringRef Device, unsigned Gpus) {
  auto C = makeCluster(Device, Gpus, 0);
  EXPECT_TRUE(bool(C));
  return *C;
}

/// A group of the collective's usual shape: send/recv is a pair.
CommGroup groupFor(Collective C, CommGroup G) {
  if (C != Collective::SendRecv)
    return G;
  return G.numNodes() > 1 ? CommGroup{2, 1} : CommGroup{2, 2};
}

TEST(CollectivesTest, SizeOneGroupsAreFree) {
  Cluster Cl = cluster("a100-80gb", 64);
  for (Collective C : AllCollectives) {
    EXPECT_EQ(collectiveSeconds(Cl, C, 1e9, {1, 1}), 0)
        << getCollectiveName(C).str();
    EXPECT_EQ(collectiveSeconds(Cl, C, 1e9, {1, 1}, CollectiveAlgorithm::Ring),
              0);
  }
}

TEST(CollectivesTest, BusBandwidthFactorsAreNcclTests) {
  EXPECT_EQ(getBusBandwidthFactor(Collective::AllReduce, 8), 2.0 * 7 / 8);
  EXPECT_EQ(getBusBandwidthFactor(Collective::AllGather, 8), 7.0 / 8);
  EXPECT_EQ(getBusBandwidthFactor(Collective::ReduceScatter, 8), 7.0 / 8);
  EXPECT_EQ(getBusBandwidthFactor(Collective::AllToAll, 8), 7.0 / 8);
  EXPECT_EQ(getBusBandwidthFactor(Collective::SendRecv, 2), 1);
  EXPECT_EQ(getBusBandwidthFactor(Collective::Broadcast, 8), 1);
}

TEST(CollectivesTest, LargeMessagesReachTheLinkBandwidth) {
  // On a large message inside one node, busbw = factor * size / time is
  // the link's bandwidth: the model's factors are nccl-tests'.
  for (const char *Device : {"a100-80gb", "h100", "cpu"}) {
    Cluster Cl = cluster(Device, 64);
    unsigned K = Cl.GpusPerNode;
    const double Bytes = 64e9;
    for (Collective C : AllCollectives) {
      CommGroup G = groupFor(C, {K, K});
      double T = collectiveSeconds(Cl, C, Bytes, G);
      double BusBw = getBusBandwidthFactor(C, G.Size) * Bytes / T;
      EXPECT_NEAR(BusBw / Cl.IntraNode.BytesPerSec, 1, 1e-3)
          << Device << " " << getCollectiveName(C).str();
    }
    // Across nodes with one rank per node: the NIC's bandwidth.
    CommGroup Rails{8, 1};
    double T = collectiveSeconds(Cl, Collective::AllReduce, Bytes, Rails);
    EXPECT_NEAR(getBusBandwidthFactor(Collective::AllReduce, 8) * Bytes / T /
                    Cl.InterNode.BytesPerSec,
                1, 1e-3)
        << Device;
  }
}

TEST(CollectivesTest, MonotonicInBytes) {
  Cluster Cl = cluster("h100", 1024);
  for (Collective C : AllCollectives)
    for (CommGroup G : {CommGroup{8, 8}, CommGroup{4, 4}, CommGroup{64, 8},
                        CommGroup{1024, 8}, CommGroup{16, 1}}) {
      G = groupFor(C, G);
      double Last = 0;
      for (double Bytes = 1; Bytes < 1e11; Bytes *= 1.7) {
        double T = collectiveSeconds(Cl, C, Bytes, G);
        EXPECT_GE(T, Last) << getCollectiveName(C).str() << " " << G.Size << "/"
                           << G.RanksPerNode << " " << Bytes;
        Last = T;
      }
    }
}

TEST(CollectivesTest, InsideANodeIsFasterThanAcross) {
  Cluster Cl = cluster("a100-80gb", 64);
  for (Collective C : AllCollectives) {
    CommGroup Inside = groupFor(C, {8, 8}), Across = groupFor(C, {8, 1});
    for (double Bytes : {1e3, 1e6, 1e9})
      EXPECT_LT(collectiveSeconds(Cl, C, Bytes, Inside),
                collectiveSeconds(Cl, C, Bytes, Across))
          << getCollectiveName(C).str() << " " << Bytes;
  }
}

TEST(CollectivesTest, HierarchicalBeatsAFlatRingOverTheSlowLevel) {
  Cluster Cl = cluster("a100-80gb", 64);
  CommGroup G{32, 8}; // 4 nodes of 8
  for (Collective C : {Collective::AllReduce, Collective::AllGather,
                       Collective::ReduceScatter, Collective::Broadcast}) {
    double Ring = collectiveSeconds(Cl, C, 1e9, G, CollectiveAlgorithm::Ring);
    double Hier =
        collectiveSeconds(Cl, C, 1e9, G, CollectiveAlgorithm::Hierarchical);
    // The flat ring runs at one NIC's speed; the hierarchy uses all 8.
    EXPECT_LT(Hier * 4, Ring) << getCollectiveName(C).str();
    EXPECT_EQ(estimateCollective(Cl, C, 1e9, G).Algorithm,
              CollectiveAlgorithm::Hierarchical)
        << getCollectiveName(C).str();
  }
  // Inside one node there is no hierarchy.
  EXPECT_TRUE(
      std::isinf(collectiveSeconds(Cl, Collective::AllReduce, 1e9, {8, 8},
                                   CollectiveAlgorithm::Hierarchical)));
}

TEST(CollectivesTest, TreeBeatsRingOnTinyMessagesAcrossManyNodes) {
  Cluster Cl = cluster("h100", 1024);
  for (CommGroup G : {CommGroup{1024, 8}, CommGroup{128, 1}}) {
    double Ring = collectiveSeconds(Cl, Collective::AllReduce, 8, G,
                                    CollectiveAlgorithm::Ring);
    double Tree = collectiveSeconds(Cl, Collective::AllReduce, 8, G,
                                    CollectiveAlgorithm::Tree);
    EXPECT_LT(Tree * 5, Ring) << G.Size;
    // Over nodes of 8 the hierarchy's inter-node tree is the same tree.
    CollectiveCost Best = estimateCollective(Cl, Collective::AllReduce, 8, G);
    EXPECT_NE(Best.Algorithm, CollectiveAlgorithm::Ring) << G.Size;
    EXPECT_NEAR(Best.Seconds, Tree, Tree * 0.01) << G.Size;
  }
  // Inside one node a large all-reduce takes the ring.
  EXPECT_EQ(
      estimateCollective(Cl, Collective::AllReduce, 1e9, {8, 8}).Algorithm,
      CollectiveAlgorithm::Ring);
  // Trees are for all-reduce only.
  EXPECT_TRUE(std::isinf(collectiveSeconds(
      Cl, Collective::AllGather, 8, {1024, 8}, CollectiveAlgorithm::Tree)));
}

TEST(CollectivesTest, SmallMessagesCostTheirLatency) {
  Cluster Cl = cluster("a100-80gb", 8);
  // 14 ring steps of NVLink latency plus NCCL's base latency.
  double T = collectiveSeconds(Cl, Collective::AllReduce, 8, {8, 8});
  EXPECT_NEAR(T, Cl.CollectiveLatencySec + 14 * Cl.IntraNode.LatencySec, 1e-9);
  EXPECT_NEAR(collectiveSeconds(Cl, Collective::SendRecv, 0, {2, 2}),
              Cl.CollectiveLatencySec + Cl.IntraNode.LatencySec, 1e-12);
}

// NCCL's protocols (tuning.cc): LL for small messages, LL128 in between,
// Simple for large ones; each with its latencies and bandwidth share.
TEST(CollectivesTest, NcclPicksItsProtocolBySize) {
  Cluster Cl = cluster("a100-80gb", 8);
  CommGroup G{8, 8};
  auto ProtocolAt = [&](double Bytes) {
    return estimateCollective(Cl, Collective::AllReduce, Bytes, G).Protocol;
  };
  EXPECT_EQ(ProtocolAt(64 << 10), CollectiveProtocol::LL);
  EXPECT_EQ(ProtocolAt(4 << 20), CollectiveProtocol::LL128);
  EXPECT_EQ(ProtocolAt(256 << 20), CollectiveProtocol::Simple);
  // Simple: 8.4 us per call and 3.4 us per NVLink hop (14 hops), at the
  // link's full bandwidth.
  double Bytes = 1e9;
  EXPECT_NEAR(collectiveSeconds(Cl, Collective::AllReduce, Bytes, G),
              8.4e-6 + 14 * 3.4e-6 + 2 * 7.0 / 8 * Bytes / 230e9, 1e-9);
  // A Megatron TP all-reduce of one micro-batch (seq 2048, hidden 8192,
  // bf16: 32 MiB) reaches ~190 GB/s of bus bandwidth, not the 230 a large
  // message does: the Simple protocol's latency is not hidden.
  double Mid = 32 << 20;
  double BusBw = getBusBandwidthFactor(Collective::AllReduce, 8) * Mid /
                 collectiveSeconds(Cl, Collective::AllReduce, Mid, G);
  EXPECT_GT(BusBw, 180e9);
  EXPECT_LT(BusBw, 200e9);
  // LL moves a quarter of the bandwidth for all-reduce: 1 MiB costs more
  // than LL's latency alone would say, and less than Simple's latency.
  double LLOnly = Cl.CollectiveLatencySec + 14 * Cl.IntraNode.LatencySec +
                  2 * 7.0 / 8 * (1 << 20) / (230e9 / 4);
  EXPECT_LE(collectiveSeconds(Cl, Collective::AllReduce, 1 << 20, G),
            LLOnly + 1e-12);
}

TEST(CollectivesTest, OneProtocolUsesTheLinksAsTheyAre) {
  Cluster Cl = cluster("cpu", 2);
  CollectiveCost C = estimateCollective(Cl, Collective::AllReduce, 1e6, {2, 2});
  EXPECT_EQ(C.Protocol, CollectiveProtocol::Single);
  EXPECT_NEAR(C.Seconds,
              2 * Cl.IntraNode.LatencySec + 1e6 / Cl.IntraNode.BytesPerSec,
              1e-12);
}

TEST(CollectivesTest, RankGroupsOnNodes) {
  auto Group = [](unsigned Size, unsigned Stride, unsigned PerNode) {
    CommGroup G = getRankGroup(Size, Stride, PerNode);
    EXPECT_EQ(G.Size, Size);
    return G.RanksPerNode;
  };
  EXPECT_EQ(Group(8, 1, 8), 8u);  // a node's tensor-parallel group
  EXPECT_EQ(Group(4, 1, 8), 4u);  // half a node
  EXPECT_EQ(Group(32, 8, 8), 1u); // data parallel beside tp=8: one per node
  EXPECT_EQ(Group(16, 2, 8), 4u); // beside tp=2: 4 per node
  // Uneven: 12 consecutive ranks are 8 + 4 on two nodes, priced as 3 x 4;
  // 6 ranks two apart are 4 + 2, priced as 3 x 2.
  EXPECT_EQ(Group(12, 1, 8), 4u);
  EXPECT_EQ(Group(6, 2, 8), 2u);
  // Groups that do not tile the nodes: tp 3 on nodes of 8 (ranks 6, 7 | 8)
  // and tp 4 on nodes of 6 (ranks 4, 5 | 6, 7) straddle a boundary.
  EXPECT_EQ(Group(3, 1, 8), 1u);
  EXPECT_EQ(Group(4, 1, 6), 2u);
  // Every group it returns prices without tripping the checks.
  Cluster Cl = cluster("h100", 96);
  for (unsigned Size : {3u, 6u, 12u, 24u, 48u, 96u}) {
    for (unsigned Stride : {1u, 2u, 4u, 8u}) {
      if (Size * Stride > 96)
        continue;
      CommGroup G = getRankGroup(Size, Stride, 8);
      EXPECT_GT(collectiveSeconds(Cl, Collective::AllReduce, 1e6, G), 0);
    }
  }
}

TEST(CollectivesTest, AllToAllAcrossNodesIsLimitedByTheNics) {
  Cluster Cl = cluster("h100", 64);
  // 64 ranks over 8 nodes: 56/64 of each rank's buffer leaves the node.
  double Bytes = 1e10;
  double T = collectiveSeconds(Cl, Collective::AllToAll, Bytes, {64, 8});
  double Nic = 56.0 / 64 * Bytes / Cl.InterNode.BytesPerSec;
  EXPECT_GT(T, Nic);
  EXPECT_LT(T, Nic * 1.01);
}

} // namespace

TEST(CollectivesTest, BucketsEachPayTheirLatency) {
  // 288 ranks one per node (a data-parallel group under tp 8): a ring's
  // latency per call is large, so 100 MiB in 25 MiB buckets costs four
  // 25 MiB collectives, more than one 100 MiB collective.
  Cluster Cl = cluster("h100", 2304);
  CommGroup G{288, 1};
  double MiB = 1024 * 1024;
  for (Collective C : {Collective::ReduceScatter, Collective::AllReduce,
                       Collective::AllGather}) {
    double One = collectiveSeconds(Cl, C, 25 * MiB, G);
    double Whole = collectiveSeconds(Cl, C, 100 * MiB, G);
    double Buckets = bucketedCollectiveSeconds(Cl, C, 100 * MiB, 25 * MiB, G);
    EXPECT_DOUBLE_EQ(Buckets, 4 * One) << getCollectiveName(C).str();
    EXPECT_GT(Buckets, Whole) << getCollectiveName(C).str();
    // A rest: three full buckets and one of 10 MiB.
    EXPECT_DOUBLE_EQ(bucketedCollectiveSeconds(Cl, C, 85 * MiB, 25 * MiB, G),
                     3 * One + collectiveSeconds(Cl, C, 10 * MiB, G));
    // Within the cap, or without one: a single collective.
    EXPECT_EQ(bucketedCollectiveSeconds(Cl, C, 10 * MiB, 25 * MiB, G),
              collectiveSeconds(Cl, C, 10 * MiB, G));
    EXPECT_EQ(bucketedCollectiveSeconds(Cl, C, 100 * MiB, 0, G), Whole);
    EXPECT_EQ(bucketedCollectiveSeconds(Cl, C, 0, 25 * MiB, G), 0);
  }
}

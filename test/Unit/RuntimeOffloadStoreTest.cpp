//===- RuntimeOffloadStoreTest.cpp - The offload store --------------------===//
//
// runtime/OffloadStore.h: ISA-L's CRC32C against the standard test vector,
// host and nvme blocks written and read back, the version and CRC checks
// (a stale or corrupt block is an OffloadCheckError naming the tensor and
// the file), the prefetcher, and the executor's uploads ahead of use.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestSupport.h"

#include "runtime/OffloadStore.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

using namespace autopar;
using namespace llvm;
using namespace autopar::test;

namespace {

TEST(OffloadStoreTest, Crc32cIsTheStandardOne) {
  // The check value of CRC-32C (Castagnoli; RFC 3720, iSCSI).
  StringRef Vector = "123456789";
  EXPECT_EQ(
      crc32c(ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(Vector.data()),
                               Vector.size())),
      0xE3069283u);
  // RFC 3720 B.4: 32 bytes of zeros.
  std::vector<uint8_t> Zeros(32, 0);
  EXPECT_EQ(crc32c(Zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c({}), 0u);
}

class OffloadStoreDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(sys::fs::createUniqueDirectory("autopar-offload", Root));
  }
  void TearDown() override { sys::fs::remove_directories(Root); }
  SmallString<128> Root;
};

std::string errorText(Error E) { return E ? toString(std::move(E)) : ""; }

TEST_F(OffloadStoreDirTest, BlocksRoundTripOnBothTiers) {
  Expected<std::unique_ptr<OffloadStore>> S = OffloadStore::create(Root, 1);
  ASSERT_TRUE(bool(S)) << toString(S.takeError());
  std::vector<uint8_t> A{1, 2, 3, 4}, B(1000, 7);
  ASSERT_EQ(errorText((*S)->put("w/a", OffloadTier::Host, A, 0)), "");
  ASSERT_EQ(errorText((*S)->put("adamw.m.w", OffloadTier::Nvme, B, 3)), "");
  EXPECT_EQ((*S)->getBytes(OffloadTier::Host), 4u);
  EXPECT_EQ((*S)->getBytes(OffloadTier::Nvme), 1000u);
  std::string Path = (*S)->getPath("adamw.m.w");
  EXPECT_NE(Path.find("rank1"), std::string::npos);
  EXPECT_TRUE(sys::fs::exists(Path));
  Expected<std::vector<uint8_t>> GotA = (*S)->get("w/a", 0);
  ASSERT_TRUE(bool(GotA)) << toString(GotA.takeError());
  EXPECT_EQ(*GotA, A);
  Expected<std::vector<uint8_t>> GotB = (*S)->get("adamw.m.w", 3);
  ASSERT_TRUE(bool(GotB)) << toString(GotB.takeError());
  EXPECT_EQ(*GotB, B);

  // A stale version and a flipped byte are check errors naming the tensor
  // and the file.
  Expected<std::vector<uint8_t>> Stale = (*S)->get("adamw.m.w", 4);
  ASSERT_FALSE(bool(Stale));
  Error E = Stale.takeError();
  EXPECT_TRUE(E.isA<OffloadCheckError>());
  std::string Message = toString(std::move(E));
  EXPECT_NE(Message.find("'adamw.m.w'"), std::string::npos) << Message;
  EXPECT_NE(Message.find(Path), std::string::npos) << Message;
  EXPECT_NE(Message.find("stale"), std::string::npos) << Message;

  ASSERT_EQ(
      errorText((*S)->injectFault("adamw.m.w", OffloadStore::Fault::Corrupt)),
      "");
  Expected<std::vector<uint8_t>> Bad = (*S)->get("adamw.m.w", 3);
  ASSERT_FALSE(bool(Bad));
  Message = toString(Bad.takeError());
  EXPECT_NE(Message.find("CRC32C"), std::string::npos) << Message;

  ASSERT_EQ(errorText((*S)->injectFault("w/a", OffloadStore::Fault::Corrupt)),
            "");
  EXPECT_FALSE(bool((*S)->get("w/a", 0)));
  consumeError((*S)->get("w/a", 0).takeError());

  // Writing a new version replaces the block whole.
  ASSERT_EQ(errorText((*S)->put("adamw.m.w", OffloadTier::Nvme, A, 4)), "");
  Expected<std::vector<uint8_t>> Again = (*S)->get("adamw.m.w", 4);
  ASSERT_TRUE(bool(Again)) << toString(Again.takeError());
  EXPECT_EQ(*Again, A);
  EXPECT_FALSE(sys::fs::exists(Path + ".tmp"));
}

TEST_F(OffloadStoreDirTest, NvmeNeedsAFolder) {
  Expected<std::unique_ptr<OffloadStore>> S = OffloadStore::create("", 0);
  ASSERT_TRUE(bool(S));
  std::string Message = errorText((*S)->put("p", OffloadTier::Nvme, {1, 2}, 0));
  EXPECT_NE(Message.find("--offload-dir"), std::string::npos) << Message;
}

TEST_F(OffloadStoreDirTest, PrefetcherFetchesAhead) {
  Expected<std::unique_ptr<OffloadStore>> S = OffloadStore::create(Root, 0);
  ASSERT_TRUE(bool(S));
  std::vector<uint8_t> A(64, 1), B(128, 2);
  ASSERT_EQ(errorText((*S)->put("a", OffloadTier::Nvme, A, 1)), "");
  ASSERT_EQ(errorText((*S)->put("b", OffloadTier::Host, B, 1)), "");
  OffloadPrefetcher P(**S);
  P.prefetch("a", 1);
  P.prefetch("b", 1);
  Expected<std::vector<uint8_t>> GotB = P.take("b", 1);
  ASSERT_TRUE(bool(GotB)) << toString(GotB.takeError());
  EXPECT_EQ(*GotB, B);
  Expected<std::vector<uint8_t>> GotA = P.take("a", 1);
  ASSERT_TRUE(bool(GotA)) << toString(GotA.takeError());
  EXPECT_EQ(*GotA, A);
  std::vector<OffloadPrefetcher::FetchEvent> Events = P.drainEvents();
  ASSERT_EQ(Events.size(), 2u);
  EXPECT_EQ(Events[0].Name, "a");
  EXPECT_TRUE(Events[0].Prefetched);
  EXPECT_EQ(Events[0].Bytes, 64u);
  // A stale request fails with the check error.
  Expected<std::vector<uint8_t>> Stale = P.take("a", 2);
  ASSERT_FALSE(bool(Stale));
  Error E = Stale.takeError();
  EXPECT_TRUE(E.isA<OffloadCheckError>());
  consumeError(std::move(E));
}

/// The CPU backend, logging the nodes it runs and the uploads ahead.
class LoggingBackend : public CpuBackend {
public:
  std::vector<std::string> Log;
  Error copyFromHostAhead(const Tensor &Dst, ArrayRef<uint8_t> Bytes) override {
    Log.push_back("ahead " + std::to_string(Bytes.size()));
    return CpuBackend::copyFromHostAhead(Dst, Bytes);
  }
  Error runNode(const Node &N, ArrayRef<Tensor> In,
                ArrayRef<Tensor> Out) override {
    Log.push_back("run " + N.getOpName().str());
    return CpuBackend::runNode(N, In, Out);
  }
};

// A parameter prefetched at the first node for its use at the fourth is on
// the device before the third runs (the node ahead of the use, at the
// latest), and the use reads it there: the product is the one without
// offload.
TEST_F(OffloadStoreDirTest, ExecutorUploadsAheadOfUse) {
  auto Program = [](bool Offload) {
    std::string W = "param %w: f32[4, 4] {init = \"normal\"";
    return "graph @g(%x: f32[2, 4]) {\n  " + W +
           (Offload ? ", placement = \"host\"}\n" : "}\n") + "  %a = Relu(%x)" +
           (Offload ? " {offload_prefetch = [\"w\"]}" : "") +
           " : f32[2, 4]\n  %b = Neg(%a) : f32[2, 4]\n"
           "  %c = Tanh(%b) : f32[2, 4]\n  %y = MatMul(%c, %w)" +
           (Offload ? " {offload_fetch = [\"w\"]}" : "") +
           " : f32[2, 4]\n  return %y\n}\n";
  };
  std::vector<HostTensor> Results[2];
  for (bool Offload : {false, true}) {
    SourceMgr SM;
    SM.AddNewSourceBuffer(
        MemoryBuffer::getMemBufferCopy(Program(Offload), "test.air"), SMLoc());
    DiagnosticEngine Diag(&SM, "test.air");
    std::unique_ptr<Module> M = parseModule(SM, Diag);
    ASSERT_TRUE(M && succeeded(verifyModule(*M, Diag)));
    Expected<std::unique_ptr<OffloadStore>> S = OffloadStore::create(Root, 0);
    ASSERT_TRUE(bool(S));
    ExecutorOptions O;
    O.Offload = Offload ? S->get() : nullptr;
    LoggingBackend B;
    Expected<std::unique_ptr<Executor>> X =
        Executor::create(*M->getGraphs().front(), B, O);
    ASSERT_TRUE(bool(X)) << toString(X.takeError());
    Expected<std::vector<HostTensor>> Out =
        (*X)->run({f32({2, 4}, {1, -2, 3, -4, 5, -6, 7, -8})});
    ASSERT_TRUE(bool(Out)) << toString(Out.takeError());
    Results[Offload] = std::move(*Out);
    if (!Offload)
      continue;
    EXPECT_EQ((*X)->getUploadsAhead(), 1u);
    auto At = [&](StringRef Entry) {
      return find(B.Log, Entry.str()) - B.Log.begin();
    };
    ASSERT_LT(At("ahead 64"), int64_t(B.Log.size()));
    EXPECT_LT(At("ahead 64"), At("run Tanh"));
    EXPECT_GT(At("ahead 64"), At("run Relu"));
  }
  EXPECT_EQ(Results[0][0].Bytes, Results[1][0].Bytes);
}

} // namespace

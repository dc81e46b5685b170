//===- RuntimeOffloadStoreTest.cpp - The offload store --------------------===//
//
// runtime/OffloadStore.h: ISA-L's CRC32C against the standard test vector,
// host and nvme blocks written and read back, the version and CRC checks
// (a stale or corrupt block is an OffloadCheckError naming the tensor and
// the file), and the prefetcher.
//
//===----------------------------------------------------------------------===//

#include "runtime/OffloadStore.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

using namespace autopar;
using namespace llvm;

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

} // namespace

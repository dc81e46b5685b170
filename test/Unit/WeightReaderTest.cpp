//===- WeightReaderTest.cpp - The safe weight reader ----------------------===//
//
// What the runtime will call to load weights: inline data encoded as bytes,
// external byte ranges read only after the location checks, and a missing
// file an error. Each test works in a fresh temporary folder.
//
//===----------------------------------------------------------------------===//

#include "weights/WeightReader.h"
#include "weights/ExternalFile.h"
#include "weights/TensorBytes.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cmath>
#include <unistd.h>

using namespace autopar;
using namespace llvm;

namespace {

/// A temporary model folder holding `weights.bin` with bytes 0, 1, ..., 99,
/// removed at the end of the test.
class WeightFolder : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(sys::fs::createUniqueDirectory("autopar-weights", Dir));
    std::string Bytes;
    for (int I = 0; I != 100; ++I)
      Bytes.push_back(char(I));
    write("weights.bin", Bytes);
  }
  void TearDown() override { sys::fs::remove_directories(Dir); }

  std::string path(StringRef Name) const {
    SmallString<256> P(Dir);
    sys::path::append(P, Name);
    return std::string(P);
  }
  void write(StringRef Name, StringRef Bytes) {
    std::error_code EC;
    raw_fd_ostream OS(path(Name), EC);
    ASSERT_FALSE(EC);
    OS << Bytes;
  }
  /// The message of E, which must be an error.
  template <typename T> static std::string errorOf(Expected<T> E) {
    EXPECT_FALSE(bool(E));
    return E ? std::string() : toString(E.takeError());
  }

  SmallString<256> Dir;
};

WeightSource external(StringRef Location, int64_t Offset, int64_t Length) {
  return WeightSource::getExternal(Location, Offset, Length);
}

TEST_F(WeightFolder, ReadsAnExternalByteRange) {
  Expected<std::vector<uint8_t>> Bytes =
      readWeightBytes("w", external("weights.bin", 16, 8), Dir);
  ASSERT_TRUE(bool(Bytes)) << toString(Bytes.takeError());
  EXPECT_EQ(*Bytes, (std::vector<uint8_t>{16, 17, 18, 19, 20, 21, 22, 23}));
  // The last bytes of the file, and an empty range at its end.
  Bytes = readWeightBytes("w", external("weights.bin", 96, 4), Dir);
  ASSERT_TRUE(bool(Bytes));
  EXPECT_EQ(*Bytes, (std::vector<uint8_t>{96, 97, 98, 99}));
  Bytes = readWeightBytes("w", external("weights.bin", 100, 0), Dir);
  ASSERT_TRUE(bool(Bytes));
  EXPECT_TRUE(Bytes->empty());
}

TEST_F(WeightFolder, ReadsFromASubfolder) {
  ASSERT_FALSE(sys::fs::create_directory(path("sub")));
  write("sub/w.bin", "abcd");
  Expected<std::vector<uint8_t>> Bytes =
      readWeightBytes("w", external("sub/w.bin", 1, 2), Dir);
  ASSERT_TRUE(bool(Bytes)) << toString(Bytes.takeError());
  EXPECT_EQ(*Bytes, (std::vector<uint8_t>{'b', 'c'}));
}

TEST_F(WeightFolder, MissingFileIsAnError) {
  std::string Message =
      errorOf(readWeightBytes("blocks.0.w", external("absent.bin", 0, 4), Dir));
  EXPECT_EQ(Message, "parameter 'blocks.0.w': external data file '" +
                         path("absent.bin") +
                         "' is missing (running needs it)");
  // A missing folder on the way, or a file used as a folder.
  EXPECT_NE(errorOf(readWeightBytes("w", external("no/w.bin", 0, 4), Dir))
                .find("is missing"),
            std::string::npos);
  EXPECT_NE(
      errorOf(readWeightBytes("w", external("weights.bin/w.bin", 0, 4), Dir))
          .find("is missing"),
      std::string::npos);
}

TEST_F(WeightFolder, RangePastTheEndIsAnError) {
  EXPECT_EQ(errorOf(readWeightBytes("w", external("weights.bin", 96, 8), Dir)),
            "parameter 'w': external data: offset 96 + length 8 is past the "
            "end of 'weights.bin' (100 bytes)");
  // Offsets that overflow when added to the length.
  EXPECT_NE(
      errorOf(readWeightBytes("w", external("weights.bin", INT64_MAX, 8), Dir))
          .find("past the end"),
      std::string::npos);
  EXPECT_NE(errorOf(readWeightBytes("w", external("weights.bin", -4, 8), Dir))
                .find("past the end"),
            std::string::npos);
}

TEST_F(WeightFolder, DotDotIsRefused) {
  ASSERT_FALSE(sys::fs::create_directory(path("sub")));
  EXPECT_EQ(
      errorOf(readWeightBytes("w", external("sub/../weights.bin", 0, 4), Dir)),
      "parameter 'w': external data: location 'sub/../weights.bin' has a "
      "'..' component; it must stay in the model's folder");
}

TEST_F(WeightFolder, AbsolutePathIsRefused) {
  std::string Absolute = path("weights.bin");
  EXPECT_EQ(errorOf(readWeightBytes("w", external(Absolute, 0, 4), Dir)),
            "parameter 'w': external data: location '" + Absolute +
                "' is absolute; it must be relative to the model");
}

TEST_F(WeightFolder, SymlinksAreRefused) {
  ASSERT_FALSE(sys::fs::create_directory(path("real")));
  write("real/w.bin", "abcd");
  // A link to the file, and a link to a folder on the way.
  ASSERT_EQ(::symlink(path("weights.bin").c_str(), path("link.bin").c_str()),
            0);
  ASSERT_EQ(::symlink(path("real").c_str(), path("linkdir").c_str()), 0);
  EXPECT_EQ(errorOf(readWeightBytes("w", external("link.bin", 0, 4), Dir)),
            "parameter 'w': external data: location 'link.bin' goes through "
            "a symbolic link");
  EXPECT_EQ(errorOf(readWeightBytes("w", external("linkdir/w.bin", 0, 4), Dir)),
            "parameter 'w': external data: location 'linkdir/w.bin' goes "
            "through a symbolic link");
}

TEST_F(WeightFolder, HardLinksAndFoldersAreRefused) {
  ASSERT_EQ(::link(path("weights.bin").c_str(), path("hard.bin").c_str()), 0);
  EXPECT_EQ(errorOf(readWeightBytes("w", external("hard.bin", 0, 4), Dir)),
            "parameter 'w': external data: location 'hard.bin' has other hard "
            "links; copy the file instead");
  ASSERT_FALSE(sys::fs::create_directory(path("folder")));
  EXPECT_EQ(errorOf(readWeightBytes("w", external("folder", 0, 0), Dir)),
            "parameter 'w': external data: location 'folder' is not a regular "
            "file");
}

TEST(WeightReaderTest, InlineDataIsEncodedLittleEndian) {
  DenseTensor F32(TensorType::get(ElementType::F32, {2}),
                  std::vector<double>{1.0, -2.0});
  Expected<std::vector<uint8_t>> Bytes =
      readWeightBytes("w", WeightSource::getInline(F32), "/nonexistent");
  ASSERT_TRUE(bool(Bytes));
  EXPECT_EQ(*Bytes, (std::vector<uint8_t>{0, 0, 0x80, 0x3F, 0, 0, 0, 0xC0}));
}

TEST(WeightReaderTest, ParameterSizeIsChecked) {
  Graph G("g");
  Value *None = G.addParam("none", TensorType::get(ElementType::F32, {2}));
  std::string Message =
      toString(readWeightBytes(*None, "/nonexistent").takeError());
  EXPECT_EQ(Message, "parameter 'none': has no data (no weight source)");
  Value *W = G.addParam(
      "w", TensorType::get(ElementType::F32, {2}),
      WeightSource::getInline(DenseTensor(
          TensorType::get(ElementType::F32, {2}), std::vector<double>{3, 4})));
  Expected<std::vector<uint8_t>> Bytes = readWeightBytes(*W, "/nonexistent");
  ASSERT_TRUE(bool(Bytes));
  EXPECT_EQ(Bytes->size(), 8u);
}

TEST(TensorBytesTest, RoundTripsEveryElementType) {
  struct Case {
    ElementType Ty;
    std::vector<double> Floats;
    std::vector<int64_t> Ints;
    std::vector<uint8_t> Bytes;
  };
  std::vector<Case> Cases = {
      {ElementType::F64, {1.0}, {}, {0, 0, 0, 0, 0, 0, 0xF0, 0x3F}},
      {ElementType::F16, {1.0, -2.0}, {}, {0x00, 0x3C, 0x00, 0xC0}},
      {ElementType::BF16, {1.0, 0.5}, {}, {0x80, 0x3F, 0x00, 0x3F}},
      {ElementType::F8E4M3, {1.0, 448.0, -0.0}, {}, {0x38, 0x7E, 0x80}},
      {ElementType::I64,
       {},
       {-2},
       {0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
      {ElementType::I32, {}, {258}, {2, 1, 0, 0}},
      {ElementType::I8, {}, {-1}, {0xFF}},
      {ElementType::U8, {}, {200}, {200}},
      {ElementType::Bool, {}, {1, 0}, {1, 0}},
  };
  for (const Case &C : Cases) {
    int64_t N = C.Floats.empty() ? C.Ints.size() : C.Floats.size();
    TensorType Type = TensorType::get(C.Ty, {N});
    DenseTensor T = C.Floats.empty() ? DenseTensor(Type, C.Ints)
                                     : DenseTensor(Type, C.Floats);
    EXPECT_EQ(encodeTensorBytes(T), C.Bytes) << Type.str();
    Expected<DenseTensor> Back = decodeTensorBytes(C.Bytes, Type);
    ASSERT_TRUE(bool(Back)) << toString(Back.takeError());
    EXPECT_EQ(*Back, T) << Type.str();
  }
  EXPECT_EQ(toString(decodeTensorBytes(std::vector<uint8_t>(3),
                                       TensorType::get(ElementType::F32, {1}))
                         .takeError()),
            "has 3 bytes; f32[1] needs 4");
}

TEST(TensorBytesTest, F8E4M3RoundsToNearestEvenAndHasNoInfinity) {
  EXPECT_EQ(encodeF8E4M3(448.0), 0x7E);
  EXPECT_EQ(encodeF8E4M3(464.0), 0x7E); // A tie: to the even mantissa.
  EXPECT_EQ(encodeF8E4M3(465.0), 0x7F); // Past the largest value: NaN.
  EXPECT_EQ(encodeF8E4M3(-INFINITY), 0xFF);
  EXPECT_EQ(encodeF8E4M3(std::ldexp(1.0, -9)), 0x01);  // Smallest subnormal.
  EXPECT_EQ(encodeF8E4M3(std::ldexp(1.0, -10)), 0x00); // Ties to zero.
  EXPECT_EQ(encodeF8E4M3(std::ldexp(7.5, -9)), 0x08);  // Up into normals.
  EXPECT_EQ(decodeF8E4M3(0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(decodeF8E4M3(0x7E), 448.0);
  EXPECT_TRUE(std::isnan(decodeF8E4M3(0x7F)));
  // Every bit pattern decodes and encodes back.
  for (unsigned Bits = 0; Bits != 256; ++Bits) {
    if ((Bits & 0x7F) != 0x7F) {
      EXPECT_EQ(encodeF8E4M3(decodeF8E4M3(uint8_t(Bits))), Bits);
    }
  }
}

} // namespace

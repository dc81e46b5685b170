//===- TypesTest.cpp - Dimensions, shapes and broadcasting ----------------===//

#include "ir/Types.h"
#include "ir/ShapeFunctions.h"

#include "gtest/gtest.h"

using namespace autopar;

namespace {

std::string str(const Dim &D) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << D;
  return OS.str();
}

TEST(DimTest, ProductsAreCanonicalMonomials) {
  Dim B = Dim::getSymbol("batch"), S = Dim::getSymbol("sequence");
  EXPECT_EQ(str(S * B), "batch*sequence");
  EXPECT_EQ(str(Dim::get(4) * B * Dim::get(2)), "8*batch");
  EXPECT_EQ(S * B, B * S);
  EXPECT_EQ(str(B * Dim::get(0)), "0");
  EXPECT_TRUE((B * Dim()).isUnknown());
  EXPECT_EQ(str(B * B), "batch*batch");
}

TEST(DimTest, ExactQuotients) {
  Dim B = Dim::getSymbol("batch"), S = Dim::getSymbol("sequence");
  Dim Total = B * S * Dim::get(768);
  std::optional<Dim> Q = Total.divide(Dim::get(768));
  ASSERT_TRUE(Q);
  EXPECT_EQ(*Q, B * S);
  Q = Total.divide(B * Dim::get(12));
  ASSERT_TRUE(Q);
  EXPECT_EQ(str(*Q), "64*sequence");
  EXPECT_FALSE(Total.divide(Dim::get(7)));
  EXPECT_FALSE(Total.divide(Dim::getSymbol("heads")));
  EXPECT_FALSE(Total.divide(Dim::get(0)));
  EXPECT_FALSE(Total.divide(Dim()));
}

TEST(DimTest, OverflowBecomesUnknown) {
  Dim Big = Dim::get(int64_t(1) << 40);
  EXPECT_TRUE((Big * Big).isUnknown());
}

TEST(TensorTypeTest, PrintsAndCountsElements) {
  TensorType T(ElementType::BF16,
               {Dim::getSymbol("batch"), Dim::get(1024), Dim()});
  EXPECT_EQ(T.str(), "bf16[batch, 1024, ?]");
  EXPECT_FALSE(T.hasStaticShape());
  EXPECT_TRUE(T.getNumElements().isUnknown());
  TensorType S = TensorType::get(ElementType::I64, {});
  EXPECT_EQ(S.str(), "i64[]");
  EXPECT_EQ(S.getNumElements().getSize(), 1);
}

TEST(TensorTypeTest, CompatibilityTreatsUnknownAsWildcard) {
  TensorType A(ElementType::F32, {Dim::get(2), Dim()});
  TensorType B(ElementType::F32, {Dim::get(2), Dim::get(3)});
  TensorType C(ElementType::F32, {Dim::get(4), Dim::get(3)});
  TensorType D(ElementType::F16, {Dim::get(2), Dim::get(3)});
  EXPECT_TRUE(isCompatible(A, B));
  EXPECT_FALSE(isCompatible(B, C));
  EXPECT_FALSE(isCompatible(B, D));
  EXPECT_FALSE(isCompatible(A, TensorType(ElementType::F32, {Dim::get(2)})));
}

TEST(ElementTypeTest, NamesRoundTrip) {
  for (llvm::StringRef Name : {"f64", "f32", "f16", "bf16", "f8e4m3", "i64",
                               "i32", "i8", "u8", "bool"}) {
    std::optional<ElementType> T = parseElementTypeName(Name);
    ASSERT_TRUE(T) << Name.str();
    EXPECT_EQ(getElementTypeName(*T), Name);
  }
  EXPECT_FALSE(parseElementTypeName("f31"));
  EXPECT_EQ(getElementTypeBits(ElementType::BF16), 16u);
  EXPECT_TRUE(isFloatElementType(ElementType::F8E4M3));
  EXPECT_FALSE(isFloatElementType(ElementType::Bool));
}

TEST(BroadcastTest, NumpyRules) {
  Dim B = Dim::getSymbol("batch");
  auto R = broadcastShapes({B, Dim::get(1), Dim::get(4)},
                           {Dim::get(3), Dim::get(1)});
  ASSERT_TRUE(R);
  EXPECT_EQ(*R, (llvm::SmallVector<Dim, 4>{B, Dim::get(3), Dim::get(4)}));
  EXPECT_FALSE(broadcastShapes({Dim::get(2)}, {Dim::get(3)}));
  EXPECT_FALSE(broadcastShapes({B}, {Dim::getSymbol("sequence")}));
  R = broadcastShapes({Dim()}, {Dim::get(5)});
  ASSERT_TRUE(R);
  EXPECT_EQ((*R)[0], Dim::get(5));
  R = broadcastShapes({Dim()}, {Dim::get(1)});
  ASSERT_TRUE(R);
  EXPECT_TRUE((*R)[0].isUnknown());
}

} // namespace

//===- Parser.cpp - Reads the .air text form ------------------------------===//

#include "ir/Parser.h"
#include "ir/Lexer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

using namespace autopar;
using namespace llvm;

namespace {

/// A use of a value by name, resolved once the whole graph is read so that
/// the verifier, not the parser, reports uses before definitions.
struct PendingUse {
  std::string Name;
  SMLoc Loc;
};

class Parser {
public:
  Parser(const SourceMgr &SM, DiagnosticEngine &Diag)
      : Diag(Diag), Lex(SM.getMemoryBuffer(SM.getMainFileID())->getBuffer()) {
    consume();
  }

  std::unique_ptr<Module> parseModule();

private:
  // Token handling.
  void consume() { Tok = Lex.next(); }
  LogicalResult emitError(const Twine &Message) {
    return emitError(Tok.getLoc(), Message);
  }
  LogicalResult emitError(SMLoc Loc, const Twine &Message) {
    if (Tok.is(Token::Error) && Loc == Tok.getLoc())
      Diag.error(Loc, Tok.Value);
    else
      Diag.error(Loc, Message);
    return failure();
  }
  LogicalResult expect(Token::Kind K, const Twine &What) {
    if (!Tok.is(K))
      return emitError("expected " + What);
    consume();
    return success();
  }
  LogicalResult expectKeyword(StringRef Word) {
    if (!Tok.isKeyword(Word))
      return emitError("expected '" + Word + "'");
    consume();
    return success();
  }
  /// Parses `Elem (',' Elem)*` up to the closing token (consumed).
  template <typename F>
  LogicalResult parseCommaList(Token::Kind Close, StringRef CloseText,
                               F ParseElement) {
    if (Tok.is(Close)) {
      consume();
      return success();
    }
    while (true) {
      if (failed(ParseElement()))
        return failure();
      if (Tok.is(Close)) {
        consume();
        return success();
      }
      if (failed(expect(Token::Comma, "',' or '" + CloseText + "'")))
        return failure();
    }
  }

  // Grammar.
  std::unique_ptr<Graph> parseGraph();
  LogicalResult parseStatement(Graph &G);
  LogicalResult parseMesh(Graph &G);
  LogicalResult parseParam(Graph &G);
  LogicalResult parseConstraint(Graph &G);
  LogicalResult parseNode(Graph &G);
  LogicalResult parseReturn();
  LogicalResult resolveUses(Graph &G);

  LogicalResult parseInteger(int64_t &Result);
  LogicalResult parseType(TensorType &Result);
  LogicalResult parseDim(Dim &Result);
  LogicalResult parseAttrDict(AttrDict &Result);
  LogicalResult parseAttribute(Attribute &Result);
  LogicalResult parseDense(Attribute &Result);
  LogicalResult parseSharding(Attribute &Result);
  LogicalResult parseAxisSet(std::vector<std::string> &Axes);
  LogicalResult parseWeightSource(std::optional<WeightSource> &Result);
  LogicalResult defineValueName(Graph &G, const Token &NameTok);

  DiagnosticEngine &Diag;
  Lexer Lex;
  Token Tok;

  // State of the graph being parsed.
  std::vector<std::pair<Node *, std::vector<PendingUse>>> PendingOperands;
  std::vector<PendingUse> PendingOutputs;
  bool SawReturn = false;
  /// Nesting depth of lists and dicts being parsed; bounded so that hostile
  /// input cannot exhaust the stack.
  unsigned AttrDepth = 0;
};

/// Deeper nesting of attribute lists and dicts is an error.
constexpr unsigned MaxAttrDepth = 64;

} // namespace

std::unique_ptr<Module> Parser::parseModule() {
  auto M = std::make_unique<Module>();
  // module-attributes ::= 'module' attr-dict
  if (Tok.isKeyword("module")) {
    M->setAttrsLoc(Tok.getLoc());
    consume();
    if (!Tok.is(Token::LBrace)) {
      (void)emitError("expected '{' and the module's attributes");
      return nullptr;
    }
    if (failed(parseAttrDict(M->getAttrs())))
      return nullptr;
  }
  StringSet<> GraphNames;
  while (!Tok.is(Token::Eof)) {
    SMLoc Loc = Tok.getLoc();
    std::unique_ptr<Graph> G = parseGraph();
    if (!G)
      return nullptr;
    if (!GraphNames.insert(G->getName()).second) {
      (void)emitError(Loc, "redefinition of graph '@" + G->getName() + "'");
      return nullptr;
    }
    M->addGraph(std::move(G));
  }
  return M;
}

// graph ::= 'graph' symbol-name '(' inputs ')' '{' statement* '}'
std::unique_ptr<Graph> Parser::parseGraph() {
  SMLoc Loc = Tok.getLoc();
  if (failed(expectKeyword("graph")))
    return nullptr;
  if (!Tok.is(Token::SymbolName)) {
    (void)emitError("expected graph name, like @main");
    return nullptr;
  }
  auto G = std::make_unique<Graph>(Tok.Value);
  G->setLoc(Loc);
  consume();
  PendingOperands.clear();
  PendingOutputs.clear();
  SawReturn = false;

  if (failed(expect(Token::LParen, "'('")))
    return nullptr;
  auto ParseInput = [&]() -> LogicalResult {
    if (!Tok.is(Token::ValueName))
      return emitError("expected graph input, like %x: f32[4]");
    Token NameTok = Tok;
    consume();
    TensorType Type;
    if (failed(expect(Token::Colon, "':' and a type")) ||
        failed(parseType(Type)) || failed(defineValueName(*G, NameTok)))
      return failure();
    Value *V = G->addInput(NameTok.Value, Type);
    V->setLoc(NameTok.getLoc());
    if (Tok.is(Token::LBrace))
      return parseAttrDict(V->getAttrs());
    return success();
  };
  if (failed(parseCommaList(Token::RParen, ")", ParseInput)) ||
      failed(expect(Token::LBrace, "'{'")))
    return nullptr;
  while (!Tok.is(Token::RBrace)) {
    if (Tok.is(Token::Eof)) {
      (void)emitError("expected '}' at the end of graph '@" + G->getName() +
                      "'");
      return nullptr;
    }
    if (SawReturn) {
      (void)emitError("expected '}' after 'return'");
      return nullptr;
    }
    if (failed(parseStatement(*G)))
      return nullptr;
  }
  if (!SawReturn) {
    (void)emitError("expected 'return' before the end of graph '@" +
                    G->getName() + "'");
    return nullptr;
  }
  consume();
  if (failed(resolveUses(*G)))
    return nullptr;
  return G;
}

LogicalResult Parser::parseStatement(Graph &G) {
  if (Tok.isKeyword("mesh"))
    return parseMesh(G);
  if (Tok.isKeyword("param"))
    return parseParam(G);
  if (Tok.isKeyword("constraint"))
    return parseConstraint(G);
  if (Tok.isKeyword("return"))
    return parseReturn();
  if (Tok.is(Token::ValueName) || Tok.is(Token::Identifier))
    return parseNode(G);
  return emitError("expected a node, 'param', 'mesh', 'constraint' or "
                   "'return'");
}

LogicalResult Parser::defineValueName(Graph &G, const Token &NameTok) {
  if (G.isNameUsed(NameTok.Value))
    return emitError(NameTok.getLoc(),
                     "redefinition of value '%" + NameTok.Value + "'");
  return success();
}

// mesh ::= 'mesh' symbol-name '=' '[' ident '=' integer (',' ...)* ']'
LogicalResult Parser::parseMesh(Graph &G) {
  Mesh M;
  M.Loc = Tok.getLoc();
  consume();
  if (!Tok.is(Token::SymbolName))
    return emitError("expected mesh name, like @cluster");
  M.Name = Tok.Value;
  SMLoc NameLoc = Tok.getLoc();
  consume();
  if (failed(expect(Token::Equal, "'='")) ||
      failed(expect(Token::LSquare, "'['")))
    return failure();
  auto ParseAxis = [&]() -> LogicalResult {
    if (!Tok.is(Token::Identifier))
      return emitError("expected mesh axis name");
    std::string Axis = Tok.Spelling.str();
    SMLoc AxisLoc = Tok.getLoc();
    consume();
    int64_t Size;
    if (failed(expect(Token::Equal, "'='")))
      return failure();
    SMLoc SizeLoc = Tok.getLoc();
    if (failed(parseInteger(Size)))
      return failure();
    if (Size <= 0)
      return emitError(SizeLoc, "mesh axis size must be positive");
    if (M.getAxisSize(Axis))
      return emitError(AxisLoc, "mesh axis '" + Axis + "' is repeated");
    M.Axes.push_back({Axis, Size});
    return success();
  };
  if (failed(parseCommaList(Token::RSquare, "]", ParseAxis)))
    return failure();
  if (M.Axes.empty())
    return emitError(NameLoc, "mesh '@" + M.Name + "' has no axes");
  std::string Name = M.Name;
  if (!G.addMesh(std::move(M)))
    return emitError(NameLoc, "redefinition of mesh '@" + Name + "'");
  return success();
}

// constraint ::= 'constraint' ident '=' (ident | integer)
// A symbol the graph assumes equal to another, or to a size
// (ir/DimEqualities.h).
LogicalResult Parser::parseConstraint(Graph &G) {
  consume();
  if (!Tok.is(Token::Identifier))
    return emitError("expected a dimension symbol, like sequence");
  Dim Symbol = Dim::getSymbol(Tok.Spelling);
  consume();
  if (failed(expect(Token::Equal, "'='")))
    return failure();
  SMLoc RepLoc = Tok.getLoc();
  Dim Rep;
  if (Tok.is(Token::Identifier)) {
    Rep = Dim::getSymbol(Tok.Spelling);
    consume();
  } else {
    int64_t Size;
    if (failed(parseInteger(Size)))
      return failure();
    if (Size < 0)
      return emitError(RepLoc, "a dimension cannot be negative");
    Rep = Dim::get(Size);
  }
  if (!G.getDimEqualities().assume(Symbol, Rep, ""))
    return emitError(RepLoc, "the constraint contradicts an earlier one");
  return success();
}

// param ::= 'param' value-name ':' type attr-dict? ('=' weight-source)?
LogicalResult Parser::parseParam(Graph &G) {
  consume();
  if (!Tok.is(Token::ValueName))
    return emitError("expected parameter name, like %w");
  Token NameTok = Tok;
  consume();
  TensorType Type;
  if (failed(expect(Token::Colon, "':' and a type")) ||
      failed(parseType(Type)) || failed(defineValueName(G, NameTok)))
    return failure();
  Value *V = G.addParam(NameTok.Value, Type);
  V->setLoc(NameTok.getLoc());
  if (Tok.is(Token::LBrace) && failed(parseAttrDict(V->getAttrs())))
    return failure();
  if (!Tok.is(Token::Equal))
    return success();
  consume();
  std::optional<WeightSource> Source;
  if (failed(parseWeightSource(Source)))
    return failure();
  V->setWeightSource(std::move(Source));
  return success();
}

// weight-source ::= dense-attr
//                 | 'external' '<' string ',' 'offset' '=' integer ','
//                   'length' '=' integer '>'
LogicalResult Parser::parseWeightSource(std::optional<WeightSource> &Result) {
  if (Tok.isKeyword("dense")) {
    Attribute A;
    if (failed(parseDense(A)))
      return failure();
    Result = WeightSource::getInline(A.getTensor());
    return success();
  }
  if (!Tok.isKeyword("external"))
    return emitError("expected 'dense<...>' or 'external<...>'");
  consume();
  if (failed(expect(Token::Less, "'<'")))
    return failure();
  if (!Tok.is(Token::String))
    return emitError("expected the external data file name as a string");
  std::string Location = Tok.Value;
  consume();
  int64_t Offset, Length;
  SMLoc OffsetLoc, LengthLoc;
  if (failed(expect(Token::Comma, "','")) || failed(expectKeyword("offset")) ||
      failed(expect(Token::Equal, "'='")))
    return failure();
  OffsetLoc = Tok.getLoc();
  if (failed(parseInteger(Offset)) || failed(expect(Token::Comma, "','")) ||
      failed(expectKeyword("length")) || failed(expect(Token::Equal, "'='")))
    return failure();
  LengthLoc = Tok.getLoc();
  if (failed(parseInteger(Length)) || failed(expect(Token::Greater, "'>'")))
    return failure();
  if (Offset < 0)
    return emitError(OffsetLoc, "external data offset must not be negative");
  if (Length < 0)
    return emitError(LengthLoc, "external data length must not be negative");
  Result = WeightSource::getExternal(Location, Offset, Length);
  return success();
}

// node ::= (value-name (',' value-name)* '=')? op-name
//          '(' (value-name (',' value-name)*)? ')' attr-dict?
//          (':' type (',' type)*)? ('loc' '(' string ')')?
LogicalResult Parser::parseNode(Graph &G) {
  SMLoc Loc = Tok.getLoc();
  std::vector<Token> ResultToks;
  if (Tok.is(Token::ValueName)) {
    while (true) {
      if (!Tok.is(Token::ValueName))
        return emitError("expected result name");
      for (const Token &Prev : ResultToks)
        if (Prev.Value == Tok.Value)
          return emitError("redefinition of value '%" + Tok.Value + "'");
      if (failed(defineValueName(G, Tok)))
        return failure();
      ResultToks.push_back(Tok);
      consume();
      if (Tok.is(Token::Equal))
        break;
      if (failed(expect(Token::Comma, "',' or '='")))
        return failure();
    }
    consume();
  }
  if (!Tok.is(Token::Identifier))
    return emitError("expected op name");
  std::optional<OpId> Op = lookupOp(Tok.Spelling);
  if (!Op)
    return emitError("unknown op '" + Tok.Spelling + "'");
  consume();

  std::vector<PendingUse> Operands;
  if (failed(expect(Token::LParen, "'('")))
    return failure();
  auto ParseOperand = [&]() -> LogicalResult {
    if (Tok.isKeyword("_")) {
      // An absent optional operand.
      Operands.push_back({"", Tok.getLoc()});
      consume();
      return success();
    }
    if (!Tok.is(Token::ValueName))
      return emitError("expected operand, like %x, or _ for an absent one");
    Operands.push_back({Tok.Value, Tok.getLoc()});
    consume();
    return success();
  };
  if (failed(parseCommaList(Token::RParen, ")", ParseOperand)))
    return failure();

  AttrDict Attrs;
  if (Tok.is(Token::LBrace) && failed(parseAttrDict(Attrs)))
    return failure();

  SmallVector<TensorType, 1> ResultTypes;
  if (!ResultToks.empty()) {
    if (failed(expect(Token::Colon, "':' and the result types")))
      return failure();
    while (true) {
      TensorType T;
      if (failed(parseType(T)))
        return failure();
      ResultTypes.push_back(T);
      if (!Tok.is(Token::Comma))
        break;
      consume();
    }
    if (ResultTypes.size() != ResultToks.size())
      return emitError(Loc, Twine(ResultToks.size()) + " results but " +
                                Twine(ResultTypes.size()) + " result types");
  }

  std::string Name;
  if (Tok.isKeyword("loc")) {
    consume();
    if (failed(expect(Token::LParen, "'('")))
      return failure();
    if (!Tok.is(Token::String))
      return emitError("expected the node name as a string");
    Name = Tok.Value;
    consume();
    if (failed(expect(Token::RParen, "')'")))
      return failure();
  }

  std::vector<std::string> ResultNames;
  for (const Token &T : ResultToks)
    ResultNames.push_back(T.Value);
  std::vector<Value *> NoOperands(Operands.size(), nullptr);
  Node *N =
      G.createNode(*Op, NoOperands, ResultTypes, std::move(Attrs), ResultNames);
  N->setLoc(Loc);
  N->setName(Name);
  for (unsigned I = 0, E = ResultToks.size(); I != E; ++I)
    N->getResult(I)->setLoc(ResultToks[I].getLoc());
  PendingOperands.push_back({N, std::move(Operands)});
  return success();
}

// return ::= 'return' (value-name (',' value-name)*)?
LogicalResult Parser::parseReturn() {
  consume();
  SawReturn = true;
  if (!Tok.is(Token::ValueName))
    return success();
  while (true) {
    if (!Tok.is(Token::ValueName))
      return emitError("expected a value to return");
    PendingOutputs.push_back({Tok.Value, Tok.getLoc()});
    consume();
    if (!Tok.is(Token::Comma))
      return success();
    consume();
  }
}

LogicalResult Parser::resolveUses(Graph &G) {
  auto Resolve = [&](const PendingUse &U) -> Value * {
    Value *V = G.lookupValue(U.Name);
    if (!V)
      (void)emitError(U.Loc, "use of undefined value '%" + U.Name + "'");
    return V;
  };
  for (auto &[N, Uses] : PendingOperands)
    for (unsigned I = 0, E = Uses.size(); I != E; ++I) {
      if (Uses[I].Name.empty())
        continue;
      Value *V = Resolve(Uses[I]);
      if (!V)
        return failure();
      N->setOperand(I, V);
    }
  std::vector<Value *> Outputs;
  for (const PendingUse &U : PendingOutputs) {
    Value *V = Resolve(U);
    if (!V)
      return failure();
    Outputs.push_back(V);
  }
  G.setOutputs(Outputs);
  return success();
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

LogicalResult Parser::parseInteger(int64_t &Result) {
  if (!Tok.is(Token::Integer))
    return emitError("expected an integer");
  if (Tok.Spelling.getAsInteger(10, Result))
    return emitError("integer is out of the range of i64");
  consume();
  return success();
}

// type ::= element-type '[' (dim (',' dim)*)? ']'
LogicalResult Parser::parseType(TensorType &Result) {
  if (!Tok.is(Token::Identifier))
    return emitError("expected a tensor type, like f32[4, batch]");
  std::optional<ElementType> Elem = parseElementTypeName(Tok.Spelling);
  if (!Elem)
    return emitError("unknown element type '" + Tok.Spelling + "'");
  consume();
  if (failed(expect(Token::LSquare, "'[' and the shape")))
    return failure();
  SmallVector<Dim, 4> Shape;
  auto ParseOne = [&]() -> LogicalResult {
    Dim D;
    if (failed(parseDim(D)))
      return failure();
    Shape.push_back(D);
    return success();
  };
  if (failed(parseCommaList(Token::RSquare, "]", ParseOne)))
    return failure();
  Result = TensorType(*Elem, Shape);
  return success();
}

// dim ::= '?' | factor ('*' factor)*     factor ::= integer | identifier
LogicalResult Parser::parseDim(Dim &Result) {
  if (Tok.is(Token::Question)) {
    consume();
    Result = Dim::getUnknown();
    return success();
  }
  Dim D = Dim::get(1);
  while (true) {
    if (Tok.is(Token::Integer)) {
      SMLoc Loc = Tok.getLoc();
      int64_t Size;
      if (failed(parseInteger(Size)))
        return failure();
      if (Size < 0)
        return emitError(Loc, "dimension must not be negative");
      Dim Product = D * Dim::get(Size);
      if (Product.isUnknown())
        return emitError(Loc, "dimension is out of the range of i64");
      D = Product;
    } else if (Tok.is(Token::Identifier)) {
      D = D * Dim::getSymbol(Tok.Spelling);
      consume();
    } else {
      return emitError("expected a dimension: an integer, a symbol or '?'");
    }
    if (!Tok.is(Token::Star))
      break;
    consume();
  }
  Result = D;
  return success();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

// attr-dict ::= '{' (attr-name '=' attribute (',' ...)*)? '}'
LogicalResult Parser::parseAttrDict(AttrDict &Result) {
  if (failed(expect(Token::LBrace, "'{'")))
    return failure();
  auto ParseEntry = [&]() -> LogicalResult {
    std::string Name;
    if (Tok.is(Token::Identifier))
      Name = Tok.Spelling.str();
    else if (Tok.is(Token::String) && !Tok.Value.empty())
      Name = Tok.Value;
    else
      return emitError("expected attribute name");
    SMLoc NameLoc = Tok.getLoc();
    consume();
    if (Result.get(Name))
      return emitError(NameLoc, "attribute '" + Name + "' is repeated");
    Attribute A;
    if (failed(expect(Token::Equal, "'='")) || failed(parseAttribute(A)))
      return failure();
    Result.set(Name, std::move(A));
    return success();
  };
  return parseCommaList(Token::RBrace, "}", ParseEntry);
}

/// Parses a float spelling; false if it is out of range.
static bool parseFloatSpelling(StringRef Spelling, double &Result) {
  std::string S = Spelling.str();
  errno = 0;
  Result = std::strtod(S.c_str(), nullptr);
  return errno != ERANGE || std::abs(Result) < 1.0;
}

LogicalResult Parser::parseAttribute(Attribute &Result) {
  if (AttrDepth >= MaxAttrDepth)
    return emitError("attributes are nested more than " + Twine(MaxAttrDepth) +
                     " deep");
  struct DepthGuard {
    unsigned &Depth;
    explicit DepthGuard(unsigned &D) : Depth(++D) {}
    ~DepthGuard() { --Depth; }
  } Guard(AttrDepth);
  switch (Tok.K) {
  case Token::Integer: {
    int64_t V;
    if (failed(parseInteger(V)))
      return failure();
    Result = Attribute::getInt(V);
    return success();
  }
  case Token::Float: {
    double V;
    if (!parseFloatSpelling(Tok.Spelling, V))
      return emitError("float is out of the range of f64");
    consume();
    Result = Attribute::getFloat(V);
    return success();
  }
  case Token::Minus:
    consume();
    if (!Tok.isKeyword("inf"))
      return emitError("expected 'inf' after '-' (a negative number has no "
                       "space after its '-')");
    consume();
    Result = Attribute::getFloat(-std::numeric_limits<double>::infinity());
    return success();
  case Token::String:
    Result = Attribute::getString(Tok.Value);
    consume();
    return success();
  case Token::LSquare: {
    SMLoc Loc = Tok.getLoc();
    consume();
    std::vector<Attribute> Elements;
    auto ParseOne = [&]() -> LogicalResult {
      Attribute A;
      if (failed(parseAttribute(A)))
        return failure();
      Elements.push_back(std::move(A));
      return success();
    };
    if (failed(parseCommaList(Token::RSquare, "]", ParseOne)))
      return failure();
    auto IsNumber = [](const Attribute &A) {
      return A.isa(Attribute::Kind::Int) || A.isa(Attribute::Kind::Float);
    };
    unsigned NumNumbers = llvm::count_if(Elements, IsNumber);
    if (NumNumbers == Elements.size()) {
      if (llvm::all_of(Elements, [](const Attribute &A) {
            return A.isa(Attribute::Kind::Int);
          })) {
        std::vector<int64_t> Ints;
        for (const Attribute &A : Elements)
          Ints.push_back(A.getInt());
        Result = Attribute::getIntList(std::move(Ints));
      } else {
        std::vector<double> Floats;
        for (const Attribute &A : Elements)
          Floats.push_back(A.isa(Attribute::Kind::Int) ? double(A.getInt())
                                                       : A.getFloat());
        Result = Attribute::getFloatList(std::move(Floats));
      }
      return success();
    }
    if (NumNumbers != 0)
      return emitError(Loc, "a list holds either numbers or other attributes");
    Result = Attribute::getList(std::move(Elements));
    return success();
  }
  case Token::LBrace: {
    AttrDict Dict;
    if (failed(parseAttrDict(Dict)))
      return failure();
    Result = Attribute::getDict(std::move(Dict));
    return success();
  }
  case Token::Identifier:
    if (Tok.isKeyword("true") || Tok.isKeyword("false")) {
      Result = Attribute::getBool(Tok.isKeyword("true"));
      consume();
      return success();
    }
    if (Tok.isKeyword("inf") || Tok.isKeyword("nan")) {
      Result = Attribute::getFloat(
          Tok.isKeyword("inf") ? std::numeric_limits<double>::infinity()
                               : std::numeric_limits<double>::quiet_NaN());
      consume();
      return success();
    }
    if (Tok.isKeyword("dense"))
      return parseDense(Result);
    if (Tok.isKeyword("sharding"))
      return parseSharding(Result);
    break;
  default:
    break;
  }
  return emitError("expected an attribute value");
}

// dense ::= 'dense' '<' type ',' '[' (element (',' element)*)? ']' '>'
LogicalResult Parser::parseDense(Attribute &Result) {
  consume();
  TensorType Type;
  if (failed(expect(Token::Less, "'<'")))
    return failure();
  SMLoc TypeLoc = Tok.getLoc();
  if (failed(parseType(Type)))
    return failure();
  if (!Type.hasStaticShape())
    return emitError(TypeLoc, "dense tensor type must have a static shape");
  ElementType Elem = Type.getElementType();
  if (failed(expect(Token::Comma, "','")))
    return failure();
  SMLoc ListLoc = Tok.getLoc();
  if (failed(expect(Token::LSquare, "'['")))
    return failure();
  std::vector<int64_t> Ints;
  std::vector<double> Floats;
  bool IsFloat = isFloatElementType(Elem);
  auto ParseElement = [&]() -> LogicalResult {
    if (IsFloat) {
      Attribute A;
      SMLoc Loc = Tok.getLoc();
      if (failed(parseAttribute(A)))
        return failure();
      if (A.isa(Attribute::Kind::Int))
        Floats.push_back(roundToElementType(double(A.getInt()), Elem));
      else if (A.isa(Attribute::Kind::Float))
        Floats.push_back(roundToElementType(A.getFloat(), Elem));
      else
        return emitError(Loc, "expected a number");
      return success();
    }
    if (Elem == ElementType::Bool) {
      if (!Tok.isKeyword("true") && !Tok.isKeyword("false"))
        return emitError("expected 'true' or 'false'");
      Ints.push_back(Tok.isKeyword("true"));
      consume();
      return success();
    }
    SMLoc Loc = Tok.getLoc();
    int64_t V;
    if (failed(parseInteger(V)))
      return failure();
    int64_t Lo = std::numeric_limits<int64_t>::min(),
            Hi = std::numeric_limits<int64_t>::max();
    if (Elem == ElementType::I32)
      Lo = INT32_MIN, Hi = INT32_MAX;
    else if (Elem == ElementType::I8)
      Lo = INT8_MIN, Hi = INT8_MAX;
    else if (Elem == ElementType::U8)
      Lo = 0, Hi = UINT8_MAX;
    if (V < Lo || V > Hi)
      return emitError(Loc, "value " + Twine(V) + " does not fit in " +
                                getElementTypeName(Elem));
    Ints.push_back(V);
    return success();
  };
  if (failed(parseCommaList(Token::RSquare, "]", ParseElement)) ||
      failed(expect(Token::Greater, "'>'")))
    return failure();
  size_t Count = IsFloat ? Floats.size() : Ints.size();
  std::optional<int64_t> Expected = Type.getStaticNumElements();
  if (!Expected)
    return emitError(TypeLoc, "dense tensor type " + Type.str() +
                                  " has too many elements");
  if (int64_t(Count) != *Expected)
    return emitError(ListLoc, "dense tensor of type " + Type.str() + " needs " +
                                  Twine(*Expected) + " elements, got " +
                                  Twine(Count));
  Result = IsFloat ? Attribute::getTensor(DenseTensor(Type, std::move(Floats)))
                   : Attribute::getTensor(DenseTensor(Type, std::move(Ints)));
  return success();
}

// axis-set ::= '{' (identifier (',' identifier)*)? '}'
LogicalResult Parser::parseAxisSet(std::vector<std::string> &Axes) {
  if (failed(expect(Token::LBrace, "'{' and mesh axes")))
    return failure();
  return parseCommaList(Token::RBrace, "}", [&]() -> LogicalResult {
    if (!Tok.is(Token::Identifier))
      return emitError("expected mesh axis name");
    Axes.push_back(Tok.Spelling.str());
    consume();
    return success();
  });
}

// sharding ::= 'sharding' '<' symbol-name ',' '[' (axis-set (',' ...)*)? ']'
//              (',' 'partial' '=' axis-set)? '>'
LogicalResult Parser::parseSharding(Attribute &Result) {
  consume();
  Sharding S;
  if (failed(expect(Token::Less, "'<'")))
    return failure();
  if (!Tok.is(Token::SymbolName))
    return emitError("expected mesh name, like @cluster");
  S.Mesh = Tok.Value;
  consume();
  if (failed(expect(Token::Comma, "','")) ||
      failed(expect(Token::LSquare, "'[' and an axis set per dimension")))
    return failure();
  if (failed(parseCommaList(Token::RSquare, "]", [&]() {
        S.DimAxes.emplace_back();
        return parseAxisSet(S.DimAxes.back());
      })))
    return failure();
  if (Tok.is(Token::Comma)) {
    consume();
    if (failed(expectKeyword("partial")) ||
        failed(expect(Token::Equal, "'='")) ||
        failed(parseAxisSet(S.PartialAxes)))
      return failure();
  }
  if (failed(expect(Token::Greater, "'>'")))
    return failure();
  Result = Attribute::getSharding(std::move(S));
  return success();
}

std::unique_ptr<Module> autopar::parseModule(const SourceMgr &SM,
                                             DiagnosticEngine &Diag) {
  return Parser(SM, Diag).parseModule();
}

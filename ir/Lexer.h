//===- Lexer.h - Tokens of the .air text form -------------------*- C++ -*-===//

#ifndef AUTOPAR_IR_LEXER_H
#define AUTOPAR_IR_LEXER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"

#include <string>

namespace autopar {

struct Token {
  enum Kind {
    Eof,
    Error,      // Spelling holds the message.
    Identifier, // graph, f32, MatMul, batch, ...
    ValueName,  // %x or %"x y"; Value holds the name.
    SymbolName, // @m or @"m"; Value holds the name.
    Integer,    // 42, -3
    Float,      // 1.5, -2e-3
    String,     // "..."; Value holds the unescaped text.
    LParen,
    RParen,
    LBrace,
    RBrace,
    LSquare,
    RSquare,
    Less,
    Greater,
    Comma,
    Equal,
    Colon,
    Star,
    Question,
    Minus,
  };

  Kind K = Eof;
  /// The token's text in the buffer.
  llvm::StringRef Spelling;
  /// Decoded names and strings.
  std::string Value;

  bool is(Kind Other) const { return K == Other; }
  bool isKeyword(llvm::StringRef Word) const {
    return K == Identifier && Spelling == Word;
  }
  llvm::SMLoc getLoc() const {
    return llvm::SMLoc::getFromPointer(Spelling.data());
  }
};

class Lexer {
public:
  explicit Lexer(llvm::StringRef Buffer)
      : Buffer(Buffer), Cur(Buffer.begin()) {}
  Token next();

private:
  Token make(Token::Kind K, const char *Start);
  Token error(const char *Start, const char *Message);
  void skipWhitespaceAndComments();
  /// Lexes the body of a quoted string at Cur (just after the quote).
  Token lexString(const char *Start, Token::Kind K);
  Token lexNumber(const char *Start);

  llvm::StringRef Buffer;
  const char *Cur;
};

} // namespace autopar

#endif // AUTOPAR_IR_LEXER_H

//===- Lexer.cpp - Tokens of the .air text form ---------------------------===//

#include "ir/Lexer.h"

#include "llvm/ADT/StringExtras.h"

using namespace autopar;
using namespace llvm;

static bool isIdentifierStart(char C) { return isAlpha(C) || C == '_'; }
static bool isIdentifierChar(char C) {
  return isAlnum(C) || C == '_' || C == '.' || C == '$';
}

Token Lexer::make(Token::Kind K, const char *Start) {
  Token T;
  T.K = K;
  T.Spelling = StringRef(Start, Cur - Start);
  return T;
}

Token Lexer::error(const char *Start, const char *Message) {
  Token T;
  T.K = Token::Error;
  T.Spelling = StringRef(Start, std::max<size_t>(Cur - Start, 1));
  T.Value = Message;
  return T;
}

void Lexer::skipWhitespaceAndComments() {
  const char *End = Buffer.end();
  while (Cur != End) {
    if (isSpace(*Cur)) {
      ++Cur;
    } else if (*Cur == '/' && Cur + 1 != End && Cur[1] == '/') {
      while (Cur != End && *Cur != '\n')
        ++Cur;
    } else {
      return;
    }
  }
}

Token Lexer::lexString(const char *Start, Token::Kind K) {
  const char *End = Buffer.end();
  std::string Text;
  while (true) {
    if (Cur == End || *Cur == '\n')
      return error(Start, "unterminated string");
    char C = *Cur++;
    if (C == '"')
      break;
    if (C != '\\') {
      Text.push_back(C);
      continue;
    }
    if (Cur == End)
      return error(Start, "unterminated string");
    char E = *Cur++;
    switch (E) {
    case '"':
    case '\\':
      Text.push_back(E);
      break;
    case 'n':
      Text.push_back('\n');
      break;
    case 't':
      Text.push_back('\t');
      break;
    case 'x': {
      if (End - Cur < 2 || !isHexDigit(Cur[0]) || !isHexDigit(Cur[1]))
        return error(Cur - 2, "expected two hex digits after \\x");
      Text.push_back(static_cast<char>(hexFromNibbles(Cur[0], Cur[1])));
      Cur += 2;
      break;
    }
    default:
      return error(Cur - 2, "unknown escape in string");
    }
  }
  Token T = make(K, Start);
  T.Value = std::move(Text);
  return T;
}

Token Lexer::lexNumber(const char *Start) {
  const char *End = Buffer.end();
  bool IsFloat = false;
  while (Cur != End && isDigit(*Cur))
    ++Cur;
  if (Cur != End && *Cur == '.') {
    IsFloat = true;
    ++Cur;
    while (Cur != End && isDigit(*Cur))
      ++Cur;
  }
  if (Cur != End && (*Cur == 'e' || *Cur == 'E')) {
    const char *Exp = Cur + 1;
    if (Exp != End && (*Exp == '+' || *Exp == '-'))
      ++Exp;
    if (Exp != End && isDigit(*Exp)) {
      IsFloat = true;
      Cur = Exp;
      while (Cur != End && isDigit(*Cur))
        ++Cur;
    }
  }
  if (Cur != End && isIdentifierStart(*Cur))
    return error(Start, "malformed number");
  return make(IsFloat ? Token::Float : Token::Integer, Start);
}

Token Lexer::next() {
  skipWhitespaceAndComments();
  const char *Start = Cur;
  if (Cur == Buffer.end())
    return make(Token::Eof, Start);
  char C = *Cur++;
  switch (C) {
  case '(':
    return make(Token::LParen, Start);
  case ')':
    return make(Token::RParen, Start);
  case '{':
    return make(Token::LBrace, Start);
  case '}':
    return make(Token::RBrace, Start);
  case '[':
    return make(Token::LSquare, Start);
  case ']':
    return make(Token::RSquare, Start);
  case '<':
    return make(Token::Less, Start);
  case '>':
    return make(Token::Greater, Start);
  case ',':
    return make(Token::Comma, Start);
  case '=':
    return make(Token::Equal, Start);
  case ':':
    return make(Token::Colon, Start);
  case '*':
    return make(Token::Star, Start);
  case '?':
    return make(Token::Question, Start);
  case '"':
    return lexString(Start, Token::String);
  case '-':
    if (Cur != Buffer.end() && isDigit(*Cur))
      return lexNumber(Start);
    return make(Token::Minus, Start);
  case '%':
  case '@': {
    Token::Kind K = C == '%' ? Token::ValueName : Token::SymbolName;
    if (Cur != Buffer.end() && *Cur == '"') {
      ++Cur;
      Token T = lexString(Start, K);
      if (T.is(Token::String) || T.is(K)) {
        if (T.Value.empty())
          return error(Start, "empty name");
        T.K = K;
      }
      return T;
    }
    while (Cur != Buffer.end() && isIdentifierChar(*Cur))
      ++Cur;
    if (Cur == Start + 1)
      return error(Start, C == '%' ? "expected a value name after '%'"
                                   : "expected a name after '@'");
    Token T = make(K, Start);
    T.Value = std::string(Start + 1, Cur);
    return T;
  }
  default:
    break;
  }
  if (isDigit(C))
    return lexNumber(Start);
  if (isIdentifierStart(C)) {
    while (Cur != Buffer.end() && isIdentifierChar(*Cur))
      ++Cur;
    return make(Token::Identifier, Start);
  }
  return error(Start, "unexpected character");
}

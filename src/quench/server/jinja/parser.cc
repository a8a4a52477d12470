#include "quench/server/jinja/parser.h"

#include <algorithm>
#include <initializer_list>

namespace quench::jinja {
namespace {

constexpr int kMaxNesting = 128;

std::string describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::kText:
      return "template text";
    case TokenKind::kVariableBegin:
      return "'{{'";
    case TokenKind::kVariableEnd:
      return "'}}'";
    case TokenKind::kBlockBegin:
      return "'{%'";
    case TokenKind::kBlockEnd:
      return "'%}'";
    case TokenKind::kString:
      return "a string";
    case TokenKind::kInteger:
    case TokenKind::kFloat:
      return "number " + t.text;
    case TokenKind::kEnd:
      return "the end of the template";
    default:
      return "'" + t.text + "'";
  }
}

ExprPtr make(Expr::Kind kind, SourcePos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

ExprPtr make(Expr::Kind kind, SourcePos pos, ExprPtr a, ExprPtr b = nullptr) {
  ExprPtr e = make(kind, pos);
  e->items.push_back(std::move(a));
  if (b) e->items.push_back(std::move(b));
  return e;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Body parse() {
    Body body = parse_body({});
    return body;
  }

 private:
  // Depth of nested expressions and statements, bounded by kMaxNesting.
  struct Nest {
    explicit Nest(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxNesting)
        syntax_error(parser.peek().pos, "nesting deeper than ", kMaxNesting, " levels");
    }
    ~Nest() { --parser.depth_; }
    Parser& parser;
  };

  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (i_ < t_.size() - 1) ++i_;
    return t;
  }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOperator && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  [[noreturn]] void expected(const std::string& what) const {
    syntax_error(peek().pos, "expected ", what, ", got ", describe(peek()));
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) expected(std::string("'") + op + "'");
  }
  std::string expect_name(const char* what = "a name") {
    if (peek().kind != TokenKind::kName) expected(what);
    return next().text;
  }
  void expect_block_end(const char* tag) {
    if (peek().kind != TokenKind::kBlockEnd) expected(std::string("'%}' to end {% ") + tag + " %}");
    next();
  }

  // Statements up to (not including) a {% name %} with name in `ends`.
  Body parse_body(std::initializer_list<const char*> ends) {
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kText;
        n->pos = t.pos;
        n->text = t.text;
        body.push_back(std::move(n));
        next();
      } else if (t.kind == TokenKind::kVariableBegin) {
        next();
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        n->pos = t.pos;
        n->expr = parse_tuple(true);
        if (peek().kind != TokenKind::kVariableEnd) expected("'}}'");
        next();
        body.push_back(std::move(n));
      } else if (t.kind == TokenKind::kBlockBegin) {
        const Token& name = peek(1);
        if (name.kind == TokenKind::kName &&
            std::any_of(ends.begin(), ends.end(), [&](const char* e) { return name.text == e; }))
          return body;
        body.push_back(parse_statement(ends));
      } else if (t.kind == TokenKind::kEnd) {
        if (ends.size() != 0)
          syntax_error(t.pos, "unexpected end of template; expected ", list(ends));
        return body;
      } else {
        expected("template text or a tag");
      }
    }
  }

  static std::string list(std::initializer_list<const char*> ends) {
    std::string out;
    for (const char* e : ends)
      out += (out.empty() ? "" : " or ") + std::string("{% ") + e + " %}";
    return out;
  }

  // Consumes `{% name` of a tag parse_body stopped at and returns name.
  std::string end_tag() {
    next();
    return next().text;
  }

  NodePtr make_node(Node::Kind kind, SourcePos pos) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->pos = pos;
    return n;
  }

  NodePtr parse_statement(std::initializer_list<const char*> ends) {
    const Nest nest(*this);
    const SourcePos pos = next().pos;  // {%
    if (peek().kind != TokenKind::kName) expected("a tag name");
    const std::string tag = next().text;
    if (tag == "if") return parse_if(pos);
    if (tag == "for") return parse_for(pos);
    if (tag == "set") return parse_set(pos);
    if (tag == "macro") return parse_macro(pos);
    if (tag == "call") return parse_call_block(pos);
    if (tag == "filter") return parse_filter_block(pos);
    if (tag == "with") return parse_with(pos);
    if (tag == "generation") {
      NodePtr n = make_node(Node::Kind::kScope, pos);
      expect_block_end("generation");
      n->body = parse_body({"endgeneration"});
      end_tag();
      expect_block_end("endgeneration");
      return n;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) syntax_error(pos, "{% ", tag, " %} outside a for loop");
      expect_block_end(tag.c_str());
      return make_node(tag == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, pos);
    }
    if (ends.size() != 0) syntax_error(pos, "unexpected {% ", tag, " %}; expected ", list(ends));
    syntax_error(pos, "unknown tag '", tag,
                 "'; supported: if, for, set, macro, call, filter, with, break, continue, "
                 "generation, raw");
  }

  NodePtr parse_if(SourcePos pos) {
    NodePtr n = make_node(Node::Kind::kIf, pos);
    n->conditions.push_back(parse_tuple(false));
    expect_block_end("if");
    while (true) {
      n->bodies.push_back(parse_body({"elif", "else", "endif"}));
      const std::string tag = end_tag();
      if (tag == "elif") {
        n->conditions.push_back(parse_tuple(false));
        expect_block_end("elif");
        continue;
      }
      if (tag == "else") {
        expect_block_end("else");
        n->else_body = parse_body({"endif"});
        end_tag();
      }
      expect_block_end("endif");
      return n;
    }
  }

  Target parse_target(bool allow_attribute) {
    Target target;
    const bool parenthesized = skip_op("(");
    target.names.push_back(expect_name("a variable name"));
    if (allow_attribute && !parenthesized && skip_op(".")) {
      target.attribute = expect_name("an attribute name");
      return target;
    }
    while (skip_op(",")) {
      if (peek().kind != TokenKind::kName || is_name("in")) break;
      target.names.push_back(expect_name("a variable name"));
    }
    if (parenthesized) expect_op(")");
    return target;
  }

  NodePtr parse_for(SourcePos pos) {
    NodePtr n = make_node(Node::Kind::kFor, pos);
    n->target = parse_target(false);
    if (!skip_name("in")) expected("'in'");
    n->expr = parse_tuple(false, {"if", "recursive"});
    if (skip_name("if")) n->filter = parse_expression(true);
    if (is_name("recursive")) syntax_error(peek().pos, "recursive for loops are not supported");
    expect_block_end("for");
    ++loop_depth_;
    n->body = parse_body({"endfor", "else"});
    --loop_depth_;
    if (end_tag() == "else") {
      expect_block_end("else");
      n->else_body = parse_body({"endfor"});
      end_tag();
    }
    expect_block_end("endfor");
    return n;
  }

  NodePtr parse_set(SourcePos pos) {
    NodePtr n = make_node(Node::Kind::kSet, pos);
    n->target = parse_target(true);
    if (skip_op("=")) {
      n->expr = parse_tuple(true);
      expect_block_end("set");
      return n;
    }
    n->kind = Node::Kind::kSetBlock;
    while (is_op("|"))
      n->filters.push_back(parse_filter(nullptr));
    expect_block_end("set");
    n->body = parse_body({"endset"});
    end_tag();
    expect_block_end("endset");
    return n;
  }

  std::vector<MacroParam> parse_params() {
    std::vector<MacroParam> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name("a parameter name");
      if (skip_op("=")) p.default_value = parse_expression(true);
      params.push_back(std::move(p));
    }
    expect_op(")");
    return params;
  }

  NodePtr parse_macro(SourcePos pos) {
    NodePtr n = make_node(Node::Kind::kMacro, pos);
    n->text = expect_name("a macro name");
    n->params = parse_params();
    expect_block_end("macro");
    const int saved = loop_depth_;
    loop_depth_ = 0;
    n->body = parse_body({"endmacro"});
    loop_depth_ = saved;
    end_tag();
    expect_block_end("endmacro");
    return n;
  }

  NodePtr parse_call_block(SourcePos pos) {
    NodePtr n = make_node(Node::Kind::kCallBlock, pos);
    if (is_op("(")) n->params = parse_params();
    n->expr = parse_expression(true);
    if (n->expr->kind != Expr::Kind::kCall) syntax_error(n->expr->pos, "expected a macro call");
    expect_block_end("call");
    n->body = parse_body({"endcall"});
    end_tag();
    expect_block_end("endcall");
    return n;
  }

  NodePtr parse_filter_block(SourcePos pos) {
    NodePtr n = make_node(Node::Kind::kFilterBlock, pos);
    n->filters.push_back(parse_filter(nullptr, true));
    while (is_op("|"))
      n->filters.push_back(parse_filter(nullptr));
    expect_block_end("filter");
    n->body = parse_body({"endfilter"});
    end_tag();
    expect_block_end("endfilter");
    return n;
  }

  NodePtr parse_with(SourcePos pos) {
    NodePtr n = make_node(Node::Kind::kWith, pos);
    while (peek().kind != TokenKind::kBlockEnd) {
      if (!n->assignments.empty()) expect_op(",");
      Target target = parse_target(false);
      expect_op("=");
      n->assignments.emplace_back(std::move(target), parse_expression(true));
    }
    expect_block_end("with");
    n->body = parse_body({"endwith"});
    end_tag();
    expect_block_end("endwith");
    return n;
  }

  // Expressions.

  bool is_tuple_end(std::initializer_list<const char*> extra_ends) const {
    const Token& t = peek();
    if (t.kind == TokenKind::kVariableEnd || t.kind == TokenKind::kBlockEnd || is_op(")"))
      return true;
    return t.kind == TokenKind::kName && std::any_of(extra_ends.begin(), extra_ends.end(),
                                                     [&](const char* e) { return t.text == e; });
  }

  ExprPtr parse_tuple(bool with_condition, std::initializer_list<const char*> extra_ends = {},
                      bool explicit_parentheses = false) {
    const SourcePos pos = peek().pos;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_ends)) break;
      items.push_back(parse_expression(with_condition));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) expected("an expression");
    }
    ExprPtr e = make(Expr::Kind::kTuple, pos);
    e->items = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condition) {
    const Nest nest(*this);
    return with_condition ? parse_condition() : parse_or();
  }

  ExprPtr parse_condition() {
    ExprPtr e = parse_or();
    while (is_name("if")) {
      const SourcePos pos = next().pos;
      ExprPtr test = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_condition() : nullptr;
      ExprPtr c = make(Expr::Kind::kCondition, pos);
      c->items.push_back(std::move(e));
      c->items.push_back(std::move(test));
      c->items.push_back(std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const SourcePos pos = next().pos;
      e = make(Expr::Kind::kOr, pos, std::move(e), parse_and());
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const SourcePos pos = next().pos;
      e = make(Expr::Kind::kAnd, pos, std::move(e), parse_not());
    }
    return e;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      const Nest nest(*this);
      const SourcePos pos = next().pos;
      return make(Expr::Kind::kNot, pos, parse_not());
    }
    return parse_compare();
  }

  ExprPtr binary(const std::string& op, SourcePos pos, ExprPtr a, ExprPtr b) {
    ExprPtr e = make(Expr::Kind::kBinary, pos, std::move(a), std::move(b));
    e->name = op;
    return e;
  }

  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    while (true) {
      const SourcePos pos = peek().pos;
      std::string op;
      for (const char* o : {"==", "!=", "<", "<=", ">", ">="})
        if (is_op(o)) op = o;
      if (!op.empty()) {
        next();
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        return e;
      }
      e = binary(op, pos, std::move(e), parse_math1());
    }
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      e = binary(t.text, t.pos, std::move(e), parse_concat());
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const Token& t = next();
      e = binary("~", t.pos, std::move(e), parse_math2());
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      e = binary(t.text, t.pos, std::move(e), parse_pow());
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      const Token& t = next();
      e = binary("**", t.pos, std::move(e), parse_unary(true));
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    const Nest nest(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      e = make(t.text == "-" ? Expr::Kind::kNeg : Expr::Kind::kPos, t.pos, parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::kName: {
        next();
        ExprPtr e = make(Expr::Kind::kLiteral, t.pos);
        if (t.text == "true" || t.text == "True") {
          e->literal = true;
        } else if (t.text == "false" || t.text == "False") {
          e->literal = false;
        } else if (t.text == "none" || t.text == "None") {
          e->literal = nullptr;
        } else {
          e->kind = Expr::Kind::kName;
          e->name = t.text;
        }
        return e;
      }
      case TokenKind::kString: {
        ExprPtr e = make(Expr::Kind::kLiteral, t.pos);
        std::string s;
        while (peek().kind == TokenKind::kString)
          s += next().text;  // adjacent literals join
        e->literal = std::move(s);
        return e;
      }
      case TokenKind::kInteger: {
        next();
        ExprPtr e = make(Expr::Kind::kLiteral, t.pos);
        try {
          e->literal = std::stoll(t.text);
        } catch (const std::exception&) {
          syntax_error(t.pos, "integer ", t.text, " is out of range");
        }
        return e;
      }
      case TokenKind::kFloat: {
        next();
        ExprPtr e = make(Expr::Kind::kLiteral, t.pos);
        e->literal = std::stod(t.text);
        return e;
      }
      case TokenKind::kOperator:
        if (t.text == "(") {
          next();
          ExprPtr e = parse_tuple(true, {}, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default:
        break;
    }
    expected("an expression");
  }

  ExprPtr parse_list() {
    ExprPtr e = make(Expr::Kind::kList, next().pos);
    while (!is_op("]")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op("]")) break;
      e->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return e;
  }

  ExprPtr parse_dict() {
    ExprPtr e = make(Expr::Kind::kDict, next().pos);
    while (!is_op("}")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op("}")) break;
      e->items.push_back(parse_expression(true));
      expect_op(":");
      e->items.push_back(parse_expression(true));
    }
    expect_op("}");
    return e;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        const SourcePos pos = next().pos;
        if (peek().kind == TokenKind::kName) {
          ExprPtr a = make(Expr::Kind::kGetAttr, pos, std::move(e));
          a->name = next().text;
          e = std::move(a);
        } else if (peek().kind == TokenKind::kInteger) {
          ExprPtr index = make(Expr::Kind::kLiteral, peek().pos);
          index->literal = std::stoll(next().text);
          e = make(Expr::Kind::kGetItem, pos, std::move(e), std::move(index));
        } else {
          expected("an attribute name after '.'");
        }
      } else if (is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object) {
    const SourcePos pos = next().pos;  // [
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!is_op(":")) {
        if (is_op(",")) syntax_error(peek().pos, "tuple subscripts are not supported");
        expect_op("]");
        return make(Expr::Kind::kGetItem, pos, std::move(object), std::move(start));
      }
    }
    next();  // :
    ExprPtr stop;
    ExprPtr step;
    if (!is_op("]") && !is_op(":")) stop = parse_expression(true);
    if (skip_op(":") && !is_op("]")) step = parse_expression(true);
    expect_op("]");
    ExprPtr e = make(Expr::Kind::kSlice, pos);
    e->items.push_back(std::move(object));
    e->items.push_back(std::move(start));
    e->items.push_back(std::move(stop));
    e->items.push_back(std::move(step));
    return e;
  }

  void parse_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (!e.args.empty() || !e.kwargs.empty()) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**"))
        syntax_error(peek().pos, "*args and **kwargs in calls are not supported");
      if (peek().kind == TokenKind::kName && is_op("=", 1)) {
        std::string name = next().text;
        next();
        e.kwargs.emplace_back(std::move(name), parse_expression(true));
      } else {
        if (!e.kwargs.empty())
          syntax_error(peek().pos, "positional argument after a keyword argument");
        e.args.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    ExprPtr e = make(Expr::Kind::kCall, peek().pos, std::move(callee));
    parse_args(*e);
    return e;
  }

  std::string dotted_name(const char* what) {
    std::string name = expect_name(what);
    while (skip_op("."))
      name += "." + expect_name(what);
    return name;
  }

  // `| name(args)`; `operand` null for filter blocks and block sets (the body is the input).
  ExprPtr parse_filter(ExprPtr operand, bool start_inline = false) {
    const SourcePos pos = peek().pos;
    if (!start_inline) expect_op("|");
    ExprPtr e = make(Expr::Kind::kFilter, pos);
    e->items.push_back(std::move(operand));
    e->name = dotted_name("a filter name");
    if (is_op("(")) parse_args(*e);
    return e;
  }

  ExprPtr parse_test(ExprPtr operand) {
    const SourcePos pos = next().pos;  // is
    ExprPtr e = make(Expr::Kind::kTest, pos, std::move(operand));
    e->negated = skip_name("not");
    e->name = dotted_name("a test name");
    const Token& t = peek();
    if (is_op("(")) {
      parse_args(*e);
    } else if ((t.kind == TokenKind::kName && t.text != "else" && t.text != "or" &&
                t.text != "and") ||
               t.kind == TokenKind::kString || t.kind == TokenKind::kInteger ||
               t.kind == TokenKind::kFloat || is_op("[") || is_op("{")) {
      e->args.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(const std::vector<Token>& tokens) {
  return Parser(tokens).parse();
}

}  // namespace quench::jinja

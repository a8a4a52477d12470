// The parsed template: expression and statement nodes. Plain tagged structs (a kind and the
// fields that kind uses) rather than a class per node, so that the parser and the renderer each
// read as one switch over a closed set.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "quench/server/jinja/template_error.h"
#include "quench/server/jinja/value.h"

namespace quench::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind : uint8_t {
    kLiteral,   // literal
    kName,      // name
    kList,      // items
    kTuple,     // items (a Python tuple; a list at runtime)
    kDict,      // items: key, value, key, value, ...
    kGetAttr,   // items[0].name
    kGetItem,   // items[0][items[1]]
    kSlice,     // items[0][items[1]:items[2]:items[3]], absent parts null
    kCall,      // items[0](args)
    kFilter,    // items[0] | name(args)
    kTest,      // items[0] is [not] name(args); negated
    kNeg,       // -items[0]
    kPos,       // +items[0]
    kNot,       // not items[0]
    kBinary,    // items[0] op items[1]: + - * / // % ** ~ == != < <= > >= in "not in"
    kAnd,       // items[0] and items[1]
    kOr,        // items[0] or items[1]
    kCondition  // items[0] if items[1] else items[2] (null: undefined)
  };
  Kind kind;
  SourcePos pos;
  Json literal;
  std::string name;  // variable, attribute, filter, test, or operator
  bool negated = false;
  std::vector<ExprPtr> items;
  std::vector<ExprPtr> args;                            // call/filter/test positional
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // call/filter/test keyword
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

// `name` or `name.attribute` (a namespace attribute) or several names to unpack into.
struct Target {
  std::vector<std::string> names;
  std::string attribute;  // set only for `set ns.attribute = ...`
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: none
};

struct Node {
  enum class Kind : uint8_t {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // conditions[i] -> bodies[i]; else_body
    kFor,          // for target in expr [if filter]: body; else_body
    kSet,          // set target = expr
    kSetBlock,     // set target: body, piped through filters
    kMacro,        // macro name(params): body
    kCallBlock,    // call(params) expr: body is the caller
    kFilterBlock,  // filter filters: body
    kWith,         // with assignments: body
    kScope,        // generation: body (HF's marker for assistant tokens; renders its body)
    kBreak,
    kContinue,
  };
  Kind kind;
  SourcePos pos;
  std::string text;  // kText; the macro's name for kMacro
  ExprPtr expr;      // output, for iterable, set value, call expression
  ExprPtr filter;    // for ... if filter
  Target target;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  std::vector<MacroParam> params;
  // kSetBlock / kFilterBlock: filters applied in order, each a kFilter expr with a null operand.
  std::vector<ExprPtr> filters;
  std::vector<std::pair<Target, ExprPtr>> assignments;  // kWith
};

}  // namespace quench::jinja

#include "quench/server/jinja/renderer.h"

#include <memory>
#include <unordered_map>

#include "quench/core/error.h"
#include "quench/server/jinja/access.h"
#include "quench/server/jinja/filters.h"
#include "quench/server/jinja/globals.h"
#include "quench/server/jinja/operators.h"
#include "quench/server/jinja/tests.h"

namespace quench::jinja {
namespace {

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};
using FramePtr = std::shared_ptr<Frame>;

FramePtr child_of(const FramePtr& parent) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  return f;
}

enum class Flow : uint8_t { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const Json& variables, const RenderLimits& limits)
      : root_(std::make_shared<Frame>()), limits_(limits) {
    QUENCH_REQUIRE(variables.is_object(), "template variables must be a JSON object");
    for (const auto& [key, value] : variables.items())
      root_->vars[key] = Value(value);
  }

  std::string run(const Body& body) {
    std::string out;
    try {
      exec(body, root_, out);
    } catch (const RaisedError&) {
      throw;
    } catch (const Error& e) {
      fail(str_cat("chat template error at ", describe(pos_), ": ", e.what()));
    }
    return out;
  }

 private:
  void tick() {
    QUENCH_REQUIRE(++steps_ <= limits_.max_steps, "the template ran more than ", limits_.max_steps,
                   " steps");
  }

  void append(std::string& out, const std::string& text) const {
    QUENCH_REQUIRE(out.size() + text.size() <= limits_.max_output_bytes,
                   "the template's output exceeds ", limits_.max_output_bytes, " bytes");
    out += text;
  }

  Value lookup(const std::string& name, const FramePtr& frame) const {
    for (const Frame* f = frame.get(); f != nullptr; f = f->parent.get()) {
      const auto it = f->vars.find(name);
      if (it != f->vars.end()) return it->second;
    }
    if (auto global = find_global(name)) return *global;
    return Value::undefined(str_cat("'", name, "' is undefined"));
  }

  void assign(const Target& target, const Value& value, const FramePtr& frame) {
    if (!target.attribute.empty()) {
      const Value ns = lookup(target.names[0], frame);
      QUENCH_REQUIRE(ns.kind() == Value::Kind::kObject && ns.object_ptr()->assignable,
                     "cannot assign attribute '", target.attribute, "' on '", target.names[0],
                     "': only namespace() objects take attributes");
      ns.object_ptr()->attributes[target.attribute] = value;
      return;
    }
    if (target.names.size() == 1) {
      frame->vars[target.names[0]] = value;
      return;
    }
    QUENCH_REQUIRE(value.is_list(), "cannot unpack a ", type_name(value), " into ",
                   target.names.size(), " names");
    QUENCH_REQUIRE(value.json().size() == target.names.size(), "cannot unpack ",
                   value.json().size(), " values into ", target.names.size(), " names");
    for (size_t i = 0; i < target.names.size(); ++i)
      frame->vars[target.names[i]] = Value(value.json()[i]);
  }

  Flow exec(const Body& body, const FramePtr& frame, std::string& out) {
    for (const NodePtr& node : body) {
      const Flow flow = exec_node(*node, frame, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec_node(const Node& n, const FramePtr& frame, std::string& out) {
    tick();
    pos_ = n.pos;
    switch (n.kind) {
      case Node::Kind::kText:
        append(out, n.text);
        return Flow::kNormal;
      case Node::Kind::kOutput:
        append(out, to_str(eval(*n.expr, frame)));
        return Flow::kNormal;
      case Node::Kind::kIf:
        for (size_t i = 0; i < n.conditions.size(); ++i)
          if (truthy(eval(*n.conditions[i], frame))) return exec(n.bodies[i], frame, out);
        return exec(n.else_body, frame, out);
      case Node::Kind::kFor:
        return exec_for(n, frame, out);
      case Node::Kind::kSet:
        assign(n.target, eval(*n.expr, frame), frame);
        return Flow::kNormal;
      case Node::Kind::kSetBlock: {
        std::string text;
        exec(n.body, frame, text);
        assign(n.target, apply_filters(n, Value(text), frame), frame);
        return Flow::kNormal;
      }
      case Node::Kind::kFilterBlock: {
        std::string text;
        exec(n.body, frame, text);
        append(out, to_str(apply_filters(n, Value(text), frame)));
        return Flow::kNormal;
      }
      case Node::Kind::kMacro:
        frame->vars[n.text] = make_macro(n, frame);
        return Flow::kNormal;
      case Node::Kind::kCallBlock: {
        const Expr& call = *n.expr;
        const Value callee = eval(*call.items[0], frame);
        CallArgs args = eval_args(call, frame);
        args.keyword.emplace_back("caller", make_macro(n, frame));
        pos_ = n.pos;
        append(out, to_str(invoke(callee, args)));
        return Flow::kNormal;
      }
      case Node::Kind::kWith: {
        const FramePtr scope = child_of(frame);
        for (const auto& [target, value] : n.assignments)
          assign(target, eval(*value, frame), scope);
        return exec(n.body, scope, out);
      }
      case Node::Kind::kScope:
        return exec(n.body, frame, out);
      case Node::Kind::kBreak:
        return Flow::kBreak;
      case Node::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  Value apply_filters(const Node& n, Value value, const FramePtr& frame) {
    for (const ExprPtr& f : n.filters) {
      const CallArgs args = eval_args(*f, frame);
      pos_ = f->pos;
      value = apply_filter(f->name, value, args);
    }
    return value;
  }

  Flow exec_for(const Node& n, const FramePtr& frame, std::string& out) {
    const Value iterable = eval(*n.expr, frame);
    pos_ = n.pos;
    std::vector<Json> items = iterate(iterable);
    if (n.filter) {
      std::vector<Json> kept;
      for (Json& item : items) {
        tick();
        const FramePtr scope = child_of(frame);
        assign(n.target, Value(item), scope);
        if (truthy(eval(*n.filter, scope))) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(n.else_body, frame, out);
    const auto length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      tick();
      const FramePtr scope = child_of(frame);
      const Value item(items[static_cast<size_t>(i)]);
      assign(n.target, item, scope);
      auto loop = std::make_shared<Object>();
      auto& a = loop->attributes;
      a["index"] = Value(i + 1);
      a["index0"] = Value(i);
      a["revindex"] = Value(length - i);
      a["revindex0"] = Value(length - i - 1);
      a["first"] = Value(i == 0);
      a["last"] = Value(i == length - 1);
      a["length"] = Value(length);
      a["depth"] = Value(int64_t{1});
      a["depth0"] = Value(int64_t{0});
      a["previtem"] = i > 0 ? Value(items[static_cast<size_t>(i - 1)])
                            : Value::undefined("there is no previous item");
      a["nextitem"] = i + 1 < length ? Value(items[static_cast<size_t>(i + 1)])
                                     : Value::undefined("there is no next item");
      a["cycle"] = Value::callable("loop.cycle", [i](const CallArgs& args) {
        QUENCH_REQUIRE(!args.positional.empty(), "loop.cycle() needs at least one value");
        return args.positional[static_cast<size_t>(i) % args.positional.size()];
      });
      scope->vars["loop"] = Value::object(std::move(loop));
      if (exec(n.body, scope, out) == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  // A macro (or a call block's caller): a callable that renders `n.body` in a fresh scope under
  // the scope it was defined in, with its parameters bound.
  Value make_macro(const Node& n, const FramePtr& frame) {
    // The defining scope is held weakly: a macro stored in its own scope would otherwise keep
    // that scope alive forever. A macro outliving its scope falls back to the top level.
    const std::weak_ptr<Frame> defined_in = frame;
    const std::string name = n.kind == Node::Kind::kMacro ? n.text : "caller";
    return Value::callable(name, [this, &n, defined_in, name](const CallArgs& args) {
      QUENCH_REQUIRE(depth_ < limits_.max_call_depth, "macro calls nested deeper than ",
                     limits_.max_call_depth, " (runaway recursion in '", name, "'?)");
      FramePtr parent = defined_in.lock();
      const FramePtr scope = child_of(parent ? parent : root_);
      for (size_t i = 0; i < n.params.size(); ++i) {
        const MacroParam& p = n.params[i];
        if (i < args.positional.size()) {
          scope->vars[p.name] = args.positional[i];
          continue;
        }
        const Value* given = nullptr;
        for (const auto& [key, value] : args.keyword)
          if (key == p.name) given = &value;
        if (given) {
          scope->vars[p.name] = *given;
        } else if (p.default_value) {
          scope->vars[p.name] = eval(*p.default_value, scope);
        } else {
          scope->vars[p.name] = Value::undefined(str_cat("'", p.name, "' is undefined"));
        }
      }
      Json varargs = Json::array();
      for (size_t i = n.params.size(); i < args.positional.size(); ++i)
        varargs.push_back(args.positional[i].to_json());
      scope->vars["varargs"] = Value(std::move(varargs));
      Json kwargs = Json::object();
      for (const auto& [key, value] : args.keyword) {
        if (key == "caller") {
          scope->vars["caller"] = value;
          continue;
        }
        bool is_param = false;
        for (const MacroParam& p : n.params)
          is_param = is_param || p.name == key;
        if (!is_param) kwargs[key] = value.to_json();
      }
      scope->vars["kwargs"] = Value(std::move(kwargs));
      ++depth_;
      std::string text;
      try {
        exec(n.body, scope, text);
      } catch (...) {
        --depth_;
        throw;
      }
      --depth_;
      return Value(text);
    });
  }

  CallArgs eval_args(const Expr& e, const FramePtr& frame) {
    CallArgs args;
    for (const ExprPtr& a : e.args)
      args.positional.push_back(eval(*a, frame));
    for (const auto& [key, value] : e.kwargs)
      args.keyword.emplace_back(key, eval(*value, frame));
    return args;
  }

  Value invoke(const Value& callee, const CallArgs& args) {
    if (callee.is_undefined()) {
      fail(callee.undefined_hint().empty() ? "called an undefined value" : callee.undefined_hint());
    }
    QUENCH_REQUIRE(callee.kind() == Value::Kind::kCallable, "'", type_name(callee),
                   "' object is not callable");
    return callee.callable_ptr()->call(args);
  }

  static std::optional<int64_t> slice_part(const Value& v) {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    QUENCH_REQUIRE(v.is_data() && is_numeric(v.json()) && !v.json().is_number_float(),
                   "slice indices must be integers or None, got ", type_name(v));
    return as_int(v.json());
  }

  Value eval(const Expr& e, const FramePtr& frame) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return Value(e.literal);
      case Expr::Kind::kName:
        return lookup(e.name, frame);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        Json out = Json::array();
        for (const ExprPtr& item : e.items)
          out.push_back(eval(*item, frame).to_json());
        return Value(std::move(out));
      }
      case Expr::Kind::kDict: {
        Json out = Json::object();
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          const Value key = eval(*e.items[i], frame);
          out[key.is_string() ? key.str() : to_str(key)] = eval(*e.items[i + 1], frame).to_json();
        }
        return Value(std::move(out));
      }
      case Expr::Kind::kGetAttr: {
        const Value object = eval(*e.items[0], frame);
        pos_ = e.pos;
        return get_attribute(object, e.name);
      }
      case Expr::Kind::kGetItem: {
        const Value object = eval(*e.items[0], frame);
        const Value key = eval(*e.items[1], frame);
        pos_ = e.pos;
        return get_item(object, key);
      }
      case Expr::Kind::kSlice: {
        const Value object = eval(*e.items[0], frame);
        std::optional<int64_t> parts[3];
        for (size_t i = 0; i < 3; ++i)
          if (e.items[i + 1]) parts[i] = slice_part(eval(*e.items[i + 1], frame));
        pos_ = e.pos;
        return get_slice(object, parts[0], parts[1], parts[2]);
      }
      case Expr::Kind::kCall: {
        const Value callee = eval(*e.items[0], frame);
        const CallArgs args = eval_args(e, frame);
        pos_ = e.pos;
        return invoke(callee, args);
      }
      case Expr::Kind::kFilter: {
        const Value input = eval(*e.items[0], frame);
        const CallArgs args = eval_args(e, frame);
        pos_ = e.pos;
        return apply_filter(e.name, input, args);
      }
      case Expr::Kind::kTest: {
        const Value input = eval(*e.items[0], frame);
        const CallArgs args = eval_args(e, frame);
        pos_ = e.pos;
        return Value(apply_test(e.name, input, args) != e.negated);
      }
      case Expr::Kind::kNeg: {
        const Value v = eval(*e.items[0], frame);
        pos_ = e.pos;
        return negate(v);
      }
      case Expr::Kind::kPos: {
        const Value v = eval(*e.items[0], frame);
        pos_ = e.pos;
        QUENCH_REQUIRE(v.is_data() && is_numeric(v.json()), "bad operand type for unary +: '",
                       type_name(v), "'");
        return v;
      }
      case Expr::Kind::kNot:
        return Value(!truthy(eval(*e.items[0], frame)));
      case Expr::Kind::kAnd: {
        Value a = eval(*e.items[0], frame);
        return truthy(a) ? eval(*e.items[1], frame) : a;
      }
      case Expr::Kind::kOr: {
        Value a = eval(*e.items[0], frame);
        return truthy(a) ? a : eval(*e.items[1], frame);
      }
      case Expr::Kind::kCondition: {
        if (truthy(eval(*e.items[1], frame))) return eval(*e.items[0], frame);
        if (e.items[2]) return eval(*e.items[2], frame);
        return Value::undefined("the inline if expression had no else branch");
      }
      case Expr::Kind::kBinary: {
        const Value a = eval(*e.items[0], frame);
        const Value b = eval(*e.items[1], frame);
        pos_ = e.pos;
        return binary_op(e.name, a, b);
      }
    }
    return Value();
  }

  FramePtr root_;
  RenderLimits limits_;
  SourcePos pos_;
  int64_t steps_ = 0;
  int32_t depth_ = 0;
};

}  // namespace

std::string render_template(const Body& body, const Json& variables, const RenderLimits& limits) {
  return Renderer(variables, limits).run(body);
}

}  // namespace quench::jinja

"""A subset of expr-lang (github.com/expr-lang/expr), the language of Argo's expressions.

Argo evaluates `retryStrategy.expression` and the `{{=...}}` tags of a template with expr
(util/template/expression_template.go; workflow/controller/operator.go,
`buildRetryStrategyLocalScope`). Its variables are strings: `lastRetry.exitCode` is "137",
not 137, so `lastRetry.exitCode != 3` always holds and comparisons must quote the number
(docs/retries.md, "Conditional retries"). This evaluator keeps those semantics: no implicit
conversion between strings and numbers, `==` across types is false, `<` across types is an
error.

Supported: literals (numbers, 'single' and "double" quoted strings, true, false, nil), member
access (`a.b`, `a['b']`), calls of a few functions (asInt, asFloat, string, int, float, len,
lower, upper), unary `!`/`not`/`-`, `* / %`, `+ -` (string concatenation too), comparisons,
`in`, `&&`/`and`, `||`/`or`, `??` and the ternary `a ? b : c`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any


class ExprError(ValueError):
    """An expression that does not parse or cannot be evaluated."""


_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.\d+|\d+)|(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<name>[A-Za-z_$][\w$]*)|(?P<op>==|!=|<=|>=|&&|\|\||\?\?|[-+*/%<>!?:()\[\].,]))"
)
_KEYWORDS = {"and": "&&", "or": "||", "not": "!"}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "asInt": lambda v: int(float(v)) if isinstance(v, str) else int(v),
    "asFloat": float,
    "int": lambda v: int(float(v)) if isinstance(v, str) else int(v),
    "float": float,
    "string": lambda v: format_value(v),
    "len": len,
    "lower": lambda v: str(v).lower(),
    "upper": lambda v: str(v).upper(),
}
_MISSING = object()


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ExprError(f"unexpected character at {position}: {text[position:]!r}")
        position = match.end()
        if match.group("num"):
            number = match.group("num")
            out.append(("lit", float(number) if "." in number else int(number)))
        elif match.group("str"):
            raw = match.group("str")[1:-1]
            out.append(("lit", re.sub(r"\\(.)", r"\1", raw)))
        elif name := match.group("name"):
            if name in _KEYWORDS:
                out.append(("op", _KEYWORDS[name]))
            elif name in ("true", "false"):
                out.append(("lit", name == "true"))
            elif name == "nil":
                out.append(("lit", None))
            elif name == "in":
                out.append(("op", "in"))
            else:
                out.append(("name", name))
        else:
            out.append(("op", match.group("op")))
    out.append(("end", None))
    return out


class _Parser:
    """Precedence climbing over the token list, producing nested tuples."""

    _BINARY = [
        ["??"],
        ["||"],
        ["&&"],
        ["==", "!=", "<", ">", "<=", ">=", "in"],
        ["+", "-"],
        ["*", "/", "%"],
    ]

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self) -> tuple[str, Any]:
        return self.tokens[self.at]

    def take(self, op: str | None = None) -> tuple[str, Any]:
        token = self.tokens[self.at]
        if op is not None and token != ("op", op):
            raise ExprError(f"expected {op!r}, found {token[1]!r}")
        self.at += 1
        return token

    def parse(self) -> Any:
        tree = self.ternary()
        if self.peek()[0] != "end":
            raise ExprError(f"unexpected {self.peek()[1]!r}")
        return tree

    def ternary(self) -> Any:
        condition = self.binary(0)
        if self.peek() == ("op", "?"):
            self.take()
            yes = self.ternary()
            self.take(":")
            return ("?", condition, yes, self.ternary())
        return condition

    def binary(self, level: int) -> Any:
        if level == len(self._BINARY):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek()[0] == "op" and self.peek()[1] in self._BINARY[level]:
            op = self.take()[1]
            left = (op, left, self.binary(level + 1))
        return left

    def unary(self) -> Any:
        if self.peek() in (("op", "!"), ("op", "-")):
            op = self.take()[1]
            return ("neg" if op == "-" else "!", self.unary())
        return self.postfix(self.primary())

    def primary(self) -> Any:
        kind, value = self.take()
        if kind == "lit":
            return ("lit", value)
        if kind == "name":
            if self.peek() == ("op", "("):
                self.take()
                args = []
                while self.peek() != ("op", ")"):
                    args.append(self.ternary())
                    if self.peek() == ("op", ","):
                        self.take()
                self.take(")")
                return ("call", value, args)
            return ("var", value)
        if (kind, value) == ("op", "("):
            inner = self.ternary()
            self.take(")")
            return inner
        raise ExprError(f"unexpected {value!r}")

    def postfix(self, tree: Any) -> Any:
        while self.peek() in (("op", "."), ("op", "[")):
            if self.take()[1] == ".":
                kind, name = self.take()
                if kind != "name":
                    raise ExprError("expected a member name after '.'")
                tree = ("get", tree, ("lit", name))
            else:
                tree = ("get", tree, self.ternary())
                self.take("]")
        return tree


def _equal(left: Any, right: Any) -> bool:
    if isinstance(left, bool) != isinstance(right, bool):
        return False
    if isinstance(left, str) != isinstance(right, str):
        return False
    return bool(left == right)


def _evaluate(tree: Any, env: Mapping[str, Any]) -> Any:
    op = tree[0]
    if op == "lit":
        return tree[1]
    if op == "var":
        if tree[1] not in env:
            raise ExprError(f"unknown name {tree[1]}")
        return env[tree[1]]
    if op == "get":
        base, key = _evaluate(tree[1], env), _evaluate(tree[2], env)
        value = base.get(key, _MISSING) if isinstance(base, Mapping) else _MISSING
        if value is _MISSING:
            raise ExprError(f"no member {key!r}")
        return value
    if op == "call":
        if tree[1] not in _FUNCTIONS:
            raise ExprError(f"unknown function {tree[1]}")
        return _FUNCTIONS[tree[1]](*(_evaluate(a, env) for a in tree[2]))
    if op == "?":
        return _evaluate(tree[2] if _truth(_evaluate(tree[1], env)) else tree[3], env)
    if op == "!":
        return not _truth(_evaluate(tree[1], env))
    if op == "neg":
        return -_evaluate(tree[1], env)
    if op == "&&":
        return _truth(_evaluate(tree[1], env)) and _truth(_evaluate(tree[2], env))
    if op == "||":
        return _truth(_evaluate(tree[1], env)) or _truth(_evaluate(tree[2], env))
    if op == "??":
        try:
            left = _evaluate(tree[1], env)
        except ExprError:
            left = None
        return _evaluate(tree[2], env) if left is None else left
    left, right = _evaluate(tree[1], env), _evaluate(tree[2], env)
    if op == "==":
        return _equal(left, right)
    if op == "!=":
        return not _equal(left, right)
    if op == "in":
        return left in right
    try:
        return _ARITHMETIC[op](left, right)
    except TypeError as error:
        raise ExprError(f"invalid operation: {left!r} {op} {right!r}") from error


_ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "%": lambda a, b: a % b,
}


def _truth(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ExprError(f"expected a bool, got {value!r}")
    return value


def evaluate(text: str, env: Mapping[str, Any]) -> Any:
    """The value of an expression in an environment of (nested) variables."""
    return _evaluate(_Parser(text).parse(), env)


def evaluate_bool(text: str, env: Mapping[str, Any]) -> bool:
    """A boolean expression, as Argo's `EvalBool` requires."""
    return _truth(evaluate(text, env))


def format_value(value: Any) -> str:
    """A value as Argo writes an expression's result into a template."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None:
        return "null"
    return str(value)


def nested(flat: Mapping[str, str]) -> dict[str, Any]:
    """`{"a.b": v}` as `{"a": {"b": v}}`: how Argo builds an expression's environment."""
    env: dict[str, Any] = {}
    for key, value in flat.items():
        node = env
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node.setdefault(parts[-1], value)
    return env

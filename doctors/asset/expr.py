"""A whitelisting evaluator for xacro ``${...}`` expressions (no ``eval`` of arbitrary code).

Accepts literals, names (looked up through a callback, then math constants and functions),
arithmetic, comparisons, boolean logic, conditional expressions, calls of whitelisted functions,
list/tuple literals and indexing. Integer size, sequence length and nesting are bounded so that
hostile input fails fast with CaliperError instead of exhausting time or memory.
"""
from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

from caliper_jax.errors import CaliperError

MAX_SOURCE = 10_000
MAX_NODE_DEPTH = 60
MAX_INT_BITS = 1024
MAX_LENGTH = 1_000_000


def _round(x, ndigits=None):
    if ndigits is not None and abs(ndigits) > 100:
        raise ValueError("round() precision out of range")
    return round(x, ndigits)


FUNCTIONS: dict[str, Callable] = {
    name: getattr(math, name)
    for name in ("sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "sqrt",
                 "exp", "log", "log10", "log2", "floor", "ceil", "fabs", "radians", "degrees", "pow",
                 "hypot", "copysign", "fmod", "isnan", "isinf", "trunc")
}
FUNCTIONS.update(abs=abs, min=min, max=max, round=_round, int=int, float=float, str=str, bool=bool, len=len,
                 sum=sum)
CONSTANTS = {"pi": math.pi, "e": math.e, "inf": math.inf, "nan": math.nan, "tau": math.tau,
             "True": True, "False": False, "true": True, "false": False, "None": None}

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
            ast.NotIn: lambda a, b: a not in b}
_SEQUENCES = (str, list, tuple)


def evaluate(source: str, lookup: Callable[[str], object]) -> object:
    """Evaluate ``source``; names resolve through ``lookup`` (which raises KeyError when unknown)."""
    if len(source) > MAX_SOURCE:
        raise CaliperError(f"expression longer than {MAX_SOURCE} characters")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise CaliperError(f"cannot parse expression `{_short(source)}` ({type(exc).__name__})") from None
    return _Evaluator(lookup, source).node(tree.body, 0)


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _checked(value: object) -> object:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ValueError("integer too large")
    if isinstance(value, _SEQUENCES) and len(value) > MAX_LENGTH:
        raise ValueError("result too long")
    if isinstance(value, complex):
        raise ValueError("complex result")
    return value


class _Evaluator:
    def __init__(self, lookup: Callable[[str], object], source: str):
        self.lookup = lookup
        self.source = source

    def fail(self, why: str) -> CaliperError:
        return CaliperError(f"cannot evaluate `{_short(self.source)}`: {why}")

    def name(self, ident: str) -> object:
        try:
            return self.lookup(ident)
        except KeyError:
            pass
        for table in (CONSTANTS, FUNCTIONS):
            if ident in table:
                return table[ident]
        raise self.fail(f"undefined name `{ident}`")

    def node(self, node: ast.AST, depth: int) -> object:
        if depth > MAX_NODE_DEPTH:
            raise self.fail("expression nested too deeply")
        try:
            return _checked(self._node(node, depth + 1))
        except (ArithmeticError, TypeError, ValueError, LookupError) as exc:
            if isinstance(exc, CaliperError):
                raise
            raise self.fail(f"{type(exc).__name__}: {exc}") from None

    def _node(self, node: ast.AST, depth: int) -> object:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
            return node.value
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "math":
            if node.attr in FUNCTIONS or node.attr in CONSTANTS:
                return FUNCTIONS.get(node.attr, CONSTANTS.get(node.attr))
            raise self.fail(f"math.{node.attr} is not allowed")
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](self.node(node.operand, depth))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return self._binary(node.op, self.node(node.left, depth), self.node(node.right, depth))
        if isinstance(node, ast.BoolOp):
            value: object = None
            for operand in node.values:
                value = self.node(operand, depth)
                if bool(value) == isinstance(node.op, ast.Or):
                    break
            return value
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            left = self.node(node.left, depth)
            for op, comparator in zip(node.ops, node.comparators, strict=True):
                right = self.node(comparator, depth)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            branch = node.body if self.node(node.test, depth) else node.orelse
            return self.node(branch, depth)
        if isinstance(node, ast.Call) and not node.keywords:
            func = self.node(node.func, depth)
            if not any(func is f for f in FUNCTIONS.values()):
                raise self.fail("only whitelisted math functions may be called")
            args = [self.node(arg, depth) for arg in node.args if not isinstance(arg, ast.Starred)]
            if len(args) != len(node.args):
                raise self.fail("starred arguments are not allowed")
            return func(*args)
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.node(item, depth) for item in node.elts]
            return items if isinstance(node, ast.List) else tuple(items)
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
            return self.node(node.value, depth)[self.node(node.slice, depth)]
        raise self.fail(f"{type(node).__name__} is not allowed")

    @staticmethod
    def _binary(op: ast.operator, a: object, b: object) -> object:
        if isinstance(op, ast.Pow) and isinstance(a, int) and isinstance(b, int) and (abs(b) > 64 or
                                                                                      abs(a) > 2**32):
            a = float(a)  # float power overflows promptly instead of building a huge integer
        if isinstance(op, ast.Mult):
            seq, count = (a, b) if isinstance(a, _SEQUENCES) else (b, a)
            if isinstance(seq, _SEQUENCES) and isinstance(count, int) and len(seq) * count > MAX_LENGTH:
                raise ValueError("result too long")
        return _BINARY[type(op)](a, b)

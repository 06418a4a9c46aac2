"""``jqPathExpressions`` ignore rules, with Argo CD's exact contract.

Argo CD builds the program ``del(<expr>)`` by string concatenation (so an expression may
close the parenthesis and run any jq) and requires it to emit exactly one value. No
output, a runtime error, a timeout or a second output skips that one rule for that one
object; a parse error fails when the rules are loaded. We keep that contract:

* each expression is validated with libjq once per process (:func:`compile_jq` is
  cached: 1,000 apps sharing the recommended RayCluster rule compile it once);
* expressions in the fast subset (:mod:`gitops_ray.diff.jqfast`) run in Python, which
  gives the same paths and errors as libjq in microseconds and cannot run away;
* everything else runs libjq in a worker process with a deadline
  (:mod:`gitops_ray.diff.jqworker`).

Skips are reported as :class:`JqSkip` with a message free of document values: libjq
quotes the offending value in its errors, which for a Secret would be its data.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import jq

from gitops_ray.diff import jqfast
from gitops_ray.diff.jqworker import POOL, JqTimeout, JqWorkerError
from gitops_ray.diff.paths import Path, PathError, delete_paths

_QUOTED_VALUE = re.compile(r'\s*\((?:[^()"]|"(?:[^"\\]|\\.)*")*\)')
_JQ_MESSAGE = re.compile(
    r"^(Cannot |Invalid |Out of bounds|Range bounds|Start and end indices|Unfinished |Expected )"
    r"| cannot be | is not valid| not a string$| has no keys$| has no length$")
# Where libjq starts quoting a value: after these, the rest of the line is dropped.
_VALUE_MARKERS = (" with result ", " near attempt ", " (while parsing")
# Every word of libjq's own runtime and fromjson messages; a message with any other word
# is not one of libjq's (``error(.data.x)``, a value left after cutting) and is withheld.
_JQ_WORDS = frozenset((
    "a", "added", "an", "and", "array", "as", "at", "be", "between", "boolean", "bounds", "cannot",
    "check", "column", "component", "delete", "divided", "divisor", "end", "eof", "expected",
    "expression", "field", "fields", "from", "has", "index", "indices", "invalid", "is",
    "iterate", "key", "keys", "length", "line", "literal", "matched", "modulo", "multiplied",
    "must", "negative", "no", "not", "null", "number", "numbers", "numeric", "object", "of",
    "out", "over", "parsed", "path", "range", "separator", "slice", "start", "string",
    "subtracted", "term", "tested", "unfinished", "use", "valid", "values", "whether", "with",
    "zero"
))
_LOCATION = re.compile(r"at <top-level>, line 1, column ([0-9]+):?")
_WRAPPER = len("del(")
_MAX_MESSAGE = 200


class JqSyntaxError(ValueError):
    """libjq could not compile ``del(<expr>)``."""


class JqSkip(Exception):
    """The rule is skipped for this object; the message is safe to show and log."""


@dataclass(frozen=True)
class JqExpression:
    """One compiled expression: its text and, when it has one, its fast-path program."""

    text: str
    fast: jqfast.Program | None

    @property
    def is_fast(self) -> bool:
        return self.fast is not None


@functools.lru_cache(maxsize=4096)
def compile_jq(expression: str) -> JqExpression:
    """Validate ``del(<expression>)`` with libjq and parse the fast path, once."""
    try:
        jq.compile(f"del({expression})")
    except ValueError as e:
        raise JqSyntaxError(_first_error_line(str(e))) from None
    return JqExpression(expression, jqfast.parse(expression))


def apply_del(expr: JqExpression, doc: Any, *, timeout: float) -> Any:
    """The result of ``del(<expr>)`` on ``doc``; the fast path edits ``doc`` in place."""
    if expr.fast is not None:
        paths = _fast_paths(expr.fast, doc)
        try:
            result = delete_paths(doc, paths)
        except PathError as e:
            raise JqSkip(str(e)) from None
        return _one_object([result])
    reply = _run(expr, doc, timeout=timeout, mode="del")
    return _one_object(reply["o"])


def del_paths(expr: JqExpression, doc: Any, *, timeout: float) -> list[Path]:
    """The concrete paths ``del(<expr>)`` deletes from ``doc`` (jq ``path(<expr>)``)."""
    if expr.fast is not None:
        paths = _fast_paths(expr.fast, doc)
    else:
        reply = _run(expr, doc, timeout=timeout, mode="paths")
        _one_object(reply["o"])
        if "px" in reply:
            raise JqSkip(f"not a path expression: {safe_message(reply['px'])}")
        paths = _checked_paths(reply["p"])
    if any(not p for p in paths):
        raise JqSkip("JQ patch did not return an object")
    return paths


def _fast_paths(program: jqfast.Program, doc: Any) -> list[Path]:
    try:
        return jqfast.evaluate_paths(program, doc)
    except jqfast.JqRuntimeError as e:
        raise JqSkip(f"JQ patch returned error: {e}") from None


def _run(expr: JqExpression, doc: Any, *, timeout: float, mode: str) -> dict[str, Any]:
    try:
        reply = POOL.run({"e": expr.text, "d": doc, "m": mode}, timeout)
    except JqTimeout:
        raise JqSkip(f"JQ patch execution timed out ({timeout:g}s)") from None
    except JqWorkerError as e:
        raise JqSkip(str(e)) from None
    if "x" in reply:
        raise JqSkip(f"JQ patch returned error: {safe_message(reply['x'])}")
    return reply


def _one_object(outputs: list[Any]) -> Any:
    if not outputs:
        raise JqSkip("JQ patch did not return any data")
    if len(outputs) > 1:
        raise JqSkip("JQ patch returned multiple objects")
    if not isinstance(outputs[0], dict):
        raise JqSkip("JQ patch did not return an object")
    return outputs[0]


def _checked_paths(outputs: list[Any]) -> list[Path]:
    """``[path(expr)]``'s single output as paths of dict keys and list indexes."""
    if len(outputs) != 1 or not isinstance(outputs[0], list):
        raise JqSkip("not a path expression")
    paths = []
    for path in outputs[0]:
        if not isinstance(path, list) or not all(
                isinstance(s, str) or (isinstance(s, int) and not isinstance(s, bool))
                for s in path):
            raise JqSkip("not a path expression of keys and indexes")
        paths.append(tuple(path))
    return paths


def safe_message(message: str) -> str:
    """A libjq error without the document values it quotes, one line, bounded.

    libjq puts values in parentheses (``Cannot iterate over string ("...")``), after
    ``with result`` / ``near attempt to``, or, for ``fromjson``, in ``(while parsing
    '...')`` (the single quotes are not escaped, so the value may hold anything); those
    parts are cut. What is left is shown only if every word is a word of libjq's own
    messages: ``error(.data.token)`` makes a value the whole message, so such messages
    are withheld rather than guessed at.
    """
    text = _first_error_line(message)
    for marker in _VALUE_MARKERS:
        text = text.split(marker, 1)[0]
    text = _QUOTED_VALUE.sub("", text).strip()
    if not _only_jq_words(text) or not _JQ_MESSAGE.search(text):
        return "runtime error (message withheld: it may quote the object)"
    return text[:_MAX_MESSAGE]


def _only_jq_words(text: str) -> bool:
    words = re.split(r"[\s,:;.]+", text.lower())
    return all(w in _JQ_WORDS or w.isdigit() for w in words if w)


def _first_error_line(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    first = lines[0] if lines else "unknown error"
    first = _LOCATION.sub(lambda m: f"at column {max(int(m.group(1)) - _WRAPPER, 0)}", first)
    return first.removeprefix("jq: error: ")

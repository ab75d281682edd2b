"""Plain data on the wire between the grader and a sandboxed kernel.

Two layers, both without pickle:

* a **frame** (:func:`pack`, :func:`unpack`) is a list of named byte
  strings, each announced by a line ``<name> <length>``, after a magic line
  and before ``end``. Reading a frame checks every name and length against
  limits before it slices anything.
* **plain data** (:func:`dump`, :func:`load`) is one frame holding a JSON
  tree (``tree``) and one ``.npy`` file per array (``a0``, ``a1``, ...). In
  the tree, tuples, lists, arrays, non-finite floats and opaque markers are
  tagged objects; everything else is JSON itself. Loading an array reads its
  ``.npy`` header first, refuses anything but plain dtypes (bools, numbers,
  strings) and sizes that disagree with the bytes present, and only then
  calls ``np.load(..., allow_pickle=False)``.

The grader writes the hidden cases with :func:`dump`; the harvest in the
student's kernel writes each exercise's result with :func:`dump_result`;
the grader reads results back with :func:`load_result`, which also checks
their shape. Whatever a kernel sends, reading it either returns plain data
within the limits or raises :class:`WireError`.
"""

from __future__ import annotations

import io
import json
import math
import re

import numpy as np

from selfattention_exercises.plain import (MAX_ARRAY_ITEMS, MAX_DEPTH,
                                           MAX_ITEMS, MAX_STR, Opaque,
                                           to_plain)

__all__ = ["WireError", "pack", "unpack", "dump", "load", "dump_cases",
           "load_cases", "dump_result", "load_result", "MAGIC"]

MAGIC = b"selfattention-wire 1\n"
_NAME = re.compile(rb"[A-Za-z0-9_.-]{1,64}")
#: Limits of one plain-data bundle.
MAX_BUNDLE = 16 * 2 ** 20
MAX_ARRAYS = 256
MAX_NODES = 200_000
MAX_MESSAGE = 2_000
MAX_CODE = 40                       # a diagnosis code's characters


class WireError(ValueError):
    """Bytes that are not a well-formed frame or plain-data bundle."""


# ------------------------------------------------------------------ frames
def pack(parts) -> bytes:
    """One frame holding ``parts``, a sequence of ``(name, bytes)``."""
    out = [MAGIC]
    for name, data in parts:
        if not _NAME.fullmatch(name.encode()):
            raise WireError(f"bad part name {name!r}")
        out.append(f"{name} {len(data)}\n".encode())
        out.append(bytes(data))
    out.append(b"end\n")
    return b"".join(out)


def unpack(data: bytes, max_parts: int = 64,
           max_part: int = MAX_BUNDLE) -> dict[str, bytes]:
    """The named parts of a frame; :class:`WireError` if malformed."""
    view = memoryview(data)
    if bytes(view[:len(MAGIC)]) != MAGIC:
        raise WireError("not a frame")
    pos, parts = len(MAGIC), {}
    while True:
        eol = data.find(b"\n", pos, pos + 100)
        if eol < 0:
            raise WireError("frame cut short")
        line = bytes(view[pos:eol])
        pos = eol + 1
        if line == b"end":
            if pos != len(data):
                raise WireError("bytes after the end of the frame")
            return parts
        name, _, size = line.partition(b" ")
        if not _NAME.fullmatch(name) or not size.isdigit() or len(size) > 12:
            raise WireError("bad part header")
        size = int(size)
        key = name.decode()
        if key in parts or len(parts) >= max_parts or size > max_part:
            raise WireError("too many, repeated or too large parts")
        if pos + size > len(data):
            raise WireError("frame cut short")
        parts[key] = bytes(view[pos:pos + size])
        pos += size


# ------------------------------------------------------------------ plain
def _encode(value, arrays: list, depth: int = 0):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, np.ndarray):
        arrays.append(value)
        return {"array": len(arrays) - 1}
    if isinstance(value, Opaque):
        return {"opaque": value.type_name}
    if isinstance(value, (tuple, list)) and depth <= MAX_DEPTH:
        items = [_encode(v, arrays, depth + 1) for v in value]
        return {"tuple" if isinstance(value, tuple) else "list": items}
    raise WireError(f"not plain data: {type(value).__name__}")


def dump(value) -> bytes:
    """``value`` (converted by ``to_plain``) as a plain-data bundle."""
    arrays: list[np.ndarray] = []
    tree = _encode(to_plain(value), arrays)
    return _bundle(tree, arrays)


def _bundle(tree, arrays) -> bytes:
    parts = [("tree", json.dumps(tree, allow_nan=False).encode())]
    for i, arr in enumerate(arrays):
        buffer = io.BytesIO()
        np.save(buffer, arr, allow_pickle=False)
        parts.append((f"a{i}", buffer.getvalue()))
    return pack(parts)


def _load_npy(data: bytes) -> np.ndarray:
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(
                stream, max_header_size=1000)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(
                stream, max_header_size=1000)
        else:
            raise WireError("unknown .npy version")
    except WireError:
        raise
    except Exception:
        raise WireError("bad .npy header") from None
    if (dtype.hasobject or dtype.names is not None or dtype.shape != ()
            or dtype.kind not in "biufU"):
        raise WireError("an array of a dtype that is not plain")
    count = 1
    for n in shape:
        if not isinstance(n, int) or n < 0:
            raise WireError("bad array shape")
        count *= n
    if count > MAX_ARRAY_ITEMS or \
            count * dtype.itemsize != len(data) - stream.tell():
        raise WireError("array size and bytes disagree")
    stream.seek(0)
    return np.load(stream, allow_pickle=False)


class _Budget:
    def __init__(self, nodes: int):
        self.nodes = nodes

    def spend(self) -> None:
        self.nodes -= 1
        if self.nodes < 0:
            raise WireError("too many values")


def _decode(node, arrays: list, budget: _Budget, depth: int = 0):
    budget.spend()
    if node is None or isinstance(node, (bool, float)):
        return node
    if isinstance(node, int):
        if not -2 ** 63 <= node < 2 ** 63:
            raise WireError("integer out of range")
        return node
    if isinstance(node, str):
        if len(node) > MAX_STR:
            raise WireError("string too long")
        return node
    if not (isinstance(node, dict) and len(node) == 1):
        raise WireError("bad node")
    (tag, body), = node.items()
    if tag in ("tuple", "list"):
        if (not isinstance(body, list) or len(body) > MAX_ITEMS
                or depth > MAX_DEPTH):
            raise WireError("bad sequence")
        items = [_decode(v, arrays, budget, depth + 1) for v in body]
        return tuple(items) if tag == "tuple" else items
    if tag == "array" and type(body) is int and 0 <= body < len(arrays):
        return arrays[body]
    if tag == "float" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "opaque" and isinstance(body, str) and len(body) <= 80:
        return Opaque(body)
    raise WireError("bad node")


def _parse_tree(parts: dict) -> tuple:
    if "tree" not in parts:
        raise WireError("no tree")
    names = set(parts) - {"tree"}
    count = len(names)
    if count > MAX_ARRAYS or names != {f"a{i}" for i in range(count)}:
        raise WireError("bad array parts")
    arrays = [_load_npy(parts[f"a{i}"]) for i in range(count)]
    try:
        tree = json.loads(parts["tree"].decode("utf-8"),
                          parse_constant=_no_constant)
    except WireError:
        raise
    except (ValueError, RecursionError):
        raise WireError("bad tree") from None
    return tree, arrays


def _no_constant(name):
    raise WireError(f"bad constant {name}")


def load(data: bytes):
    """The plain data of a bundle made by :func:`dump`."""
    tree, arrays = _parse_tree(unpack(data, MAX_ARRAYS + 1, MAX_BUNDLE))
    return _decode(tree, arrays, _Budget(MAX_NODES))


# ------------------------------------------------------------------ cases
def dump_cases(cases: list[dict]) -> bytes:
    """An exercise's cases (dicts of plain data by argument name)."""
    arrays: list[np.ndarray] = []
    tree = [{str(k): _encode(to_plain(v), arrays) for k, v in case.items()}
            for case in cases]
    return _bundle({"cases": tree}, arrays)


def load_cases(data: bytes) -> list[dict]:
    """The cases written by :func:`dump_cases`."""
    tree, arrays = _parse_tree(unpack(data, MAX_ARRAYS + 1, MAX_BUNDLE))
    if not (isinstance(tree, dict) and isinstance(tree.get("cases"), list)):
        raise WireError("bad cases")
    budget = _Budget(MAX_NODES)
    return [{str(k): _decode(v, arrays, budget) for k, v in case.items()}
            for case in tree["cases"]]


# ------------------------------------------------------------------ results
def dump_result(result: dict) -> bytes:
    """An attempt's result (see ``Exercise.attempt``) as a bundle."""
    arrays: list[np.ndarray] = []
    outcomes = []
    for outcome in result["outcomes"]:
        (key, value), = ((k, v) for k, v in outcome.items() if k != "code")
        entry = {key: _encode(value, arrays) if key == "output"
                 else str(value)[:MAX_MESSAGE]}
        if key == "wrong" and "code" in outcome:   # the diagnosis's code
            entry["code"] = str(outcome["code"])[:MAX_CODE]
        outcomes.append(entry)
    tree = {"outcomes": outcomes,
            "called": [str(n)[:200] for n in result["called"]][:20],
            "tampered": bool(result["tampered"])}
    return _bundle(tree, arrays)


def load_result(data: bytes, n_cases: int) -> dict:
    """Read and check a result bundle; :class:`WireError` if malformed."""
    tree, arrays = _parse_tree(unpack(data, MAX_ARRAYS + 1, MAX_BUNDLE))
    if not (isinstance(tree, dict) and set(tree) == {"outcomes", "called",
                                                     "tampered"}):
        raise WireError("bad result")
    outcomes, called = tree["outcomes"], tree["called"]
    if not (isinstance(outcomes, list) and 0 < len(outcomes) <= n_cases
            and isinstance(called, list) and len(called) <= 20
            and all(isinstance(n, str) and len(n) <= 200 for n in called)
            and isinstance(tree["tampered"], bool)):
        raise WireError("bad result")
    budget, checked = _Budget(MAX_NODES), []
    for i, outcome in enumerate(outcomes):
        if not isinstance(outcome, dict):
            raise WireError("bad outcome")
        coded = set(outcome) == {"wrong", "code"}
        if not (coded or (len(outcome) == 1 and "code" not in outcome)):
            raise WireError("bad outcome")
        if coded and not (isinstance(outcome["code"], str)
                          and len(outcome["code"]) <= MAX_CODE):
            raise WireError("bad outcome")
        (key, value), = ((k, v) for k, v in outcome.items() if k != "code")
        if key == "output":
            checked.append({key: _decode(value, arrays, budget)})
        elif key in ("not_done", "wrong") and isinstance(value, str) \
                and len(value) <= MAX_MESSAGE and i == len(outcomes) - 1:
            checked.append({key: value, **({"code": outcome["code"]}
                                           if coded else {})})
        else:
            raise WireError("bad outcome")
    return {"outcomes": checked, "called": called,
            "tampered": tree["tampered"]}

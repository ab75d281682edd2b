""""For review" read from the submitted source, in the grader's process.

Every route by which an answer could borrow the library's work, or change
what the harvest sees, is a cell added to chapter 1's student notebook; the
review must flag it, quoting the line. The chapters' own solutions must
never be flagged (they are what an honest student hands in). Nothing here
runs a notebook.
"""

from pathlib import Path

import nbformat
import pytest

from selfattention_course import assign
from selfattention_course.notebook import load_manifest
from selfattention_course.review import cell_digest, review
from hostile_routes import (ENCODED, FOR_REVIEW_ROUTES, JUDGE_PASTED, SHOWN,
                            routes)

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
EXERCISES = {label: ex for label, (_, _, ex) in
             assign.find_exercises().items()}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("assignments")
    assign.build(CHAPTERS, out)
    chapters, _ = load_manifest(out / "grader" / "manifest.json")
    return out, chapters


def flagged(nb, chapter):
    # as the grader asks (Grader.review): the judge's helpers too
    spec = {e["label"]: (e["answers"], EXERCISES[e["label"]].references,
                         EXERCISES[e["label"]].grading())
            for e in chapter["exercises"]}
    return review(nb, spec, chapter["book_cells"])


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_solution_of_the_book_is_flagged(built, path):
    _, chapters = built
    found = flagged(nbformat.read(path, as_version=4), chapters[path.stem])
    assert not any(found.values()), {k: [f.quote() for f in v]
                                     for k, v in found.items() if v}


@pytest.mark.slow                   # about 3 s: twelve notebooks reviewed
def test_the_student_notebooks_are_not_flagged(built):
    out, chapters = built
    for path in CHAPTERS:
        nb = nbformat.read(out / "student" / path.name, as_version=4)
        assert not any(flagged(nb, chapters[path.stem]).values()), path.stem
        # nor the launch notebook (Colab's), which a student may hand in
        nb = nbformat.read(ROOT / "notebooks" / path.name, as_version=4)
        assert not any(flagged(nb, chapters[path.stem]).values()), path.stem


def with_cell(built, source):
    out, chapters = built
    nb = nbformat.read(out / "student" / "01_definition.ipynb",
                       as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(source))
    return flagged(nb, chapters["01_definition"]), len(nb.cells)


@pytest.mark.parametrize("route", FOR_REVIEW_ROUTES)
def test_every_route_of_the_tripwire_s_gaps_is_flagged(built, route):
    source = routes(0, Path("/x"))[route].strip()
    found, cells = with_cell(built, source)
    first = found["ex-definition-tempered"]
    assert first, route
    assert first[0].cell == cells                  # the added cell, quoted
    assert first[0].text.strip() in source


@pytest.mark.parametrize("source, kind", [
    # references through aliases, attributes, `from` imports, assignment
    ("from selfattention.attention import attention as a\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return a(Q / tau[..., None], K, V)", "reference"),
    ("import selfattention\n"
     "f = selfattention.attention.attention\n"
     "my_tempered_attention = lambda Q, K, V, tau: f(Q, K, V)", "reference"),
    ("def my_tempered_attention(Q, K, V, tau):\n"
     "    from selfattention import attention\n"
     "    return attention.multi_head_attention(Q, K, V, 1)", "reference"),
    ("import torch\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return torch.nn.MultiheadAttention(4, 1)", "reference"),
    # a helper the answer calls, in another cell
    ("import selfattention.attention as A\n"
     "def helper(Q, K, V):\n"
     "    return A.attention(Q, K, V)\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return helper(Q / tau[..., None], K, V)", "reference"),
    # the checks' own code
    ("def predict_moved(query, shift):\n"
     "    return checks.check_moved.feedback(lambda q, s: (0, 0))",
     "checks"),
    ("from selfattention_exercises import core\n"
     "def predict_moved(query, shift):\n"
     "    return core.call(lambda: (1, 2))", "checks"),
    # dynamic code and hooks, wherever they are
    ("x = eval('1 + 1')", "dynamic"),
    ("import importlib\nm = importlib.import_module('selfattention')",
     "dynamic"),
    ("import marshal", "dynamic"),
    ("import pickle", "dynamic"),
    ("f = type(lambda: 0)(compile('1', 'x', 'eval'), {})", "dynamic"),
    ("import sys\nsys.settrace(None)", "dynamic"),
    ("import sys\nsys.modules['numpy'] = None", "dynamic"),
    ("get_ipython().events.register('pre_run_cell', print)", "dynamic"),
    ("!echo hi", "dynamic"),
    ("%run other.py", "dynamic"),
    ("import concurrent.futures", "dynamic"),
    ("open('mine.py', 'w').write('x = 1')\nimport mine", "dynamic"),
    ("import numpy as np\nnp.sum = lambda *a: 0", "hook"),
    # code a safe magic runs is read; aliases, imports and shells
    ("%%time\nimport threading\nthreading.Thread(target=print).start()",
     "dynamic"),
    ("%timeit -n 1 exec('1')", "dynamic"),
    ("g = getattr\nb = g(g, '__self__')", "dynamic"),
    ("exit._ip.ex('x = 1')", "dynamic"),
    ("import pathlib\npathlib.Path('numpy.py').write_text('x = 1')",
     "dynamic"),
    ("import torch\nf = torch.ops.aten._scaled_dot_product_attention_math",
     "dynamic"),
    ("from sys import setprofile\nsetprofile(None)", "dynamic"),
    ("from sys import _getframe", "dynamic"),
    # the source lines the tripwire reads a shown cell's copy by
    ("import linecache\nlinecache.clearcache()", "dynamic"),
    ("from linecache import cache\ncache.clear()", "dynamic"),
    # IPython's output cache: what an earlier cell showed, kept
    ("kept = Out[3]", "dynamic"),
    ("kept = _", "dynamic"),
    ("def my_tempered_attention(Q, K, V, tau):\n    return _12(Q, K, V)",
     "dynamic"),
    ("kept = next(v for v in _oh.values())", "dynamic"),
    # a flagged module read as another module's attribute
    ("import traceback\ntraceback.linecache.clearcache()", "dynamic"),
    ("from traceback import linecache\nlinecache.clearcache()", "dynamic"),
    ("import os\nos.sys.modules['numpy'] = None", "dynamic"),
    ("import os as o\nhooks = o.sys.meta_path", "dynamic"),
    ("from operator import attrgetter", "dynamic"),
    # the grader's kernel told apart from the student's by its environment
    ("import os\nif os.getenv('SELFATTENTION_GRADING'):\n    pass",
     "dynamic"),
    ("from os import getenv", "dynamic"),
    ("def print(*a):\n    pass", "hook"),
    # an attribute named by a constant is the attribute
    ("import torch\nf = getattr(torch, 'ops')", "dynamic"),
    ("import torch\nok = hasattr(torch, '_C')", "dynamic"),
    ("import sys\nf = getattr(sys, '_getframe')", "dynamic"),
    ("import sys\nf = getattr(sys, 'settrace', None)", "dynamic"),
    ("def up(frame):\n    return getattr(frame, 'f_back')", "dynamic"),
    ("def up(frame):\n    return getattr(frame, 'f_locals')", "dynamic"),
    ("def up(frame):\n    return getattr(frame, 'f_globals')", "dynamic"),
    ("def up(tb):\n    return getattr(tb, 'tb_frame')", "dynamic"),
    ("def up(g):\n    return getattr(g, 'gi_frame')", "dynamic"),
    ("def up(c):\n    return getattr(c, 'cr_frame')", "dynamic"),
    ("def up(frame, t):\n    setattr(frame, 'f_trace', t)", "dynamic"),
    ("import selfattention.attention as A\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return getattr(A, 'attention')(Q / tau[..., None], K, V)",
     "reference"),
    ("import selfattention.attention as A\n"
     "f = getattr(A, 'attention', None)\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return f(Q / tau[..., None], K, V)", "reference"),
    # PyTorch's private parts
    ("import torch\nf = torch._scaled_dot_product_attention_math",
     "dynamic"),
    ("import torch._dynamo", "dynamic"),
    ("from torch.nn.functional import _in_projection", "dynamic"),
    ("from torch import _VF", "dynamic"),
    # IPython's shell reached without the name get_ipython
    ("import ipywidgets\nipywidgets.get_ipython().ex('x = 1')", "dynamic"),
    ("import pandas.io.formats.printing as p\nshell = p.get_ipython()",
     "dynamic"),
    ("from ipywidgets import get_ipython", "dynamic"),
    ("def run(shell):\n    shell.ex('x = 1')", "dynamic"),
    ("def run(shell):\n    return shell.ev('1')", "dynamic"),
    ("def run(shell):\n    shell.system('ls')", "dynamic"),
    ("def run(shell):\n    shell.events.register('post_run_cell', print)",
     "dynamic"),
    ("import timeit\ntimeit.timeit(bytes.fromhex('7831').decode(), "
     "number=1)", "dynamic"),
    ("from timeit import timeit", "dynamic"),
    ("import doctest", "dynamic"),
    ("import pty", "dynamic"),
    ("import code", "dynamic"),
    ("import codeop", "dynamic"),
    ("import runpy", "dynamic"),
    # an answer bound so that the review would stop following it
    ("from selfattention.attention import attention as lib_att\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return lib_att(Q / tau[..., None], K, V)\n"
     "my_tempered_attention = my_tempered_attention", "reference"),
    ("from selfattention.attention import attention as lib_att\n"
     "def helper(Q, K, V):\n    return lib_att(Q, K, V)\n"
     "helper = helper\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return helper(Q / tau[..., None], K, V)", "reference"),
    ("import torch\nt = torch\nt = t\nf = t.ops", "dynamic"),
    ("from selfattention.attention import attention as lib_att\n"
     "match (lambda Q, K, V, tau: lib_att(Q / tau[..., None], K, V)):\n"
     "    case my_tempered_attention:\n        pass", "dynamic"),
    ("from selfattention.attention import attention as lib_att\n"
     "[my_tempered_attention := lambda Q, K, V, tau: lib_att(Q, K, V) "
     "for _ in (0,)]", "dynamic"),
    ("from selfattention.attention import attention as lib_att\n"
     "print((my_tempered_attention := lambda Q, K, V, tau: "
     "lib_att(Q, K, V)) is not None)", "dynamic"),
    ("from selfattention.attention import attention as lib_att\n"
     "[*my_tempered_attention] = [lambda Q, K, V, tau: lib_att(Q, K, V)]\n"
     "my_tempered_attention, = my_tempered_attention", "dynamic"),
    ("from selfattention.attention import attention as lib_att\n"
     "for my_tempered_attention in [lambda Q, K, V, tau: lib_att(Q, K, V)]:"
     "\n    pass", "dynamic"),
    ("import selfattention.attention as sa_att\n"
     "def my_tempered_attention(Q, K, V, tau, "
     "f=getattr(sa_att, 'attention')):\n"
     "    return f(Q / tau[..., None], K, V)", "reference"),
    ("from selfattention.attention import attention as lib_att\n"
     "def _wrap(_):\n"
     "    return lambda Q, K, V, tau: lib_att(Q / tau[..., None], K, V)\n"
     "@_wrap\ndef my_tempered_attention(Q, K, V, tau):\n    ...",
     "reference"),
    ("from selfattention.attention import attention as lib_att\n"
     "try:\n    raise ValueError\nexcept* ValueError:\n"
     "    my_tempered_attention = lambda Q, K, V, tau: lib_att(Q, K, V)",
     "reference"),
    # a reference reached through an object that code fills: a dict, an
    # attribute, a list's append, setattr, a registry a function fills
    ("import selfattention.attention as sa\nR = {}\nR['a'] = sa.attention\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return R['a'](Q, K, V)", "reference"),
    ("import selfattention.attention as sa\nclass Box:\n    pass\n"
     "box = Box()\nbox.f = sa.attention\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return box.f(Q, K, V)", "reference"),
    ("import selfattention.attention as sa\nL = []\nL.append(sa.attention)\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return L[0](Q, K, V)", "reference"),
    ("import selfattention.attention as sa\nclass Box:\n    pass\n"
     "box = Box()\nsetattr(box, 'f', sa.attention)\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return box.f(Q, K, V)", "reference"),
    ("import selfattention.attention as sa\nREG = {}\n"
     "def reg(f):\n    REG['a'] = f\n    return f\nreg(sa.attention)\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return REG['a'](Q, K, V)", "reference"),
    # a module used as a value: in a list, a dict, an argument, returned,
    # a default, stored in an attribute
    ("import selfattention.attention as sa\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return [sa][0].attention(Q, K, V)", "dynamic"),
    ("import selfattention\nM = {'m': selfattention.attention}\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return M['m'].attention(Q, K, V)", "dynamic"),
    ("import torch\ndef pick(m):\n    return m\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return pick(torch.nn).MultiheadAttention(4, 1)", "dynamic"),
    ("import selfattention.attention as sa\ndef lib():\n    return sa\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return lib().attention(Q, K, V)", "dynamic"),
    ("import selfattention.attention as sa\n"
     "def my_tempered_attention(Q, K, V, tau, m=sa):\n"
     "    return m.attention(Q, K, V)", "dynamic"),
    ("import torch.nn as tnn\nclass Box:\n    pass\nbox = Box()\n"
     "box.m = tnn\ndef my_tempered_attention(Q, K, V, tau):\n"
     "    return box.m.MultiheadAttention(4, 1)", "dynamic"),
    ("import __main__\nparts = [__main__]", "dynamic"),
    # code compiled or evaluated from strings, frames and the heap
    ("import torch\ncu = torch.jit.CompilationUnit('def f(x):\\n"
     "    return x')", "dynamic"),
    ("from torch import jit", "dynamic"),
    ("import torch\nf = torch.compile(lambda x: x)", "dynamic"),
    ("import torch.fx", "dynamic"),
    ("from torch.utils import cpp_extension", "dynamic"),
    ("from sympy.parsing.sympy_parser import parse_expr", "dynamic"),
    ("import sympy\nsympy.sympify('1 + 1')", "dynamic"),
    ("import pydoc\nf = pydoc.locate('selfattention.attention')", "dynamic"),
    ("from unittest import mock", "dynamic"),
    ("import sys\nf = sys._getframe(0)", "dynamic"),
    ("import logging\nf = logging.currentframe()", "dynamic"),
    ("import typing\nh = typing.get_type_hints(print)", "dynamic"),
    ("import gc\nn = len(gc.get_objects())", "dynamic"),
    # a judge's helper pasted and kept where no answer reaches it, and
    # the same as a lambda
    (JUDGE_PASTED.split("def my_tempered_attention")[0] +
     "H = {'t': _tempered}", "judge"),
    ("largest = lambda q, k, t: tempered(q, k, t[..., None], "
     "q.shape[-1]).max(axis=-1)", "judge"),
])
def test_routes_are_flagged_with_their_kind(built, source, kind):
    found, _ = with_cell(built, source)
    kinds = {f.kind for f in found["ex-definition-tempered"]} | \
        {f.kind for f in found["ex-definition-moved"]}
    assert kind in kinds, (source, found)


@pytest.mark.parametrize("source", [
    "import numpy as np\nfrom selfattention.attention import softmax\n"
    "def my_tempered_attention(Q, K, V, tau):\n"
    "    A = softmax(Q @ np.swapaxes(K, -1, -2) / (Q.shape[-1] ** 0.5 "
    "* tau[..., None]))\n"
    "    return A @ V, A",
    "%timeit 1 + 1",
    "%time y = 1 + 1",
    "%%timeit -n 3 -r 2\nimport numpy as np\nnp.zeros(3).sum()",
    "if 'model' not in globals():\n    model = None",
    "import torch\nmodel = torch.nn.Linear(2, 2).eval()",
    "import numpy as np\nx = getattr(np.zeros(2), 'shape', None)",
    # modules named, helped, their functions and classes kept in lists,
    # compiled patterns, stacks of arrays
    "import numpy as np\nhelp(np)",
    "import numpy as np\nfns = [np.mean, np.median]\n"
    "x = np.stack([np.zeros(2)])",
    "import re\npattern = re.compile('[a-z]+')",
    "import torch\nlayers = [torch.nn.Linear(2, 2), torch.nn.ReLU()]\n"
    "model = torch.nn.Sequential(*layers)",
    "results = {}\nresults['tempered'] = 1.0\nclass Box:\n    pass\n"
    "box = Box()\nbox.x = 2",
])
def test_plain_code_is_not_flagged(built, source):
    found, _ = with_cell(built, source)
    assert not found["ex-definition-tempered"], found


def test_a_reference_flags_its_own_exercise_only(built):
    found, _ = with_cell(built, (
        "from selfattention.attention import attention\n"
        "def my_limits(Q, K, V):\n"
        "    return attention(Q * 1e9, K, V)[0], attention(Q * 0, K, V)[0]"))
    assert found["ex-definition-limits"]           # measured, not derived
    assert not found["ex-definition-tempered"]     # not used by its answer
    assert not found["ex-definition-moved"]


def with_cell_in(built, stem, source):
    out, chapters = built
    nb = nbformat.read(out / "student" / f"{stem}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(source))
    return flagged(nb, chapters[stem])


TEMPERED = "def my_tempered_attention(Q, K, V, tau):\n    return "
LIMITS = "def my_limits(Q, K, V):\n    return "


@pytest.mark.parametrize("stem, label, source", [
    ("01_definition", "ex-definition-tempered",
     "from selfattention.blockwise import blockwise_attention\n" + TEMPERED
     + "blockwise_attention(Q / tau[..., None], K, V)"),
    ("01_definition", "ex-definition-tempered",
     "import torch\n" + TEMPERED
     + "torch._scaled_dot_product_attention_math(Q, K, V)"),
    ("01_definition", "ex-definition-tempered",
     "import torch\n" + TEMPERED
     + "torch._native_multi_head_attention(Q, K, V, 4, 1)"),
    ("01_definition", "ex-definition-tempered",
     "from torch.nn.attention import sdpa_kernel\n" + TEMPERED
     + "sdpa_kernel"),
    ("01_definition", "ex-definition-tempered",
     "from selfattention import nonlocal_block\n" + TEMPERED
     + "nonlocal_block.nonlocal_op(Q, K, V, V)"),
    ("01_definition", "ex-definition-tempered",
     "import selfattention.windows as w\n" + TEMPERED
     + "w.window_attention(Q, K, V, V, V, 1, 2)"),
    ("01_definition", "ex-definition-limits",
     "from selfattention.attention import attention\n" + LIMITS
     + "attention(Q, K, V, scale=1e6)[0], attention(Q, K, V, scale=0)[0]"),
    ("01_definition", "ex-definition-limits",
     "from selfattention.attention import softmax\n" + LIMITS
     + "softmax(Q @ K.T * 1e6) @ V, V.mean(0)"),
    ("01_definition", "ex-definition-moved",
     "import numpy as np\ndef predict_moved(query, shift):\n"
     "    return np.roll(np.arange(64).reshape(8, 8), shift, (0, 1))"),
    ("02_scaling", "ex-scaling-gradient",
     "import torch\ndef my_query_gradient(Q, K, V, G):\n"
     "    return torch.func.jacfwd(lambda q: q)(Q)"),
    ("02_scaling", "ex-scaling-gradient",
     "from torch.func import jvp, hessian, linearize\n"
     "def my_query_gradient(Q, K, V, G):\n"
     "    return jvp, hessian, linearize"),
    ("02_scaling", "ex-scaling-gradient",
     "import torch.autograd.forward_ad as fwAD\n"
     "def my_query_gradient(Q, K, V, G):\n"
     "    return fwAD.make_dual(Q, G)"),
    ("02_scaling", "ex-scaling-norm",
     "import torch\ndef my_jacobian_norm(P):\n"
     "    return torch.autograd.functional.hessian(lambda p: p, P)"),
    ("11_matching", "ex-matching-bilinear",
     "from scipy.ndimage import map_coordinates\n"
     "def my_bilinear_lookup(C, flow, radius):\n"
     "    return map_coordinates(C[0, 0], flow.T, order=1, "
     "mode='grid-wrap')"),
    ("11_matching", "ex-matching-bilinear",
     "import scipy.interpolate as si\n"
     "def my_bilinear_lookup(C, flow, radius):\n"
     "    return si.RegularGridInterpolator"),
    ("11_matching", "ex-matching-bilinear",
     "import torch.nn.functional as F\n"
     "def my_bilinear_lookup(C, flow, radius):\n"
     "    return F.grid_sample(C, flow, align_corners=True)"),
    ("03_multihead", "ex-multihead-grouped",
     "from torch.utils.flop_counter import FlopCounterMode\n"
     "def grouped_counts(d, h, g, n, m):\n"
     "    return FlopCounterMode"),
    ("03_multihead", "ex-multihead-grouped",
     "from torch.profiler import profile\n"
     "def grouped_counts(d, h, g, n, m):\n"
     "    with profile(with_flops=True) as prof:\n"
     "        pass\n"
     "    return 0, sum(e.flops for e in prof.key_averages()) // 2, 0"),
    ("05_position", "ex-position-shift",
     "import numpy as np\n"
     "def shift_matrix(d, k, base):\n"
     "    E = np.ones((d, 50))\n"
     "    return np.linalg.lstsq(E.T, E.T, rcond=None)[0].T"),
    ("05_position", "ex-position-bias-equivariance",
     "from scipy.special import softmax\n"
     "def still_equivariant(table, rows, cols, perm):\n"
     "    return bool(softmax(table).all())"),
    ("09_windows", "ex-windows-padding",
     "from selfattention.windows import padded_window_ids\n"
     "def my_padded_attention(x, W_q, W_k, W_v, W_o, h, M, shift, table):\n"
     "    return padded_window_ids(x.shape[:2], M, shift)"),
    ("12_misconceptions", "ex-misconceptions-same-output",
     "from scipy.optimize import linprog\n"
     "def same_output_row(a, V):\n"
     "    return linprog(-a, A_eq=V.T, b_eq=a @ V, bounds=(0, None)).x"),
    ("06_transformer", "ex-transformer-rollout-limit",
     "import numpy as np\nfrom selfattention import interpret\n"
     "def rollout_limit(maps, residual):\n"
     "    deep = np.broadcast_to(maps, (1, 400) + maps.shape)\n"
     "    return interpret.rollout(deep, residual)[0, 0], 0.5"),
    ("06_transformer", "ex-transformer-counts",
     "from selfattention.cost import msa_macs\n"
     "def block_counts(n, d, h, d_mlp):\n"
     "    return 4 * d * d, msa_macs((1, n), d) + 2 * n * d * d_mlp"),
    ("10_nonlocal", "ex-nonlocal-gate-gradients",
     "from torch.autograd.functional import vhp\n"
     "def my_gate_gradients(x, F, W_g, W_z, gamma, target):\n"
     "    return vhp"),
    # the library's functions as the training recipes import them
    ("07_photographs", "ex-photographs-loss",
     "import torch\n"
     "from selfattention_training.photographs import masked_patch_loss as f\n"
     "def masked_patch_loss(pred, target, hidden):\n"
     "    t = torch.from_numpy\n"
     "    return float(f(t(pred), t(target), t(hidden)))"),
    ("07_photographs", "ex-photographs-counts",
     "from selfattention_training import photographs\n"
     "def detection_counts(classes, boxes, labels, true_boxes):\n"
     "    return photographs.detr_counts(None, None, None)"),
    ("07_photographs", "ex-photographs-uniform",
     "import math\nfrom selfattention.position import relative_offsets\n"
     "def uniform_distance(H, W, p):\n"
     "    D2 = (relative_offsets((H, W)) ** 2).sum(-1)\n"
     "    return p * math.sqrt(D2.mean())"),
    ("07_photographs", "ex-photographs-uniform",
     "import math\nimport torch\ndef uniform_distance(H, W, p):\n"
     "    X = torch.cartesian_prod(torch.arange(H), torch.arange(W))\n"
     "    return p * math.sqrt((torch.cdist(X, X) ** 2).mean())"),
    ("07_photographs", "ex-photographs-uniform",
     "import numpy as np\nfrom scipy import spatial\n"
     "def uniform_distance(H, W, p):\n"
     "    X = np.argwhere(np.ones((H, W)))\n"
     "    return p * np.sqrt((spatial.distance_matrix(X, X) ** 2).mean())"),
    ("07_photographs", "ex-photographs-counts",
     "from selfattention import detection\n"
     "def detection_counts(classes, boxes, labels, true_boxes):\n"
     "    iou = detection._iou_terms(boxes[:, None], true_boxes[None])[0]\n"
     "    return int((iou >= 0.5).sum()), len(classes), len(labels)"),
])
def test_every_shortcut_is_a_reference(built, stem, label, source):
    found = with_cell_in(built, stem, source)[label]
    assert found and found[0].kind == "reference", found


@pytest.mark.parametrize("stem, label, source", [
    # a listed reference reached as the attribute of a module that holds
    # it, or through its fused fast path, with one head isolated
    ("01_definition", "ex-definition-tempered",
     "import torch\nfrom torch import nn\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    layer = nn.TransformerEncoderLayer(Q.shape[-1], 1)\n"
     "    return layer.self_attn(torch.tensor(Q), torch.tensor(K),\n"
     "                           torch.tensor(V))"),
    ("01_definition", "ex-definition-tempered",
     "import torch\n"
     "block = torch.nn.Transformer(d_model=4, nhead=1).encoder.layers[0]\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    with torch.no_grad():\n"
     "        return block.eval()(torch.tensor(Q / tau[..., None]))"),
    ("01_definition", "ex-definition-tempered",
     "import torch.nn as tnn\nmake = tnn.TransformerDecoderLayer\n"
     "def my_tempered_attention(Q, K, V, tau):\n"
     "    return make(4, 1).multihead_attn(Q, K, V)"),
    ("03_multihead", "ex-multihead-equivalent",
     "from selfattention.torch_bridge import multihead_from_weights as mk\n"
     "def equivalent_weights(W_q, W_k, W_v, W_o, h, order, G):\n"
     "    return mk(W_q, W_k, W_v, W_o, h)"),
])
def test_a_reference_inside_an_object_is_a_reference(built, stem, label,
                                                     source):
    found = with_cell_in(built, stem, source)[label]
    assert found and found[0].kind == "reference", found
    assert "holds" in found[0].what or "uses" in found[0].what, found


def judge_helper_routes():
    """(chapter, exercise, helper) for every function a judge of an
    exercise with auto-points computes an answer with."""
    from selfattention_course.judges import answer_helpers

    modules = {}
    for label, (module, _, ex) in assign.find_exercises().items():
        if ex.points > 0:
            for dotted in sorted(answer_helpers(ex.grading())):
                modules.setdefault(module.rsplit(".", 1)[-1], []).append(
                    (label, dotted))
    return sorted(modules.items())


def retyped(tree):
    """A function with every name it binds or uses renamed (but the
    builtins)."""
    import ast
    import builtins

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not hasattr(builtins, node.id):
            node.id = f"my_{node.id}"
        elif isinstance(node, ast.arg):
            node.arg = f"my_{node.arg}"
        elif isinstance(node, ast.FunctionDef):
            node.name = f"my_{node.name}"
    return tree


@pytest.mark.slow                   # about 3 s: every judge's helpers
@pytest.mark.parametrize("module, helpers", judge_helper_routes(),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_a_copy_of_a_judge_s_helper_is_for_review(built, module, helpers):
    """Each function a judge computes an answer with, pasted as it is,
    retyped under other names and with a line added, the answer calling
    it: sent for review, as a copy of the judge's code; the chapter's
    solutions are not (test_no_solution_of_the_book_is_flagged)."""
    import ast
    import inspect
    import textwrap

    from selfattention_course.judges import answer_helpers
    from selfattention_course.review.likeness import (MIN_STEPS, SHAPE_NODES,
                                                      _size)

    _, chapters = built
    stems = {e["label"]: stem for stem, chapter in chapters.items()
             for e in chapter["exercises"]}
    answers = {e["label"]: e["answers"] for chapter in chapters.values()
               for e in chapter["exercises"]}
    by_label = {}
    for label, dotted in helpers:
        by_label.setdefault(label, []).append(dotted)
    for label, dotteds in by_label.items():     # one notebook per exercise
        copies = {}                             # name -> the helper copied
        for dotted in dotteds:
            fn = answer_helpers(EXERCISES[label].grading())[dotted]
            tree = ast.parse(textwrap.dedent(inspect.getsource(
                inspect.unwrap(fn)))).body[0]
            copies[tree.name] = (dotted, ast.unparse(tree))
            if _size(tree) >= SHAPE_NODES:
                other = retyped(tree)
                copies[other.name] = (dotted, ast.unparse(other))
            if len(tree.body) >= MIN_STEPS + 1:     # a line added, too
                padded = retyped(ast.parse(ast.unparse(tree)).body[0])
                padded.name = f"padded{padded.name}"
                padded.body.insert(1, ast.parse("junk = 0").body[0])
                copies[padded.name] = (dotted, ast.unparse(padded))
        calls = ", ".join(f"{name}(*args, **kw)" for name in copies)
        source = "\n\n".join(code for _, code in copies.values()) + (
            f"\n\ndef {answers[label][0]}(*args, **kw):\n"
            f"    return {calls}\n")
        found = with_cell_in(built, stems[label], source)[label]
        assert found and found[0].kind == "judge", (label, found)
        for name, (dotted, _) in copies.items():
            assert any(f.kind == "judge" and dotted in f.what and
                       f.text.lstrip().startswith(f"def {name}(")
                       for f in found), (label, name, found)


def test_the_pieces_of_the_hostile_routes_exist():
    assert SHOWN.startswith("# lib/selfattention/attention.py")
    assert cell_digest(SHOWN) != cell_digest("\n" + SHOWN)
    assert ENCODED


def test_reading_an_import_never_runs_a_program_in_the_grader():
    """A star import of a module that runs a program when imported (here
    f2py's command line, which calls sys.exit) is read without importing
    it: the review returns, and the grader goes on."""
    import sys

    before = sys.argv[:]
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(
        "from numpy.f2py.__main__ import *\n"
        "def my_answer(x):\n    return x\n"))
    found = review(nb, {"ex-x": (("my_answer",), ())})
    assert sys.argv == before and set(found) == {"ex-x"}



def _counting(monkeypatch):
    from selfattention_course.review.scope import _Names

    calls = [0]
    original = _Names.meanings

    def counted(self, node, depth=0):
        calls[0] += 1
        return original(self, node, depth)

    monkeypatch.setattr(_Names, "meanings", counted)
    return calls


@pytest.mark.parametrize("source", [
    "a = 1\na = max(a, a, a, a, a, a, a, a)\na.real",
    "a = 1\na = max(" + ", ".join(["max(a, a, a, a, a, a, a, a)"] * 8)
    + ")\na.real\ndef my_tempered_attention(Q, K, V, tau):\n"
      "    return a.real",
    "a = 1\nb = 1\na = max(b, b, b, b, b, b, b, b)\n"
    "b = max(a, a, a, a, a, a, a, a)\nb.real",
])
def test_names_bound_through_themselves_are_read_once(built, monkeypatch,
                                                      source):
    """``a = max(a, a, ...)`` is read in a number of steps that grows with
    the cell's size, not exponentially with its arguments."""
    calls = _counting(monkeypatch)
    found, _ = with_cell(built, source)
    assert calls[0] < 20_000, calls[0]
    assert not found["ex-definition-tempered"], found


def test_a_notebook_too_involved_to_read_goes_for_review(built,
                                                         monkeypatch):
    """Names bound through each other in a ring, each many times over,
    would take the review exponentially many steps: it stops at its
    budget and sends every exercise of the notebook for review."""
    from selfattention_course.review import scope as module

    k = 8
    source = "\n".join(f"a{i} = 1" for i in range(k)) + "\n" + "\n".join(
        f"a{i} = max(" + ", ".join([f"a{(i + 1) % k}"] * 8) + ")"
        for i in range(k)) + "\na0.real"
    calls = _counting(monkeypatch)
    found, cells = with_cell(built, source)
    assert calls[0] <= module.MAX_WORK + module.MAX_DEPTH + 10, calls[0]
    for label, findings in found.items():
        assert findings and findings[0].kind == "dynamic", label
        assert findings[0].cell == cells


def test_the_chapter_s_own_function_is_named_by_what_it_is(built):
    """The chapter's ``def attention`` is the library's attention, not the
    module ``torch.nn.attention`` that shares its last name."""
    found, _ = with_cell(built, "def my_tempered_attention(Q, K, V, tau):\n"
                                "    return attention(Q, K, V)")
    whats = [f.what for f in found["ex-definition-tempered"]]
    assert whats and all("torch.nn.attention" not in w for w in whats)
    assert any("selfattention.attention.attention" in w for w in whats)


#: Answers of 7.1 that reach the copy of ``photo_vit.masked_patch_loss``
#: that chapter 7 shows on its page under the answer's own name, kept
#: under another name before the answer replaces it.
SHOWN_UNDER_THE_ANSWER_S_NAME = [
    ("chapter_loss = masked_patch_loss",
     "def masked_patch_loss(pred, target, hidden):\n"
     "    return float(chapter_loss(torch.from_numpy(pred),\n"
     "                              torch.from_numpy(target),\n"
     "                              torch.from_numpy(hidden)))"),
    ("", "def masked_patch_loss(pred, target, hidden,\n"
         "                      shown=masked_patch_loss):\n"
         "    return float(shown(torch.tensor(pred), torch.tensor(target),\n"
         "                       torch.tensor(hidden)))"),
    ("masked_patch_loss",         # shown by a cell, then read from Out
     "def masked_patch_loss(pred, target, hidden):\n"
     "    f = next(v for v in Out.values() if callable(v))\n"
     "    return float(f(torch.tensor(pred), torch.tensor(target),\n"
     "                   torch.tensor(hidden)))"),
    ("class Kept:\n    loss = staticmethod(masked_patch_loss)",
     "def masked_patch_loss(pred, target, hidden):\n"
     "    t = torch.from_numpy\n"
     "    return float(Kept.loss(t(pred), t(target), t(hidden)))"),
]


@pytest.mark.parametrize("kept, answer", SHOWN_UNDER_THE_ANSWER_S_NAME)
def test_the_shown_copy_kept_under_another_name_is_a_reference(
        built, kept, answer):
    """Chapter 7 shows ``masked_patch_loss``, the answer's own name: a
    wrapper around that copy (kept by an alias, a default, a class) is the
    reference, although the chapter's cell is left as it is; read back
    from IPython's output cache, it is dynamic code. (The
    tripwire recognises that copy by its cell's first line, which
    ``linecache.clearcache()`` erases: only the review can tell.)"""
    out, chapters = built
    nb = nbformat.read(out / "student" / "07_photographs.ipynb",
                       as_version=4)
    shown = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                 and c.source.startswith(
                     "# lib/selfattention_models/photo_vit.py")
                 and "def masked_patch_loss(" in c.source)
    stub = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                and c.source.startswith("def masked_patch_loss("))
    nb.cells[stub].source = answer
    if kept:
        nb.cells.insert(shown + 1, nbformat.v4.new_code_cell(kept))
    found = flagged(nb, chapters["07_photographs"])
    loss = found["ex-photographs-loss"]
    assert loss and loss[0].kind in ("reference", "dynamic"), loss
    assert loss[0].kind == "dynamic" or \
        "selfattention_models.photo_vit.masked_patch_loss" in loss[0].what, loss


# ------------------------------------------------ honest habits, and twins
def solved_with(built, sources, at=None):
    """Chapter 1 as an honest student hands it in (the chapter, solutions
    included), with ``sources`` added as cells (at the end, or from the
    code cell of index ``at`` on); what the review flags, per exercise."""
    _, chapters = built
    nb = nbformat.read(ROOT / "chapters" / "01_definition.ipynb",
                       as_version=4)
    cells = [nbformat.v4.new_code_cell(s) for s in sources]
    where = len(nb.cells) if at is None else at
    nb.cells[where:where] = cells
    return flagged(nb, chapters["01_definition"])


HONEST_HABITS = [
    # IPython's autoreload extension, as students load it
    ["%load_ext autoreload", "%autoreload 2"],
    ["%load_ext autoreload\n%autoreload"],
    ["%load_ext autoreload\n%autoreload 3", "%autoreload off"],
    # help, by every IPython spelling and by help()
    ["import numpy as np\nnp.einsum?"],
    ["import numpy as np\nnp.einsum??"],
    ["import numpy as np\n?np.einsum", "??np.linalg.norm"],
    ["%pinfo np.einsum", "%pinfo2 np.einsum"],
    ["import numpy as np\nhelp(np.einsum)"],
    ["import torch\ntorch.nn.functional.softmax?"],
    ["help(len)", "def mine():\n    pass\nhelp(mine)"],
    # printing to the standard streams
    ["import sys\nprint('tau =', 0.5, file=sys.stderr)"],
    ["import sys\nsys.stderr.write('checking\\n')\nsys.stderr.flush()"],
    ["import sys as system_module\n"
     "print('done', file=system_module.stdout, flush=True)"],
    # a cell with a syntax error: the kernel runs none of it
    ["def my_tempered_attention(Q, K, V, tau):\n"
     "    return Q @ K.T V"],
    ["x = [1, 2"],
    ["print('tau'"],
    ["for i in range(3)\n    print(i)"],
    ["np.einsum('ij,jk->ik', A, B"],
    ["result = attention(Q, K, V)\nresult[0.shape"],
    # which machine the notebook ran on
    ["import platform\n"
     "print(platform.system(), platform.machine(), platform.release())"],
    ["import platform\nprint(platform.python_version(), "
     "platform.python_implementation())"],
    ["from platform import system, python_version\n"
     "print(system(), python_version())"],
    # one-line cells that look like a magic's name but are Python
    ["history = [1, 2]"], ["import time\ntime.sleep(0)"],
    ["history = [1, 2]", "history"], ["def config():\n    pass", "config"],
]


@pytest.mark.parametrize("sources", HONEST_HABITS)
def test_honest_habits_are_not_for_review(built, sources):
    for at in (None, 3):                       # at the end, near the top
        found = solved_with(built, sources, at)
        assert not any(found.values()), {k: [f.quote() for f in v]
                                         for k, v in found.items() if v}


def test_a_broken_answer_cell_leaves_the_earlier_answer_judged(built):
    """A cell that retypes an answer with a syntax error never runs: the
    answer defined before it is the one graded, and it is not flagged."""
    found = solved_with(built, [
        "def my_tempered_attention(Q, K, V, tau):\n"
        "    return (Q @ K.T"])
    assert not found["ex-definition-tempered"]


@pytest.mark.parametrize("sources", [
    # other extensions, module names and reloading by name
    ["%load_ext storemagic"], ["%load_ext shadowmod"],
    ["%load_ext IPython.extensions.autoreload\n%autoreload 2"],
    ["%reload_ext autoreload"], ["%aimport selfattention.attention"],
    ["%load_ext autoreload\n%aimport numpy"],
    ["%autoreload 2 -p\nimport os"], ["%autoreload 2; x = 1"],
    ["%load_ext autoreload\nexec('x = 1')"],
    # help of anything but a plain dotted name, or of a flagged one
    ["x = [1]\nx[0]?"], ["%pinfo -n x"], ["import numpy as np\nnp.*sum*?"],
    ["%pinfo2 get_ipython"], ["import sys\nsys._getframe?"],
    ["import torch\ntorch._C?"], ["import sys\nsys.modules??"],
    ["%psearch np.*sum*"],
    ["help('selfattention_exercises')"], ["name = 'antigravity'\nhelp(name)"],
    ["def show(name):\n    help(name)"], ["help(f'{1}')"], ["help()"],
    ["import numpy as np\nhelp(np.einsum, 1)"],
    ["import numpy as np\nif True:\n    help(np.einsum)"],
    # the standard streams for anything but printing
    ["import sys\nerr = sys.stderr"], ["import sys\nsys.stderr.session"],
    ["import sys\nsys.stderr = open('x.txt', 'a')"],
    ["import sys\nsys.stdout.parent_header"],
    ["import sys\nw = sys.stderr.write"],
    ["from sys import stderr\nprint(1, file=stderr)"],
    ["import sys\nprint(sys.modules, file=sys.stderr)"],
    ["import sys\nsys.stderr.write(str(sys._getframe()))"],
    ["import sys\ndef show(print):\n    print(1, file=sys.stderr)"],
    ["import sys\nclass Log:\n    def print(self, file):\n"
     "        return file.session\n"
     "    print(None, file=sys.stderr)"],
    # cells that do not parse but that the kernel runs: a one-line cell
    # IPython's prefilter reads as a magic (automagic) or an autocall
    ["run shadow.py"], ["pip install shadowmod"], ["load_ext shadowmod"],
    ["reset -f"], ["cd /tmp"], ["ls -la"], ["autocall"], ["automagic"],
    ["exit 3"], ["logstart"], ["rehashx"],
    # ... or a bare magic's name that no earlier statement surely binds
    ["history"], ["for history in []:\n    pass", "history"],
    ["if False:\n    history = 1", "history"],
    ["history = 1", "del history", "history"],
    ["history = 1\ndef forget():\n    global history\n    del history",
     "history"],
    ["autocall = 1", "autocall", "exec 'x = 1'"],
    # ... or a bound name with an argument after it, which the magic would
    # run if the binding failed: a timing magic runs its argument as a
    # cell (%autocall, then "exec S" runs), store reads pickles
    ["timeit = 1 / 0", "timeit %autocall", "exec 'x = 1'"],
    ["time = 0", "try:\n    1 / 0\nexcept ZeroDivisionError as time:\n"
     "    pass", "time %autocall", "exec 'x = 1'"],
    ["time = 0", "time /f"], ["time = 0", "time ;f"],
    ["history = 1", "history -f /tmp/x.py"], ["store = 1", "store -r"],
    ["history = 1", "try:\n    1 / 0\nexcept ZeroDivisionError as "
     "history:\n    pass", "history"],
    ["autocall = int('x')", "autocall"], ["alias = 1", "alias"],
    # a safe magic whose code does not parse, beside code that runs
    ["%time def f(:\nx = eval('1')"],
    ["%%capture\ndef f(:"], ["%%time\nexec('1')\ndef f(:"],
    # a future import that changes what the kernel's compiler accepts
    ["from __future__ import barry_as_FLUFL",
     "x = eval('1') if 1 <> 2 else 0"],
    # platform functions that start a process or read files
    ["import platform\nplatform.processor()"],
    ["import platform\nplatform.uname()"],
    ["import platform\nplatform.platform()"],
    ["import platform as p\np.architecture()"],
    ["import platform\nplatform.libc_ver()"],
    ["import platform\nplatform.freedesktop_os_release()"],
    ["import platform\nplatform._syscmd_ver()"],
    ["from platform import uname"], ["from platform import architecture"],
    ["import platform\nf = platform.uname\nf()"],
    # IPython's shell reached inside a safe magic's code
    ["%time sh = get_ipython()"],
    ["%timeit -n 1 get_ipython().push({'exec': print})"],
    ["%%time\nget_ipython().user_global_ns"],
])
def test_near_misses_of_honest_habits_are_for_review(built, sources):
    found = solved_with(built, sources)
    assert found["ex-definition-tempered"], sources


def test_a_listed_reference_retyped_under_other_names_is_a_reference(built):
    """The library's attention with every name renamed, the answer calling
    it: a copy by its shape (a reference of a few statements at least)."""
    import ast
    import inspect
    import textwrap

    from selfattention import attention

    tree = ast.parse(textwrap.dedent(inspect.getsource(
        attention.attention))).body[0]
    source = (ast.unparse(retyped(tree)) + "\n\n" + TEMPERED +
              "my_attention(Q / tau[..., None], K, V)\n")
    found, _ = with_cell(built, source)
    first = found["ex-definition-tempered"][0]
    assert first.kind == "reference" and "attention.attention" in first.what
    assert first.text.startswith("def my_attention(")


def large_helpers():
    """(exercise, helper) for every helper of a judge long
    enough (FUZZY_STEPS statements) to be recognised with statements
    left out."""
    import ast
    import inspect
    import textwrap

    from selfattention_course.judges import answer_helpers
    from selfattention_course.review.likeness import FUZZY_STEPS, _steps

    found = []
    for _, pairs in judge_helper_routes():
        for label, dotted in pairs:
            fn = answer_helpers(EXERCISES[label].grading())[dotted]
            tree = ast.parse(textwrap.dedent(inspect.getsource(
                inspect.unwrap(fn)))).body[0]
            if len(_steps(tree)) >= FUZZY_STEPS:
                found.append((label, dotted))
    return found


@pytest.mark.slow                   # about 15 s: 29 helpers, 12 chapters
@pytest.mark.parametrize("label, dotted", large_helpers())
def test_a_large_helper_trimmed_and_reordered_is_a_copy(built, label,
                                                        dotted):
    """A judge's helper of many statements (6.4's ``_measured_shift``,
    10's ``bilinear_lookup``), every name renamed, one statement in five
    left out and the last two before its return swapped: still a copy of
    it (the shapes of most of its statements are there)."""
    import ast
    import inspect
    import textwrap

    from selfattention_course.judges import answer_helpers

    _, chapters = built
    stem = next(stem for stem, chapter in chapters.items()
                if any(e["label"] == label for e in chapter["exercises"]))
    answers = {e["label"]: e["answers"] for e in chapters[stem]["exercises"]}
    fn = answer_helpers(EXERCISES[label].grading())[dotted]
    tree = retyped(ast.parse(textwrap.dedent(inspect.getsource(
        inspect.unwrap(fn)))).body[0])
    body = [s for s in tree.body if not (isinstance(s, ast.Expr) and
                                         isinstance(s.value, ast.Constant))]
    kept = [s for i, s in enumerate(body[:-1]) if i % 5 != 4]
    kept[-2:] = kept[-2:][::-1]
    tree.body = kept + body[-1:]
    source = (ast.unparse(tree) + f"\n\ndef {answers[label][0]}"
              f"(*args, **kw):\n    return {tree.name}(*args, **kw)\n")
    found = with_cell_in(built, stem, source)[label]
    assert any(f.kind == "judge" and dotted in f.what for f in found), found

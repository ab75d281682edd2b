"""The hostile class of chapter 1: one added cell per way of gaming or
escaping the grader (:func:`routes`), and the answers that only look like
the book's or the judge's code. Graded end to end by
tests/e2e/test_hostile_grading.py; tests/unit/test_review.py reviews the
same cells without a sandbox and tests/e2e/test_gradescope.py grades some
of them in Gradescope's layout.
"""

import base64
import inspect
import platform
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "01_definition.ipynb"
LABELS = ["ex-definition-tempered", "ex-definition-limits",
          "ex-definition-moved", "ex-definition-noise"]
WRITTEN = ["ex-definition-tempered", "ex-definition-limits",
           "ex-definition-moved", "ex-definition-noise"]  # parts to be read
#: The exercises that give auto-points (the limits', the Predict's and the
#: noise Experiment's points are their written parts').
AUTO = ["ex-definition-tempered"]
ROWS = [row for label in LABELS for row in
        [label] + [f"{label} (written)"] * (label in WRITTEN)]
MARKER = "hostile-marker-7f3a"
SECRET = "SELFATTENTION_INSTRUCTOR_SECRET"      # set in the grader only
KEY = b"selfattention-instructor-key"           # in the grader's keyring
KEYCTL = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}.get(
    platform.machine())                          # add_key, request_key, keyctl


def _shown_attention_cell() -> str:
    """The cell in which chapter 1 shows the library's attention."""
    nb = nbformat.read(CHAPTER, as_version=4)
    return next(c.source for c in nb.cells if c.cell_type == "code" and
                c.source.startswith("# lib/selfattention/attention.py"))


SHOWN = _shown_attention_cell()
ENCODED = base64.b64encode(b"""
import selfattention.attention as A
my_tempered_attention = lambda Q, K, V, tau: A.attention(
    Q / tau[..., None], K, V)
""").decode()


def _judge_pasted() -> str:
    """The functions with which the judge of 1.1 computes its answer,
    pasted from the installed grader, and an answer that calls them."""
    from selfattention_course.judges import definition

    pasted = "\n".join(inspect.getsource(f) for f in (
        definition._scores, definition._tempered))
    return ("import math\nimport numpy as np\n"
            "from selfattention.attention import softmax\n" + pasted +
            "def my_tempered_attention(Q, K, V, tau):\n"
            "    A = _tempered(Q, K, tau[..., None], Q.shape[-1])\n"
            "    return A @ V, A\n")


JUDGE_PASTED = _judge_pasted()
#: The same helpers, kept where the answer reaches them only through an
#: object: a dict, an attribute, a registry a decorator fills.
JUDGE_HELPERS = JUDGE_PASTED.split("def my_tempered_attention")[0]
TEMPERED_BY = ("def my_tempered_attention(Q, K, V, tau):\n"
               "    A = {}(Q, K, tau[..., None], Q.shape[-1])\n"
               "    return A @ V, A\n")
#: The other answer of 1.1, found by bisection on the first: a route that
#: answers the first answers both.
BISECTION = """
import numpy as np
def temperatures_for(Q, K, p):
    lo, hi = np.full(p.shape, -30.0), np.full(p.shape, 30.0)
    for _ in range(100):
        mid = (lo + hi) / 2
        top = my_tempered_attention(Q, K, K, np.exp(mid))[1].max(axis=-1)
        lo, hi = np.where(top > p, mid, lo), np.where(top > p, hi, mid)
    return np.exp((lo + hi) / 2)
"""
#: The routes of the tripwire's gaps: every one of them is for review.
FOR_REVIEW_ROUTES = ["global-exec", "input-transformer", "profile-off",
                     "thread", "co-filename", "recompiled-source",
                     "shifted-shown-cell", "encoded-setup",
                     "private-helpers", "shortcut-sdpa", "shortcut-alias",
                     "computed-name", "judge-pasted", "judge-retyped",
                     "layer-attention", "fast-path", "judge-dict",
                     "judge-attribute", "judge-registry", "reference-dict",
                     "module-in-list", "torch-module-in-list",
                     "pydoc-locate", "torchscript-string", "sympy-exec",
                     "judge-reshaped", "reference-retyped"]


def routes(port: int, gradebook: Path) -> dict[str, str]:
    """One added cell per way of gaming or escaping the grader."""
    return {
        # Lines of "correct" in the results file the kernel's environment
        # names (and in every file any variable names), printed verdicts,
        # and lines written into other students' files under /tmp.
        "forge-files": f'''
import glob, json, os
labels = {LABELS!r}
lines = "".join(json.dumps({{"exercise": l, "status": "correct",
                             "message": "ok", "points": 1.0,
                             "max_points": 1.0}}) + "\\n" for l in labels)
paths = list(os.environ.values()) + ["/tmp/results.jsonl"]
paths += glob.glob("/tmp/**", recursive=True)
for path in paths:
    try:
        with open(path, "a") as out:
            out.write(lines)
    except Exception:
        pass
with open("/tmp/{MARKER}-shared", "w") as out:
    out.write("I was here")
for label in labels:
    print(f"[{{label}}] Correct: rows are non-negative")
''',
        # Feedback, the checks and the grading machinery replaced from a
        # cell, the name the check cells call rebound, and the checks
        # called again with the library's own functions.
        "patch-checks": '''
import selfattention_exercises.core as core
import selfattention_course.harvest as harvest
import selfattention_course.wire as wire
from selfattention.attention import attention as lib_attention
from selfattention.attention import softmax as lib_softmax
from selfattention_exercises import definition


def forged(self, answers, cases, places=None):
    outs = []
    for case in cases:
        if "tau" in case:
            outs.append({"output": lib_attention(case["Q"], case["K"],
                                                 case["V"])})
        elif "Q" in case:
            outs.append({"output": (lib_softmax(case["Q"]), case["V"])})
        else:
            outs.append({"output": (5, 7)})
    return {"outcomes": outs, "called": [], "tampered": False}


core.Exercise.attempt = forged
core.Exercise.assess = lambda self, result, cases: core.Feedback(
    self.label, "correct", "ok", self.points, self.points)
core.Tripwire.__enter__ = lambda self: self
core.Feedback.passed = property(lambda self: True)
harvest.harvest = lambda *args: None
wire.dump_result = lambda result: b""
checks.check_tempered_attention(lib_attention)
checks.check_limits(lambda Q, K, V: (V, V))
checks.check_moved(lambda query, shift: (5, 7))
checks.check_edge_weights(lambda noise, seed: (0.3, 0.2))
for name in ("check_tempered_attention", "check_limits", "check_moved",
             "check_edge_weights"):
    setattr(definition, name, lambda *a: print("Correct"))
checks = definition
''',
        # A check used as an oracle to find an answer by trial.
        "oracle": '''
import contextlib, io
for i in range(4):
    for j in range(4):
        guess = lambda Q, K, V, i=i, j=j: (V[[i] * len(Q)], V[[j] * len(Q)])
        seen = io.StringIO()
        with contextlib.redirect_stdout(seen):
            checks.check_limits(guess)
        if "Correct" in seen.getvalue() or \\
                checks.check_limits.feedback(guess).passed:
            my_limits = guess
''',
        # The answer is the library's own function: a copy of its code
        # taken before the original is replaced.
        "library-answers": '''
import types
import selfattention.attention as A
bare = A.attention.__wrapped__
my_tempered_attention = types.FunctionType(
    bare.__code__.replace(), bare.__globals__, "copy", bare.__defaults__)
A.softmax = lambda S: None
A.attention = lambda *a, **k: None
''',
        # The instructor's solution cells, read from the checkout, and the
        # installed package edited for this and later students. (Where a
        # chapter lies, not a walk of every file the sandbox shows: the
        # virtualenv's tens of thousands would outlast the cell's limit.)
        "instructor-files": f'''
import json, pathlib, selfattention, sys
places = [pathlib.Path(selfattention.__file__).resolve().parents[2],
          pathlib.Path.cwd(), pathlib.Path({str(ROOT)!r})]
for place in places:
    for path in place.glob("*/01_definition.ipynb"):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if "solution" in cell["metadata"].get("tags", []):
                exec("".join(cell["source"]))
checks = pathlib.Path(selfattention.__file__).resolve().parents[1] / \
    "selfattention_exercises"
targets = [checks / "core.py", checks / "edited.py",
           pathlib.Path({str(ROOT)!r}) / "chapters" / "{MARKER}.txt",
           pathlib.Path(sys.prefix) / "lib" / "python3.11" / "site-packages"
           / "sitecustomize.py"]
for target in targets:
    try:
        with open(target, "a") as out:
            out.write("# {MARKER}\\n")
    except OSError as err:
        print(type(err).__name__)
''',
        # A detached process that rewrites the gradebook after the run, and
        # the network, including a listener on the grader's loopback.
        "escape": f'''
import os, socket, sys, time
code = """
import time
time.sleep(1)
for _ in range(150):
    for path in [{str(gradebook / "gradebook.csv")!r}, "/tmp/{MARKER}"]:
        try:
            with open(path, "w") as out:
                out.write("student,chapter\\\\nx,1\\\\n")
        except OSError:
            pass
    time.sleep(0.2)
"""
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", code, "{MARKER}"])
    os._exit(0)
for host, port in [("127.0.0.1", {port}), ("10.0.2.2", 80), ("1.1.1.1", 53)]:
    try:
        socket.create_connection((host, port), timeout=2).sendall(b"hi")
        print("connected", host)
    except OSError as err:
        print(type(err).__name__)
print("uid", os.getuid(), "{SECRET}" in os.environ)
''',
        # Memory and file size, then processes.
        "resources": '''
try:
    hog = bytearray(16 * 2 ** 30)
except MemoryError:
    print("MemoryError")
with open("/tmp/big", "wb") as out:
    for _ in range(2048):
        out.write(b"x" * 2 ** 20)
''',
        "fork-bomb": '''
import os, time
children = []
try:
    for _ in range(400):
        pid = os.fork()
        if pid == 0:
            time.sleep(120)
            os._exit(0)
        children.append(pid)
except OSError as err:
    print("fork stopped after", len(children), type(err).__name__)
''',
        # 200 MB printed.
        "huge-output": '''
line = "x" * (2 ** 20 - 1)
for _ in range(200):
    print(line)
''',
        # An endless loop in a cell, and one in an answer.
        "endless-cell": '''
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)      # an interrupt does nothing
while True:
    pass
''',
        "endless-answer": '''
def my_tempered_attention(Q, K, V, tau):
    while True:
        pass
''',
        # The runner killed; its output forged; results planted in advance.
        # The runner is the sandbox's first process: these signals do not
        # reach it, and the notebook goes on to be graded.
        "kill-runner": '''
import os, signal
for sig in (signal.SIGKILL, signal.SIGSTOP):
    os.kill(os.getppid(), sig)
os.kill(-1, signal.SIGKILL)
''',
        "forge-channel": '''
import os
fake = b"selfattention-wire 1\\nreport 2\\n{}end\\n"
for path in [f"/proc/{os.getppid()}/fd/1", "/proc/1/fd/1"]:
    try:
        with open(path, "wb") as out:
            out.write(fake)
        print("wrote", path)
    except OSError as err:
        print(type(err).__name__)
os.write(1, fake)
for name in ("harvest", "harvest-0"):
    os.makedirs(f"/tmp/{name}", exist_ok=True)
    for i in range(3):
        with open(f"/tmp/{name}/{i}.bin", "wb") as out:
            out.write(fake)
''',
        # The answers are the copies of the library's functions that the
        # chapter shows on its page, and so defines in the notebook.
        "copies": '''
def my_tempered_attention(Q, K, V, tau):
    return attention(Q / tau[..., None], K, V)
def my_limits(Q, K, V):
    return softmax(Q @ K.T) @ V, V
''',
        # The hidden cases looked for before the harvest; a helper process
        # (detached) that answers with the library; a process started by an
        # answer while it runs.
        "early-look": '''
import glob, os, pickle, struct
import selfattention.attention as A
print("cases seen", len(glob.glob("/job/*cases*") + glob.glob("/tmp/**/*cases*",
                                                         recursive=True)))
ask_r, ask_w = os.pipe()
get_r, get_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.close(ask_w); os.close(get_r)
        inp, out = os.fdopen(ask_r, "rb"), os.fdopen(get_w, "wb")
        while True:
            Q, K, V, tau = pickle.loads(
                inp.read(struct.unpack("q", inp.read(8))[0]))
            data = pickle.dumps(A.attention(Q / tau[..., None], K, V))
            out.write(struct.pack("q", len(data)) + data)
            out.flush()
    os._exit(0)
os.close(ask_r); os.close(get_w)
ask, get = os.fdopen(ask_w, "wb"), os.fdopen(get_r, "rb")
def my_tempered_attention(Q, K, V, tau):
    try:
        data = pickle.dumps((Q, K, V, tau))
        ask.write(struct.pack("q", len(data)) + data)
        ask.flush()
        return pickle.loads(get.read(struct.unpack("q", get.read(8))[0]))
    except (OSError, struct.error):      # the helper is gone: fork one now
        r, w = os.pipe()
        if os.fork() == 0:
            os.write(w, pickle.dumps(A.attention(Q / tau[..., None], K, V)))
            os._exit(0)
        os.close(w)
        return pickle.loads(os.read(r, 1 << 20))
''',
        # A classmate graded at the same time starved of processor time.
        "cpu-hog": '''
import os, time
end = time.time() + 8
for _ in range(30):
    if os.fork() == 0:
        os.setsid()                  # each in a scheduling group of its own
        while time.time() < end:
            pass
        os._exit(0)
time.sleep(4)
''',
        # Outputs that slip under the limits or run in the instructor's
        # viewer: HTML, JavaScript, SVG, deep JSON, widget buffers.
        "rich-output": '''
from IPython.display import HTML, SVG, Javascript, display
from ipykernel.comm import Comm
display(HTML("<script>alert(1)</script><a href='https://x.example'>x</a>"))
display(Javascript("alert(2)"))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(3)'
            '</script></svg>'))
deep = [[[[[[[[["x" * 2 ** 20] * 4]]]]]]]]
for _ in range(6):
    display({"application/json": {"a": deep}}, raw=True)
for _ in range(4):
    Comm(target_name="jupyter.widget", buffers=[b"x" * 2 ** 23],
         data={"state": {}, "buffer_paths": [["a"]]})
''',
        # Text that a Markdown viewer would turn into links, HTML or
        # reversed text in the feedback, and text that UTF-8 cannot encode
        # (which once stopped the whole gradebook from being written).
        "feedback-text": '''
def my_tempered_attention(Q, K, V, tau):
    raise ValueError("see https://x.example/login, www.x.example, a@x.example"
                     " <b>bold</b> [link](https://x.example) \\u202ereversed"
                     " \\ud800")
def my_limits(Q, K, V):
    return ("www.x.example", "https://x.example\\udcff")
''',
        # Routes around a tripwire that lives in the student's process
        # (each gets 0: "for review" is decided from the source, in the
        # grader).
        # A global `exec` that the harvest's own call would resolve first.
        "global-exec": """
import builtins
from selfattention.attention import attention as lib_attention
_real_exec = builtins.exec
def exec(code, *namespaces):
    return _real_exec(code, *namespaces)
def my_tempered_attention(Q, K, V, tau):
    return lib_attention(Q / tau[..., None], K, V)
""",
        # An input transformer that rewrites every later cell (the
        # harvest's call included).
        "input-transformer": """
from selfattention import attention as sa
def rewrite(lines):
    return lines + ["my_tempered_attention = lambda Q, K, V, tau: "
                    "sa.attention(Q / tau[..., None], K, V)\\n"]
get_ipython().input_transformers_cleanup.append(rewrite)
""",
        # The profile hook switched off from inside the answer.
        "profile-off": """
import sys
import selfattention.attention as A
def my_tempered_attention(Q, K, V, tau):
    sys.setprofile(None)
    return A.attention(Q / tau[..., None], K, V)
""",
        # A thread started earlier answers with the library.
        "thread": """
import threading, queue
import selfattention.attention as A
jobs, done = queue.Queue(), queue.Queue()
def worker():
    while True:
        done.put(A.attention(*jobs.get()))
threading.Thread(target=worker, daemon=True).start()
def my_tempered_attention(Q, K, V, tau):
    jobs.put((Q / tau[..., None], K, V))
    return done.get()
""",
        # The library's code object with its file name replaced.
        "co-filename": """
import types
import selfattention.attention as A
bare = A.attention.__wrapped__
my_tempered_attention = types.FunctionType(
    bare.__code__.replace(co_filename="<mine>"), bare.__globals__)
""",
        # The library's source compiled again under another name.
        "recompiled-source": """
import inspect
import selfattention.attention as A
source = inspect.getsource(A.attention.__wrapped__).replace(
    "def attention", "def lib_copy")
namespace = dict(vars(A))
exec(compile(source, "<retyped>", "exec"), namespace)
def my_tempered_attention(Q, K, V, tau):
    return namespace["lib_copy"](Q / tau[..., None], K, V)
""",
        # The cell the chapter shows, pasted with a shifted first line.
        "shifted-shown-cell": SHOWN.replace(
            "# lib/selfattention/attention.py", "\n# my own attention")
        + """
def my_tempered_attention(Q, K, V, tau):
    return attention(Q / tau[..., None], K, V)
""",
        # A setup cell whose payload is encoded, run at grading time.
        "encoded-setup": f"""
import base64
exec(base64.b64decode({ENCODED!r}).decode())
""",
        # The checks' private helpers through the public core.call, the
        # judges of the grader imported, and assess as an oracle.
        "private-helpers": """
from selfattention_exercises import core
try:
    from selfattention_course.judges import definition as J
except ImportError as err:
    print("judges", type(err).__name__)
    J = None
def my_tempered_attention(Q, K, V, tau):
    A = core.call(J._tempered, Q, K, tau[..., None], Q.shape[-1])
    return A @ V, A
def my_limits(Q, K, V):
    for i in range(len(V)):
        guess = (V[[i] * len(Q)], V[[0] * len(Q)])
        fb = checks.check_limits.assess(
            {"outcomes": [{"output": guess}], "called": [],
             "tampered": False}, [{"Q": Q, "K": K, "V": V}])
        if fb.passed:
            return guess
    return V, V
""",
        # Shortcuts: PyTorch's fused attention with a per-query scale, the
        # library reached through an alias and a computed name.
        "shortcut-sdpa": """
import torch
import torch.nn.functional as F
def my_tempered_attention(Q, K, V, tau):
    q, k, v = (torch.from_numpy(a) for a in (Q, K, V))
    q = q / torch.from_numpy(tau)[..., None]
    Y = F.scaled_dot_product_attention(q, k, v)
    S = q @ k.transpose(-1, -2) / Q.shape[-1] ** 0.5
    return Y.numpy(), torch.softmax(S, -1).numpy()
""",
        "shortcut-alias": """
import selfattention as sa
tool = sa.attention.attention
def my_tempered_attention(Q, K, V, tau):
    return tool(Q / tau[..., None], K, V)
""",
        "computed-name": """
import selfattention.attention as A
def my_tempered_attention(Q, K, V, tau):
    return getattr(A, "atten" + "tion")(Q / tau[..., None], K, V)
""",
        # Made-up numbers for the experiment, and a prediction measured on
        # the moved copy instead of predicted.
        "invented-numbers": """
def edge_weights(noise, seed):
    return (0.357 - 0.5 * noise + (seed % 7) / 1000, 0.05 + 0.9 * noise)
def predict_moved(query, shift):
    img1, img2 = checks.moved_image(shift)
    X1, X2 = (patches.center(patches.patchify(im, 4)) for im in (img1, img2))
    S = X1 @ X2.T
    return divmod(int(S[query[0] * 8 + query[1]].argmax()), 8)
""",
        # A module written into the kernel's working folder, by a route the
        # review does not read (numpy's savetxt writes any text), then
        # imported: the kernel runs with PYTHONSAFEPATH, so it is not found.
        "cwd-module": """
import numpy as np
try:
    np.savetxt("shadowmod.py", [[0]], fmt="shadowed = True  # %d")
except OSError as err:
    print("cwd write", type(err).__name__)
try:
    import shadowmod
    print("cwd import", "found")
except ImportError:
    print("cwd import", "refused")
""",
        # The grader's own code pasted: the functions with which the judge
        # computes the answer (from the installed package, which every
        # student has), as they are and retyped under other names.
        "judge-pasted": JUDGE_PASTED,
        "judge-retyped": """
import math
import numpy as np
from selfattention.attention import softmax
def scores_of(q, k):
    return q @ np.swapaxes(k, -1, -2)
def weights(q, k, t, d):
    return softmax(scores_of(q, k) / (math.sqrt(d) * t))
def my_tempered_attention(Q, K, V, tau):
    A = weights(Q, K, tau[..., None], Q.shape[-1])
    return A @ V, A
""",
        # nn.MultiheadAttention reached as the attribute of a layer that
        # holds it, with identity projections, and through the layer's
        # fused fast path (eval, no grad) with one head.
        "layer-attention": """
import numpy as np
import torch
from torch import nn
def my_tempered_attention(Q, K, V, tau):
    d = Q.shape[-1]
    layer = nn.TransformerEncoderLayer(d, 1, batch_first=True,
                                       dtype=torch.float64)
    mha = layer.self_attn
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(d).repeat(3, 1))
        mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(torch.eye(d))
        mha.out_proj.bias.zero_()
    pad = np.zeros(V.shape[:-1] + (d,))
    pad[..., :V.shape[-1]] = V
    q = torch.tensor(Q / tau[..., None])
    Y, A = mha(q, torch.tensor(K), torch.tensor(pad),
               average_attn_weights=True)
    return Y.detach().numpy()[..., :V.shape[-1]], A.detach().numpy()
""",
        "fast-path": """
import numpy as np
import torch
def my_tempered_attention(Q, K, V, tau):
    d = Q.shape[-1]
    block = torch.nn.TransformerEncoderLayer(
        d, nhead=1, dim_feedforward=1, dropout=0.0, batch_first=True,
        dtype=torch.float64).eval()
    with torch.no_grad():
        out = block(torch.tensor(Q / tau[..., None]))
    A = np.ones(Q.shape[:-1] + K.shape[1:2]) / K.shape[1]
    return out.numpy()[..., :V.shape[-1]], A
""",
        # The judge's helpers pasted, reached only through a dict, an
        # attribute of an object, a registry filled by a decorator.
        "judge-dict": JUDGE_HELPERS + 'H = {}\nH["t"] = _tempered\n' +
        TEMPERED_BY.format('H["t"]') + BISECTION,
        "judge-attribute": JUDGE_HELPERS + "class Box:\n    pass\n"
        "box = Box()\nbox.t = _tempered\n" + TEMPERED_BY.format("box.t") +
        BISECTION,
        "judge-registry": "REG = {}\ndef reg(f):\n    REG[f.__name__] = f\n"
        "    return f\n" + JUDGE_HELPERS.replace("def _", "@reg\ndef _") +
        TEMPERED_BY.format('REG["_tempered"]') + BISECTION,
        # The library's attention kept in a dict, reached through a list
        # holding its module, nn.MultiheadAttention through a list holding
        # torch.nn, and found by pydoc from a string.
        "reference-dict": """
import selfattention.attention as sa
R = {}
R["a"] = sa.attention
def my_tempered_attention(Q, K, V, tau):
    return R["a"](Q / tau[..., None], K, V)
""" + BISECTION,
        "module-in-list": """
import selfattention.attention as sa
def my_tempered_attention(Q, K, V, tau):
    return [sa][0].attention(Q / tau[..., None], K, V)
""" + BISECTION,
        "torch-module-in-list": """
import numpy as np, torch
def my_tempered_attention(Q, K, V, tau):
    B, n, d = Q.shape
    mha = [torch.nn][0].MultiheadAttention(d, 1, bias=False,
                                           batch_first=True,
                                           dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(d).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(d))
    _, a = mha(torch.tensor(Q / tau[..., None]), torch.tensor(K),
               torch.tensor(K))
    A = a.detach().numpy()
    return A @ V, A
""" + BISECTION,
        "pydoc-locate": """
import pydoc
att = pydoc.locate("selfattention.attention." + "attention")
def my_tempered_attention(Q, K, V, tau):
    return att(Q / tau[..., None], K, V)
""" + BISECTION,
        # PyTorch's fused attention compiled from a string by TorchScript
        # (the weights as its output for the identity as values), and the
        # library's attention run by an exec that sympy's parser calls,
        # then the tripwire's record cleared from the harvest's frames.
        "torchscript-string": '''
import numpy as np, torch
cu = torch.jit.CompilationUnit("""
def f(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)
""")
def my_tempered_attention(Q, K, V, tau):
    q, k = torch.tensor(Q / tau[..., None]), torch.tensor(K)
    eye = torch.eye(K.shape[-2], dtype=q.dtype).expand(K.shape[0], -1, -1)
    A = cu.f(q, k, eye).numpy()
    return A @ V, A
''' + BISECTION,
        "sympy-exec": """
from sympy.parsing.sympy_parser import parse_expr
SRC = '''
import sys
import selfattention.attention as sa
def cloak():
    f = sys._getframe(1)
    while f is not None:
        w = f.f_locals.get("wire")
        if w is not None and hasattr(w, "called"):
            w.called.clear()
        f = f.f_back
def my_tempered_attention(Q, K, V, tau):
    out = sa.attention(Q / tau[..., None], K, V)
    cloak()
    return out
'''
G = {}
parse_expr("exec(s, g)", local_dict={"s": SRC, "g": G}, transformations=())
my_tempered_attention = G["my_tempered_attention"]
""" + BISECTION,
        # The judge's helpers reshaped (one statement merged into another,
        # one a lambda), and the library's attention retyped with every
        # name changed.
        "judge-reshaped": """
import math
import numpy as np
from selfattention.attention import softmax
def tempered(q, k, t, d):
    z = q @ np.swapaxes(k, -1, -2) / (math.sqrt(d) * t)
    return softmax(z)
largest = lambda q, k, t: tempered(q, k, t[..., None], q.shape[-1]).max(
    axis=-1)
def my_tempered_attention(Q, K, V, tau):
    A = tempered(Q, K, tau[..., None], Q.shape[-1])
    return A @ V, A
def temperatures_for(Q, K, p):
    lo, hi = np.full(p.shape, -30.0), np.full(p.shape, 30.0)
    for _ in range(100):
        mid = (lo + hi) / 2
        top = largest(Q, K, np.exp(mid))
        lo, hi = np.where(top > p, mid, lo), np.where(top > p, hi, mid)
    return np.exp((lo + hi) / 2)
""",
        "reference-retyped": """
import math
import numpy as np
from selfattention.attention import softmax
def attn(q, k, v, mask=None, bias=None, scale=None):
    if scale is None:
        scale = 1 / math.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale
    if bias is not None:
        s = s + bias
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    a = softmax(s)
    return a @ v, a
def my_tempered_attention(Q, K, V, tau):
    return attn(Q / tau[..., None], K, V)
""" + BISECTION,
        # The instructor's session keyring, inherited by every process.
        "keyring": f'''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
found = libc.syscall({(KEYCTL or (0, 0, 0))[1]}, b"user", {KEY!r}, None, 0)
buffer = ctypes.create_string_buffer(256)
size = libc.syscall({(KEYCTL or (0, 0, 0))[2]}, 11, found, buffer, 256)
print("key", found, buffer.raw[:max(size, 0)])
''',
    }

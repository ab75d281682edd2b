"""The checks of chapter 3's exercises accept right answers, on public and
hidden cases, and explain wrong ones."""

import numpy as np
import pytest

from exercise_answers import expect, hidden
from selfattention_exercises import multihead as checks

torch = pytest.importorskip("torch")


# ----------------------------------------------------------- 3.1 grouped
def grouped(d, h, g, n, m):
    kv = g * (d // h)
    return (2 * d * d + 2 * d * kv,
            2 * n * d * d + 2 * m * d * kv + 2 * n * m * d,
            2 * m * kv)


def grouped_layer(d, h, g, n, m):
    """A layer with grouped keys and values, built in PyTorch: its weights,
    its multiply-adds (FlopCounterMode) and the keys and values it keeps."""
    from torch.utils.flop_counter import FlopCounterMode

    w = d // h
    proj = torch.nn.ModuleDict({
        "q": torch.nn.Linear(d, d, bias=False),
        "k": torch.nn.Linear(d, g * w, bias=False),
        "v": torch.nn.Linear(d, g * w, bias=False),
        "o": torch.nn.Linear(d, d, bias=False)})
    x, c = torch.randn(n, d), torch.randn(m, d)
    with torch.no_grad(), FlopCounterMode(display=False) as flops:
        q = proj["q"](x).reshape(n, h, w).transpose(0, 1)   # (h, n, w)
        k = proj["k"](c).reshape(m, g, w).transpose(0, 1)   # (g, m, w)
        v = proj["v"](c).reshape(m, g, w).transpose(0, 1)
        group = torch.arange(h) * g // h                    # query head's KV
        A = torch.softmax(q @ k[group].transpose(1, 2) / w ** 0.5, -1)
        y = proj["o"]((A @ v[group]).transpose(0, 1).reshape(n, d))
    assert y.shape == (n, d)
    return (sum(p.numel() for p in proj.parameters()),
            flops.get_total_flops() // 2, k.numel() + v.numel())


@pytest.mark.parametrize("d, h, g, n, m", [(16, 4, 1, 64, 64),
                                           (64, 8, 4, 10, 7),
                                           (96, 12, 3, 1, 50),
                                           (48, 4, 4, 5, 9)])
def test_grouped_formulas_count_what_a_built_layer_holds(d, h, g, n, m):
    assert grouped(d, h, g, n, m) == grouped_layer(d, h, g, n, m)


def test_grouped_with_as_many_key_heads_as_query_heads_is_multi_head():
    for d, h, n in [(16, 4, 64), (64, 8, 10)]:
        mha = torch.nn.MultiheadAttention(d, h, bias=False)
        assert grouped(d, h, h, n, n)[0] == sum(
            p.numel() for p in mha.parameters())


def test_grouped_check_accepts_the_formulas_on_hidden_cases():
    expect(checks.check_grouped.feedback(grouped), "correct")
    hidden(checks.check_grouped, grouped)


def test_grouped_cases_share_keys_between_query_heads():
    for seed in range(30):
        for case in checks.check_grouped.draw(np.random.default_rng(seed)):
            assert case["d"] % case["h"] == 0 and case["h"] % case["g"] == 0
            assert case["g"] < case["h"]


def changed(which, value):
    """The right triple with one count replaced by value(d, h, g, n, m)."""
    def answer(d, h, g, n, m):
        out = list(grouped(d, h, g, n, m))
        out[which] = value(d, h, g, n, m)
        return tuple(out)
    return answer


def kv(d, h, g):
    return g * (d // h)


@pytest.mark.parametrize("answer, status, code", [
    (None, "not done", "not-done"),
    (lambda *a: None, "not done", "not-done"),
    # built in PyTorch and counted with FlopCounterMode, a reference
    (grouped_layer, "for review", "for-review"),
    (lambda d, h, g, n, m: grouped(d, h, g, n, m)[:2], "wrong",
     "not-a-triple"),
    (lambda d, h, g, n, m: (0.5, 1, 2), "wrong", "not-a-triple"),
    # parameters
    (changed(0, lambda d, h, g, n, m: 4 * d * d), "wrong", "kv-not-shared"),
    (changed(0, lambda d, h, g, n, m: 2 * d * d + 2 * d * (d // h)),
     "wrong", "one-kv-head"),
    (changed(0, lambda d, h, g, n, m: 2 * d * d + 2 * d * (h // g)
             * (d // h)), "wrong", "groups-inverted"),
    (changed(0, lambda d, h, g, n, m: d * d + 2 * d * kv(d, h, g)),
     "wrong", "output-projection-missing"),
    (changed(0, lambda d, h, g, n, m: 2 * d * d + d * kv(d, h, g)),
     "wrong", "one-of-k-v-missing"),
    (changed(0, lambda d, h, g, n, m: grouped(d, h, g, n, m)[0] + 1),
     "wrong", "not-the-params"),
    # multiply-adds
    (changed(1, lambda d, h, g, n, m: 2 * n * d * d + 2 * m * d * kv(d, h, g)
             + 2 * n * m * d * g // h), "wrong", "products-shared"),
    (changed(1, lambda d, h, g, n, m: 2 * n * d * d + 2 * n * d * kv(d, h, g)
             + 2 * n * m * d), "wrong", "keys-per-query"),
    (changed(1, lambda d, h, g, n, m: 2 * n * d * d + 2 * m * d * d
             + 2 * n * m * d), "wrong", "kv-not-shared"),
    (changed(1, lambda d, h, g, n, m: 2 * n * d * d + 2 * m * d * (d // h)
             + 2 * n * m * d), "wrong", "one-kv-head"),
    (changed(1, lambda d, h, g, n, m: 2 * n * d * d + 2 * m * d * (h // g)
             * (d // h) + 2 * n * m * d), "wrong", "groups-inverted"),
    (changed(1, lambda d, h, g, n, m: 2 * grouped(d, h, g, n, m)[1]),
     "wrong", "macs-doubled"),
    (changed(1, lambda d, h, g, n, m: 2 * n * m * d), "wrong",
     "projections-missing"),
    (changed(1, lambda d, h, g, n, m: 2 * n * d * d
             + 2 * m * d * kv(d, h, g)), "wrong", "products-missing"),
    (changed(1, lambda d, h, g, n, m: grouped(d, h, g, n, m)[1] - n * m * d),
     "wrong", "one-product-counted"),
    (changed(1, lambda d, h, g, n, m: grouped(d, h, g, n, m)[1] - n * d * d),
     "wrong", "output-projection-missing"),
    (changed(1, lambda d, h, g, n, m: grouped(d, h, g, n, m)[1] + 1),
     "wrong", "not-the-macs"),
    # cached keys and values
    (changed(2, lambda d, h, g, n, m: 2 * m * d), "wrong", "kv-not-shared"),
    (changed(2, lambda d, h, g, n, m: 2 * m * (d // h)), "wrong",
     "one-kv-head"),
    (changed(2, lambda d, h, g, n, m: 2 * m * (h // g) * (d // h)), "wrong",
     "groups-inverted"),
    (changed(2, lambda d, h, g, n, m: m * kv(d, h, g)), "wrong",
     "cache-keys-only"),
    (changed(2, lambda d, h, g, n, m: 2 * n * kv(d, h, g)), "wrong",
     "cache-per-query"),
    (changed(2, lambda d, h, g, n, m: 8 * m * kv(d, h, g)), "wrong",
     "cache-in-bytes"),
    (changed(2, lambda d, h, g, n, m: 2 * m * kv(d, h, g) + 1), "wrong",
     "not-the-cache"),
])
def test_grouped_check_names_the_problem(answer, status, code):
    expect(checks.check_grouped.feedback(answer), status, code)


# ------------------------------------------------------- 3.2 equivalent
def equivalent(W_q, W_k, W_v, W_o, h, order, G, keys="inv_T", out="inv",
               rows=True):
    w = W_q.shape[1] // h
    G_inv = np.linalg.inv(G)
    on_keys = {"inv_T": G_inv.transpose(0, 2, 1), "inv": G_inv,
               "same": np.stack([np.eye(w)] * h)}[keys]
    on_out = {"inv": G_inv, "inv_T": G_inv.transpose(0, 2, 1),
              "same": np.stack([np.eye(w)] * h)}[out]
    blocks = [slice(i * w, (i + 1) * w) for i in order]
    kept = [slice(i * w, (i + 1) * w) for i in range(h)]
    return (np.hstack([W_q[:, b] @ g for b, g in zip(blocks, G)]),
            np.hstack([W_k[:, b] @ g for b, g in zip(blocks, on_keys)]),
            np.hstack([W_v[:, b] @ g for b, g in zip(blocks, G)]),
            np.vstack([g @ W_o[b] for b, g in
                       zip(blocks if rows else kept, on_out)]))


def inverse_order(W_q, W_k, W_v, W_o, h, order, G):
    return equivalent(W_q, W_k, W_v, W_o, h, np.argsort(order), G)


def test_equivalent_check_accepts_the_construction_on_hidden_cases():
    expect(checks.check_equivalent.feedback(equivalent), "correct")
    hidden(checks.check_equivalent, equivalent)


def equivalent_by_einsum(W_q, W_k, W_v, W_o, h, order, G):
    """The same construction written another way (per-head tensors,
    einsum, a solve for the inverse): rounding differs, the answer not."""
    d, w = W_q.shape[0], W_q.shape[1] // h
    heads = [W.reshape(d, h, w)[:, order] for W in (W_q, W_k, W_v)]
    q, k, v = (np.einsum("dhw,hwu->dhu", Z, M) for Z, M in zip(
        heads, (G, np.linalg.solve(G, np.eye(w)).transpose(0, 2, 1), G)))
    o = np.linalg.solve(G, W_o.reshape(h, w, -1)[order])
    return (q.reshape(d, -1), k.reshape(d, -1), v.reshape(d, -1),
            o.reshape(h * w, -1))


def test_equivalent_check_accepts_another_writing_of_it():
    expect(checks.check_equivalent.feedback(equivalent_by_einsum), "correct")
    hidden(checks.check_equivalent, equivalent_by_einsum)


@pytest.mark.parametrize("answer, status, code", [
    (None, "not done", "not-done"),
    (lambda *a: None, "not done", "not-done"),
    (lambda W_q, W_k, W_v, W_o, h, o, G: (W_q, W_k, W_v), "wrong",
     "type"),
    (lambda W_q, W_k, W_v, W_o, h, o, G: (W_q, W_k, W_v, W_o[:, :1]),
     "wrong", "shape"),
    (lambda W_q, W_k, W_v, W_o, h, o, G: (W_q, W_k, W_v, W_o), "wrong",
     "heads-not-reordered"),
    (inverse_order, "wrong", "heads-inverse-order"),
    (lambda *a: equivalent(*a, keys="same"), "wrong", "keys-unchanged"),
    (lambda *a: equivalent(*a, keys="inv"), "wrong", "keys-inverse"),
    (lambda *a: equivalent(*a, rows=False), "wrong", "output-rows-stay"),
    (lambda *a: equivalent(*a, out="same"), "wrong", "output-rows-unchanged"),
    (lambda *a: equivalent(*a, out="inv_T"), "wrong",
     "output-rows-transposed"),
    (lambda *a: tuple(np.full_like(W, np.nan) for W in a[:4]), "wrong",
     "not-finite"),
    (lambda *a: (2 * equivalent(*a)[0],) + equivalent(*a)[1:], "wrong",
     "maps-change"),
    (lambda *a: equivalent(*a)[:3] + (2 * equivalent(*a)[3],), "wrong",
     "outputs-change"),
    # the heads reordered, no basis changed: the same maps and outputs
    (lambda W_q, W_k, W_v, W_o, h, order, G: equivalent(
        W_q, W_k, W_v, W_o, h, order, np.stack([np.eye(W_q.shape[1] // h)]
                                               * h)), "wrong",
     "basis-unchanged"),
    # queries and keys changed, values left in their old basis
    (lambda *a: equivalent(*a)[:2] + equivalent(
        *a[:6], np.stack([np.eye(a[0].shape[1] // a[4])] * a[4]))[2:],
     "wrong", "basis-unchanged"),
])
def test_equivalent_check_names_the_problem(answer, status, code):
    expect(checks.check_equivalent.feedback(answer), status, code)


# ------------------------------------------------------------ 3.3 heads
def test_retrieval_task_puts_both_payloads_in_the_target():
    X, target = checks.retrieval_task(np.random.default_rng(0), 50)
    assert X.shape == (50, 8, 8) and target.shape == (50, 8)
    colours = X[..., :4].argmax(-1)
    assert (colours[:, 0] == 0).all()
    for c, part in ((1, slice(0, 4)), (2, slice(4, 8))):
        assert ((colours == c).sum(1) == 1).all()
        where = (colours == c).argmax(1)
        assert np.array_equal(X[np.arange(50), where, 4:], target[:, part])


def trained_error(h, seed):
    """The solution's experiment: 200 Adam steps on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        layer = torch.nn.MultiheadAttention(8, h, batch_first=True)
        opt = torch.optim.Adam(layer.parameters(), lr=0.03)
        for _ in range(200):
            X, target = (torch.from_numpy(a).float()
                         for a in checks.retrieval_task(rng, 64))
            Y, _ = layer(X[:, :1], X, X, need_weights=False)
            loss = ((Y[:, 0] - target) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        X, target = (torch.from_numpy(a).float()
                     for a in checks.retrieval_task(rng, 1000))
        with torch.no_grad():
            Y, _ = layer(X[:, :1], X, X, need_weights=False)
        return float(((Y[:, 0] - target) ** 2).sum() / (target ** 2).sum())
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_heads_check_accepts_a_real_experiment():
    expect(checks.check_heads.feedback(trained_error), "correct")


def fake(one, many):
    return lambda h, seed: one if h == 1 else many


@pytest.mark.parametrize("answer, status, code", [
    (fake(0.38, 0.0), "correct", None),
    (None, "not done", "not-done"),
    (lambda h, seed: None, "not done", "not-done"),
    (fake("low", 0.0), "wrong", "not-a-number"),
    (fake([0.4, 0.4], 0.0), "wrong", "not-a-number"),
    (fake(float("nan"), 0.0), "wrong", "not-an-error"),
    (fake(-0.1, 0.0), "wrong", "not-an-error"),
    (fake(40.0, 0.0), "wrong", "error-not-relative"),
    (fake(0.01, 0.0), "wrong", "one-head-too-good"),
    (fake(0.38, 0.38), "wrong", "heads-not-trained"),
])
def test_heads_check_names_the_problem(answer, status, code):
    expect(checks.check_heads.feedback(answer), status, code)

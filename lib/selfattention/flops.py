"""FLOPs counted on real PyTorch modules (chapter 8).

Cost formulas such as Swin's :math:`\\Omega` (see :mod:`selfattention.cost`)
are a model; a framework executes operators. :func:`count_flops` runs a
call under PyTorch's ``torch.utils.flop_counter.FlopCounterMode``, which
watches every operator the call dispatches and adds up a count for those it
has a formula for, chiefly matrix products. Two conventions to keep in mind:

* a product of an ``(m, k)`` by a ``(k, n)`` matrix counts ``2·m·k·n``
  FLOPs, **two per multiply-add**, so the count is twice a formula in
  multiply-adds;
* operators without a formula (elementwise work, the softmax, and fused
  attention kernels) count nothing. Run the call on the ``meta`` device,
  where tensors have shapes but no data, to count the reference path of
  every operator without computing anything.
"""

from __future__ import annotations

from ._validate import boundary, function

__all__ = ["count_flops"]


@boundary(fn=function(), runs_user_code=True)
def count_flops(fn, *args, **kwargs):
    """FLOPs per operator recorded while ``fn(*args, **kwargs)`` runs.

    Parameters
    ----------
    fn : callable
        A ``torch.nn.Module`` or any function of tensors, for example a
        ``torch.nn.MultiheadAttention`` called as ``fn(x, x, x)`` with ``x``
        of shape (B, n, C).
    *args, **kwargs
        Passed to ``fn``.

    Returns
    -------
    flops : dict of str to int
        ``{"aten.mm": ..., "aten.bmm": ...}``: the operator's name and its
        FLOPs, two per multiply-add; ``sum(flops.values())`` is the total.
        Operators the counter has no formula for are absent.
    """
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn(*args, **kwargs)
    counts = counter.get_flop_counts().get("Global", {})  # absent: none
    return {str(op): int(f) for op, f in counts.items()}

"""FLOPs counted on real PyTorch modules (chapter 8).

``torch.utils.flop_counter.FlopCounterMode`` counts two FLOPs per
multiply-add of the operators it has a formula for (chiefly matrix
products); elementwise work, the softmax and fused attention kernels count
nothing. On the ``meta`` device nothing is computed.
"""

from __future__ import annotations

from ._validate import boundary, function

__all__ = ["count_flops"]


@boundary(fn=function(), runs_user_code=True)
def count_flops(fn, *args, **kwargs):
    """FLOPs per operator recorded while ``fn(*args, **kwargs)`` runs.

    ``fn`` is a ``torch.nn.Module`` or any function of tensors. Returns
    ``{"aten.mm": ..., "aten.bmm": ...}``, two FLOPs per multiply-add;
    operators without a formula are absent.
    """
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn(*args, **kwargs)
    counts = counter.get_flop_counts().get("Global", {})  # absent: none
    return {str(op): int(f) for op, f in counts.items()}

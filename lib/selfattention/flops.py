"""FLOPs counted on real PyTorch modules (:ref:`ch-windows`)."""

from ._validate import boundary, function

__all__ = ["count_flops"]


@boundary(fn=function(), runs_user_code=True)
def count_flops(fn, *args, **kwargs):
    """FLOPs per operator recorded while ``fn(*args, **kwargs)`` runs: PyTorch's
    ``FlopCounterMode`` counts two per multiply-add of the operators it has a
    formula for; elementwise work, the softmax and fused kernels count nothing
    (:ref:`ch-windows`)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn(*args, **kwargs)
    counts = counter.get_flop_counts().get("Global", {})  # absent: none
    return {str(op): int(f) for op, f in counts.items()}

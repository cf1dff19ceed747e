"""Gradients through gridshard's spatial reductions and halo exchange, for torch tensors that require grad.

Every reduction is a function of a few global sums of per-point terms, ``value = F(S_1, ..., S_k)``, with ``S_j =
sum over the grid of t_j(x)`` (a weighted sum, the total weight, the sum of squared deviations, ...). The forward
pass gives the library's value (exact, the same bits on every mesh) and the global sums it needs, both from one
library call (one allreduce); the backward pass forms ``c_j = g dF/dS_j`` from those sums (the same numbers on every
rank of the spatial group) and then the gradient of ``sum_j c_j s_j(x)`` over this rank's own points, ``s_j`` the
local part of ``S_j``: so each rank gets the gradient of the global loss with respect to its own shard, with no
communication (the result is replicated on the spatial group, so the gradient of a sum is local), and per point the
same arithmetic whatever the mesh: gradients of the exact reductions are the same bits on every layout. Terms that
read neighbours (the gradient magnitude) have their backward from the library's adjoint kernel, which exchanges
halos: those reductions communicate in the backward pass too, where they must; so does ``halo_exchange``, whose
backward is the adjoint exchange.

Weights are constants (no gradient flows to them). torch is imported only when a tensor is given.
"""

import contextlib
import sys
import threading

_STATE = threading.local()


# The phase of a library call, in the two lowest bits of its signature (python/src/python_mesh.hpp): a plain call, the
# forward of a differentiated one, or a backward pass that communicates. Ranks in different phases raise on every
# rank, with a message that names gradients, instead of leaving each other out of step.
PLAIN, DIFFERENTIATED, BACKWARD = 0, 1, 2


@contextlib.contextmanager
def _phase(phase):
    previous = getattr(_STATE, "phase", PLAIN)
    _STATE.phase = phase
    try:
        yield
    finally:
        _STATE.phase = previous


def _grad_call():
    """Marks the library calls a differentiated reduction makes in its forward pass."""
    return _phase(DIFFERENTIATED)


def backward_call():
    """Marks the library calls a backward pass makes (those that communicate)."""
    return _phase(BACKWARD)


def call_phase():
    """The phase of the current library call: PLAIN, DIFFERENTIATED or BACKWARD."""
    return getattr(_STATE, "phase", PLAIN)


def _torch():
    return sys.modules.get("torch")


def wanted(*values):
    """Whether any of ``values`` is a torch tensor that requires grad while grad is enabled."""
    torch = _torch()
    if torch is None or not torch.is_grad_enabled():
        return False
    return any(isinstance(v, torch.Tensor) and v.requires_grad for v in values)


class Rule:
    """One reduction's gradient: ``forward(*inputs)`` the library's value (a tensor of the leading shape, or that shape
    with ``(1, 1)`` after it) and the global sums (float64 tensors, each of the leading shape or broadcastable to
    it), both from one library call; ``finalize(*sums)`` the value as a torch expression of the sums,
    ``local(*inputs)`` this rank's parts of the sums as torch expressions of its inputs (None for a sum that does
    not depend on them). ``inputs`` are what the method took (tensors, or None); ``grad_of`` the positions of those
    that may need a gradient. A rule whose terms read neighbours gives ``local_grads(coefficients, inputs, needs)``
    instead of ``local``: the gradients of ``sum_j c_j s_j`` itself (formed in its forward pass, so that the
    backward makes no collective). A rule whose value is replicated over a group smaller than the spatial one (a
    zonal mean, over the lon group) gives ``combine_upstream(grad)``: the sum of the replicas' upstream gradients
    (collective)."""

    grad_of = (0,)

    def forward(self, *inputs):
        raise NotImplementedError

    def finalize(self, *sums):
        raise NotImplementedError

    def local(self, *inputs):
        raise NotImplementedError


def _make_reduction():
    torch = _torch()

    class Reduction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, rule, *inputs):
            with _grad_call():
                value, sums = rule.forward(*inputs)
                ctx.sums = [s.detach() for s in sums]
            ctx.rule = rule
            ctx.shape = value.shape
            ctx.save_for_backward(*[x if isinstance(x, torch.Tensor) else None for x in inputs])
            ctx.others = [None if isinstance(x, torch.Tensor) else x for x in inputs]
            return value

        @staticmethod
        def backward(ctx, grad):
            rule = ctx.rule
            saved = ctx.saved_tensors
            inputs = [s if s is not None else o for s, o in zip(saved, ctx.others)]
            needs = [k for k in rule.grad_of if ctx.needs_input_grad[1 + k]]
            grads = [None] * len(inputs)
            if not needs:
                return (None, *grads)
            if hasattr(rule, "combine_upstream"):
                with backward_call():
                    grad = rule.combine_upstream(grad)
            with torch.enable_grad():
                sums = [s.clone().requires_grad_(True) for s in ctx.sums]
                out = rule.finalize(*sums)
                g = grad.reshape(out.shape).to(out.dtype)
                coefficients = torch.autograd.grad(out, sums, g, allow_unused=True)
            if hasattr(rule, "local_grads"):
                for k, gk in zip(needs, rule.local_grads(coefficients, inputs, needs)):
                    grads[k] = gk
                return (None, *grads)
            with torch.enable_grad():
                leaves = [x.detach() if isinstance(x, torch.Tensor) else x for x in inputs]
                for k in needs:
                    leaves[k] = leaves[k].requires_grad_(True)
                parts = rule.local(*leaves)
                total = None
                for c, part in zip(coefficients, parts):
                    if c is None or part is None or not part.requires_grad:
                        continue
                    term = (c.detach().to(part.device) * part.to(torch.float64)).sum()
                    total = term if total is None else total + term
                if total is not None:
                    found = torch.autograd.grad(total, [leaves[k] for k in needs], allow_unused=True)
                    for k, gk in zip(needs, found):
                        grads[k] = gk if gk is not None else torch.zeros_like(inputs[k])
                else:
                    for k in needs:
                        grads[k] = torch.zeros_like(inputs[k])
            return (None, *grads)

    return Reduction


def _make_identity_reduction():
    torch = _torch()

    class IdentityBackward(torch.autograd.Function):
        """A spatial all-reduce whose backward passes the gradient through (ACE's _AutogradAllReduce): the result is
        the same on every rank of the group, so each rank's gradient of its own copy of the loss is its input's."""

        @staticmethod
        def forward(ctx, reduce, tensor):
            with _grad_call():
                return reduce(tensor.detach())

        @staticmethod
        def backward(ctx, grad):
            return None, grad

    return IdentityBackward


def _make_elementwise():
    torch = _torch()

    class Elementwise(torch.autograd.Function):
        """A map of the shard whose forward is the library's (``value``) and whose backward is the library's adjoint
        of it (``adjoint(tensor, grad)``, which may communicate: a halo exchange)."""

        @staticmethod
        def forward(ctx, value, adjoint, tensor):
            ctx.adjoint = adjoint
            ctx.save_for_backward(tensor)
            with _grad_call():
                return value(tensor.detach())

        @staticmethod
        def backward(ctx, grad):
            (tensor,) = ctx.saved_tensors
            with backward_call():
                return None, None, ctx.adjoint(tensor.detach(), grad.detach())

    return Elementwise


def _make_halo():
    torch = _torch()

    class Halo(torch.autograd.Function):
        """The padded halo exchange; its backward is the adjoint exchange (each halo cell's gradient added into the
        rank that owns the cell)."""

        @staticmethod
        def forward(ctx, exchange, adjoint, tensor):
            ctx.adjoint = adjoint
            with _grad_call():
                return exchange(tensor.detach())

        @staticmethod
        def backward(ctx, grad):
            with backward_call():
                return None, None, ctx.adjoint(grad.detach().contiguous())

    return Halo


_FUNCTIONS = {}


def _function(name, make):
    if name not in _FUNCTIONS:
        _FUNCTIONS[name] = make()
    return _FUNCTIONS[name]


def reduce(rule, *inputs):
    """``rule.forward(*inputs)``'s value, with the gradient the rule describes."""
    return _function("reduction", _make_reduction).apply(rule, *inputs)


def identity_reduce(reduce_detached, tensor):
    """``reduce_detached(tensor)``, an all-reduce whose backward is the identity."""
    return _function("identity", _make_identity_reduction).apply(reduce_detached, tensor)


def elementwise(value, adjoint, tensor):
    """``value(tensor)`` (the library's), with ``adjoint(tensor, grad)`` as its backward."""
    return _function("elementwise", _make_elementwise).apply(value, adjoint, tensor)


def halo(exchange, adjoint, tensor):
    """``exchange(tensor)`` (a padded halo exchange) with ``adjoint`` as its backward."""
    return _function("halo", _make_halo).apply(exchange, adjoint, tensor)

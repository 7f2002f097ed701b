"""Train PyTorch models over a directed network: ``n`` replicas on one device, any algorithm, one batched call.

Needs PyTorch (``pip install "rowstoch_fast[torch]"``); importing :mod:`rowstoch_fast` never imports it, and
this module imports it only when used.

:class:`Replicas` holds ``n`` copies of an ``nn.Module`` as one ``(n, d)`` parameter block and gives any
optimizer of the package a ``grad_fn`` that computes every node's gradient in one vectorised call
(a ``torch.func.vmap`` of ``functional_call`` and of the loss, then one backward pass); buffers (batch-norm statistics) are
kept per replica. Arrays cross between the optimizer and torch without copies: a NumPy block becomes a CPU
tensor on the same memory, a CuPy block a CUDA tensor through DLPack, and the gradient goes back the same
way (the optimizer then copies it into its own state: one ``(n, d)`` copy per step).

Examples
--------
>>> import numpy as np, torch
>>> from rowstoch_fast import PullDiagGT, topology
>>> from rowstoch_fast.torch import Replicas
>>> torch.manual_seed(0)  # doctest: +ELLIPSIS
<torch._C.Generator object at ...>
>>> model = torch.nn.Linear(4, 3).double()
>>> reps = Replicas(model, n=8)
>>> data = torch.randn(8, 32, 4, dtype=torch.float64)
>>> labels = torch.randint(0, 3, (8, 32))
>>> grad_fn = reps.grad_fn(lambda node, t: (data[node], labels[node]))
>>> opt = PullDiagGT(topology.exponential(8), reps.x0(), lr=0.05)
>>> for _ in range(20):
...     _ = opt.step(grad_fn)
>>> reps.set_params(opt.gather_x())
>>> reps.module(0)(data[0]).shape
torch.Size([32, 3])
"""

from __future__ import annotations

import copy
import warnings

import numpy as np

from ._checks import as_float_array, check_bool, check_int, require_memory

__all__ = ["Replicas", "GradFn", "DecentralizedOptimizer", "as_tensor", "from_tensor", "accuracy"]


def _torch():
    try:
        import torch
    except ImportError as exc:
        raise ImportError("rowstoch_fast.torch needs PyTorch: pip install 'rowstoch_fast[torch]'") from exc
    return torch


def as_tensor(X):
    """A torch tensor on the memory of ``X`` (no copy): NumPy arrays (read-only views too; the tensor is only
    read) become CPU tensors, CuPy arrays CUDA tensors through DLPack; tensors pass through. A NumPy array torch
    cannot view (negative strides, another byte order) is copied."""
    torch = _torch()
    if isinstance(X, torch.Tensor):
        return X
    if hasattr(X, "__cuda_array_interface__") or (hasattr(X, "__dlpack__") and not isinstance(X, np.ndarray)):
        return torch.from_dlpack(X)
    arr = np.asarray(X)
    if arr.dtype.kind not in "fiub":  # (torch's own refusal lists its types, naming no argument)
        raise TypeError(f"X must be a numeric array or tensor, got {type(X).__name__} of dtype {arr.dtype}")
    if not arr.dtype.isnative or any(s < 0 for s in arr.strides):  # (torch views neither: a copy, not its
        # "negative stride" or "byte order" refusal, helper 204)
        arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
    with warnings.catch_warnings():  # the optimizers hand out read-only views; torch warns about those
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(arr)


def from_tensor(T, like=None):
    """``T`` as an array of the kind of ``like`` (no copy): NumPy for a CPU tensor, CuPy (DLPack) for a CUDA
    tensor or when ``like`` is a CuPy array; a torch ``like`` gets the tensor itself."""
    torch = _torch()
    if not isinstance(T, torch.Tensor):
        raise TypeError(f"T must be a torch.Tensor, got {type(T).__name__}")
    if like is not None and isinstance(like, torch.Tensor):
        return T
    T = T.detach()
    if T.dtype == torch.bfloat16 or "float8" in str(T.dtype):  # (torch's "unsupported ScalarType BFloat16",
        # helper 204)
        raise TypeError(f"T has dtype {T.dtype}, which NumPy has no type for: convert it first (T.float())")
    if T.is_cuda or (like is not None and hasattr(like, "__cuda_array_interface__")):
        import cupy

        return cupy.from_dlpack(T)
    return T.numpy()


def _device(torch, device):
    """``device`` as a torch.device that this torch can use, or a clear error naming it."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be a torch device such as 'cpu' or 'cuda:0', got {device!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device={device!r} but this torch has no usable CUDA device "
                           f"(torch {torch.__version__}, torch.cuda.is_available() is False)")
    return dev


def _as_batch(value, name):
    """``torch.as_tensor(value)``, or a TypeError naming ``name`` for what torch cannot convert: text, objects
    (torch's "can't convert np.ndarray of type numpy.str_" had named nothing, helper 204)."""
    torch = _torch()
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as exc:
        dtype = f" of dtype {value.dtype}" if hasattr(value, "dtype") else ""
        raise TypeError(f"{name} must be numbers (an array or a tensor), got {type(value).__name__}{dtype} "
                        f"({exc})") from None


def _pair(batch):
    """What a ``batch_fn`` returned, checked: ``(inputs, targets)``."""
    if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
        raise TypeError(f"batch_fn must return (inputs, targets), got {type(batch).__name__}")
    return batch


class _Loaders:
    """``batch_fn`` over one iterable per node (e.g. a ``torch.utils.data.DataLoader``): each call takes the
    node's next batch, starting a new pass (epoch) when its iterator runs out."""

    def __init__(self, loaders, n):
        self.loaders, self.n = loaders, n
        self.iterators = []
        for k, loader in enumerate(loaders):
            try:
                self.iterators.append(iter(loader))
            except TypeError:
                raise TypeError(f"batch_fn[{k}] ({self._node(k)}'s loader) must be an iterable of (inputs, targets) "
                                f"batches such as a DataLoader, got {type(loader).__name__}") from None

    def _node(self, k):
        """Who loader ``k`` serves: ``node i`` (of repetition ``r``)."""
        return f"node {k % self.n}" + (f" of repetition {k // self.n}" if k >= self.n else "")

    def __call__(self, node, t, repeat=0):
        k = repeat * self.n + node
        try:
            batch = next(self.iterators[k])
        except StopIteration:
            self.iterators[k] = iter(self.loaders[k])
            batch = next(self.iterators[k], None)
            if batch is None:  # (a bare StopIteration had escaped, naming nothing, and ended a loop stepping
                # through map() silently, helper 218)
                raise ValueError(
                    f"batch_fn[{k}], {self._node(k)}'s loader ({type(self.loaders[k]).__name__}), gave no batch on "
                    f"a new pass: it is empty (a DataLoader with drop_last=True over a shard smaller than its "
                    f"batch_size) or can be iterated once only (an iterator, not a re-iterable such as a "
                    f"DataLoader): give every node a loader that yields at least one batch per pass") from None
        if not (isinstance(batch, (tuple, list)) and len(batch) >= 2):  # (text: "string index out of range")
            raise TypeError(f"batch_fn[{k}], {self._node(k)}'s loader, must yield (inputs, targets) batches, got "
                            f"{type(batch).__name__} {batch!r:.60}")
        return batch[0], batch[1]


class GradFn:
    """The ``grad_fn`` of :meth:`Replicas.grad_fn`: ``G = grad_fn(X)`` for the ``(n, d)`` block ``X``.

    Attributes
    ----------
    iteration : int
        Calls so far: the ``iteration`` passed to ``batch_fn`` next.
    last_loss : ndarray or None
        The per-node mini-batch losses of the last call (with ``keep_loss=True``).
    """

    def __init__(self, replicas, batch_fn, stacked, keep_loss, rounds=None):
        stacked, keep_loss = check_bool(stacked, "stacked"), check_bool(keep_loss, "keep_loss")  # ("no" had been
        # read as True, helper 218)
        self.replicas, self.batch_fn, self.stacked, self.keep_loss = replicas, batch_fn, stacked, keep_loss
        #: Mini-batches averaged per call as declared (None: not said, one): an optimizer that gossips R times
        #: per iteration refuses a declared count other than 1 and R, and warns when none was declared.
        self.rounds = None if rounds is None else check_int(rounds, "rounds", minimum=1)
        self.iteration = 0
        self.last_loss = None
        self._torch = _torch()

    def _batches(self, t):
        r = self.replicas
        N = r.n * r.repeats
        if self.stacked:
            inputs, targets = _pair(self.batch_fn(t))
        else:
            if r.repeats == 1:
                pairs = [_pair(self.batch_fn(i, t)) for i in range(r.n)]
            else:  # repetition k's node i draws with batch_fn(i, t, k)
                pairs = [_pair(self.batch_fn(i, t, k)) for k in range(r.repeats) for i in range(r.n)]
            try:
                inputs = self._torch.stack([_as_batch(p[0], "batch_fn's inputs") for p in pairs])
                targets = self._torch.stack([_as_batch(p[1], "batch_fn's targets") for p in pairs])
            except RuntimeError as exc:  # batches of different shapes
                raise ValueError(f"batch_fn's batches must have one shape on every node: {exc}") from None
        inputs, targets = _as_batch(inputs, "batch_fn's inputs"), _as_batch(targets, "batch_fn's targets")
        if r.repeats > 1 and self.stacked and inputs.shape[:2] == (r.repeats, r.n):  # (repeats, n, B, ...)
            inputs, targets = inputs.flatten(0, 1), targets.flatten(0, 1)
        if inputs.shape[0] != N or targets.shape[0] != N:
            raise ValueError(f"batch_fn must give one batch per node: got {inputs.shape[0]} inputs and "
                             f"{targets.shape[0]} targets for {N} replicas")
        return inputs.to(r.device), targets.to(r.device)

    def __call__(self, X):
        r = self.replicas
        P = as_tensor(X)
        if P.shape != r.params.shape:
            raise ValueError(f"grad_fn got a block of shape {tuple(P.shape)}, expected {tuple(r.params.shape)} "
                             "(n nodes x the model's parameter count)")
        if P.device != r.device or P.dtype != r.dtype:
            P = P.to(device=r.device, dtype=r.dtype)  # a copy: give the optimizer the model's dtype to avoid it
        G = loss = None
        for _ in range(self.rounds or 1):  # (eq. 12b: R gossip rounds per iteration average R mini-batches)
            inputs, targets = self._batches(self.iteration)
            with _named_failure(inputs, targets, dtype=r.dtype):
                g, l = self._gradients(P.reshape(-1, r.d), inputs, targets)  # repetitions: one flat set of replicas
            G, loss = (g, l) if G is None else (G + g, loss + l)
            self.iteration += 1
        if (self.rounds or 1) > 1:
            G, loss = G / self.rounds, loss / self.rounds
        if self.keep_loss:
            self.last_loss = loss.detach().cpu().numpy().reshape(r.params.shape[:-1])
        return from_tensor(G.view(r.params.shape), like=X)

    def _gradients(self, P, inputs, targets):
        """Every node's loss gradient at its row of ``P``: ``(G (n, d), losses (n,))``."""
        torch, r = self._torch, self.replicas
        with torch.enable_grad():
            P = P.detach().requires_grad_(True)
            losses = r._losses(r._outputs(P, inputs), targets)
            (G,) = torch.autograd.grad(losses.sum(), P, allow_unused=True, materialize_grads=True)
        return G, losses.detach()


class _named_failure:
    """Torch's own error on the batches, with what was handed to it (shapes, dtypes) and where from (``source``:
    ``batch_fn``'s batches, one row per replica, or :meth:`Replicas.evaluate`'s data). Torch's assertions (a
    loss's "multi-target not supported") become ValueErrors."""

    def __init__(self, inputs, targets, source="batch_fn's batches", dtype=None):
        self.inputs, self.targets, self.source, self.dtype = inputs, targets, source, dtype

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind in (RuntimeError, IndexError, ValueError, AssertionError):  # (torch.OutOfMemoryError: as it is)
            i, t = self.inputs, self.targets
            rows = ", one row per replica" if self.source == "batch_fn's batches" else ""
            given = f"inputs {tuple(i.shape)} {i.dtype}" + (f", targets {tuple(t.shape)} {t.dtype}" if t is not None
                                                            else "")
            hint = (f"; the replicas' parameters are {self.dtype}: convert the inputs (.to({self.dtype})) or build "
                    f"the replicas in their dtype" if self.dtype is not None and i.is_floating_point() and
                    i.dtype != self.dtype else "")  # (a model may cast its inputs itself: not refused before it runs)
            raise (ValueError if kind is AssertionError else kind)(
                f"the model{' and loss' if t is not None else ''} failed on {self.source} ({given}{rows}): "
                f"{exc}{hint}") from exc
        return False


_ELEMENTWISE = ("ReLU", "LeakyReLU", "ELU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softplus", "Identity", "Dropout")


def _hooked(model, torch):
    """Whether a hook could change what ``model`` computes: its own or a submodule's forward (pre-)hooks or
    backward hooks, or global module hooks."""
    from torch.nn.modules import module as nn_module

    glob = [getattr(nn_module, name, None) for name in ("_global_forward_hooks", "_global_forward_pre_hooks",
                                                          "_global_backward_hooks", "_global_backward_pre_hooks")]
    if any(glob_hooks for glob_hooks in glob):
        return True
    return any(getattr(m, name, None) for m in model.modules()
               for name in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"))


def _mlp_plan(model, torch):
    """For a model that is Linear layers (with biases) and element-wise activations in sequence (an
    ``nn.Sequential`` itself, not a subclass with a ``forward`` of its own), with no buffers, no hooks and no
    parameter shared by two layers: ``[("linear", weight name, bias name) | ("act", module, None)]``; None for
    any other model (it then goes through vmap, which runs the model's own ``forward``). The products are the
    same ``x W^T + b`` as ``nn.Linear``'s, batched over nodes."""
    if type(model) is torch.nn.Sequential:  # (a subclass's forward, e.g. a residual one, is not the sequence)
        layers = list(model._modules.items())  # (every use: named_children() lists a layer used twice once)
        prefix = "{}.".format
    else:
        layers, prefix = [("", model)], (lambda name: "")
    if any(True for _ in model.buffers()) or _hooked(model, torch):
        return None
    plan = []
    for name, layer in layers:
        if type(layer) is torch.nn.Linear and layer.bias is not None:
            plan.append(("linear", prefix(name) + "weight", prefix(name) + "bias"))
        elif type(layer).__name__ in _ELEMENTWISE and type(layer).__module__.startswith("torch.nn"):
            plan.append(("act", layer, None))
        else:
            return None
    names = [n for kind, *pair in plan if kind == "linear" for n in pair]
    if not names or set(names) != {name for name, _ in model.named_parameters()}:
        return None  # (a layer used twice: named_parameters() lists its tied parameters once)
    return plan


#: How many samples :meth:`Replicas.evaluate` and :func:`accuracy` pass through the models at once.
EVALUATION_BATCH = 4096


class Replicas:
    """``n`` copies of an ``nn.Module`` held as one stacked parameter block.

    Parameters
    ----------
    model : torch.nn.Module
        The architecture and the initial parameters every node starts from
        (copied; ``model`` itself is not modified).
    n : int
        Number of nodes (replicas).
    loss : callable, optional
        ``loss(outputs, targets) -> scalar``; default cross-entropy.
    device, dtype : optional
        Where and in which precision to keep the replicas (default: the
        model's). Give the optimizer blocks of the same dtype (float64 for a
        ``model.double()``) and ``grad_fn`` converts nothing.
    repeats : int, default 1
        Independent repetitions (seeds) trained together: ``params`` becomes
        ``(repeats, n, d)``, what the optimizers take as ``x0`` for batched
        repetitions, and ``batch_fn`` is called as ``batch_fn(node, t, k)`` for
        repetition ``k``.

    Attributes
    ----------
    params : torch.Tensor, shape (n, d) or (repeats, n, d)
        Row ``i`` is node ``i``'s parameters, flattened in ``named_parameters()``
        order.
    buffers : dict of torch.Tensor
        Each buffer stacked over the replicas, shape ``(n * repeats, *shape)``:
        batch-norm running statistics stay per replica and are updated in
        place by ``grad_fn`` (train mode).
    """

    def __init__(self, model, n, *, loss=None, device=None, dtype=None, repeats=1):
        torch = _torch()
        self.n = check_int(n, "n", minimum=1)
        self.repeats = check_int(repeats, "repeats", minimum=1)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        base = copy.deepcopy(model)
        if device is not None:
            device = _device(torch, device)
        if dtype is not None and dtype not in (torch.float32, torch.float64):
            raise TypeError(f"dtype must be torch.float32 or torch.float64 (the optimizers' dtypes), got {dtype}")
        if device is not None or dtype is not None:
            base = base.to(device=device, dtype=dtype)
        devices = {p.device for p in base.parameters()} | {b.device for b in base.buffers()}
        if len(devices) > 1:
            raise ValueError(f"the model's parameters and buffers are split across devices "
                             f"({', '.join(sorted(map(str, devices)))}); move it to one (model.to(device)) or pass "
                             "device=")
        if any(dev.type == "meta" for dev in devices):
            raise ValueError("the model is on the 'meta' device (no values to start from); materialise it first "
                             "(model.to_empty(device=...) and initialise it) or pass device=")
        # parameters with requires_grad=False are the model's constants: not replicated, not trained, not counted
        named = [(name, p) for name, p in base.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("model has no parameters to train (none has requires_grad=True)")
        dtypes = {p.dtype for _, p in named}
        if len(dtypes) > 1:
            raise TypeError(f"the model's parameters must share one dtype, got {sorted(map(str, dtypes))}")
        self.dtype = named[0][1].dtype
        self.device = named[0][1].device
        if self.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"the model's parameters must be float32 or float64 (the optimizers' dtypes), got "
                            f"{self.dtype}: pass dtype=torch.float32")
        self._layout, offset = [], 0
        for name, p in named:
            self._layout.append((name, offset, p.numel(), tuple(p.shape)))
            offset += p.numel()
        self.d = offset
        flat = torch.cat([p.detach().reshape(-1) for _, p in named])
        N = self.n * self.repeats
        if self.device.type == "cpu":  # the block, its gradient and an optimizer's few copies must fit
            require_memory(4 * N * self.d * flat.element_size(),
                           f"Replicas(n={self.n}, repeats={self.repeats}) of {self.d} parameters",
                           "lower n or repeats")
        self.params = flat.unsqueeze(0).repeat(N, 1).contiguous()
        if self.repeats > 1:
            self.params = self.params.view(self.repeats, self.n, self.d)
        self.buffers = {k: b.detach().unsqueeze(0).repeat(N, *([1] * b.ndim)).clone()
                        for k, b in base.named_buffers()}
        # train mode, but a submodule set to eval in a model in train mode stays so (a frozen batch norm: its
        # running statistics neither used per batch nor updated); a model all in eval mode is trained whole
        kept = [m for m in base.modules() if not m.training] if base.training else []
        base.train()
        for m in kept:
            m.eval()
        self._base = base
        self._frozen = len(named) != len(list(base.parameters()))
        if loss is not None and not callable(loss):
            raise TypeError(f"loss must be a callable loss(outputs, targets) -> scalar, got {type(loss).__name__}")
        self.loss = loss if loss is not None else torch.nn.functional.cross_entropy

    def __repr__(self):
        return (f"Replicas({type(self._base).__name__}, n={self.n}, d={self.d}, repeats={self.repeats}, "
                f"dtype={self.dtype}, device={self.device})")

    def __getstate__(self):
        # (the vmapped functions, built on first use, are closures: a Replicas had stopped pickling after its first
        # forward pass, helper 267; they are built again)
        return {k: v for k, v in self.__dict__.items() if k != "_fns"}

    # ------------------------------------------------------------------ the per-node function
    def _split(self, P):
        """The parameters of a flat block (``(d,)``, or ``(..., d)`` for one set per replica) by name: views."""
        return {name: P[..., o:o + size].unflatten(-1, shape) for name, o, size, shape in self._layout}

    def _functions(self):
        """The vmapped forward and loss, and the plan of the batched-product forward (built once)."""
        fns = self.__dict__.get("_fns")
        if fns is None or fns[3] is not self.loss:  # (a loss assigned since: its own vmap)
            torch = _torch()
            from torch.func import vmap

            base = self._base
            # the n forward passes as one vmapped call and the n losses likewise; one backward pass of their sum
            # gives every node's gradient (the losses share no parameters). Measured 1.6x faster here than
            # vmap(grad(...)) of the per-node loss (bench/RESULTS.md section 10).
            forward = vmap(_functional(base), randomness="different")  # (dropout: every replica its own mask, as n
            # models would)
            # a faster forward for stacks of Linear layers and activations (all of them trained)
            plan = None if self._frozen else _mlp_plan(base, torch)
            fns = self._fns = (forward, vmap(self.loss), plan, self.loss)
        return fns

    def _outputs(self, P, inputs):
        """Every replica's outputs on its own inputs: ``P`` a flat ``(replicas, d)`` block, ``inputs`` one batch
        per replica on the leading axis."""
        torch = _torch()
        forward, _, mlp, _ = self._functions()
        params = self._split(P)
        if mlp is not None and inputs.ndim == 3:  # (replicas, B, features): batched matrix products
            out = inputs
            for kind, a, b in mlp:
                out = torch.baddbmm(params[b].unsqueeze(1), out, params[a].transpose(1, 2)) if kind == "linear" \
                    else a(out)
            return out
        return forward(params, self.buffers, inputs)

    def _losses(self, out, targets):
        """One mean loss per replica: ``(replicas,)``."""
        torch = _torch()
        if self.loss is torch.nn.functional.cross_entropy and out.ndim == 3 and targets.ndim == 2 \
                and not targets.is_floating_point():
            n, B = targets.shape
            # F.cross_entropy's mean: over the targets it does not ignore (ignore_index -100, padding's label;
            # a mean over all B had halved the gradient of a half-padded batch)
            return torch.nn.functional.cross_entropy(out.reshape(n * B, -1), targets.reshape(-1),
                                                     reduction="none").view(n, B).sum(1) / (targets != -100).sum(1)
        return _scalar_losses(self._functions()[1](out, targets), len(out))

    def forward(self, inputs):
        """Every node's model on its own mini-batch, differentiable in :attr:`params` (train mode).

        Parameters
        ----------
        inputs : tensor of shape ``(n, B, ...)`` (``(repeats, n, B, ...)`` with repetitions)
            Node ``i``'s batch at ``inputs[i]``.

        Returns
        -------
        tensor of shape ``(n, B, ...)``
            The outputs; :meth:`losses` of them, summed, and ``.backward()`` give
            every node's gradient in ``params.grad`` (what
            :class:`DecentralizedOptimizer` steps with).
        """
        torch = _torch()
        inputs = _as_batch(inputs, "inputs").to(self.device)
        N = self.n * self.repeats
        if self.repeats > 1 and inputs.shape[:2] == (self.repeats, self.n):
            inputs = inputs.flatten(0, 1)
        if inputs.ndim == 0 or inputs.shape[0] != N:
            raise ValueError(f"inputs must hold one batch per node on its first axis ({N}), got shape "
                             f"{tuple(inputs.shape)}")
        with _named_failure(inputs, None, "forward's inputs", self.dtype):  # (a feature count the model does not
            # take: torch's words alone named no argument)
            return self._outputs(self.params.reshape(N, self.d), inputs)

    __call__ = forward

    def losses(self, outputs, targets):
        """Each node's mean loss on its batch (:attr:`loss` of :meth:`forward`'s outputs): shape ``(n,)``. Their
        sum is the loss to call ``.backward()`` on (the nodes share no parameters)."""
        torch = _torch()
        if not isinstance(outputs, torch.Tensor):  # (an array: no gradient to give; torch's words named nothing)
            raise TypeError(f"outputs must be the tensor forward returned (reps(inputs)), got "
                            f"{type(outputs).__name__}")
        targets = _as_batch(targets, "targets").to(self.device)
        N = self.n * self.repeats
        if self.repeats > 1 and targets.shape[:2] == (self.repeats, self.n):
            targets = targets.flatten(0, 1)
        if targets.ndim == 0 or outputs.ndim == 0 or targets.shape[0] != N or outputs.shape[0] != N:
            raise ValueError(f"outputs and targets must hold one batch per node on their first axis ({N}), got "
                             f"shapes {tuple(outputs.shape)} and {tuple(targets.shape)}")
        if outputs.ndim > 1 and targets.ndim > 1 and outputs.shape[1] != targets.shape[1]:  # (torch's "shape
            # '[20, -1]' is invalid", helper 204)
            raise ValueError(f"outputs and targets must hold batches of one size, got {outputs.shape[1]} outputs and "
                             f"{targets.shape[1]} targets a node (shapes {tuple(outputs.shape)} and "
                             f"{tuple(targets.shape)})")
        return self._losses(outputs, targets)

    # ------------------------------------------------------------------ for the optimizers
    def x0(self, like="numpy"):
        """The initial block for an optimizer: ``self.params`` as a NumPy array on its memory (CPU) or a CuPy
        array through DLPack (CUDA; the optimizer then runs on the CuPy backend). ``like="torch"``: the tensor."""
        if like not in ("numpy", "torch"):
            raise ValueError(f"like must be 'numpy' (NumPy or CuPy, by the device) or 'torch', got {like!r}")
        if like == "torch":
            return self.params
        return from_tensor(self.params)

    def grad_fn(self, batch_fn, *, stacked=False, keep_loss=False, rounds=None):
        """A ``grad_fn`` for any optimizer of the package: every node's gradient in one vectorised call.

        Parameters
        ----------
        batch_fn : callable or sequence of DataLoader
            ``batch_fn(node, iteration) -> (inputs, targets)``: node ``node``'s
            mini-batch at the ``iteration``-th call (tensors or arrays; every
            node's of the same shape). With ``stacked=True``:
            ``batch_fn(iteration) -> (inputs, targets)`` with a leading node axis.
            Or one iterable of ``(inputs, targets)`` batches per node (a
            ``DataLoader`` over the node's shard, ``drop_last=True`` so that the
            shapes agree): each call takes every node's next batch, starting a
            new epoch where a loader runs out.
        stacked : bool, default False
            ``batch_fn(iteration)`` gives every node's mini-batch at once, with
            a leading node axis (one call instead of one per node).
        keep_loss : bool, default False
            Keep the per-node mini-batch losses of the last call in
            ``grad_fn.last_loss`` (one small device-to-host copy per call).
        rounds : int, optional
            Mini-batches averaged per call: give an optimizer that gossips
            ``rounds = R`` times per iteration (MG-Pull-Diag-GT) the average of
            ``R`` mini-batches (eq. 12b) with ``rounds=R``, or say ``rounds=1``
            to step it with one (the paper's batches axis). Such an optimizer
            refuses any other count, and warns when none is given.

        Returns
        -------
        GradFn
            ``G = grad_fn(X)``: ``X`` the ``(n, d)`` block the optimizer passes
            (NumPy, CuPy or torch), ``G`` of the same kind, without copies
            when ``X`` is on the replicas' device in their dtype.
        """
        stacked = check_bool(stacked, "stacked")
        if not callable(batch_fn):
            loaders = list(batch_fn) if isinstance(batch_fn, (list, tuple)) else None
            if loaders is None or len(loaders) != self.n * self.repeats or stacked:
                raise TypeError(f"batch_fn must be callable, or one DataLoader (iterable of (inputs, targets)) per "
                                f"node ({self.n * self.repeats}), got {type(batch_fn).__name__}")
            batch_fn = _Loaders(loaders, self.n)
        return GradFn(self, batch_fn, stacked, keep_loss, rounds)

    def set_params(self, X):
        """Copy an ``(n, d)`` block (an optimizer's ``gather_x()``, NumPy, CuPy or torch) into :attr:`params`."""
        torch = _torch()
        P = as_tensor(X)
        if tuple(P.shape) != tuple(self.params.shape):
            raise ValueError(f"X has shape {tuple(P.shape)}, expected {tuple(self.params.shape)}")
        if P.is_floating_point() and not bool(torch.isfinite(P).all()):
            raise ValueError("X must be finite (a diverged run's block?)")
        if P.is_floating_point() and P.dtype != self.dtype:  # (checked as the replicas hold it: 1e300 had become
            # inf in float32 replicas, silently, helper 204)
            P = P.to(self.dtype)
            bad = (~torch.isfinite(P)).nonzero()
            if len(bad):
                where = tuple(bad[0].tolist())
                raise ValueError(f"X must be finite in the replicas' {self.dtype}; X[{', '.join(map(str, where))}] = "
                                 f"{float(as_tensor(X)[where]):.6g} is beyond its range (largest "
                                 f"{torch.finfo(self.dtype).max:.6g})")
        with torch.no_grad():
            self.params.copy_(P)

    # ------------------------------------------------------------------ evaluation
    def module(self, node=None, *, weights=None, repeat=0):
        """An ``nn.Module`` (a copy) with node ``node``'s parameters and buffers, or, with ``node=None``, the
        average of the replicas weighted by ``weights`` (e.g. ``A.pi``; divided by their sum; default uniform)
        and their averaged floating-point buffers (of repetition ``repeat``)."""
        torch = _torch()
        repeat = check_int(repeat, "repeat", minimum=0)
        if repeat >= self.repeats:
            raise ValueError(f"repeat must be in 0..{self.repeats - 1}, got {repeat}")
        params = self.params.reshape(self.repeats, self.n, self.d)[repeat]
        buffers = {k: b[repeat * self.n:(repeat + 1) * self.n] for k, b in self.buffers.items()}
        m = copy.deepcopy(self._base)
        with torch.no_grad():
            if node is not None:
                if weights is not None:  # (one node's parameters: the weights of an average had been ignored)
                    raise ValueError("module(node, weights=...): weights average the replicas, node takes one of "
                                     "them: pass node=None with weights, or node alone")
                node = check_int(node, "node", minimum=0)
                if node >= self.n:
                    raise ValueError(f"node must be in 0..{self.n - 1}, got {node}")
                flat = params[node]
                bufs = {k: b[node] for k, b in buffers.items()}
            else:
                w = torch.full((self.n,), 1.0 / self.n, dtype=self.dtype, device=self.device) if weights is None \
                    else torch.as_tensor(_average_weights(weights, self.n), device=self.device).to(self.dtype)
                flat = w @ params
                bufs = {k: (torch.tensordot(w.to(b.dtype), b, dims=1) if b.is_floating_point() else b[0])
                        for k, b in buffers.items()}
            params = dict(m.named_parameters())
            for name, value in self._split(flat).items():
                params[name].copy_(value)
            named_buffers = dict(m.named_buffers())
            for k, b in bufs.items():
                named_buffers[k].copy_(b)
        return m

    def evaluate(self, inputs, targets, *, batch_size=EVALUATION_BATCH):
        """Every replica's loss and accuracy on one data set (eval mode): two arrays of shape ``(n,)`` (or
        ``(repeats, n)``); the accuracy (top-1) is NaN where ``targets`` are not class labels of shape ``(N,)``
        (a regression's)."""
        torch = _torch()
        from torch.func import vmap

        inputs, targets = _eval_set(inputs, targets, batch_size)
        inputs, targets = inputs.to(self.device), targets.to(self.device)
        classes = _class_labels(targets)
        base = copy.deepcopy(self._base).eval()
        run = vmap(_functional(base), in_dims=(0, 0, None))
        loss = vmap(self.loss, in_dims=(0, None))
        N = self.n * self.repeats
        losses = torch.zeros(N, dtype=torch.float64, device=self.device)
        correct = torch.zeros(N, dtype=torch.float64, device=self.device)
        params = self._split(self.params.reshape(N, self.d))
        with torch.no_grad():
            for s in range(0, len(targets), batch_size):
                t = targets[s:s + batch_size]
                with _named_failure(inputs, targets, "evaluate's inputs and targets", self.dtype):  # (a feature
                    # count the model does not take, labels past its classes: torch's words alone named neither)
                    out = run(params, self.buffers, inputs[s:s + batch_size])  # (replicas, B, classes)
                    losses += _scalar_losses(loss(out, t), N).double() * len(t)
                if classes:
                    correct += (out.argmax(-1) == t).sum(-1).double()
        shape = self.params.shape[:-1]
        accuracy = (correct / len(targets)).cpu().numpy().reshape(shape)
        return (losses / len(targets)).cpu().numpy().reshape(shape), accuracy if classes else accuracy * np.nan


def _functional(base):
    """``f(params, buffers, x)``: ``base`` called on ``x`` with ``params`` and ``buffers`` in place of its own
    (``torch.func.functional_call``), its own put back afterwards in every submodule. (A submodule registered
    under two names, tied weights as ``self.b = self.a``, had kept vmap's batched tensors: torch restores the
    second name's entry to the first's swapped-in value, and ``module()`` / ``evaluate()`` then failed with
    "Cannot access storage of BatchedTensorImpl", helper 218.)"""
    from torch.func import functional_call

    def call(params, buffers, x):
        saved = [(m, dict(m._parameters), dict(m._buffers)) for m in base.modules()]
        try:
            return functional_call(base, (params, buffers), (x,))
        finally:
            for m, own_params, own_buffers in saved:
                m._parameters.update(own_params)
                m._buffers.update(own_buffers)
    return call


def _scalar_losses(losses, replicas):
    """The vmapped loss, one scalar per replica, or a ValueError: a loss with ``reduction="none"`` gave one value
    per sample, which summed made every gradient batch-size times too large."""
    if tuple(losses.shape) != (replicas,):
        raise ValueError(f"loss must return a scalar per batch (the mean over its samples, e.g. "
                         f"reduction='mean'), but it returned shape {tuple(losses.shape[1:])} per replica; a "
                         "reduction='none' loss would make every gradient batch-size times too large")
    return losses


def _average_weights(weights, n):
    """``weights`` (one per node, finite, >= 0, not all 0) divided by their sum: a weighted average (ones summed
    the replicas, n times the average model)."""
    w = as_float_array(weights, "weights", np.float64, copy=True, finite=False)  # (text or complex: NumPy's own
    # "could not convert string to float" or the imaginary parts dropped, helper 204)
    if w.shape != (n,):
        raise ValueError(f"weights must have one value per node ({n}), got shape {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any() or not w.max() > 0:
        raise ValueError("weights must be finite and >= 0, not all 0 (e.g. A.pi)")
    with np.errstate(over="ignore"):
        total = w.sum()
    if not np.isfinite(total):  # (1e308 twice summed to inf: every weight 0, an all-zero model, helper 204)
        w /= w.max()
        total = w.sum()
    return w if total == 1.0 else w / total


def _eval_set(inputs, targets, batch_size):
    """``inputs`` and ``targets`` as tensors of one sample per row, as many of each, at least one (an empty set
    gave NaN losses and an accuracy of 0; a shorter ``targets`` scored only the first inputs)."""
    torch = _torch()
    check_int(batch_size, "batch_size", minimum=1)
    inputs, targets = _as_batch(inputs, "inputs"), _as_batch(targets, "targets")
    if inputs.ndim == 0 or targets.ndim == 0:
        raise ValueError(f"inputs and targets must hold one sample per row, got shapes {tuple(inputs.shape)} and "
                         f"{tuple(targets.shape)}")
    if len(inputs) != len(targets):
        raise ValueError(f"inputs has {len(inputs)} samples but targets has {len(targets)}")
    if len(targets) == 0:
        raise ValueError("the evaluation set is empty (0 samples)")
    return inputs, targets


def _class_labels(targets):
    """Whether ``targets`` are class labels: one integer per sample (what top-1 accuracy compares with)."""
    return targets.ndim == 1 and not targets.is_floating_point() and not targets.is_complex()


def accuracy(module, inputs, targets, batch_size=EVALUATION_BATCH):
    """Top-1 accuracy of ``module`` (eval mode) on ``inputs`` / integer ``targets`` (one class label per sample,
    shape ``(N,)``; a model of one output, whose argmax is always 0, needs its own threshold instead). Every
    submodule's mode is restored afterwards."""
    torch = _torch()
    if not isinstance(module, torch.nn.Module):  # ("foo": an AttributeError, helper 204)
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__} {module!r:.60}")
    inputs, targets = _eval_set(inputs, targets, batch_size)
    if not _class_labels(targets):  # ((N, 1) labels broadcast against (N,) predictions: N x N, accuracy 3.0)
        raise ValueError(f"targets must be integer class labels of shape (N,), got {tuple(targets.shape)} "
                         f"{targets.dtype}" + (": flatten them (targets.reshape(-1))" if targets.ndim == 2
                                               and targets.shape[1] == 1 else ""))
    modes = [(m, m.training) for m in module.modules()]  # (eval() then train() had unfrozen a frozen layer)
    module.eval()
    correct = 0
    try:
        with torch.no_grad():
            for s in range(0, len(targets), batch_size):
                correct += int((module(inputs[s:s + batch_size]).argmax(-1) == targets[s:s + batch_size]).sum())
    finally:
        for m, mode in modes:
            m.training = mode
    return correct / len(targets)


def _optimizer_class():
    """:class:`DecentralizedOptimizer`, a ``torch.optim.Optimizer``: made on first use (torch imported then)."""
    torch = _torch()

    class DecentralizedOptimizer(torch.optim.Optimizer):
        """Any optimizer of the package in the ``torch.optim`` style, over the replicas of :class:`Replicas`.

        ``zero_grad()``, a forward and backward pass of every node on its own
        mini-batch, ``step()``: the iterates of the package's optimizer stepped
        with :meth:`Replicas.grad_fn` on the same batches, bit for bit. It is a
        ``torch.optim.Optimizer``, so torch's learning-rate schedulers drive
        its ``lr`` (``param_groups[0]["lr"]``).

        Parameters
        ----------
        replicas : Replicas
            Its :attr:`~Replicas.params` become the one parameter (``requires_grad``):
            between steps they hold the points where the next gradients are
            needed (``opt.ask()`` of the package's optimizer).
        method : str or optimizer class
            A name of ``rowstoch_fast.algorithms.names()`` (``"pull-diag-gt"``,
            ``"dsgd"``, ...) or a class of the registry.
        A : MixingMatrix, network or int
            The network (``W`` or ``C`` for the methods that need those: as
            ``method.build`` takes it); for a federated method (``"fedavg"``,
            ``"scaffold"``, ...) the number of clients ``n`` also does.
        lr : float
            The learning rate; ``param_groups[0]["lr"]`` (a scheduler's) from
            then on: a new rate applies from the next ``step()``, to what it
            computes from the gradients (the update and the next points; a
            gradient-tracking method computed the points of the current
            gradients with the rate before).
        batches_per_step : int, optional
            Backward passes averaged by each :meth:`step`; default the method's
            ``rounds`` (eq. 12b: ``R`` gossip rounds average ``R`` mini-batches).
            ``1`` steps an MG method with one mini-batch per iteration (the
            paper's batches axis). ``step()`` counts the backward passes since
            ``zero_grad()`` and refuses any other number (a backward pass after
            a ``step()`` with no ``zero_grad()`` between is refused too: the
            gradient would hold the last step's).
        **options
            The method's other keywords (``rounds=R``, ``tracker=``, ...).

        Notes
        -----
        The package's optimizer owns the points: weights set in ``replicas``
        (:meth:`Replicas.set_params`, an in-place edit) before the first
        ``step()`` restart it from them; after that they are refused, since
        its iterates would not see them (build a new optimizer from the
        edited replicas). :meth:`state_dict` holds the replicas' buffers
        (batch-norm statistics) too.

        Examples
        --------
        >>> import torch
        >>> from rowstoch_fast import topology
        >>> from rowstoch_fast.torch import DecentralizedOptimizer, Replicas
        >>> _ = torch.manual_seed(0)
        >>> reps = Replicas(torch.nn.Linear(4, 3).double(), n=8)
        >>> opt = DecentralizedOptimizer(reps, "pull-diag-gt", topology.exponential(8), lr=0.05)
        >>> data, labels = torch.randn(8, 32, 4, dtype=torch.float64), torch.randint(0, 3, (8, 32))
        >>> for _ in range(20):
        ...     opt.zero_grad()
        ...     reps.losses(reps(data), labels).sum().backward()
        ...     opt.step()
        >>> opt.iteration
        19
        """

        def __init__(self, replicas, method, A, lr, *, batches_per_step=None, **options):
            from .algorithms import REGISTRY

            if not isinstance(replicas, Replicas):
                raise TypeError(f"replicas must be a rowstoch_fast.torch.Replicas, got {type(replicas).__name__}")
            if isinstance(method, str):
                if method not in REGISTRY:
                    raise ValueError(f"method {method!r} is not an algorithm of the registry; one of: "
                                     f"{', '.join(sorted(REGISTRY))}")
                method = REGISTRY[method]
            elif not (isinstance(method, type) and method in REGISTRY.values()):
                raise TypeError(f"method must be an algorithm's name or class, got {method!r}")
            if method.gradients != "batch":
                raise TypeError(f"{method.__name__} takes a per-sample oracle, not gradients: it cannot be stepped "
                                "by loss.backward()")
            if options.get("backend") == "mpi":  # (helper 252: torch's "shape '[8, 6]' is invalid for input of
                # size 24" from a rank's share of the nodes)
                raise ValueError("backend='mpi': a DecentralizedOptimizer runs in one process (reps.params holds every "
                                 "node's model); under MPI step an optimizer of the package, e.g. PullDiagGT(A, x0, "
                                 "lr, backend='mpi'), with reps.grad_fn(batch_fn) of Replicas of the process's own "
                                 "nodes (opt.local_nodes)")
            import weakref

            self.replicas = replicas
            self._make = lambda: method.build(A, replicas.x0(), self._lr, **options)
            self._lr = lr
            self.inner = self._make()
            self._fresh = True  # (no step told yet: weights set in the replicas restart it from them)
            self.batches_per_step = self.inner.rounds if batches_per_step is None else \
                check_int(batches_per_step, "batches_per_step", minimum=1)
            replicas.params.requires_grad_(True)
            self._backwards = 0
            self._stepped = self._stale = False  # (a backward pass after a step with no zero_grad between: stale)
            me = weakref.ref(self)  # (the hook must not keep a dropped optimizer alive, nor count for it)

            def count(grad):
                opt = me()
                if opt is not None:
                    opt._backwards += 1
                    opt._stale |= opt._stepped and opt.replicas.params.grad is not None  # (added to the last's)
                    opt._stepped = False
                return grad

            self._hook = replicas.params.register_hook(count)
            weakref.finalize(self, self._hook.remove)  # (dropped: its hook goes too)
            super().__init__([replicas.params], {"lr": lr})
            self._ask()

        def add_param_group(self, param_group):
            """Refused once built: the optimizer steps :attr:`Replicas.params` alone (another group's parameters
            were never stepped)."""
            if self.param_groups:
                raise TypeError("DecentralizedOptimizer steps replicas.params alone (the replicas' model): it takes "
                                "no other parameter group; step other parameters with an optimizer of their own")
            super().add_param_group(param_group)

        def _ask(self):
            X = self.inner.ask()
            params = self.replicas.params
            with torch.no_grad():
                params.copy_(as_tensor(X).reshape(params.shape))
            self._written = getattr(params, "_version", None)  # (torch counts in-place changes: one by the user
            # shows as another count)
            self._written_values = params.detach().clone() if self._fresh else None  # (before the first step:
            # weights loaded through .data, which torch does not count, show as other values; read by value then
            # only, a copy and a read of every parameter a step costing 15-50% of a small model's step, helper 217)

        def _points_kept(self, where):
            """Whether ``replicas.params`` still hold the points the optimizer wrote; where they were changed
            (:meth:`Replicas.set_params`, an in-place edit), restart from them before the first step and say
            whether the points it asks are theirs, else a RuntimeError (its iterates would not see them)."""
            params = self.replicas.params
            if getattr(params, "_version", None) == self._written and (
                    self._written_values is None or torch.equal(params, self._written_values)):
                return True
            if not self._fresh:
                raise RuntimeError(f"{where}: replicas.params were changed since step() set them (set_params, or an "
                                   "in-place edit such as loading weights): the package's optimizer holds its "
                                   "iterates and would not see the change; set the weights before the first step(), "
                                   "or build a new DecentralizedOptimizer from the edited replicas")
            before = params.detach().clone()
            self.inner = self._make()  # (restarted from the weights set)
            self._ask()
            return bool(torch.equal(before, params))

        @property
        def iteration(self):
            """The package optimizer's finished iterations (methods that start from the gradients at ``x0``
            take one more step() than iterations)."""
            return self.inner.iteration

        def _check_groups(self):
            """A RuntimeError where ``param_groups`` no longer hold one group of ``replicas.params`` alone: a group
            appended to the list was never stepped, and a group whose ``params`` were replaced left
            ``replicas.params.grad`` uncleared by ``zero_grad()``, the gradients of the steps adding up (helper
            196)."""
            groups = self.param_groups
            if len(groups) != 1 or len(groups[0]["params"]) != 1 or groups[0]["params"][0] is not self.replicas.params:
                raise RuntimeError("DecentralizedOptimizer steps replicas.params alone: its param_groups must hold one "
                                   "group whose params are [replicas.params] (a group was added, or its params "
                                   "replaced); step other parameters with an optimizer of their own")

        def zero_grad(self, set_to_none=True):
            """Clear ``params.grad`` and the count of backward passes (and, where weights were set in the replicas
            before the first step, restart the optimizer from them)."""
            self._check_groups()
            self._points_kept("zero_grad()")
            super().zero_grad(set_to_none=set_to_none)
            self._backwards = 0
            self._stepped = self._stale = False

        @torch.no_grad()
        def step(self, closure=None):
            """One step with the gradients in ``replicas.params.grad`` (the ``R`` backward passes averaged).

            Returns the closure's loss when a ``closure`` (re-evaluating the
            loss and calling ``backward``) is given, as ``torch.optim`` does.
            """
            self._check_groups()
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            params = self.replicas.params
            if params.grad is None:
                raise RuntimeError("step() found no gradient in replicas.params.grad: call loss.backward() between "
                                   "zero_grad() and step() (the loss of replicas(inputs))")
            if not self._points_kept("step()"):
                params.grad, self._backwards, self._stepped, self._stale = None, 0, False, False  # (taken elsewhere)
                raise RuntimeError("step(): the optimizer restarted from the weights set in the replicas, and its "
                                   f"first points are not them ({type(self.inner).__name__} starts from its server's "
                                   "or the average model): replicas.params now hold them; compute the loss there "
                                   "again")
            if self._stale:
                raise ValueError("step(): backward() ran after the last step() with no zero_grad() between, so "
                                 "replicas.params.grad holds that step's gradients too; call zero_grad() before each "
                                 "step's backward passes")
            B = self.batches_per_step
            if self._backwards and self._backwards != B:  # (a grad written by hand: taken as the average)
                why = f" ({type(self.inner).__name__} gossips rounds={B} times per iteration: eq. 12b)" \
                    if B == self.inner.rounds > 1 else ""
                raise ValueError(f"a step averages batches_per_step={B} mini-batch{'es' if B > 1 else ''}{why}: "
                                 f"call backward() on {B} between zero_grad() and step(), got {self._backwards} "
                                 "(every autograd pass through replicas.params counts: take a gradient for "
                                 "logging at replicas.params.detach().requires_grad_())")
            G = params.grad / self._backwards if self._backwards > 1 else params.grad
            if self.inner._asked_points() is None:
                raise RuntimeError("step(): the optimizer has no step waiting for gradients (a failed step before "
                                   "this one?); replicas.params are the points of the next: compute the loss there "
                                   "again")
            try:
                lr = self.param_groups[0]["lr"]
                if lr is not self._lr and not _same_rate(lr, self._lr):  # a scheduler's new rate: this step's
                    # update uses it, as in torch.optim (the step waiting for G computes it here); checked then
                    _check_group_rate(self.inner, lr, "param_groups[0]['lr']")
                    if np.ndim(lr) == 0 and not lr > 0:
                        raise ValueError(f"lr must be > 0 at every step, got {lr!r} from param_groups[0]['lr'] (a "
                                         "scheduler's warm-up from 0 or decay to 0?): the package's methods divide "
                                         "by it or scale their corrections with it; start a warm-up above 0, e.g. "
                                         "LambdaLR(opt, lambda k: (k + 1) / K), or decay to eta_min > 0")
                    self.inner.lr = lr
                    self._lr = lr
                self._fresh = False
                self.inner.tell(from_tensor(G))
            finally:
                self._backwards, self._stepped = 0, True
                self._ask()  # (params: the points of the step now waiting, whatever happened)
            return loss

        def state_dict(self):
            """The package optimizer's :meth:`state_dict` (its finished iterations: the points of the next step are
            asked again on load) and the torch optimizer's own entries, as tensors, strings and lists: what
            ``torch.save`` writes and ``torch.load`` reads back with its default ``weights_only=True`` (NumPy
            arrays it refuses)."""
            return {"rowstoch": {k: _to_torch_safe(torch, v) for k, v in self.inner.state_dict().items()},
                    "param_groups": super().state_dict()["param_groups"],
                    "buffers": {k: b.detach().cpu().clone() for k, b in self.replicas.buffers.items()}}

        def load_state_dict(self, state):
            """Continue from :meth:`state_dict`: the same iterates as if never stopped."""
            if not (isinstance(state, dict) and "rowstoch" in state):
                raise ValueError("state must be what DecentralizedOptimizer.state_dict() returned (a dict with "
                                 "'rowstoch')")
            matrices = {k: getattr(self.inner, k) for k in type(self.inner).matrices}
            saved = {k: _from_torch_safe(v) for k, v in state["rowstoch"].items()}  # (NumPy arrays, as saved)
            buffers = state.get("buffers", {})  # (a state of an earlier version has none: they stay as they are)
            if not (isinstance(buffers, dict) and all(hasattr(b, "shape") for b in buffers.values())):  # (3: "'int'
                # object is not iterable", helper 204)
                raise ValueError(f"state['buffers'] must be a dict of tensors (name -> the replicas' buffer), as "
                                 f"state_dict() writes, got {type(buffers).__name__} {str(buffers)[:60]}")
            mine = self.replicas.buffers
            if set(buffers) - set(mine) or any(tuple(b.shape) != tuple(mine[k].shape) for k, b in buffers.items()):
                raise ValueError(f"state['buffers'] does not fit the replicas' buffers: saved "
                                 f"{ {k: tuple(b.shape) for k, b in buffers.items()} }, here "
                                 f"{ {k: tuple(b.shape) for k, b in mine.items()} }")
            x, here = saved.get("x"), tuple(self.inner.x.shape)
            rows = here if len(here) != 3 else (here[1], here[0] * here[2])  # (repetitions: saved node-major, as
            # (n, reps * d); their own state had been refused, helper 204)
            if x is not None and tuple(np.shape(x)) not in (here, rows):  # (helper 196's list: another
                # model's state met torch's "shape '[4, 12]' is invalid for input of size 32")
                raise ValueError(f"state['rowstoch']['x'] holds models of shape {tuple(np.shape(x))}, but these "
                                 f"replicas' are {tuple(self.inner.x.shape)} (n x the model's parameter count): "
                                 "the state is another model's or another network's")
            groups = state.get("param_groups")
            if groups:  # (checked now: "x" had been taken, and refused only by the next step(), helper 204)
                if not (isinstance(groups, (list, tuple)) and isinstance(groups[0], dict) and "lr" in groups[0]):
                    raise ValueError(f"state['param_groups'] must be a list of dicts with 'lr' (as state_dict() "
                                     f"writes), got {type(groups).__name__} {str(groups)[:80]}")
                _check_group_rate(self.inner, groups[0]["lr"], "state['param_groups'][0]['lr']")
            self.inner = type(self.inner).from_state_dict(saved, **matrices)
            self._lr = self.inner.lr  # (a rate a scheduler set after the last step: applied by the next, as it was)
            saved = state.get("param_groups")
            self.param_groups[0]["lr"] = saved[0]["lr"] if saved else self.inner.lr
            with torch.no_grad():
                for k, b in buffers.items():
                    mine[k].copy_(b)
            self._fresh = False
            self._ask()

        def __repr__(self):
            return f"DecentralizedOptimizer({self.inner!r})"

        def __getstate__(self):
            # (torch's Optimizer pickles its defaults, state and param_groups only: a deepcopy or a pickle had
            # succeeded and given an object whose repr, step() and state_dict() raised AttributeError, helper 267)
            raise TypeError("a DecentralizedOptimizer is copied through its state: build a new one on copied "
                            "Replicas (copy.deepcopy(replicas)) and load_state_dict(opt.state_dict()) into it")

    DecentralizedOptimizer.__module__ = __name__
    DecentralizedOptimizer.__qualname__ = "DecentralizedOptimizer"  # (pickled by reference: the module makes it)
    return DecentralizedOptimizer


#: The NumPy dtypes ``torch.from_numpy`` takes back exactly in every torch we support (2.1: no uint16/32/64).
_TORCH_DTYPES = ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")


def _to_torch_safe(torch, value):
    """A value of a package state dict in what ``torch.load(weights_only=True)`` reads: a tensor (an unsigned
    dtype torch lacks as ``{"numpy_dtype": name, "bits": its bits as signed ints}``), a text as ``str`` (an array
    of texts as a list)."""
    arr = np.asarray(value)
    if arr.dtype.kind == "U":
        return str(arr) if arr.ndim == 0 else arr.tolist()
    arr = np.array(arr, order="C")  # (a copy, C-ordered; np.ascontiguousarray would make a 0-d array 1-d)
    if arr.dtype.name in _TORCH_DTYPES:
        return torch.from_numpy(arr)
    if arr.dtype.kind in "iu":
        return {"numpy_dtype": arr.dtype.name, "bits": torch.from_numpy(arr.view(np.dtype(f"i{arr.dtype.itemsize}")))}
    raise TypeError(f"a state value of dtype {arr.dtype} has no torch form")


def _from_torch_safe(value):
    """What :func:`_to_torch_safe` made, back as the NumPy array it was (a NumPy array passes as it is: a state
    dict of an earlier version)."""
    if isinstance(value, dict) and set(value) == {"numpy_dtype", "bits"}:
        return value["bits"].numpy().view(np.dtype(value["numpy_dtype"]))
    if isinstance(value, (str, list)):
        return np.array(value)
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):  # (a tensor)
        return value.detach().cpu().numpy()
    return value


def _check_group_rate(inner, lr, name):
    """Refuse a ``param_groups[0]["lr"]`` (``name``) that is no number (nor one per replica): ``"0.1"`` had failed
    in "'>' not supported between 'str' and 'int'" (helper 192); an array of rates is checked as ``inner``'s
    constructor checks ``lr`` (one per replica, shape (reps, 1, 1); FROST's one per node), its messages headed by
    ``name`` (a (reps, 1, 1) array had met "truth value of an array is ambiguous", helper 204). A number's sign
    is the step's to say."""
    try:
        kind = np.asarray(lr).dtype.kind
    except (TypeError, ValueError, RuntimeError):
        kind = "O"
    if kind not in "iuf":
        raise TypeError(f"{name} must be a number (or one per replica), got {type(lr).__name__} {lr!r}")
    if np.ndim(lr) == 0:
        return
    try:
        inner._check_rates_fit(inner._check_lr(np.asarray(lr)), inner._global_shape, inner._ops.dtype)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{name}: {exc}") from None


def _same_rate(a, b):
    """Two learning rates equal (numbers, or arrays of one rate per replica)."""
    return a is b or bool(np.array_equal(np.asarray(a), np.asarray(b)))


def __getattr__(name):
    if name == "DecentralizedOptimizer":  # (a torch.optim.Optimizer: torch imported only when asked for)
        cls = globals()["DecentralizedOptimizer"] = _optimizer_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

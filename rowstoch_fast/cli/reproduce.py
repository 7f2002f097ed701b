"""``rowstoch reproduce``: the paper's figures and the experiments of :mod:`rowstoch_fast.experiments`.
"""

from __future__ import annotations

import contextlib
import os

from .._checks import MAX_ROUNDS
from ..errors import UsageError
from ._common import _writable_folder, progress_option, refuse_shared_launch


#: The figures of ``rowstoch reproduce``, with what each is.
FIGURES = {
    "pull-diag": "Figure 1",
    "linear-speedup": "Figure 2, both halves (exponential graphs and rings)",
    "multi-gossip": "Figure 3's synthetic analogue",
    "mnist-mlp": "Figure 3's neural network (a four-layer MLP through PyTorch; digits by default, MNIST with --data "
                 "mnist)",
    "mnist-heterogeneous": "the heterogeneous MNIST figure of Appendix E (each node its own label distribution, "
                           "with the heat map)",
    "cifar10-resnet": "Figure 4 (ResNet-18 on CIFAR-10 from --data-dir, or --synthetic images; --width for a CPU)",
    "robustness": "the algorithms under message loss",
    "communication": "under compressed messages (accuracy against bytes; neither in the paper)",
    "k-gt-local-steps": "another paper's figure: K-GT (Liu, Lin, Koloskova & Stich 2024), the error after equal "
                        "communication against the local steps K, K-GT vs Local DSGD on heterogeneous quadratics "
                        "(--iterations: communication rounds)",
}

#: The options each figure of ``rowstoch reproduce`` reads.
_SEEDS = ("--seed", "--data-seed")
_REPRODUCE_OPTIONS = {"pull-diag": (),
                      "linear-speedup": ("--iterations", "--repeats", "--graphs", "--rates") + _SEEDS,
                      "robustness": ("--iterations", "--repeats") + _SEEDS,
                      "multi-gossip": ("--iterations", "--repeats") + _SEEDS,
                      "communication": ("--iterations", "--repeats", "--seed"),
                      "k-gt-local-steps": ("--iterations", "--repeats", "--seed"),
                      "mnist-mlp": ("--iterations", "--repeats", "--data", "--data-dir", "--alpha", "--axis"),
                      "mnist-heterogeneous": ("--iterations", "--repeats", "--data", "--data-dir", "--axis"),
                      "cifar10-resnet": ("--iterations", "--repeats", "--data-dir", "--synthetic", "--width", "--axis")}
_ALL_OPTIONS = tuple(dict.fromkeys(o for options in _REPRODUCE_OPTIONS.values() for o in options))


def _stem(figure):
    """The name a figure's files start with (``multi_gossip.csv``, ``multi_gossip_verdict.csv``, ...)."""
    return "kgt_local_steps" if figure == "k-gt-local-steps" else figure.replace("-", "_")


#: The names of a figure's files in ``--out`` (``{stem}``: :func:`_stem`): its records, figures and verdicts.
_OUTPUT_NAME = r"{stem}(_(verdict|verdicts|finals|split))?\.(csv|png|pdf|svg|json)"


#: The file ``rowstoch demo`` leaves in its folder: its next run there replaces the files it wrote (a
#: reproduction of multi-gossip there removes it).
DEMO_MARKER = ".rowstoch-demo"


def earlier_outputs(out, figure, overwrite, words=None):
    """The files of an earlier run of ``figure`` in the folder ``out``: refused unless ``overwrite``, which removes
    them first (``rowstoch demo`` always does, in its own folder). An interrupted rerun had left the earlier run's
    CSV and figure beside its own verdict, or replaced a finished run with a partial one. Only the figure's own
    names count (a user's ``pull_diag_notes.txt`` is neither refused nor removed)."""
    import re

    if not os.path.isdir(out):
        return
    pattern = re.compile(_OUTPUT_NAME.format(stem=re.escape(_stem(figure))))
    found = sorted(name for name in os.listdir(out) if os.path.isfile(os.path.join(out, name)) and
                   pattern.fullmatch(name))
    if found and not overwrite:
        raise UsageError(f"--out {out!r} holds the results of an earlier run of {words or figure} "
                         f"({', '.join(found)}): choose another folder, or pass --overwrite to replace them")
    for name in found:
        os.remove(os.path.join(out, name))


#: The experiment of each figure whose runs gossip several rounds per iteration, and its parameter holding them.
_GOSSIP_ROUNDS = {"multi-gossip": ("reproduce_multi_gossip", "rounds"),
                  "robustness": ("reproduce_robustness", "mg_rounds"),
                  "mnist-mlp": ("reproduce_mnist_mlp", "rounds"),
                  "mnist-heterogeneous": ("reproduce_mnist_heterogeneous", "rounds"),
                  "cifar10-resnet": ("reproduce_cifar10_resnet", "rounds")}


def _least_rounds(figure):
    """``(rounds, why)``: the fewest communication rounds a figure's runs take, and why. One iteration of its
    largest R (:data:`_GOSSIP_ROUNDS`, read from the experiment's own defaults: multi-gossip's and the neural
    figures' 10, robustness's MG method's 5), K-GT's :data:`~rowstoch_fast.experiments.KGT_MIN_ROUNDS`; 1 for
    the others."""
    import inspect

    import numpy as np

    from .. import experiments

    if figure == "k-gt-local-steps":
        return experiments.KGT_MIN_ROUNDS, "the verdict reads the last tenth of its records"
    if figure not in _GOSSIP_ROUNDS:
        return 1, "one iteration"
    function, parameter = _GOSSIP_ROUNDS[figure]
    R = int(np.max(inspect.signature(getattr(experiments, function)).parameters[parameter].default))
    return R, f"one iteration at R = {R}"


def _check_inputs(args):
    """UsageError for what would stop a figure's run after it started: data files that cannot be read, PyTorch
    missing (before ``--out`` is made or its earlier files removed)."""
    if args.figure == "cifar10-resnet":
        from ..experiments.neural import MAX_WIDTH  # (before PyTorch is asked for: no import of it there)

        if args.width > MAX_WIDTH:  # (10^8 overflowed PyTorch's sizes: a traceback)
            raise UsageError(f"--width is at most {MAX_WIDTH} (64 times ResNet-18's channels), got {args.width}")
        if args.data_dir is not None:  # (the files before PyTorch is asked for)
            from ..datasets import load_cifar10

            try:
                load_cifar10(args.data_dir)
            except (FileNotFoundError, ValueError) as exc:
                raise UsageError(f"--data-dir: {exc}") from exc
        _needs_torch(args.figure)
    elif args.figure in ("mnist-mlp", "mnist-heterogeneous"):
        if args.data == "mnist" and not args.data_dir:
            raise UsageError("--data mnist reads MNIST from --data-dir (nothing is downloaded)")
        if args.data == "mnist":
            from ..datasets import load_mnist

            try:
                load_mnist(args.data_dir)
            except (FileNotFoundError, ValueError) as exc:
                raise UsageError(f"--data-dir: {exc}") from exc
        _needs_torch(args.figure)


def _needs_torch(figure):
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise UsageError(f"reproduce {figure} needs PyTorch: pip install '.[torch]' from the checkout (the CPU wheel "
                         "first on a machine without a GPU: docs/guide/install.md)")


def _graphs(text):
    """``--graphs``: the comma-separated halves of Figure 2, each known, none twice, at least one."""
    from ..experiments import LINEAR_SPEEDUP_SIZES

    names = [g.strip() for g in text.split(",")]
    bad = [g for g in names if g not in LINEAR_SPEEDUP_SIZES]
    if bad or len(set(names)) != len(names):
        raise UsageError(f"--graphs must name distinct halves of Figure 2 from {', '.join(LINEAR_SPEEDUP_SIZES)}, "
                         f"comma-separated, got {text!r}")
    return tuple(names)


def cmd_reproduce(args):
    """``rowstoch reproduce FIGURE``: one of the paper's experiments."""
    from .. import experiments

    refuse_shared_launch(f"reproduce {args.figure}")
    reads = _REPRODUCE_OPTIONS[args.figure]
    unread = [o for o in _ALL_OPTIONS if o in args.given and o not in reads]
    if unread:  # they were ignored: another run than the one asked for
        raise UsageError(f"reproduce {args.figure} takes no {' or '.join(unread)}"
                         + (f" (it takes {', '.join(reads)})" if reads else ""))
    if args.figure == "cifar10-resnet":
        if args.synthetic == (args.data_dir is not None):
            raise UsageError("reproduce cifar10-resnet reads CIFAR-10 from --data-dir, or trains on --synthetic "
                             "images: give one of the two")
    elif args.data_dir and args.data != "mnist":
        raise UsageError("--data-dir is read with --data mnist only (digits need no files)")
    graphs = _graphs(args.graphs) if args.graphs is not None else ("exponential", "ring")
    least, why = _least_rounds(args.figure)
    if (args.iterations or least) < least:  # (a traceback after --out was made, before)
        raise UsageError(f"reproduce {args.figure}: --iterations is the communication rounds of each run, at least "
                         f"{least} ({why}), got {args.iterations}")
    most = MAX_ROUNDS // (max(experiments.KGT_LOCAL_STEPS) if args.figure == "k-gt-local-steps" else 1)
    if (args.iterations or 0) > most:  # (a traceback past 2^62 iterations, helper 261)
        raise UsageError(f"reproduce {args.figure}: --iterations is at most {most} (2^62 iterations a run"
                         + (f", {max(experiments.KGT_LOCAL_STEPS)} local steps a round" if most < MAX_ROUNDS else "")
                         + f"), got {args.iterations}")
    _check_inputs(args)
    _writable_folder(args.out, "--out")
    earlier_outputs(args.out, args.figure, args.overwrite)  # (last: --overwrite removes them only when the run
    # will start)
    if args.figure == "multi-gossip":  # (the demo's files replaced by this run's: a demo there no longer owns them)
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(args.out, DEMO_MARKER))
    progress = progress_option(args)
    seeds = {"seed": args.seed} if args.data_seed is None else {"seed": args.seed, "data_seed": args.data_seed}
    if args.figure == "pull-diag":
        experiments.reproduce_pull_diag(args.out)
    elif args.figure == "linear-speedup":
        experiments.reproduce_linear_speedup(args.out, iterations=args.iterations, repeats=args.repeats or 20,
                                             graphs=graphs, rates=args.rates, progress=progress, **seeds)
    elif args.figure == "robustness":
        experiments.reproduce_robustness(args.out, rounds_budget=args.iterations or 1000, repeats=args.repeats or 10,
                                         progress=progress, **seeds)
    elif args.figure == "communication":
        experiments.reproduce_communication(args.out, rounds_budget=args.iterations or 1000,
                                            repeats=args.repeats or 3, progress=progress, seed=args.seed)
    elif args.figure == "k-gt-local-steps":
        experiments.reproduce_kgt_local_steps(args.out, communication_rounds=args.iterations or experiments.KGT_ROUNDS,
                                              repeats=args.repeats or experiments.KGT_REPEATS, progress=progress,
                                              seed=args.seed)
    elif args.figure == "cifar10-resnet":
        try:
            experiments.reproduce_cifar10_resnet(args.out, data_dir=args.data_dir, synthetic=args.synthetic,
                                                 width=args.width, communication_rounds=args.iterations or 2000,
                                                 repeats=args.repeats or 3, progress=progress, axis=args.axis)
        except (FileNotFoundError, ValueError) as exc:
            raise UsageError(str(exc)) from exc
    elif args.figure in ("mnist-mlp", "mnist-heterogeneous"):
        options = dict(data=args.data, data_dir=args.data_dir, communication_rounds=args.iterations or 2000,
                       repeats=args.repeats or 3, progress=progress, axis=args.axis)
        try:
            if args.figure == "mnist-mlp":
                experiments.reproduce_mnist_mlp(args.out, alpha=args.alpha, **options)
            else:
                experiments.reproduce_mnist_heterogeneous(args.out, **options)
        except (FileNotFoundError, ValueError) as exc:  # (a split the data cannot give, ...)
            raise UsageError(str(exc)) from exc
    else:
        experiments.reproduce_multi_gossip(args.out, communication_rounds=args.iterations or 2000,
                                           repeats=args.repeats or 5, progress=progress, **seeds)
    return 0

"""``rowstoch reproduce``: the paper's figures and the experiments of :mod:`rowstoch_fast.experiments`.
"""

from __future__ import annotations

from ..errors import UsageError
from ._common import _writable_folder, progress_option


#: The options each figure of ``rowstoch reproduce`` reads.
_REPRODUCE_OPTIONS = {"pull-diag": (), "linear-speedup": ("--iterations", "--repeats"),
                      "robustness": ("--iterations", "--repeats"), "multi-gossip": ("--iterations", "--repeats"),
                      "communication": ("--iterations", "--repeats"),
                      "mnist-mlp": ("--iterations", "--repeats", "--data", "--data-dir", "--alpha", "--axis")}


def cmd_reproduce(args):
    """``rowstoch reproduce FIGURE``: one of the paper's experiments."""
    from .. import experiments

    reads = _REPRODUCE_OPTIONS[args.figure]
    unread = [o for o in ("--iterations", "--repeats", "--data", "--data-dir", "--alpha", "--axis")
              if o in args.given and o not in reads]
    if unread:  # they were ignored: another run than the one asked for
        raise UsageError(f"reproduce {args.figure} takes no {' or '.join(unread)}"
                         + (f" (it takes {', '.join(reads)})" if reads else ""))
    if args.data_dir and args.data != "mnist":
        raise UsageError("--data-dir is read with --data mnist only (digits need no files)")
    _writable_folder(args.out, "--out")
    progress = progress_option(args)
    if args.figure == "pull-diag":
        experiments.reproduce_pull_diag(args.out)
    elif args.figure == "linear-speedup":
        experiments.reproduce_linear_speedup(args.out, iterations=args.iterations or 4000, repeats=args.repeats or 20,
                                             progress=progress)
    elif args.figure == "robustness":
        experiments.reproduce_robustness(args.out, rounds_budget=args.iterations or 1000, repeats=args.repeats or 10,
                                         progress=progress)
    elif args.figure == "communication":
        experiments.reproduce_communication(args.out, rounds_budget=args.iterations or 1000,
                                            repeats=args.repeats or 3, progress=progress)
    elif args.figure == "mnist-mlp":
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            raise UsageError("reproduce mnist-mlp needs PyTorch: pip install 'rowstoch_fast[torch]'")
        if args.data == "mnist" and not args.data_dir:
            raise UsageError("--data mnist reads the four MNIST IDX files from --data-dir (nothing is downloaded)")
        try:
            experiments.reproduce_mnist_mlp(args.out, data=args.data, data_dir=args.data_dir,
                                            communication_rounds=args.iterations or 2000, repeats=args.repeats or 3,
                                            alpha=args.alpha, progress=progress, axis=args.axis)
        except (FileNotFoundError, ValueError) as exc:
            raise UsageError(str(exc)) from exc
    else:
        experiments.reproduce_multi_gossip(args.out, communication_rounds=args.iterations or 2000,
                                           repeats=args.repeats or 5, progress=progress)
    return 0

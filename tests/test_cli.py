"""The rowstoch command line: tables, files, and one-line errors for bad input."""

import json
import os
import re

import numpy as np
import pytest
import scipy.sparse as sp

from rowstoch_fast import cli, topology


def test_metrics_table_for_a_topology(capsys):
    assert cli.main(["metrics", "--topology", "exponential", "--n", "16"]) == 0
    out = capsys.readouterr().out
    assert "exponential" in out and "0.6000" in out and "1.0000" in out


def test_metrics_all(capsys):
    assert cli.main(["metrics", "--n", "16"]) == 0
    out = capsys.readouterr().out
    for name in ("ring", "star", "paper-grid", "paper-nearest_neighbor"):
        assert name in out


def test_metrics_all_leaves_out_a_graph_too_large_for_the_memory(capsys, monkeypatch):
    """Helper 231: ``rowstoch metrics --n 100000`` (every topology) ended whole, "out of memory: complete(100000)
    needs 447 GiB", after 35 s of building the others; the graph that does not fit is left out and said."""
    real = topology.complete

    def complete(n, *args, **kwargs):
        if n == 16:
            raise MemoryError("complete(16) needs about 447 GiB of memory but only 1.0 GiB is available")
        return real(n, *args, **kwargs)

    monkeypatch.setattr(topology, "complete", complete)
    assert cli.main(["metrics", "--n", "16"]) == 0
    out, err = capsys.readouterr()
    assert "ring" in out and "\ncomplete " not in out and "not built at --n 16: complete (complete(16) needs" in err


@pytest.mark.parametrize("suffix", [".npz", ".npy", ".mtx", ".txt"])
def test_metrics_from_matrix_files(tmp_path, capsys, suffix):
    A = topology.exponential(8)
    path = tmp_path / f"A{suffix}"
    if suffix == ".npz":
        sp.save_npz(path, sp.csr_matrix(A.csr))
    elif suffix == ".npy":
        np.save(path, A.toarray())
    elif suffix == ".mtx":
        import scipy.io

        scipy.io.mmwrite(path, sp.coo_matrix(A.csr))
    else:
        src = np.arange(8)
        lines = [f"{i} {(i + h) % 8}" for i in src for h in (1, 2, 4)]
        path.write_text("# src dst\n" + "\n".join(lines) + "\n")
    assert cli.main(["metrics", "--matrix", str(path)]) == 0
    assert "0.5000" in capsys.readouterr().out  # beta of exponential(8)


@pytest.mark.parametrize("text", [
    "src,dst\n" + "\n".join(f"{i},{(i + h) % 8}" for i in range(8) for h in (1, 2, 4)),
    "# a CSV without a header\n" + "\n".join(f"{i}, {(i + h) % 8}" for i in range(8) for h in (1, 2, 4)),
    "src,dst,weight\n" + "\n".join(f"{i},{(i - h) % 8},0.25" for i in range(8) for h in (0, 1, 2, 4))])
def test_edge_lists_with_commas(tmp_path, capsys, text):
    """CSV edge lists (commas, spaces after them, a header line, weights) read as the whitespace ones: the
    exponential graph on 8 nodes, beta 0.5 (they were refused: 'could not convert string')."""
    path = tmp_path / "edges.csv"
    path.write_text(text + "\n")
    assert cli.main(["metrics", "--matrix", str(path)]) == 0
    assert "0.5000" in capsys.readouterr().out
    path.write_text("0,1\n1;2\n")
    assert cli.main(["metrics", "--matrix", str(path)]) == 2
    assert "edge list" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["metrics", "--topology", "bogus"], "unknown topology 'bogus'"),
        (["metrics", "--topology", "grid", "--n", "10"], "square --n"),
        (["metrics", "--matrix", "/nonexistent/A.npz"], "does not exist"),
    ],
)
def test_bad_arguments_give_one_line_errors(capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_invalid_matrix_file(tmp_path, capsys):
    path = tmp_path / "bad.npy"
    np.save(path, np.array([[1.0, 0.0], [0.0, 1.0]]))  # not strongly connected
    assert cli.main(["metrics", "--matrix", str(path)]) == 2
    assert "strongly connected" in capsys.readouterr().err
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip")
    assert cli.main(["metrics", "--matrix", str(garbage)]) == 2
    assert "cannot use matrix file" in capsys.readouterr().err


def test_argparse_rejects_bad_n():
    with pytest.raises(SystemExit) as exc:
        cli.main(["metrics", "--n", "-3"])
    assert exc.value.code == 2


def test_cli_run_default_lr_follows_the_method(tmp_path, capsys):
    """Without --lr: 0.05 / n for the Pull-Diag family (its tracker follows the sum of the gradients), 0.05 else."""
    base = ["run", "--topology", "ring", "--n", "8", "--iterations", "5", "--total", "1600", "--batch", "20",
            "--no-progress"]
    assert cli.main(base + ["--out", str(tmp_path / "a")]) == 0
    assert "pull-diag-gt (lr 0.00625)" in capsys.readouterr().out
    assert cli.main(base + ["--algorithm", "push-pull", "--out", str(tmp_path / "b")]) == 0
    assert "push-pull (lr 0.05)" in capsys.readouterr().out


@pytest.mark.parametrize("objective", ["quadratic", "logistic"])
def test_cli_run_in_float32_follows_float64(tmp_path, objective):
    """--dtype float32: matrix, iterates and the objective (its data too) in float32, within 1e-5 of float64."""
    import pandas as pd

    base = ["run", "--topology", "erdos_renyi", "--n", "64", "--objective", objective, "--iterations", "200",
            "--record-every", "50", "--no-progress"] + (["--total", "6400", "--batch", "50"] * (objective == "logistic"))
    assert cli.main(base + ["--out", str(tmp_path / "d")]) == 0
    assert cli.main(base + ["--dtype", "float32", "--out", str(tmp_path / "s")]) == 0
    a, b = (pd.read_csv(tmp_path / k / "history.csv") for k in ("d", "s"))
    assert np.allclose(b["loss"], a["loss"], rtol=1e-5)
    # the gradient norm is a mean of nearly cancelling O(1) terms: float32 keeps ~1e-5 of it at 0.017 and
    # less below (the iterates themselves agree to 1e-5: test_algorithms.py::test_float32_end_to_end...)
    above = a["grad_norm"] > 1e-2
    assert above.sum() >= 2 and np.allclose(b["grad_norm"][above], a["grad_norm"][above], rtol=1e-4)


# ---------------------------------------------------------------------------- quiet by default
def test_progress_bars_only_where_someone_watches(tmp_path, capsys, monkeypatch):
    """No terminal (a log file, a pipe): no bar in the output; --progress forces one; -q drops the narration and
    keeps the results; -v adds the library's log."""
    from rowstoch_fast import _progress, cli

    base = ["run", "--n", "8", "--iterations", "30", "--total", "1600", "--lr", "0.05"]  # (a rate that gets
    # somewhere in 30 iterations: at the default's a note says it barely moved, as it does under -q too)
    assert cli.main(base + ["--out", str(tmp_path / "a")]) == 0
    plain = capsys.readouterr()
    assert "it/s" not in plain.err and "\r" not in plain.err and "wrote" in plain.out
    assert cli.main(base + ["--out", str(tmp_path / "b"), "--progress"]) == 0
    assert "pull-diag-gt" in capsys.readouterr().err  # the bar's description, on stderr
    assert cli.main(base + ["--out", str(tmp_path / "c"), "-q"]) == 0
    quiet = capsys.readouterr()
    assert "wrote" not in quiet.out and "grad norm" in quiet.out and quiet.err == ""
    assert cli.main(base + ["--out", str(tmp_path / "d"), "-v"]) == 0
    assert "rowstoch: INFO: pull-diag-gt (lr" in capsys.readouterr().err
    import logging

    assert not [h for h in logging.getLogger("rowstoch_fast").handlers if not isinstance(h, logging.NullHandler)]
    monkeypatch.setattr(_progress, "watched", lambda: False)  # (nobody watching: a log, a pipe)
    assert _progress.bar(True, 10) is None
    monkeypatch.setattr(_progress, "watched", lambda: True)
    shown = _progress.bar(True, 10)
    assert shown is not None
    shown.close()
    with pytest.raises(SystemExit):
        cli.main(["metrics", "-q", "-v"])  # one or the other
    assert "not allowed with argument" in capsys.readouterr().err


def test_every_command_takes_quiet_verbose_and_progress():
    from rowstoch_fast.cli import make_parser

    parser = make_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name, sub in commands.items():
        flags = {s for action in sub._actions for s in action.option_strings}
        assert {"-q", "--quiet", "-v", "--verbose", "--progress", "--no-progress"} <= flags, name


def test_set_num_threads_is_public_and_checked():
    import rowstoch_fast as rf

    before = rf.set_num_threads(1)
    try:
        assert rf.get_num_threads() == 1
    finally:
        rf.set_num_threads(before)
    with pytest.raises(ValueError, match="n must be >= 1"):
        rf.set_num_threads(0)
    with pytest.raises(TypeError):
        rf.set_num_threads(1.5)


def test_a_refused_command_leaves_no_folder_behind(tmp_path, capsys):
    """``--out`` is made and proved writable before any computation; a command refused after that (here: a network
    file that does not exist, read after the check) removes it again while it is empty."""
    from rowstoch_fast import cli

    out = tmp_path / "new" / "deeper"
    assert cli.main(["run", "--matrix", str(tmp_path / "missing.npz"), "--out", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    assert cli.main(["run", "--matrix", str(tmp_path / "missing.npz"), "--out", str(kept)]) == 2
    assert kept.is_dir()  # (a folder that was there stays)


def test_run_refuses_to_replace_an_earlier_runs_history(tmp_path, capsys):
    """A new user's trial: `rowstoch run --topology star ... --out r4` replaced r4's earlier ring history, exit 0
    (compare refuses). Refused now, unless --overwrite, or --resume of the run whose history it holds (a run going
    on writes where it wrote); a review found a resume let into any folder."""
    out = tmp_path / "r4"
    base = ["run", "--n", "8", "--total", "1600", "--batch", "20", "--no-progress"]
    assert cli.main([*base, "--iterations", "3", "--topology", "ring", "--out", str(out), "--checkpoint",
                     str(tmp_path / "ck.npz")]) == 0
    kept = (out / "history.csv").read_text()
    capsys.readouterr()
    assert cli.main([*base, "--iterations", "3", "--topology", "star", "--out", str(out)]) == 2
    assert f"--out {str(out)!r} holds the results of an earlier run (history.csv" in _one_line(capsys)
    assert (out / "history.csv").read_text() == kept
    assert cli.main([*base, "--topology", "ring", "--out", str(out), "--iterations", "6",
                     "--resume", str(tmp_path / "ck.npz")]) == 0  # (the same run, going on: where it wrote)
    star = tmp_path / "star"
    assert cli.main([*base, "--iterations", "3", "--topology", "star", "--out", str(star)]) == 0
    capsys.readouterr()
    assert cli.main([*base, "--topology", "ring", "--out", str(star), "--iterations", "9",
                     "--resume", str(tmp_path / "ck.npz")]) == 2  # (a resume into another run's folder)
    assert "holds the results of another run" in _one_line(capsys)
    (star / "history.json").write_text('{"meta": ')  # (damaged: not another run's, unknown)
    assert cli.main([*base, "--topology", "ring", "--out", str(star), "--iterations", "9",
                     "--resume", str(tmp_path / "ck.npz")]) == 2
    assert "its history.json cannot be read (JSONDecodeError" in _one_line(capsys)
    assert cli.main([*base, "--iterations", "3", "--topology", "star", "--out", str(out), "--overwrite"]) == 0
    assert (out / "history.csv").read_text() != kept
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")  # (a folder of other files: nothing is replaced)
    assert cli.main([*base, "--iterations", "3", "--out", str(tmp_path / "other")]) == 0
    # a comparison's folder, even with --overwrite (helper 246: a run's history beside a comparison's compare.csv)
    comparison = tmp_path / "cmp"
    comparison.mkdir()
    (comparison / "compare.csv").write_text("algorithm\n")
    for more in ([], ["--overwrite"]):
        capsys.readouterr()
        assert cli.main([*base, "--iterations", "3", "--out", str(comparison), *more]) == 2
        assert f"--out {str(comparison)!r} holds a comparison (compare.csv): choose another folder" in _one_line(capsys)
    assert sorted(p.name for p in comparison.iterdir()) == ["compare.csv"]


def _one_line(capsys):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("table, cli_args, message", [
    ("loss = 1.5", [], "e.toml: [communication] loss must be in [0, 1) (gilbert-elliott: [0, 1]), got 1.5"),
    ('loss_model = "gilbert-elliott"\nloss = 0.5', [],
     "e.toml: [communication] loss_model gilbert-elliott needs p_bad and p_recover"),
    ('activation = "markov"', ["--p-sleep", "0.3"], "e.toml: [communication] activation markov needs p_wake"),
    ("max_delay = -1", [], "e.toml: [communication] max_delay"),
    ("network_seed = 3", [], "e.toml: [communication] network_seed is not read without loss"),
    ("loss = [0.1, 0.1]", [], "e.toml: [communication] loss '0.1,0.1' names a rate twice"),
    ("p_bad = 0.1", [], 'e.toml: [communication] p_bad needs [communication] loss_model = "gilbert-elliott" (they '
                        'go with that model only)'),  # (helper 219: "loss_model gilbert-elliott needs p_bad ...")
])
def test_an_experiment_files_bad_communication_value_names_its_key(tmp_path, capsys, table, cli_args, message):
    """A layer option's value refused where the experiment file set it: one line naming the file, the table and the
    key (as the layer declares it), not the command line's flag; the options written on the command line keep
    their flags, and the same value written there is refused as before."""
    (tmp_path / "e.toml").write_text(f"[communication]\n{table}\n[algorithms.dsgd]\nlr = 0.01\n")
    argv = ["compare", "--config", str(tmp_path / "e.toml"), *cli_args, "--out", str(tmp_path / "o"), "--no-progress"]
    assert cli.main(argv) == 2
    err = _one_line(capsys)
    assert message in err and "--loss" not in err and "--network-seed" not in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("table, message", [
    ("[run]\nrounds_budget = -50", "e.toml: [run] rounds_budget must be >= 1, got -50"),
    ("[run]\nrepeats = 0", "e.toml: [run] repeats must be >= 1, got 0"),
    ("[objective]\nkind = \"logistic\"\ntotal = 1001", "e.toml: [objective] total 1001 samples must be divisible"),
    ("[algorithms.pull-diag-gtt]\nlr = 0.01", "e.toml: [algorithms]: unknown algorithm 'pull-diag-gtt'"),
    ("[algorithms.dsgd]\nlr = 5e-324", "e.toml: [algorithms.dsgd] lr = 5e-324 is subnormal"),  # (helper 192:
    # "--lr = 5e-324 is subnormal", a flag not given)
    ("[algorithms.\"local-dsgd \"]\nlr = 0.05\nlocal_steps = \"many\"",  # (helper 192: its settings dropped)
     "e.toml: [algorithms]: unknown algorithm 'local-dsgd ': a space around the name (write "
     "[algorithms.local-dsgd])"),
    ("[objective]\nkind = \"logistic\"\nbatch = 0", "e.toml: [objective] batch: batch must be >= 1, got 0"),
    ("[algorithms.dsgd]\nlr = 0.01\ntracker = \"perron\"",
     "e.toml: [algorithms.dsgd] tracker = 'perron' is for the methods with a Pull-Diag tracker; dsgd has none"),
])
def test_an_experiment_files_bad_value_of_any_table_names_its_key(tmp_path, capsys, table, message):
    """A new user's trial: the file's [run], [objective] and [algorithms] values were refused as command-line
    flags ("--rounds-budget must be >= 1"), naming neither the file nor the key; the same value written on the
    command line keeps its flag."""
    algorithms = "" if "[algorithms." in table else "\n[algorithms.dsgd]\nlr = 0.01\n"
    (tmp_path / "e.toml").write_text(f"[network]\ntopology = \"ring\"\nn = 8\n{table}\n{algorithms}")
    argv = ["compare", "--config", str(tmp_path / "e.toml"), "--out", str(tmp_path / "o"), "--no-progress"]
    assert cli.main(argv) == 2
    err = _one_line(capsys)
    assert message in err and "--" not in err.split(message)[0], err


def test_an_experiment_files_relative_matrix_is_found_beside_it(tmp_path, capsys, monkeypatch):
    """``matrix = "graph.npy"`` (and a per-node ``awake = "@awake.txt"``) in a file kept beside its data: read from
    the current folder as on the command line, or else from the file's folder (refused as missing when run from
    elsewhere)."""
    import numpy as np

    (tmp_path / "exp").mkdir()
    np.save(tmp_path / "exp" / "graph.npy", topology.ring(8).toarray())
    (tmp_path / "exp" / "e.toml").write_text('[network]\nmatrix = "graph.npy"\n[objective]\nkind = "logistic"\n'
                                             'total = 1600\nbatch = 20\n[run]\nrounds_budget = 20\nrepeats = 1\n'
                                             '[algorithms.dsgd]\nlr = 0.01\n')
    monkeypatch.chdir(tmp_path)
    assert cli.main(["compare", "--config", "exp/e.toml", "--out", "o", "--no-progress"]) == 0
    saved = json.loads((tmp_path / "o" / "experiment.json").read_text())["settings"]["matrix"]
    assert os.path.samefile(saved, tmp_path / "exp" / "graph.npy")
    capsys.readouterr()
    (tmp_path / "exp" / "awake.txt").write_text("1\n1\n1\n1\n0.5\n0.5\n0.5\n0.5\n")  # (per-node values: @FILE)
    with_awake = (tmp_path / "exp" / "e.toml").read_text().replace("[objective]", '[communication]\nawake = '
                                                                   '"@awake.txt"\n[objective]')
    (tmp_path / "exp" / "a.toml").write_text(with_awake.replace("dsgd", "push-pull"))
    assert cli.main(["compare", "--config", "exp/a.toml", "--out", "oa", "--no-progress"]) == 0
    capsys.readouterr()
    (tmp_path / "exp" / "e.toml").write_text((tmp_path / "exp" / "e.toml").read_text().replace("graph", "none"))
    assert cli.main(["compare", "--config", "exp/e.toml", "--out", "o2", "--no-progress"]) == 2
    assert "'none.npy' does not exist" in _one_line(capsys)


def test_a_command_lines_bad_communication_value_still_names_its_flag(tmp_path, capsys):
    (tmp_path / "e.toml").write_text("[communication]\nloss = 0.1\n[algorithms.dsgd]\nlr = 0.01\n")
    for argv, message in ((["--loss", "1.5"], "error: --loss must be in [0, 1)"),
                          (["--config", str(tmp_path / "e.toml"), "--loss", "1.5"], "error: --loss must be in [0, 1)"),
                          (["--config", str(tmp_path / "e.toml"), "--loss-model", "gilbert-elliott"],
                           "error: --loss-model gilbert-elliott needs --p-bad and --p-recover")):
        assert cli.main(["compare", *argv, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
        assert message in _one_line(capsys)


def test_a_refusal_of_the_file_s_keys_and_a_flag_names_each_in_its_words(tmp_path, capsys):
    """Helper 185: a file's [network] with `--matrix` on the command line read "--topology and --n ... are not read
    with --matrix": the file's keys as flags. Each is said where it was written. (The file's keys alone are dropped
    now, said in a note: the command line's --matrix wins, helper 266; beside the command line's own --n, refused.)"""
    (tmp_path / "e.toml").write_text('[network]\ntopology = "ring"\n[algorithms.dsgd]\nlr = 0.05\n')
    np.savetxt(tmp_path / "m.txt", [[0, 1], [1, 0]], fmt="%d")
    assert cli.main(["compare", "--config", str(tmp_path / "e.toml"), "--matrix", str(tmp_path / "m.txt"), "--n", "4",
                     "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert _one_line(capsys).endswith("e.toml: [network] topology and --n are not read with --matrix (the file "
                                      "is the network)\n")


def _leaving_layer():
    """A links layer of a test's own whose option is spelled otherwise on the command line (``--leaving``) and in
    an experiment file (``leaving-nodes``) than its name (``leave_nodes``)."""
    from rowstoch_fast.errors import UsageError
    from rowstoch_fast.network import Sleepy
    from rowstoch_fast.network.options import Option

    class Leaving(Sleepy):
        layer = "leaving-test"
        order = listed = 26
        keeps_symmetry = True

        def __init__(self, A, nodes):
            super().__init__(A, 1.0)
            self.nodes = tuple(nodes)

        def _draw(self, t):
            awake = np.ones(self.n, dtype=bool)
            awake[list(self.nodes)] = t < 2
            return awake

        @property
        def static(self):
            return None

        def map(self, f):
            return Leaving(f(self.base), self.nodes)

        OPTIONS = (Option("leave_nodes", str, None, "nodes that leave at iteration 2", cli="--leaving",
                          toml="leaving-nodes"),)
        SEED_FLAGS = ()

        @classmethod
        def options_in_use(cls, ns):
            return ns.leave_nodes is not None

        @classmethod
        def check_options(cls, ns, d=None):
            if ns.leave_nodes is not None and not all(p.strip().isdigit() for p in ns.leave_nodes.split(",")):
                raise UsageError(f"--leaving must be comma-separated node ids, got {ns.leave_nodes!r}")

        @classmethod
        def from_options(cls, net, ns, seed):
            return cls(net, [int(p) for p in ns.leave_nodes.split(",")])

        @classmethod
        def options_words(cls, ns):
            return f"nodes {ns.leave_nodes} leave" if ns.leave_nodes else None

        @classmethod
        def options_record(cls, ns):
            return {"leave_nodes": ns.leave_nodes} if ns.leave_nodes else {}

    return Leaving


def test_a_layer_options_cli_and_toml_spellings_are_declared(tmp_path, capsys):
    """Option(cli=..., toml=...): --help, the TOML schema, an experiment file's settings (the command line wins
    over them), its refusals and the records all read the declared spellings; nothing else is edited."""
    import json

    from rowstoch_fast import config
    from rowstoch_fast.network.base import LAYERS
    from rowstoch_fast.network.options import Option

    _leaving_layer()
    try:
        for command in ("run", "compare"):
            with pytest.raises(SystemExit):
                cli.main([command, "--help"])
            out = capsys.readouterr().out
            assert "--leaving LEAVE_NODES" in out and "--leave-nodes" not in out
        communication = config.schema()["communication"]
        assert communication["leaving-nodes"] == ("leave_nodes", str) and "leave_nodes" not in communication
        path = tmp_path / "e.toml"
        path.write_text('[communication]\nleaving-nodes = "1,2"\n[algorithms.dsgd]\nlr = 0.01\n')
        assert config.load(path)[0]["leave_nodes"] == "1,2"
        small = ["--n", "8", "--total", "800", "--batch", "10", "--no-progress"]
        assert cli.main(["compare", "--config", str(path), "--rounds-budget", "6", "--repeats", "1", *small,
                         "--out", str(tmp_path / "c1")]) == 0
        assert cli.main(["compare", "--config", str(path), "--leaving", "3", "--rounds-budget", "6", "--repeats", "1",
                         *small, "--out", str(tmp_path / "c2")]) == 0
        capsys.readouterr()
        settings = [json.loads((tmp_path / out / "experiment.json").read_text())["settings"] for out in ("c1", "c2")]
        assert settings[0]["leave_nodes"] == "1,2" and settings[1]["leave_nodes"] == "3"
        path.write_text('[communication]\nleaving-nodes = "x"\n[algorithms.dsgd]\nlr = 0.01\n')
        assert cli.main(["compare", "--config", str(path), "--out", str(tmp_path / "bad"), "--no-progress"]) == 2
        assert "e.toml: [communication] leaving-nodes must be comma-separated node ids, got 'x'" in _one_line(capsys)
        assert cli.main(["run", "--leaving", "x", *small, "--out", str(tmp_path / "bad")]) == 2
        assert "error: --leaving must be comma-separated node ids" in _one_line(capsys)
        assert cli.main(["run", "--leaving", "1,2", "--iterations", "6", *small, "--out", str(tmp_path / "r")]) == 0
        record = json.loads((tmp_path / "r" / "history.json").read_text())["meta"]["config"]["cli"]
        assert record["leave_nodes"] == "1,2"
    finally:
        LAYERS.pop("leaving-test", None)
    with pytest.raises(ValueError, match="cli must be a flag"):
        Option("x", cli="-x")
    with pytest.raises(ValueError, match="toml must be a bare TOML key"):
        Option("x", toml="a b")


def test_two_layers_options_spelled_alike_are_refused():
    from rowstoch_fast.network import Lossy, options
    from rowstoch_fast.network.base import LAYERS
    from rowstoch_fast.network.options import Option

    class Twice(Lossy):
        layer = "twice-test"
        OPTIONS = (Option("twice", float, 0.0, "a rate", toml="loss"),)

    try:
        with pytest.raises(TypeError, match="its option 'twice' has the key 'loss' of an option of Lossy"):
            options.declared()
    finally:
        LAYERS.pop("twice-test", None)


@pytest.mark.parametrize("option, message", [
    (dict(name="lr", kind=float, default=None), "Burst: its option --lr is the command line's own --lr"),
    (dict(name="seed", kind=int, default=None, cli="--burst-seed"),
     "Burst: its option 'seed' has the destination of the command line's own --seed")])
def test_a_layer_option_spelled_as_the_commands_own_is_refused(option, message):
    """A layer's ``Option("lr", ...)`` had ended every command, ``rowstoch algorithms`` too, with argparse's
    "conflicting option string: --lr" naming no layer; one whose destination alone was another option's would
    have set that option (helper 238)."""
    from rowstoch_fast.cli.parser import make_parser
    from rowstoch_fast.network import Sleepy
    from rowstoch_fast.network.base import LAYERS
    from rowstoch_fast.network.options import Option

    class Burst(Sleepy):
        layer = "burst-test"
        OPTIONS = (Option(**option, help="a clash"),)

    try:
        with pytest.raises(TypeError, match=re.escape(message)):
            make_parser()
    finally:
        LAYERS.pop("burst-test", None)
    make_parser()


def test_ranks_whose_commands_differ_are_said_as_each_wrote_it(tmp_path, monkeypatch, capsys):
    """An MPMD launch where one rank wrote ``--n 8`` beside an experiment file that the other took its n from: the
    refusal was reworded as the file's key on rank 0 ("rank 1 has '[network] n 8'"), which neither rank wrote. MPI
    itself stands in (a rank 0 of one): the test process never initializes MPI (Open MPI as root refuses a
    singleton without its opt-in, and a forked worker after MPI_Init is unsafe), and needs no mpi4py."""
    import sys
    import types

    from rowstoch_fast.cli import _common

    comm = types.SimpleNamespace(Get_rank=lambda: 0, Get_size=lambda: 2)
    monkeypatch.setitem(sys.modules, "mpi4py", types.SimpleNamespace(MPI=types.SimpleNamespace(COMM_WORLD=comm)))

    exp = tmp_path / "exp.toml"
    exp.write_text('[network]\nn = 16\n[objective]\nkind = "quadratic"\nd = 3\n[run]\nrounds_budget = 20\n'
                   '[algorithms.dsgd]\nlr = 0.05\n')
    common = ["compare", "--config", str(exp), "--backend", "mpi", "--no-progress", "--out", str(tmp_path / "o")]
    other = cli.make_parser().parse_args([*common, "--n", "8"])  # (rank 1's parse, as main makes it)
    other.given = {token for token in common if token.startswith("--")} | {"--n"}
    monkeypatch.setattr(_common, "_every_rank", lambda mine: [mine, _common.parsed_settings(other)])
    code = cli.main(common)  # (rank 0: its n from the file)
    said = capsys.readouterr().err
    assert code == 2 and "rank 1 has '--n 8' where rank 0 has 'no --n'; launch every rank" in said, said
    assert "[network]" not in said, said
    assert not (tmp_path / "o").exists()


def test_another_ranks_bug_is_not_said_as_a_usage_error(monkeypatch):
    """Under --backend mpi a refusal on one rank is said as one line on every rank; another rank's unexpected
    error (a bug) was said the same way on the others, a one-line usage error hiding a traceback. It is raised as
    the RemoteError that names it."""
    pytest.importorskip("mpi4py")
    from types import SimpleNamespace

    from rowstoch_fast.backends import mpi
    from rowstoch_fast.cli._common import on_every_rank
    from rowstoch_fast.errors import RemoteError, UsageError

    def failing(text):
        def collective(comm, fn, *a):
            raise RemoteError(text)
        return collective

    args = SimpleNamespace(backend="mpi")
    monkeypatch.setattr(mpi, "collective", failing("rank 1 failed: ValueError: --data-file x.npz: no such file"))
    with pytest.raises(UsageError, match=r"^rank 1: --data-file x\.npz: no such file$"):
        on_every_rank(args, print)
    monkeypatch.setattr(mpi, "collective", failing("rank 1 failed: AttributeError: 'NoneType' has no attribute 'n'"))
    with pytest.raises(RemoteError, match="AttributeError") as caught:
        on_every_rank(args, print)
    assert not isinstance(caught.value, UsageError)


def test_the_run_figure_says_every_way_a_run_diverged(tmp_path, monkeypatch):
    """A run whose gradient norm grew past the warning ends "diverged" (exit 3) with finite records; its figure's
    label said nothing (only a NaN divergence was labelled)."""
    from rowstoch_fast.runner import History

    labels = []
    save = History.save
    monkeypatch.setattr(History, "save", lambda self, folder, title=None, label=None: (
        labels.append(label), save(self, folder, title=title, label=label))[1])
    code = cli.main(["run", "--topology", "ring", "--n", "8", "--objective", "least-squares", "--algorithm",
                     "pull-diag-gt", "--lr", "0.01", "--iterations", "200", "--record-every", "5", "--repeats", "2",
                     "--no-progress", "--out", str(tmp_path / "u")])
    status = json.loads((tmp_path / "u" / "history.json").read_text())["status"]
    assert code == 3 and status == "diverged"
    assert labels == ["pull-diag-gt, lr = 0.01 (diverged)"]


@pytest.mark.parametrize("backend", ["bogus", "module://no_such_backend_module"])
def test_a_matplotlib_backend_that_does_not_load_is_refused_before_the_run(tmp_path, backend):
    """MPLBACKEND=bogus: the run finished, then a traceback, and the folder's old figure stayed beside the new
    records."""
    import subprocess
    import sys

    env = dict(os.environ, MPLBACKEND=backend)
    out = subprocess.run([sys.executable, "-m", "rowstoch_fast.cli", "run", "--objective", "quadratic", "--iterations",
                          "5", "--no-progress", "--out", str(tmp_path / "r")], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"rowstoch: error: MPLBACKEND={backend!r}: matplotlib cannot use it here")
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_a_comparison_that_draws_no_figure_runs_whatever_the_backend(tmp_path):
    """``MPLBACKEND=bogus``: a comparison with figures is refused before its run, as every command; one with
    ``--format none`` (and no ``--live``) draws nothing, and runs (helper 173: it had been refused)."""
    import subprocess
    import sys

    env = dict(os.environ, MPLBACKEND="bogus")
    args = [sys.executable, "-m", "rowstoch_fast.cli", "compare", "--n", "8", "--objective", "quadratic", "--d", "3",
            "--algorithms", "dsgd", "--lr", "0.05", "--rounds-budget", "10", "--repeats", "1", "--no-progress"]
    for formats, code in (("png", 2), ("none", 0)):
        out = subprocess.run(args + ["--format", formats, "--out", str(tmp_path / formats)], env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == code and "Traceback" not in out.stderr, out.stderr
        assert (tmp_path / formats / "compare.csv").exists() == (code == 0)
    assert out.stderr == "" and not (tmp_path / "png").exists()
    out = subprocess.run(args + ["--format", "png", "--out", str(tmp_path / "png")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.stderr.startswith("rowstoch: error: MPLBACKEND='bogus': matplotlib cannot use it here"), out.stderr


def test_a_final_checkpoint_that_cannot_be_saved_keeps_the_run_s_records(tmp_path, monkeypatch, capsys):
    """Out of memory gathering the state for --checkpoint at the end lost the whole run: no history, no folder."""
    from rowstoch_fast import runner

    saved = runner._save_checkpoint
    calls = []

    def out_of_memory_at_the_end(path, opt, *args):
        calls.append(opt.iteration)
        if opt.iteration == 30:
            raise MemoryError("Unable to allocate 153. MiB for an array with shape (500000, 40)")
        return saved(path, opt, *args)

    monkeypatch.setattr(runner, "_save_checkpoint", out_of_memory_at_the_end)
    code = cli.main(["run", "--objective", "quadratic", "--iterations", "30", "--record-every", "10", "--no-progress",
                     "--checkpoint", str(tmp_path / "ck.npz"), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "out of memory: Unable to allocate 153. MiB" in err and calls[-1] == 30
    assert "the 4 rows recorded before the error are in" in err
    import pandas as pd

    assert pd.read_csv(tmp_path / "r" / "history.csv")["iteration"].tolist() == [0, 10, 20, 30]


def test_a_matrix_file_that_declares_more_than_memory_holds_is_named(tmp_path, capsys):
    """An .npy header declaring 10^14 entries: "out of memory: Unable to allocate ...", naming no option."""
    path = tmp_path / "big.npy"
    with open(path, "wb") as fh:  # (a header alone: 800 TB declared, beyond any address space)
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (10**7, 10**7)})
    code = cli.main(["run", "--objective", "quadratic", "--iterations", "2", "--no-progress", "--matrix", str(path),
                     "--normalize", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"rowstoch: error: out of memory: --matrix {str(path)!r}: "), err


def test_a_compressed_data_file_past_memory_is_refused_before_it_is_decompressed(tmp_path, capsys, monkeypatch):
    """An .npz of 38 MiB of zeros in 39 kB (deflated): decompressed whole before any check, so a larger one
    was killed by the operating system; now refused by the sizes its entries declare, naming --data-file once."""
    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, H=np.zeros((10**6, 4)), y=np.zeros(10**6))
    assert path.stat().st_size < 100_000
    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(4 << 20))
    code = cli.main(["run", "--objective", "logistic", "--iterations", "2", "--no-progress", "--data-file",
                     str(path), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and err == (f"rowstoch: error: out of memory: --data-file {str(path)!r} needs about 38.1 MiB "
                                 "of memory but only 4.0 MiB is available\n"), err


def test_a_split_that_drops_samples_says_how_many_and_what_became_of_the_labels(tmp_path, capsys):
    """Helper 180: --split classes:1 on 1,600 samples with 5% positives kept 144, half of them positive (each node cut
    to the smallest node's size), and nothing said so: the problem solved was another. It is now said on stderr
    (once); a split that keeps every sample says nothing."""
    rng = np.random.default_rng(0)
    H = rng.standard_normal((1600, 4))
    y = np.where(rng.random(1600) < 0.05, 1.0, -1.0)
    path = tmp_path / "imbalanced.npz"
    np.savez(path, H=H, y=y)
    common = ["run", "--objective", "logistic-l2", "--n", "16", "--iterations", "2", "--no-progress", "--lr", "0.1",
              "--data-file", str(path), "--out"]
    assert cli.main([*common, str(tmp_path / "a"), "--split", "classes:1"]) == 0
    err = capsys.readouterr().err
    kept = re.search(r"rowstoch: warning: --split classes:1 keeps (\d+) of the 1600 training samples \((\d+) per "
                     r"node: each node cut to the smallest node's size\); labels -1 9\d% -> \d+%, 1 \d% -> \d+%", err)
    assert kept and int(kept[1]) == 16 * int(kept[2]) < 400 and err.count("warning") == 1, err
    assert cli.main([*common, str(tmp_path / "b"), "--split", "iid"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_experiment_json_says_how_the_data_were_made_and_split(tmp_path):
    """Helper 261: under --split iid|sorted experiment.json's objective dropped the generator, its seed, total and
    heterogeneity (kept under the contiguous split); it now keeps them and names the split (and the seed it drew,
    where it drew one)."""
    common = ["compare", "--n", "4", "--algorithms", "dsgd", "--rounds-budget", "4", "--repeats", "1", "--lr", "0.1",
              "--total", "400", "--data-seed", "7", "--format", "none", "--no-progress", "--out"]
    for split, extra in (("contiguous", {}), ("iid", {"split_seed": 7}), ("sorted", {})):
        out = tmp_path / split
        assert cli.main([*common, str(out), "--split", split]) == 0
        objective = json.loads((out / "experiment.json").read_text())["graphs"]["exponential"]["objective"]
        expected = {"generator": "synthetic", "total": 400, "seed": 7, "heterogeneity": 0.0}
        if split != "contiguous":
            expected.update(split=split, **extra)
        assert {k: objective.get(k) for k in (*expected, "split_seed")} == {"split_seed": None, **expected}, objective


def test_a_data_file_whose_loss_overflows_at_the_start_is_refused(tmp_path, capsys):
    """Helper 180: features of 1e200 overflowed the least-squares loss at the start; every method ran, each was
    reported `diverged` ("not finite from the start") and the command exited 0."""
    rng = np.random.default_rng(0)
    path = tmp_path / "huge.npz"
    np.savez(path, H=rng.standard_normal((32, 3)) * 1e200, y=rng.standard_normal(32))
    code = cli.main(["compare", "--objective", "least-squares", "--n", "4", "--algorithms", "dsgd", "--lr", "0.1",
                     "--rounds-budget", "5", "--no-progress", "--data-file", str(path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and re.fullmatch(rf"rowstoch: error: --data-file {re.escape(repr(str(path)))}: the loss or its "
                                      r"gradient at the start is not finite \(loss inf\) in float64: its rows "
                                      r"overflow \(the largest entry of H is [\d.]+e\+200\); rescale them\n", err), err
    np.savez(path, H=rng.standard_normal((32, 3)) * 1e200, y=np.where(rng.random(32) < 0.5, -1.0, 1.0))
    code = cli.main(["compare", "--objective", "logistic-l2", "--n", "4", "--algorithms", "dsgd", "--lr", "0.1",
                     "--batch", "4", "--rounds-budget", "5", "--no-progress", "--data-file", str(path), "--out",
                     str(tmp_path / "l2")])  # (finite at its start x0 = 0: its optimum's solver failed, and said so
    err = capsys.readouterr().err  # in words that named neither the file nor what to do)
    assert code == 2 and re.fullmatch(rf"rowstoch: error: --data-file {re.escape(repr(str(path)))}: its optimum x\* "
                                      r"could not be computed \(LogisticL2.optimum\(\)'s minimiser is not finite "
                                      r"\(x\[0\] = nan\)\); the largest entry of H is [\d.]+e\+200: rescale its "
                                      r"rows\n", err), err
    np.savez(path, H=rng.standard_normal((32, 3)), y=rng.standard_normal(32))
    assert cli.main(["run", "--objective", "least-squares", "--n", "4", "--iterations", "2", "--no-progress",
                     "--data-file", str(path), "--out", str(tmp_path / "r")]) == 0


def test_rowstoch_run_says_to_drop_the_flag_that_turned_an_option_off(tmp_path, capsys):
    """Helper 183: `rowstoch run --no-undirected --weights metropolis` was told "(add --undirected)"."""
    common = ["run", "--topology", "ring", "--n", "8", "--weights", "metropolis", "--no-progress", "--out"]
    assert cli.main([*common, str(tmp_path / "a"), "--no-undirected"]) == 2
    assert capsys.readouterr().err.endswith("needs an undirected graph: 7 sends to 0 but 0 does not send to 7 (drop "
                                            "--no-undirected)\n")
    assert cli.main([*common, str(tmp_path / "b")]) == 2
    assert capsys.readouterr().err.endswith("(add --undirected)\n")


def test_repetitions_past_what_memory_can_index_are_named(tmp_path, capsys):
    """--repeats 2^62: NumPy's "iterator is too large", naming neither the option nor the size."""
    code = cli.main(["run", "--objective", "quadratic", "--iterations", "10", "--no-progress", "--repeats",
                     str(2**62), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("rowstoch: error: out of memory: run(repeats=4611686018427387904)"), err
    assert "lower --repeats" in err


def test_a_non_ascii_file_name_under_the_c_locale(tmp_path):
    """Under LANG=C with Python's UTF-8 mode off a non-ASCII name arrives with its bytes escaped as lone
    surrogates: ``run``'s figure could not draw its title (a traceback out of matplotlib), and a comparison whose
    methods had run ended with "surrogates not allowed" and no tables. The outputs now show the name as UTF-8,
    and the console prints it as the bytes it was given."""
    import subprocess
    import sys

    graph = tmp_path / "grâphé.txt"
    graph.write_text("0 1\n1 2\n2 0\n")
    env = dict(os.environ, LC_ALL="C", LANG="C", PYTHONUTF8="0")
    env.pop("PYTHONIOENCODING", None)
    common = ["--matrix", str(graph), "--objective", "quadratic", "--no-progress"]
    for command in (["run", "--iterations", "5"], ["compare", "--algorithms", "dsgd", "--lr", "dsgd=0.05",
                                                   "--rounds-budget", "20", "--repeats", "1", "--format", "png"]):
        out = subprocess.run([sys.executable, "-m", "rowstoch_fast.cli", *command, *common, "--out",
                              str(tmp_path / command[0])], env=env, capture_output=True, timeout=300)
        assert out.returncode == 0, out.stderr.decode("utf-8", "replace")
    assert (tmp_path / "run" / "grad_norm.png").exists()
    assert "grâphé.txt" in (tmp_path / "compare" / "summary.md").read_text(encoding="utf-8")
    assert (tmp_path / "compare" / "compare.png").exists()  # (its title names the file)
    assert "grâphé.txt".encode() in out.stdout


def test_the_console_error_handler_is_put_back_when_a_command_ends(monkeypatch):
    """The handler that prints a non-ASCII name on an ASCII console stayed on a program's own stdout after
    ``cli.main`` returned (a reviewer's finding); stderr, whose handler is ``backslashreplace``, was left out."""
    import io
    import sys

    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
    err = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="backslashreplace")
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    seen = []

    def command(argv):
        seen.append((out.errors, err.errors))
        print("gr\u00e2ph\u00e9", file=out)  # (a name read as UTF-8: its bytes on the console)
        return 0

    monkeypatch.setattr(cli, "_main", command)
    assert cli.main(["metrics"]) == 0
    assert seen == [("rowstoch.utf8_bytes", "rowstoch.utf8_bytes")]
    assert (out.errors, err.errors) == ("strict", "backslashreplace")
    out.flush()
    assert out.buffer.getvalue() == "gr\u00e2ph\u00e9\n".encode()


def test_two_runs_into_one_folder_are_refused_while_the_first_writes(tmp_path, capsys):
    """Helper 185: two `rowstoch run` into the same --out (the default ./results included) both found it empty at
    their start, and the one that ended last replaced the other's history, both exiting 0. The folder is locked
    while a run holds it: the second is refused, naming the first; once it is done, its lock is gone."""
    import signal
    import subprocess
    import sys
    import time

    from conftest import hang_limit, sigint_as_usual
    from rowstoch_fast.compare.outputs import LOCK

    out, ck = tmp_path / "res", tmp_path / "ck.npz"
    first = subprocess.Popen([sys.executable, "-m", "rowstoch_fast.cli", "run", "--n", "4", "--iterations",
                              "10000000", "--record-every", "1000", "--no-progress", "--out", str(out),  # (its first
                              # checkpoint after 10^5 iterations: 10^8 had made the test wait 20-110 s for it)
                              "--checkpoint", str(ck)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                             preexec_fn=sigint_as_usual)
    try:
        deadline = time.time() + hang_limit(60)
        while not (out / LOCK).exists() and time.time() < deadline and first.poll() is None:
            time.sleep(0.05)
        assert (out / LOCK).exists(), first.communicate()
        code = cli.main(["run", "--n", "4", "--iterations", "5", "--no-progress", "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and re.fullmatch(rf"rowstoch: error: --out {re.escape(repr(str(out)))} is being written by "
                                          rf"another run \(process {first.pid}\); wait for it, or choose another "
                                          r"folder\n", err), err
        while not ck.exists() and time.time() < deadline and first.poll() is None:  # (the run under way, its
            time.sleep(0.05)  # first checkpoint written: a Ctrl-C in its set-up, on a loaded machine, wrote nothing)
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=hang_limit(60))
    finally:
        first.kill()
    assert first.returncode == 130 and (out / "history.csv").exists() and not (out / LOCK).exists()


def test_demo_replaces_its_own_files_not_a_reproduction_s(tmp_path, capsys, monkeypatch):
    """Helper 185: `rowstoch demo --out DIR` replaced the files of a `rowstoch reproduce multi-gossip --out DIR` run
    (the same names) without a word, where `reproduce` itself refuses that folder without --overwrite. The demo
    refuses a folder holding them unless it wrote them (its marker) or --overwrite."""
    import rowstoch_fast.experiments as experiments

    ran = []
    monkeypatch.setattr(experiments, "demo", lambda out, progress=None: ran.append(out))
    folder = tmp_path / "fig"
    folder.mkdir()
    (folder / "multi_gossip.csv").write_text("a reproduction's records\n")
    assert cli.main(["demo", "--out", str(folder), "--no-progress"]) == 2
    assert "holds the results of an earlier run of rowstoch reproduce multi-gossip (multi_gossip.csv)" in \
        capsys.readouterr().err and not ran and (folder / "multi_gossip.csv").exists()
    assert cli.main(["demo", "--out", str(folder), "--no-progress", "--overwrite"]) == 0 and ran
    (folder / "multi_gossip.csv").write_text("the demo's records\n")  # (its marker is there now: replaced)
    assert cli.main(["demo", "--out", str(folder), "--no-progress"]) == 0 and len(ran) == 2
    assert not (folder / "multi_gossip.csv").exists()  # (removed before the demo writes its own)


def test_run_s_lock_names_its_holder_and_a_folder_that_cannot_hold_it(tmp_path, capsys, monkeypatch):
    """Helper 187: a run refused by a comparison's lock read "being written by another run" (the caller's kind, not
    the holder's); a --out where the lock could not be made (read-only) ended in a traceback, exit 1."""
    import fcntl
    import socket

    from rowstoch_fast.compare import outputs

    out = tmp_path / "o"
    out.mkdir()
    with open(out / outputs.LOCK, "w") as held:  # (a comparison's lock, as an earlier version wrote it: no kind)
        held.write(f"{os.getpid()} {socket.gethostname()}")
        held.flush()
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert cli.main(["run", "--n", "4", "--iterations", "3", "--no-progress", "--out", str(out)]) == 2
        assert f"is being written by a comparison (process {os.getpid()})" in capsys.readouterr().err

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(outputs.FolderLock, "_take_lock", refused)
    assert cli.main(["run", "--n", "4", "--iterations", "3", "--no-progress", "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"rowstoch: error: --out {str(out)!r} is not writable: Permission denied\n"


def test_a_reproduction_in_the_demo_s_folder_takes_its_files_from_it(tmp_path, capsys, monkeypatch):
    """Helper 187: after `demo --out D` and `reproduce multi-gossip --out D --overwrite`, the demo's marker stayed,
    and the next `demo --out D` replaced the reproduction's files unasked. The reproduction removes the marker."""
    import rowstoch_fast.experiments as experiments

    def reproduction(out, rounds=(1, 5, 10), **kw):  # (its signature's rounds: read for the fewest it needs)
        open(os.path.join(out, "multi_gossip.csv"), "w").close()
        return {}

    monkeypatch.setattr(experiments, "demo", lambda out, progress=None: None)
    monkeypatch.setattr(experiments, "reproduce_multi_gossip", reproduction)
    folder = tmp_path / "d"
    assert cli.main(["demo", "--out", str(folder), "--no-progress"]) == 0 and (folder / ".rowstoch-demo").exists()
    assert cli.main(["reproduce", "multi-gossip", "--out", str(folder), "--no-progress", "--overwrite"]) in (0, 1)
    assert (folder / "multi_gossip.csv").exists() and not (folder / ".rowstoch-demo").exists()
    capsys.readouterr()
    assert cli.main(["demo", "--out", str(folder), "--no-progress"]) == 2
    assert "holds the results of an earlier run of rowstoch reproduce multi-gossip" in capsys.readouterr().err


def test_a_local_method_whose_first_round_falls_past_the_run_is_warned(tmp_path, capsys):
    """Helper 185: `run --algorithm local-dsgd --hyper local_steps=100 --iterations 20` ran "0 communication rounds",
    no word more: its nodes only stepped alone. A warning says why and what to change; a run that communicates says
    nothing of it."""
    common = ["run", "--n", "4", "--algorithm", "local-dsgd", "--no-progress"]
    assert cli.main([*common, "--hyper", "local_steps=100", "--iterations", "20", "--out", str(tmp_path / "a")]) == 0
    assert ("rowstoch: warning: no communication round in 20 iterations: local-dsgd communicates at the last of "
            "every local_steps = 100 iterations (raise --iterations, or lower local_steps)") in capsys.readouterr().err
    assert cli.main([*common, "--iterations", "20", "--out", str(tmp_path / "b")]) == 0
    assert "no communication round" not in capsys.readouterr().err


def test_run_notes_a_run_that_made_no_progress_or_went_past_a_thousandfold(tmp_path, capsys):
    """Helper 189: `rowstoch run` said "done", exit 0, where Pull-Diag-GT over 10% losses ended with its loss 3.9x
    and its gradient norm 1.5x its start (and growing), and where at lr 1 on a ring its loss went to 2,150x its start
    and ended at 679x (the runner's `diverged` is a thousandfold at the end). Both are noted; a run whose loss alone
    ends above its start while its gradient falls (a tracker's early scale) is not."""
    common = ["run", "--topology", "ring", "--n", "16", "--algorithm", "pull-diag-gt", "--no-progress"]
    assert cli.main([*common, "--lr", "1", "--iterations", "300", "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"rowstoch: note: the loss went to [\d,]+x its start by iteration \d+ and ended at [\d,.]+x it; "
                     r"try a smaller --lr", err), err
    edges = tmp_path / "net.txt"  # (the helper's own 6-node digraph)
    edges.write_text("0 1\n1 2\n2 3\n3 4\n4 5\n5 0\n0 3\n2 5\n4 1\n")
    assert cli.main(["run", "--matrix", str(edges), "--algorithm", "pull-diag-gt", "--no-progress", "--lr", "0.01",
                     "--iterations", "600", "--loss", "0.1", "--awake", "0.9", "--out", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"rowstoch: note: (the loss \(.*\) and )?the gradient norm \([\d.]+ -> [\d.]+, [\d.]+x\) ended "
                     r"above (its|their) start: no progress at this rate \(try a smaller --lr; `rowstoch compare` "
                     r"tunes it; on a network that loses messages, robust-gradient-push and r-fast are made for it\)",
                     err), err
    assert cli.main([*common, "--iterations", "300", "--out", str(tmp_path / "c")]) == 0
    assert "note" not in capsys.readouterr().err
    # (helper 190: the loss alone 97x its start, its gradient falling, was unsaid; R-FAST was told to try R-FAST)
    assert cli.main(["run", "--topology", "ring", "--n", "16", "--algorithm", "r-fast", "--lr", "30", "--iterations",
                     "400", "--loss", "0.5", "--awake", "0.5", "--no-progress", "--out", str(tmp_path / "d")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"note: the loss \([\d.]+ -> [\d.]+, [\d.]+x\) ended above its start: no progress at this rate "
                     r"\(.*; on a network that loses messages, robust-gradient-push is made for it\)", err), err


def test_run_says_what_a_comparison_would_call_a_run_that_climbed_back_or_barely_moved(tmp_path, capsys):
    """`rowstoch run` said "done" and nothing else where Pull-Diag-GT over 10% losses fell to 0.128x its start by
    iteration 420 and climbed back to 0.503x by 2,000 (a comparison's `no-progress`); a run too short or at a rate too
    small to move is told so, not sent to its tracker's scales; a run that converges gets no note."""
    assert cli.main(["run", "--topology", "exponential", "--n", "16", "--algorithm", "pull-diag-gt", "--loss", "0.1",
                     "--iterations", "2000", "--no-progress", "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"rowstoch: note: by `rowstoch compare`'s rules, read on the gradient norm, this run is no-progress: grad_norm ended at "
                     r"0\.5\d*x its start \([\d.]+ -> [\d.]+\) at lr 0\.003125; it fell to 0\.1\d*x its start by "
                     r"iteration \d+, then climbed back; its tracker's D_t .* try a loss-robust method", err), err
    assert cli.main(["run", "--topology", "ring", "--n", "16", "--algorithm", "pull-diag-gt", "--lr", "1e-6",
                     "--iterations", "400", "--no-progress", "--out", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"this run is no-progress: grad_norm ended at 0\.9\d*x its start .* at lr 1e-06; still "
                     r"falling at the end: a larger lr or a longer budget\n", err), err
    assert "tracker" not in err
    assert cli.main(["run", "--topology", "exponential", "--n", "16", "--algorithm", "dsgd", "--iterations", "300",
                     "--no-progress", "--out", str(tmp_path / "c")]) == 0
    assert "note" not in capsys.readouterr().err


def test_run_s_figure_is_titled_with_the_setting_as_a_comparison_s(tmp_path, monkeypatch):
    """The figure of a run over 10% losses was titled "exponential (n = 16), logistic, 1 repetition(s)": the network
    model was not said. It names the graph, its weights, the objective and the network model, as compare's do."""
    from rowstoch_fast.runner import History

    titles, save = [], History.save
    monkeypatch.setattr(History, "save", lambda self, folder, title=None, label=None: titles.append(title) or
                        save(self, folder, title, label))
    assert cli.main(["run", "--topology", "exponential", "--n", "8", "--algorithm", "dsgd", "--iterations", "20",
                     "--loss", "0.1", "--repeats", "2", "--total", "1600", "--no-progress",
                     "--out", str(tmp_path / "a")]) == 0
    assert titles == ["directed exponential (n = 8, in-degree weights), nonconvex logistic regression (d = 10), 10% of "
                      "messages lost, 2 repetitions"]


def test_a_caption_of_graphs_with_their_own_weights_says_which_are_whose(tmp_path, capsys):
    """Helper 184: `--preset paper`'s caption listed "in-degree weights; random integer weights 1-10, rows
    normalized; ..." after four graphs, without saying which rule went with which graph. Each graph says its own."""
    (tmp_path / "e.toml").write_text('[network]\ntopology = ["paper-ring", "paper-grid"]\n[objective]\nkind = '
                                     '"quadratic"\nd = 3\n[run]\nrounds_budget = 10\nrepeats = 2\n[outputs]\n'
                                     'formats = []\n[algorithms.dsgd]\nlr = 0.05\n')
    assert cli.main(["compare", "--config", str(tmp_path / "e.toml"), "--no-progress", "--out", str(tmp_path / "o")]) == 0
    caption = (tmp_path / "o" / "summary.md").read_text().splitlines()[-1]
    assert caption.startswith("a random quadratic (d = 3) on the graphs directed paper-ring (in-degree weights), "
                              "undirected paper-grid (random integer weights 1-10, rows normalized) (n = 16), "), caption


@pytest.mark.parametrize("argv, said", [
    (["compare", "--algorithms", "dsgd", "--algorithms", "dgd"],
     "argument --algorithms: given twice (dsgd, then dgd): give it once (several values: comma-separated in one)"),
    (["compare", "--loss", "0.1", "--loss=0.2"], "argument --loss: given twice (0.1, then 0.2): give it once"),
    (["compare", "--topology", "ring", "--topology", "exponential"],
     "argument --topology: given twice (ring, then exponential): give it once"),
    (["run", "--lr", "0.01", "--lr", "0.02"], "argument --lr: given twice (0.01, then 0.02): give it once"),
    (["metrics", "--topology", "paper-ring", "--topology", "paper-grid"], "argument --topology: given twice"),
    (["compare", "--config", "a.toml", "--config", "b.toml"], "given twice (a.toml, then b.toml): give it once ("),
    (["run", "--metric", "loss", "--metric", "grad_norm"], "give it once (several values: comma-separated in one)"),
])
def test_a_value_option_given_twice_is_refused(tmp_path, capsys, argv, said):
    """Helper 192: the last of a repeated option alone was kept without a word (``--algorithms dsgd --algorithms
    dgd`` ran dgd; ``--loss 0.1 --loss 0.2`` one setting), where ``compare --lr`` joins its repeats and ``--hyper``
    refuses one."""
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, "--out", str(tmp_path / "o")])
    assert exit_.value.code == 2 and said in _one_line(capsys)
    assert not (tmp_path / "o").exists()
    # each parse anew: the same option once in the next command is no repeat; the same value twice is one (a
    # wrapper's default and its user's, helper 194)
    assert cli.main(["metrics", "--topology", "paper-ring"]) == 0
    assert cli.main(["metrics", "--topology", "paper-ring", "--topology=paper-ring"]) == 0


def test_metrics_refuses_a_seed_that_a_topology_does_not_read(capsys):
    """Helper 193: ``metrics --topology exponential --seed 3`` ignored --seed without a word (``--normalize``
    without ``--matrix`` is refused); the drawn topologies read it."""
    assert cli.main(["metrics", "--topology", "exponential", "--seed", "3"]) == 2
    assert "--seed is not read with --topology exponential: it draws nothing" in _one_line(capsys)
    for name in ("geometric", "erdos_renyi"):
        assert cli.main(["metrics", "--topology", name, "--n", "12", "--seed", "3"]) == 0
        three = capsys.readouterr().out
        assert cli.main(["metrics", "--topology", name, "--n", "12", "--seed", "4"]) == 0
        assert capsys.readouterr().out != three  # (another draw)


# ---------------------------------------------------------------------------- helper 219's findings
def _file(tmp_path, text):
    """An experiment file ``e.toml`` of a small least-squares problem on 8 nodes, ``text`` after its tables."""
    path = tmp_path / "e.toml"
    path.write_text('[objective]\nkind = "least-squares"\nsamples_per_node = 8\nd = 4\n[run]\nrounds_budget = 20\n'
                    f'repeats = 1\n{text}')
    return str(path)


@pytest.mark.parametrize("where, network, said", [
    ("file", '[network]\ntopology = "erdos_renyi"\nn = 8\n[algorithms.dgd]\n',
     'e.toml: [algorithms]: \'dgd\' runs on an undirected network\'s doubly stochastic W, and this network is not one '
     '(build it with [network] undirected = true, weights = "metropolis")'),
    ("command line", ["--topology", "erdos_renyi", "--n", "8", "--algorithms", "dgd"],
     "--algorithms: 'dgd' runs on an undirected network's doubly stochastic W, and this network is not one (build it "
     "with --undirected --weights metropolis)"),
    ("file", '[network]\ntopology = "erdos_renyi"\nn = 8\n[algorithms.dgd]\n--undirected',
     'e.toml: [algorithms]: \'dgd\' runs on an undirected network\'s doubly stochastic W, and this network is not one '
     '(build it with --undirected and [network] weights = "metropolis")'),  # (one written on the command line)
])
def test_advice_on_an_undirected_network_is_in_the_words_of_its_route(tmp_path, capsys, where, network, said):
    """Helper 219: a file's refusal of DGD on a directed graph read "(build it with directed=False, [network] weights
    = 'metropolis'; on the command line [network] undirected [network] weights metropolis)": the command line is
    told its options, a file its keys with their values, neither Python's keywords."""
    text, _, written = network.partition("--") if where == "file" else (None, None, None)
    argv = ["compare", "--config", _file(tmp_path, text), *(["--" + written] if written else [])] if text else \
        ["compare", "--objective", "least-squares", "--rounds-budget", "20", *network]
    assert cli.main([*argv, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = _one_line(capsys)
    assert said in err and "directed=False" not in err and "on the command line" not in err, err


def test_an_interruption_before_any_result_says_that_resume_continues_it(tmp_path, capsys, monkeypatch):
    """Helper 219: a Ctrl-C in the first tuning said "nothing written", but the folder held experiment.json (and the
    runs' checkpoints): the same command again was refused for an --out not empty, and --resume continued it."""
    from rowstoch_fast.compare import tuning

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tuning, "trajectories", interrupted)
    out = tmp_path / "o 1"
    assert cli.main(["compare", "--config", _file(tmp_path, '[algorithms.dsgd]\n'), "--out", str(out),
                     "--no-progress", "--jobs", "1"]) == 130
    err = capsys.readouterr().err
    assert "nothing written" not in err, err
    assert f"interrupted before any algorithm finished: no results yet; {out} holds experiment.json (the " \
           f"settings)" in err and f": --resume '{out}' continues it" in err, err  # (quoted: a space)
    assert (out / "experiment.json").exists()


def test_a_files_metric_mistyped_is_named_with_the_closest(tmp_path, capsys):
    """Helper 219: ``metrics = ["subopt"]`` was refused in the command line's words ("must be a comma-separated list
    of ...") with no "did you mean"; the command line's own refusal names the closest too."""
    path = _file(tmp_path, '[outputs]\nmetrics = ["subopt"]\n[algorithms.dsgd]\nlr = 0.05\n')
    assert cli.main(["compare", "--config", path, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = _one_line(capsys)
    assert "e.toml: [outputs] metrics: unknown metric 'subopt' (did you mean 'suboptimality'?); give a list (or one " \
           "string separated by commas) of grad_norm," in err and "comma-separated list" not in err, err
    assert cli.main(["compare", "--metric", "suboptimality,Loss", "--out", str(tmp_path / "o")]) == 2
    assert "--metric must be a comma-separated list of " in (err := _one_line(capsys)) and \
        "got 'Loss' (did you mean 'loss'?)" in err, err


def test_algorithms_on_the_command_line_name_the_files_tables_they_leave_out(tmp_path, capsys):
    """Helper 219: ``--algorithms`` (the command line wins) dropped the file's ``[algorithms.NAME]`` tables, their lr
    and rounds, without a word: a note on stderr names them; the narration counts "1 algorithm"."""
    path = _file(tmp_path, '[network]\ntopology = "exponential"\nn = 8\n[algorithms.dsgd]\nlr = 0.05\n'
                           '[algorithms.push-pull]\nlr = 0.1\n[algorithms.mg-pull-diag-gt]\nrounds = 3\n')
    assert cli.main(["compare", "--config", path, "--algorithms", "dsgd", "--out", str(tmp_path / "o"),
                     "--no-progress", "--format", "none", "--jobs", "1"]) == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if "--algorithms leaves out" in line]
    assert notes == [f"rowstoch: note: --algorithms leaves out [algorithms.push-pull], [algorithms.mg-pull-diag-gt] "
                     f"of {path} (the command line wins): their settings are not used"], captured.err
    assert "(n = 8, reliable links): 1 algorithm, 20 communication rounds each, 1 repetition, ranked by " in \
        captured.out, captured.out
    assert cli.main(["compare", "--config", path, "--out", str(tmp_path / "o2"), "--no-progress", "--format", "none",
                     "--jobs", "1", "--algorithms", "dsgd,push-pull,mg-pull-diag-gt", "--rounds-budget", "30"]) == 0
    assert "leaves out" not in capsys.readouterr().err


def test_metrics_take_the_network_options_of_compare(capsys):
    """Helper 219: ``rowstoch metrics`` refused ``--undirected --weights metropolis``, which ``compare`` and ``run``
    take (one set of network options now): the undirected Erdos-Renyi graph's Metropolis W has kappa 1; ``all``
    names no one topology to build so."""
    assert cli.main(["metrics", "--topology", "erdos_renyi", "--n", "8"]) == 0
    out = capsys.readouterr().out
    key = out.split("\nbeta = ", 1)[1]  # (its columns said below the table, helper 223)
    assert "R (Thm 3): the gossip rounds" in " ".join(key.split()), out
    directed = next(line for line in out.splitlines() if line.startswith("erdos_renyi")).split()
    assert cli.main(["metrics", "--topology", "erdos_renyi", "--n", "8", "--undirected", "--weights",
                     "metropolis", "-q"]) == 0
    undirected = capsys.readouterr().out.splitlines()[-1].split()  # (-q: the table alone)
    assert undirected[0] == "erdos_renyi" and undirected[4] == "1.0000" and directed[4] != "1.0000"
    assert cli.main(["metrics", "--undirected"]) == 2
    assert "--undirected is not read with --topology all (name one topology)" in _one_line(capsys)


def test_rowstoch_run_advises_an_undirected_network_in_its_own_words(tmp_path, capsys):
    """Helper 220: DGD on a directed graph told the command line "weights='metropolis' builds such a W", Python's
    words."""
    assert cli.main(["run", "--algorithm", "dgd", "--topology", "erdos_renyi", "--n", "8", "--iterations", "5",
                     "--out", str(tmp_path / "r"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--undirected --weights metropolis build such a W" in err and "weights='metropolis'" not in err, err


def test_a_metrics_module_that_is_no_file_is_said_as_what_it_is(tmp_path, capsys):
    """Helper 218: a folder, a device or a FIFO given to --metrics-module "did not exist", or (a FIFO) was opened
    and the command blocked; now one line saying what it is."""
    import os

    from rowstoch_fast import cli

    (tmp_path / "dir.py").mkdir()
    cases = [(tmp_path / "dir.py", "is a folder: give the Python file in it")]
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.py")
        cases.append((tmp_path / "pipe.py", "is a FIFO (named pipe), not a regular file"))
    for path, said in cases:
        assert cli.main(["compare", "--metrics-module", str(path), "--n", "4", "--rounds-budget", "10", "--out",
                         str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err


def test_the_tracker_s_memory_refusal_speaks_the_command_line_s_words(tmp_path, capsys, monkeypatch):
    """Helper 231: ``rowstoch run --topology ring --n 500`` was refused "use tracker='perron' ... or raise
    max_bytes": the library's keywords, which the command line does not take."""
    monkeypatch.setenv("ROWSTOCH_TRACKER_MAX_BYTES", "1000")
    assert cli.main(["run", "--topology", "ring", "--n", "16", "--iterations", "3", "--out", str(tmp_path / "o"),
                     "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "out of memory: the exact diagonal tracker needs" in err and "use --tracker perron" in err
    assert "ROWSTOCH_TRACKER_MAX_BYTES" in err and "tracker='" not in err and "max_bytes" not in err


@pytest.mark.parametrize("args, said", [
    (["run", "--lr", "1e-320"], "error: --lr = 1e-320 is subnormal"),
    (["compare", "--awake", "1e-320", "--algorithms", "dsgd", "--lr", "0.01", "--rounds-budget", "10"],
     "error: --awake = 1e-320 is subnormal"),
    (["run", "--iterations", str(10**40)], "error: --iterations must be <= 2^62"),
    (["run", "--algorithm", "extra"], "e.g. --undirected --weights metropolis"),
    (["run", "--algorithm", "feddyn", "--hyper", "alpha=5e-324"], "error: --hyper alpha = 5e-324 is subnormal"),
])
def test_a_refusal_by_the_library_s_name_of_a_value_says_the_option(tmp_path, capsys, args, said):
    """Helper 261: refusals that named the library's parameter (q, lr, iterations, weights='metropolis'), not the
    option that sets it."""
    rc = cli.main([*args, "--n", "4", "--no-progress", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and said in err and len(err.strip().splitlines()) == 1, err


def test_a_memory_error_without_words_says_what_ran_out_and_what_to_lower(tmp_path, capsys, monkeypatch):
    """Helper 263: NumPy's bare MemoryError (a copy of the data for its fingerprint) read "rowstoch: error: out of
    memory: " and nothing more. It says an allocation failed, during which set-up step where one was shown, and
    which sizes to lower."""
    from rowstoch_fast.objectives import NonconvexLogistic

    def no_memory(self):
        raise MemoryError()

    monkeypatch.setattr(NonconvexLogistic, "describe", no_memory)
    tail = ("(the error gave no size); lower the sizes (--d, --total, --samples-per-node, --n, --repeats) or free "
            "memory\n")
    assert cli.main(["run", "--iterations", "3", "--no-progress", "--out", str(tmp_path / "a")]) == 2
    assert capsys.readouterr().err == "rowstoch: error: out of memory: an allocation failed " + tail
    assert cli.main(["run", "--iterations", "3", "--progress", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.endswith("rowstoch: error: out of memory: an allocation failed during set-up: the logistic objective "
                        "on 16 nodes " + tail), err
    assert cli.main(["run", "--iterations", "3", "--no-progress", "--out", str(tmp_path / "c")]) == 2
    assert "during" not in capsys.readouterr().err  # (the earlier call's set-up line is not this one's)


def test_synthetic_data_too_large_names_the_options_that_size_it(tmp_path, capsys, monkeypatch):
    """Helper 263: `--total 300000000` was refused "the synthetic logistic data (300000000 samples of d = 10) needs
    about 58.1 GiB" naming no option; it says which to lower (the library's words in Python)."""
    from rowstoch_fast import _checks
    from rowstoch_fast.objectives import NonconvexLogistic

    monkeypatch.setattr(_checks, "available_memory", lambda: 1 << 30)
    assert cli.main(["run", "--total", "40000000", "--no-progress", "--out", str(tmp_path / "a")]) == 2
    assert re.fullmatch(r"rowstoch: error: out of memory: the synthetic logistic data \(40000000 samples of d = 10\) "
                        r"needs about [\d.]+ GiB of memory but only 1.0 GiB is available; lower --total, "
                        r"--test-samples or --d\n", capsys.readouterr().err)
    with pytest.raises(MemoryError, match="; lower total, test_samples or d$"):
        NonconvexLogistic.synthetic(4, total=40000000)


def test_large_link_noise_and_least_squares_prox_blocks_are_refused_before_they_are_allocated(tmp_path, capsys,
                                                                                              monkeypatch):
    """Helper 263: `run --topology complete --n 2048 --d 500 --objective quadratic --noise 0.1` asked 15.6 GiB a
    round for the noise on the received copies and was killed by the operating system (no message); ADMM on least
    squares asked (repeats, n, d, d) systems, "Unable to allocate 4.77 GiB", naming nothing. Both are refused first
    now, saying what and what to lower."""
    from rowstoch_fast import _checks
    from rowstoch_fast.network import messages
    from rowstoch_fast.objectives import LeastSquares

    monkeypatch.setattr(_checks, "available_memory", lambda: 200_000)  # (the round's block: (16 + 256) x 50 x 8)
    monkeypatch.setattr(messages, "NOISE_BLOCK_CHECKED", 1 << 10)
    code = cli.main(["run", "--topology", "complete", "--n", "16", "--d", "50", "--objective", "quadratic", "--noise",
                     "0.1", "--algorithm", "dsgd", "--iterations", "3", "--no-progress", "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert code == 2 and re.search(r"rowstoch: error: out of memory: Noisy\(per='link'\): the noise on the 256 "
                                   r"received copies of 50 values each, every round needs about .* but only 195.3 KiB "
                                   r"is available; a sparser graph, fewer repetitions or a smaller d\n$", err), err
    f = LeastSquares.synthetic(4, samples_per_node=10, d=30, seed=0)
    with pytest.raises(MemoryError, match=r"the local proximal step of least squares \(a 30 x 30 system per node and "
                                          r"repetition\) needs .*; fewer repetitions, or a smaller d"):
        f.prox_local(np.zeros((5, 4, 30)), 0.1)


# ---------------------------------------------------------------------------- helper 266's findings
def test_the_command_lines_tracker_and_mg_rounds_win_over_a_files_algorithm_tables(tmp_path, capsys):
    # (they had lost to [algorithms.NAME] tracker / rounds without a word, and experiment.json named the setting
    # that did not run)
    path = _file(tmp_path, '[network]\ntopology = "ring"\nn = 8\n[algorithms.pull-diag-gt]\nlr = 0.01\n'
                           'tracker = "perron"\n[algorithms.mg-pull-diag-gt]\nlr = 0.01\nrounds = 5\n')
    out = tmp_path / "o"
    assert cli.main(["compare", "--config", path, "--tracker", "exact", "--mg-rounds", "2", "--out", str(out),
                     "--no-progress", "--format", "none"]) == 0
    err = capsys.readouterr().err
    assert "--tracker replaces [algorithms.pull-diag-gt] tracker of" in err
    assert "--mg-rounds replaces [algorithms.mg-pull-diag-gt] rounds of" in err
    saved = json.loads((out / "experiment.json").read_text())
    tables = saved["algorithms"]
    assert "tracker" not in tables["pull-diag-gt"] and "rounds" not in tables["mg-pull-diag-gt"]
    import pandas as pd

    summary = pd.read_csv(out / "summary.csv")
    assert summary.set_index("algorithm").loc["mg-pull-diag-gt", "rounds_per_iteration"] == 2


@pytest.mark.parametrize("keys, argv, said, key, value", [
    ('[communication]\ncompress = "topk"\nk = 2\n', ["--compress", "qsgd:4"],
     "[communication] k of e.toml is not read without --compress topk or randk", "k", 2),
    ('[outputs]\nx = "cost"\ncost_weights = "gradient=1,round=10"\n', ["--x", "rounds"],
     "[outputs] cost_weights of e.toml is not read without --x cost", "cost_weights", "gradient=1,round=10"),
    ("", ["--objective", "logistic-l2"],  # (the file's own objective table: least squares, samples_per_node = 8)
     "[objective] samples_per_node of e.toml is not read with --objective logistic-l2", "samples_per_node", 8),
    ("", ["--matrix", "M.npy"],
     "[network] topology and [network] n of e.toml are not read with --matrix (the file is the network)",
     "topology", "ring"),
])
def test_a_files_keys_that_went_with_a_choice_the_command_line_replaced_are_dropped_and_said(tmp_path, capsys, keys,
                                                                                             argv, said, key, value):
    # (each had been refused, the file's key named: the command line did not win, helper 266)
    np.save(tmp_path / "M.npy", topology.ring(8).toarray())
    path = _file(tmp_path, '[network]\ntopology = "ring"\nn = 8\n[algorithms.dsgd]\nlr = 0.01\n' + keys)
    argv = [a.replace("M.npy", str(tmp_path / "M.npy")) for a in argv]
    figures = [] if "--x" in argv else ["--format", "none"]  # (--x is the figures' axis)
    assert cli.main(["compare", "--config", path, *argv, "--out", str(tmp_path / "o"), "--no-progress",
                     *figures]) == 0
    assert f"rowstoch: note: {said.replace('e.toml', path)}: dropped (the command line wins)" in capsys.readouterr().err
    saved = json.loads((tmp_path / "o" / "experiment.json").read_text())["settings"]
    assert saved[key] != value, saved


@pytest.mark.parametrize("keys, argv, said", [
    ('[communication]\nk = 2\n', ["--compress", "qsgd:4"], "[communication] k is not read without --compress topk"),
    ('[outputs]\ncost_weights = "gradient=1,round=10"\n', ["--x", "rounds"], "cost_weights is read with --x cost"),
])
def test_a_key_the_file_leaves_unread_by_itself_is_refused_whatever_the_command_line_writes(tmp_path, capsys, keys,
                                                                                            argv, said):
    # (helper 271: a file's k without a compress, beside --compress qsgd:4, had been dropped as if the command line
    # had replaced the file's choice)
    path = _file(tmp_path, '[network]\ntopology = "ring"\nn = 8\n[algorithms.dsgd]\nlr = 0.01\n' + keys)
    assert cli.main(["compare", "--config", path, *argv, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert said in _one_line(capsys)


def test_a_matrix_that_needs_normalizing_is_advised_in_the_command_lines_words(tmp_path, capsys):
    # (after --no-normalize it had read "pass normalize=True (--normalize)", the library's words, helper 266)
    np.save(tmp_path / "raw.npy", 2 * topology.ring(8).toarray())
    for extra, advice in (([], "add --normalize"), (["--no-normalize"], "drop --no-normalize")):
        assert cli.main(["run", "--matrix", str(tmp_path / "raw.npy"), *extra, "--iterations", "3", "--no-progress",
                         "--out", str(tmp_path / "o")]) == 2
        assert _one_line(capsys).endswith(f"(8 such rows); {advice} to rescale raw weights\n")


def test_a_memory_refusal_of_a_files_size_names_the_file_and_its_key(tmp_path, capsys):
    # ("lower --repeats" had answered a file's repeats, the file not named, helper 266)
    path = _file(tmp_path, '[network]\ntopology = "ring"\nn = 8\n[algorithms.dsgd]\nlr = 0.01\n')
    big = tmp_path / "big.toml"
    big.write_text((tmp_path / "e.toml").read_text().replace("repeats = 1", "repeats = 1000000000"))
    big = str(big)
    assert cli.main(["compare", "--config", big, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    said = _one_line(capsys)
    assert said.startswith(f"rowstoch: error: out of memory: {big}: the runs' iterates") and said.endswith(
        "; lower [run] repeats\n"), said
    assert cli.main(["compare", "--config", path, "--repeats", "1000000000", "--out", str(tmp_path / "o"),
                     "--no-progress"]) == 2
    assert _one_line(capsys).endswith("; lower --repeats\n")  # (written on the command line: its flag)


def test_a_files_rounds_too_large_for_the_budget_names_that_key(tmp_path, capsys):
    # ("lower its rounds ([run] mg_rounds)" had named the key that does not set them: following it, the same line)
    path = _file(tmp_path, '[network]\ntopology = "ring"\nn = 8\n[algorithms.mg-pull-diag-gt]\nlr = 0.01\n'
                           'rounds = 30\n')
    assert cli.main(["compare", "--config", path, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = _one_line(capsys)
    assert "e.toml: [algorithms.mg-pull-diag-gt] rounds = 30 is more than the budget of 20 rounds" in err, err
    assert "mg_rounds" not in err and not (tmp_path / "o").exists()


def test_format_none_on_the_command_line_takes_a_files_x(tmp_path, capsys):
    # (every shipped example sets x = "rounds": --format none had been refused on each)
    path = _file(tmp_path, '[network]\ntopology = "ring"\nn = 8\n[algorithms.dsgd]\nlr = 0.01\n'
                           '[outputs]\nx = "rounds"\n')
    assert cli.main(["compare", "--config", path, "--out", str(tmp_path / "o"), "--no-progress",
                     "--format", "none"]) == 0
    assert (tmp_path / "o" / "compare.csv").exists() and not list((tmp_path / "o").glob("*.png"))
    assert cli.main(["compare", "--config", path, "--out", str(tmp_path / "o2"), "--no-progress",
                     "--format", "none", "--x", "rounds"]) == 2  # (both typed: still one that is not read)
    assert "--x is not read with --format none" in _one_line(capsys)


def test_a_files_mg_rounds_without_an_mg_method_is_refused_naming_it(tmp_path, capsys):
    # (dropped without a word where the same --mg-rounds was refused)
    path = tmp_path / "e.toml"
    path.write_text('[objective]\nkind = "least-squares"\nsamples_per_node = 8\nd = 4\n[run]\nrounds_budget = 20\n'
                    'mg_rounds = 3\n[network]\ntopology = "ring"\nn = 8\n[algorithms.dsgd]\nlr = 0.01\n')
    path = str(path)
    assert cli.main(["compare", "--config", path, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "e.toml: [run] mg_rounds is not read without an mg-* algorithm" in _one_line(capsys)
    assert not (tmp_path / "o").exists()


def test_an_unusable_cupy_backend_is_refused_before_the_output_folder_is_made(tmp_path, capsys, monkeypatch):
    # (refused once experiment.json was written: the corrected command was then refused "not empty")
    from rowstoch_fast.backends import cupy as cupy_backend

    def missing():
        raise RuntimeError("backend 'cupy' found CuPy but no usable CUDA device (a test's)")

    monkeypatch.setattr(cupy_backend, "require_cupy", missing)
    argv = ["compare", "--topology", "ring", "--n", "8", "--algorithms", "dsgd", "--lr", "0.01",
            "--rounds-budget", "20", "--backend", "cupy", "--out", str(tmp_path / "o"), "--no-progress"]
    assert cli.main(argv) == 2
    assert "--backend cupy: backend 'cupy' found CuPy but no usable CUDA device" in _one_line(capsys)
    assert not (tmp_path / "o").exists()


def test_compare_says_where_the_optimums_solver_ran_out(tmp_path, capsys, monkeypatch):
    # (its warning had been dropped with the others the command does not pass on: f* only that accurate, unsaid)
    import functools

    from rowstoch_fast import composite

    monkeypatch.setattr(composite, "proximal_gradient",
                        functools.partial(composite.proximal_gradient, max_iter=3))
    argv = ["compare", "--objective", "lasso", "--l1", "0.01", "--topology", "ring", "--undirected", "--weights",
            "metropolis", "--n", "8", "--algorithms", "pg-extra", "--lr", "0.05", "--rounds-budget", "20",
            "--repeats", "1", "--out", str(tmp_path / "o"), "--no-progress", "--format", "none"]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "the proximal gradient solver of" in err and "the optimum is that accurate" in err, err


def test_of_several_graphs_the_one_a_method_cannot_run_on_is_named(tmp_path, capsys):
    # ("this network is not one" had named neither; its advice, followed, met the other graph's refusal)
    path = tmp_path / "e.toml"
    path.write_text('[network]\ntopology = ["paper-ring", "ring"]\n[run]\nrounds_budget = 20\nrepeats = 1\n'
                    '[algorithms.extra]\nlr = 0.01\n')
    assert cli.main(["compare", "--config", str(path), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "'extra' runs on an undirected network's doubly stochastic W, and the graph paper-ring is not one" \
        in _one_line(capsys)


def test_a_comparison_of_an_earlier_version_whose_repetitions_shared_the_clients_is_not_grown(tmp_path, capsys):
    # (its repetitions of FedAvg had all drawn the same clients, this version's each their own: grown, its table
    # had mixed the two unsaid, helper 268)
    path = _file(tmp_path, '[network]\ntopology = "ring"\nn = 8\nundirected = true\nweights = "metropolis"\n'
                           '[algorithms.fedavg]\nlr = 0.05\nparticipation = 0.25\n[algorithms.dsgd]\nlr = 0.05\n')
    out = tmp_path / "o"
    assert cli.main(["compare", "--config", path, "--out", str(out), "--no-progress", "--format", "none"]) == 0
    assert json.loads((out / "experiment.json").read_text())["own_draws"] == "per repetition, FedPD's skipped " \
        "rounds too"
    assert cli.main(["compare", "--resume", str(out), "--repeats", "2", "--no-progress"]) == 0  # (this version's)
    document = json.loads((out / "experiment.json").read_text())
    del document["own_draws"]  # (as an earlier version wrote it)
    (out / "experiment.json").write_text(json.dumps(document))
    capsys.readouterr()
    assert cli.main(["compare", "--resume", str(out), "--repeats", "3", "--no-progress"]) == 2
    assert "was written by an earlier version, whose repetitions of fedavg all drew the same clients" \
        in _one_line(capsys)


def test_a_comparison_of_the_version_that_measured_fedpd_and_fedlt_by_their_clients_is_not_resumed(tmp_path,
                                                                                                   capsys):
    # (an earlier version measured FedPD and FedLT by the mean of their clients' models, and drew FedPD's clients once
    # where it skips rounds: its records of them are refused, its FedAvg's resumed, helpers 274, 276)
    network = '[network]\ntopology = "ring"\nn = 8\nundirected = true\nweights = "metropolis"\n'
    for folder, methods, refused in [("o", "[algorithms.fedlt]\nlr = 0.05\nparticipation = 0.5\n", True),
                                     ("a", "", False)]:
        (tmp_path / folder).mkdir()
        path = _file(tmp_path / folder, network + '[algorithms.fedavg]\nlr = 0.05\nparticipation = 0.25\n' + methods)
        out = tmp_path / folder / "out"
        assert cli.main(["compare", "--config", path, "--out", str(out), "--no-progress", "--format", "none",
                         "--rounds-budget", "8"]) == 0
        document = json.loads((out / "experiment.json").read_text())
        document["own_draws"] = "per repetition"  # (as the version before this one wrote it)
        (out / "experiment.json").write_text(json.dumps(document))
        capsys.readouterr()
        code = cli.main(["compare", "--resume", str(out), "--repeats", "3", "--no-progress"])
        if not refused:
            assert code == 0
            continue
        line = _one_line(capsys)
        assert code == 2 and "which measured fedlt by the mean of the clients' own models; this version measures " \
            "the server's model" in line and "fedavg" not in line, line
        assert line.rstrip().endswith("start a new comparison"), line


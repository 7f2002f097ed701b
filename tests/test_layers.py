"""The network layers' registry: every layer, and every composition the order allows, against its dense
definition (rowstoch_fast._reference.LAYER_TWINS), under every algorithm that applies with a resume; and the
guide's "Adding a network layer" recipe run as written (one module and its definition: the lists, --help, the
experiment files, the command line, the registry tests and the emulated GPU pick it up)."""

import pathlib
import re

import numpy as np
import pytest

from rowstoch_fast import _reference as ref
from rowstoch_fast import MixingMatrix, network, topology
from rowstoch_fast.algorithms import REGISTRY

BASES = {"row": lambda: topology.erdos_renyi(10, 0.3, seed=2),
         "column": lambda: topology.erdos_renyi(10, 0.3, seed=2, stochastic="column")}
EXAMPLE_LABELS = sorted(network.examples(BASES["row"]()))


def test_every_layer_has_a_dense_definition():
    missing = [cls.__name__ for cls in network.layers() if cls.layer not in ref.LAYER_TWINS]
    assert not missing, f"layers without a dense definition in _reference.LAYER_TWINS: {missing}"
    kinds = [cls.acts_on for cls in network.layers()]  # (composition order: matrices, links, messages)
    assert kinds == sorted(kinds, key=["matrices", "links", "messages"].index), kinds


def _mixes_as_its_definition(net, what):
    rng = np.random.default_rng(0)
    Xs = [rng.standard_normal((net.n, 3)) for _ in range(5)]
    expected = ref.network_run(net, Xs, d=3)
    for t, X in enumerate(Xs):
        Y = net.mix(X, t, d=3) if hasattr(net, "encode") else net.mix(X, t)
        np.testing.assert_allclose(Y, expected[t], rtol=1e-12, atol=1e-12, err_msg=f"{what} at t = {t}")
        if not hasattr(net, "encode"):
            np.testing.assert_allclose(net.matrix(t).toarray(), ref.network_matrix(net, t), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", sorted(BASES))
@pytest.mark.parametrize("label", EXAMPLE_LABELS)
def test_every_example_mixes_as_its_definition(kind, label):
    _mixes_as_its_definition(network.examples(BASES[kind]())[label], f"{label} over {kind}")


UNDIRECTED = sorted(label for label, net in network.examples(topology.ring(10, directed=False,
                                                                           weights="metropolis")).items()
                    if not hasattr(net, "encode"))


@pytest.mark.parametrize("label", UNDIRECTED)
def test_every_example_under_the_undirected_rule_mixes_as_its_definition(label):
    """keeps_symmetry, checked: the layers on the links over a symmetric doubly stochastic W, under the undirected
    rule, against the rule's definition (a link used only where both its messages arrive), every round symmetric
    and doubly stochastic."""
    W = topology.erdos_renyi(10, 0.4, seed=3, directed=False, weights="metropolis")
    net = network.examples(W)[label].undirected()
    for t in range(4):
        M = ref.network_matrix(net, t)
        np.testing.assert_allclose(net.matrix(t).toarray(), M, rtol=1e-12, atol=1e-14, err_msg=f"{label} t={t}")
        np.testing.assert_allclose(M, M.T, atol=1e-14)
        np.testing.assert_allclose(M.sum(axis=0), 1.0, atol=1e-12)
    _mixes_as_its_definition(net, f"{label} (undirected)")


def _problem(n, d=3):
    rng = np.random.default_rng(4)
    b = rng.standard_normal((n, d))
    return (lambda X: X - b), rng.standard_normal((n, d))


def _applicable(label):
    """``(cls, network)`` of every registered algorithm that runs on the example ``label`` (directed methods over
    the row-stochastic example, undirected ones over the same layers on an undirected graph's weights)."""
    bases = {"directed": BASES["row"](), "undirected": topology.ring(10, directed=False, weights="metropolis")}
    out = []
    for cls in REGISTRY.values():
        if not cls.matrices or cls.gradients != "batch":  # (no network; a per-sample oracle: test_algorithms)
            continue
        net = network.examples(bases["undirected" if "W" in cls.matrices else "directed"])[label]
        mats = cls.problem_matrices(net) if cls.applies_to(net) else None
        if mats is None or (cls.per_link_state and not all(network.fixed_links(M) for M in mats.values())):
            continue  # (running sums per link need a fixed set of links: a schedule has none; refused by name)
        out.append((cls, net))
    return out


def _runs_and_resumes(label):
    grad, x0 = _problem(10)
    ran = []
    for cls, net in _applicable(label):
        mats = cls.problem_matrices(net)
        opt = cls(x0=x0, lr=0.01, **mats)
        for _ in range(2):
            opt.step(grad)
        state = opt.state_dict()
        for _ in range(2):
            opt.step(grad)
        again = cls.from_state_dict(state, **mats)
        for _ in range(2):
            again.step(grad)
        assert np.isfinite(opt.x).all(), f"{cls.name} on {label}"
        np.testing.assert_array_equal(again.x, opt.x, err_msg=f"{cls.name} on {label}: resumed")
        ran.append(cls.name)
    assert len(ran) >= 8, ran  # (the directed family at least runs on every layer)


@pytest.mark.parametrize("label", EXAMPLE_LABELS)
def test_every_example_runs_every_algorithm_that_applies_and_resumes_bit_for_bit(label):
    """Four steps, finite, and a state_dict taken after two continues as the uninterrupted run, bit for bit (the
    layers' state, delayed messages included)."""
    _runs_and_resumes(label)


FIXED_LINKS = sorted(label for label, net in network.examples(BASES["row"]()).items() if network.fixed_links(net)
                     and getattr(network.weights_of(net), "acts_on", None) == "links")


@pytest.mark.parametrize("label", FIXED_LINKS)
def test_every_example_that_reports_arrivals_reports_its_definitions(label):
    """reports_arrivals, checked (what fixed_links reads, so what the per-link methods follow): where an example
    says its links are fixed, its arrived() is the complement of what its links layers' definitions drop (a self
    loop always arrives), over the static matrix under them."""
    net = network.weights_of(network.examples(BASES["row"]())[label])
    source, layers = ref._link_layers(net)
    assert network.fixed_links(source) and not hasattr(source, "acts_on"), label  # (a static matrix under them)
    c = source.csr
    diag = np.repeat(np.arange(net.n), np.diff(c.indptr)) == c.indices
    for t in range(5):
        gone = np.zeros(c.nnz, dtype=bool)
        for layer in layers:
            gone |= ref.LAYER_TWINS[layer.layer](layer, t, 0, c.indptr, c.indices)[0]
        np.testing.assert_array_equal(net.arrived(t, 0, c.indptr, c.indices), ~gone | diag, err_msg=f"{label} t={t}")


class _Departed(network.Network):
    """A links layer of a test's own, on Network alone (no parent layer's answers to inherit): from iteration
    ``after`` on the nodes ``nodes`` neither send nor receive. It has what the per-link methods read (``awake``,
    ``arrived``) and declares when its links are fixed; nothing else in the package knows it."""

    acts_on = "links"

    def __init__(self, A, nodes, after=0):
        self.base = network.as_network(A)
        self.n, self.stochastic = self.base.n, self.base.stochastic
        self.nodes, self.after = tuple(nodes), int(after)

    @property
    def reports_arrivals(self):
        return network.fixed_links(self.base) and not hasattr(self.base, "awake")

    def awake(self, t):
        awake = np.ones(self.n, dtype=bool)
        if t >= self.after:
            awake[list(self.nodes)] = False
        return awake

    def arrived(self, t, r, indptr, indices, row_ids=None, col_ids=None):
        rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        gi = rows if row_ids is None else np.asarray(row_ids)[rows]
        gj = np.asarray(indices, dtype=np.int64) if col_ids is None else np.asarray(col_ids)[indices]
        below = self.base.arrived(t, r, indptr, indices, row_ids=row_ids, col_ids=col_ids) \
            if isinstance(self.base, network.Network) else True
        awake = self.awake(t)
        return below & ((awake[gi] & awake[gj]) | (gi == gj))


def test_a_new_links_layer_gets_fixed_links_from_what_it_declares():
    """fixed_links reads the layers' declaration (reports_arrivals), not their types: a layer defined here, on
    Network alone, is answered for as it declares, over a matrix, under message layers and over losses; one that
    declares nothing (the default) is refused by the per-link methods, naming the matrix; and the per-link method
    runs on it as on the same departures written as a Sleepy (the package's links layer), bit for bit."""
    from rowstoch_fast import mixing
    from rowstoch_fast.algorithms import REGISTRY

    C = mixing.out_degree_weights(BASES["row"]())
    lossy = network.Lossy(C, 0.2, seed=1)
    assert network.fixed_links(_Departed(C, [0, 3], 2))
    assert network.fixed_links(network.Compressed(_Departed(C, [0, 3], 2), "topk", k=2))
    assert network.fixed_links(_Departed(lossy, [0, 3], 2))
    assert not network.fixed_links(_Departed(network.Schedule([C, C]), [0, 3], 2))  # (links that change)
    assert not network.fixed_links(_Departed(network.Sleepy(C, 0.8), [0, 3], 2))  # (two awake masks)
    assert not network.fixed_links(network.Lossy(_Departed(C, [0, 3], 2), 0.1))  # (Lossy: over a matrix only)
    assert network.fixed_links(network.Sleepy(_Departed(lossy, [1], 0), 0.8)) is False  # (it puts nodes to sleep)

    class Undeclared(_Departed):
        reports_arrivals = False  # (what a links layer that says nothing is: Network's default)

    assert not network.fixed_links(Undeclared(C, [0, 3], 2))
    with pytest.raises(ValueError, match="RobustGradientPush: C must be"):
        REGISTRY["robust-gradient-push"](Undeclared(C, [0, 3], 2), np.zeros(3), lr=0.01)

    class SleepyDeparted(network.Sleepy):  # (the same departures as the package's links layer draws them)
        def __init__(self, A, nodes, after):
            super().__init__(A, 1.0)
            self.nodes, self.after = tuple(nodes), after

        def _draw(self, t):
            return _Departed.awake(self, t)

    grad, x0 = _problem(10)
    runs = []
    for net in (_Departed(lossy, [0, 3], 2), SleepyDeparted(lossy, [0, 3], 2)):
        cls = REGISTRY["robust-gradient-push"]
        assert cls.applies_to(net)
        opt = cls(net, x0, lr=0.01)
        for _ in range(6):
            opt.step(grad)
        runs.append(opt.x.copy())
    assert np.isfinite(runs[0]).all()
    np.testing.assert_array_equal(runs[0], runs[1])


def _guide_code():
    guide = (pathlib.Path(__file__).parent.parent / "docs" / "guide" / "networks.md").read_text()
    return re.findall(r"```python\n(.*?)```", guide[guide.index("## Adding a network layer"):], re.S)[:2]


def test_the_guide_recipe_adds_a_layer_in_one_module(tmp_path, capsys, cuda_on_host, monkeypatch):
    from test_algorithms import _on_cpu_and_device
    from test_backends import _emulated_device

    from rowstoch_fast import cli, config
    from rowstoch_fast.network.base import LAYERS

    code, twin_code = _guide_code()
    namespace = {}
    exec(compile(code, "networks.md", "exec"), namespace)
    Dropout = namespace["Dropout"]
    try:
        exec(compile(twin_code, "networks.md", "exec"), {"layer_twin": ref.layer_twin, "np": np})
        assert Dropout in network.layers() and ref.LAYER_TWINS["dropout"]
        # --help, the experiment files' schema: read from the registry
        for command in ("run", "compare"):
            with pytest.raises(SystemExit):
                cli.main([command, "--help"])
            assert "--drop-nodes" in capsys.readouterr().out
        assert config.schema()["communication"]["drop_after"] == ("drop_after", int)
        (tmp_path / "e.toml").write_text('[communication]\ndrop_nodes = "1,2"\ndrop_after = 3\n'
                                         '[algorithms.dsgd]\nlr = 0.01\n')
        options, _, _ = config.load(tmp_path / "e.toml")
        assert options["drop_nodes"] == "1,2" and options["drop_after"] == 3
        # the command line: built, run, recorded, described; bad values in one line
        for extra, out in (([], "plain"), (["--drop-nodes", "1,2", "--drop-after", "3"], "run")):
            assert cli.main(["run", "--n", "8", "--iterations", "6", "--total", "800", "--batch", "10", *extra,
                             "--out", str(tmp_path / out), "--no-progress"]) == 0
        capsys.readouterr()
        import json

        record = json.loads((tmp_path / "run" / "history.json").read_text())["meta"]["config"]["cli"]
        assert record["drop_nodes"] == "1,2" and record["drop_after"] == 3
        last = [(tmp_path / out / "history.csv").read_text().splitlines()[-1] for out in ("plain", "run")]
        assert last[0] != last[1]  # (the nodes left)
        for argv, message in ((["--drop-nodes", "x"], "--drop-nodes must be comma-separated node ids"),
                              (["--drop-after", "2"], "--drop-after is not read without --drop-nodes")):
            assert cli.main(["run", "--n", "8", "--iterations", "2", *argv, "--out", str(tmp_path / "bad")]) == 2
            err = capsys.readouterr().err
            assert message in err and err.count("\n") == 1, err
        # the registry tests: its definition, its compositions, every algorithm, a resume
        nets = network.examples(BASES["row"]())
        assert {"dropout", "lossy/dropout", "dropout/qsgd", "schedule/dropout"} <= set(nets)
        # a comparison's repetitions redraw the losses under it (its _twin: "Dropout cannot be drawn anew", helper 238)
        again = network.redrawn(Dropout(network.Lossy(BASES["row"](), 0.1, seed=1), [0], 2), 3)
        assert isinstance(again, Dropout) and again.base.seed == 4 and again.nodes == (0,)
        # the per-link methods follow its links (fixed_links reads what it declares, here Sleepy's), not a schedule's
        assert network.fixed_links(nets["lossy/dropout"]) and not network.fixed_links(nets["schedule/dropout"])
        assert {"robust-gradient-push", "r-fast"} <= {cls.name for cls, _ in _applicable("lossy/dropout")}
        for label in [k for k in nets if "dropout" in k]:
            _mixes_as_its_definition(nets[label], label)
            _runs_and_resumes(label)
        # the GPU backend, on the emulated kernels: the CPU's iterates
        fake = _emulated_device(cuda_on_host, monkeypatch)
        rng = np.random.default_rng(5)
        G, x0 = rng.standard_normal((10, 4)), rng.standard_normal((10, 4))
        for cls, net in _applicable("dropout"):
            cpu, gpu = _on_cpu_and_device(cls, net, x0, G, fake, 6)
            np.testing.assert_allclose(gpu.gather_x(), cpu.x, rtol=1e-12, atol=1e-13, err_msg=cls.name)
    finally:
        LAYERS.pop("dropout", None)
        ref.LAYER_TWINS.pop("dropout", None)


def test_two_layers_examples_cannot_share_a_label(monkeypatch):
    """network.examples merges every layer's examples by label: a label two layers give (both once said
    "per-node") kept only the later layer's network, and every test reading them lost the other's."""
    from rowstoch_fast.network import Sleepy

    monkeypatch.setattr(Sleepy, "examples", classmethod(lambda cls, base: {"lossy": cls(base, 0.5)}))
    with pytest.raises(ValueError, match="Sleepy.examples labels 'lossy', which another layer's examples use"):
        network.examples(topology.ring(6))


def test_the_network_model_in_words_says_its_units():
    """Titles and captions: a loss rate in percent ("0.1 of messages lost" before), delays with their unit
    ("uniform delays up to 3" of what), and no delays said for max_delay 0 (the base network, bit for bit; it read
    "uniform delays of 0-0 iterations", helper 197)."""
    from types import SimpleNamespace

    from rowstoch_fast.network import Delayed, Lossy

    assert Lossy.options_words(SimpleNamespace(loss=0.1, loss_model="bernoulli")) == "10% of messages lost"
    assert Lossy.options_words(SimpleNamespace(loss=0.1234, loss_model="bernoulli")) == "12.34% of messages lost"
    said = [Delayed.options_words(SimpleNamespace(max_delay=k, delay=kind))
            for k, kind in ((3, "uniform"), (1, "fixed"), (0, "uniform"), (None, "uniform"))]
    assert said == ["uniform delays of 0-3 iterations", "fixed delays of 1 iteration", None, None]


def test_the_undirected_rule_refuses_a_w_it_cannot_keep_doubly_stochastic():
    """Helper 199: ``Lossy(ring(4), 0.3).undirected()`` over the directed ring (not symmetric) came back
    ``stochastic == "doubly"`` with its rounds' columns summing to 1.5 and 0.5, and ``as_undirected`` of sleep over
    it too; message layers over a W whose columns do not sum to 1 likewise. A schedule alone claims nothing."""
    skewed = MixingMatrix([[0.5, 0.5, 0.0], [0.25, 0.5, 0.25], [0.0, 0.5, 0.5]])
    with pytest.raises(ValueError, match=r"symmetric W \(an undirected graph's weights\): W\[0, 1\] = 0 but "
                                         r"W\[1, 0\] = 0\.5"):
        network.Lossy(topology.ring(4), 0.3, seed=1).undirected()
    with pytest.raises(ValueError, match=r"only for a symmetric W"):
        network.as_undirected(network.Sleepy(topology.ring(4), 0.5, seed=1))
    with pytest.raises(ValueError, match=r"needs a doubly stochastic W .*: column 0 of W sums to 0\.75"):
        network.Compressed(skewed, "topk", k=1).undirected()
    W = topology.ring(6, directed=False, weights="metropolis")
    for net in (network.Lossy(W, 0.3, seed=1), network.Sleepy(W, 0.5, seed=1), network.Compressed(W, "topk", k=1)):
        M = net.undirected().matrix(3).toarray()
        np.testing.assert_allclose(M.sum(axis=0), 1.0, rtol=1e-12)
    assert network.Schedule([skewed, skewed]).undirected().stochastic == "row"


@pytest.mark.parametrize("t, r", [(-1, 0), (0, -1), (2**64, 0), (1.5, 0), ("3", 0)])
def test_arrivals_and_messages_refuse_a_round_that_is_no_count(t, r):
    """Helper 199: ``Lossy.arrived`` / ``Sleepy.arrived`` / a message layer's ``encode`` at t = -1 had raised
    pybind11's "incompatible function arguments" (the compiled draws take unsigned counts); the mixing calls checked
    their t already."""
    c = topology.exponential(8).csr
    lossy = network.Lossy(topology.exponential(8), 0.2, seed=1)
    X = np.ones((8, 3))
    calls = [lambda: lossy.arrived(t, r, c.indptr, c.indices),
             lambda: network.Sleepy(lossy, 0.5, seed=2).arrived(t, r, c.indptr, c.indices),
             lambda: network.Compressed(topology.exponential(8), "topk", k=1).encode(X, np.empty_like(X), t, r)]
    for call in calls:
        with pytest.raises((ValueError, TypeError), match=r"^(t|r) (=|must)"):
            call()

"""Files the package writes: never over a device, a FIFO or a socket; through a symbolic link (helper 218)."""

import os

import numpy as np
import pytest

import rowstoch_fast as rf
from rowstoch_fast import report, topology
from rowstoch_fast._files import atomic_write, file_target
from rowstoch_fast.objectives import Quadratic

fifo_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")


@fifo_only
def test_a_fifo_is_refused_and_kept_and_a_link_is_written_through(tmp_path):
    """Helper 218: the atomic writers renamed their temporary file over the path asked, so that a checkpoint at
    /dev/null turned a machine's /dev/null into a regular file, and a symbolic link into a plain file (its target
    left as it was). A device, FIFO or socket is refused before anything is written; a link is written through."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"path '.*pipe' is a FIFO \(named pipe\): a file written there would "
                                         r"replace it; give a regular file's path"):
        atomic_write(fifo, lambda fh: fh.write("x"))
    assert not os.path.isfile(fifo) and os.path.exists(fifo)
    target = tmp_path / "target.csv"
    target.write_text("old")
    link = tmp_path / "link.csv"
    os.symlink(target, link)
    atomic_write(link, lambda fh: fh.write("new"))
    assert os.path.islink(link) and target.read_text() == "new"
    os.symlink(fifo, tmp_path / "to_pipe")
    with pytest.raises(ValueError, match=r"is a FIFO \(named pipe\) \('.*pipe'\)"):
        file_target(tmp_path / "to_pipe", "checkpoint")
    with pytest.raises(IsADirectoryError, match="out '.*' is a folder"):
        file_target(tmp_path, "out")
    assert file_target(tmp_path / "new.npz") == os.fspath(tmp_path / "new.npz")  # (not there yet: fine)


@fifo_only
def test_a_run_refuses_a_checkpoint_on_a_fifo_before_it_runs_and_figures_and_histories_too(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    f = Quadratic.random(4, 3, seed=0)
    algorithm = rf.Algorithm(topology.exponential(4), 0.05, method="dsgd")
    with pytest.raises(ValueError, match="checkpoint '.*pipe' is a FIFO"):
        rf.run(algorithm, f, 5, progress=False, checkpoint=str(fifo))
    history = rf.run(algorithm, f, 5, progress=False)
    for write in (history.to_csv, history.to_json):
        with pytest.raises(ValueError, match="is a FIFO"):
            write(str(fifo))
    plt = report.pyplot()
    fig = plt.figure()
    try:
        with pytest.raises(ValueError, match="is a FIFO"):
            report.save(fig, str(fifo), format="png")
    finally:
        plt.close(fig)
    assert not os.path.isfile(fifo)
    link = tmp_path / "ck.npz"
    os.symlink(tmp_path / "real.npz", link)  # (dangling until the run writes its target)
    rf.run(algorithm, f, 5, progress=False, checkpoint=str(link), checkpoint_every=2)
    assert os.path.islink(link)
    with np.load(link) as saved:
        assert "format" in saved


@fifo_only
def test_a_link_loop_a_links_missing_folder_and_fifos_given_to_readers_and_save_matrix(tmp_path):
    """Helper 222: a loop of links passed the check and its link was replaced by a file; a figure saved through a
    dangling link into a missing folder named the temporary file; save_matrix on a FIFO, and --loss @FIFO and
    --config FIFO read from one, blocked for good (--config's said it "does not exist")."""
    from rowstoch_fast import config, io
    from rowstoch_fast.errors import UsageError
    from rowstoch_fast.network import options as network_options

    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    with pytest.raises(ValueError, match="is a symbolic link that leads back to itself"):
        atomic_write(tmp_path / "loop1", lambda fh: fh.write("x"))
    assert os.path.islink(tmp_path / "loop1")
    os.symlink(tmp_path / "nofolder" / "fig.png", tmp_path / "fig.png")
    plt = report.pyplot()
    fig = plt.figure()
    try:
        with pytest.raises(FileNotFoundError, match=r"its folder '.*nofolder' does not exist"):
            report.save(fig, str(tmp_path / "fig.png"))
    finally:
        plt.close(fig)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="is a FIFO"):
        io.save_matrix(str(fifo), topology.ring(4))
    with pytest.raises(UsageError, match=r"--loss @.*pipe: not a file of numbers \(the file '.*pipe' is a FIFO"):
        network_options.node_spec(f"@{fifo}", "--loss")
    with pytest.raises(config.ConfigError, match=r"--config '.*pipe' is a FIFO \(named pipe\), not a regular file"):
        config.load(str(fifo))

"""Experiment files (rowstoch_fast.config): what a file may hold, and its values as the command line reads them."""

import pytest

from rowstoch_fast import config

BASE = '[network]\ntopology = "ring"\nn = 8\n[run]\nalgorithms = "dsgd"\n'


@pytest.mark.parametrize("metrics", ['"suboptimality, consensus_error"', '["suboptimality", "consensus_error"]',
                                     '["suboptimality,consensus_error"]'])
def test_outputs_metrics_take_what_run_algorithms_takes(tmp_path, metrics):
    """``[outputs] metrics`` takes a list or one string separated by commas, as ``[run] algorithms`` does (helper 219:
    ``metrics = "suboptimality"`` was refused, "must be a list of strings")."""
    path = tmp_path / "e.toml"
    path.write_text(f"{BASE}[outputs]\nmetrics = {metrics}\n")
    options, _, _ = config.load(str(path))
    assert options["metric"] == "suboptimality,consensus_error"


@pytest.mark.parametrize("metrics, said", [("[]", "must be a string or a list of strings, got list []"),
                                           ('""', "metrics was given an empty value")])
def test_outputs_metrics_empty_are_refused_naming_the_key(tmp_path, metrics, said):
    path = tmp_path / "e.toml"
    path.write_text(f"{BASE}[outputs]\nmetrics = {metrics}\n")
    with pytest.raises(config.ConfigError, match=r"\[outputs\] metrics") as caught:
        config.load(str(path))
    assert said in str(caught.value)


@pytest.mark.parametrize("formats, read", [("[]", "none"), ('"pdf"', "pdf"), ('"png, pdf"', "png,pdf"),
                                           ('["png", "pdf"]', "png,pdf")])
def test_outputs_formats_take_a_string_too(tmp_path, formats, read):
    """Helper 219: ``formats = "pdf"`` was refused, "must be a list of strings", where ``metrics`` and
    ``algorithms`` take a string; an empty list still means the tables alone."""
    path = tmp_path / "e.toml"
    path.write_text(f"{BASE}[outputs]\nformats = {formats}\n")
    assert config.load(str(path))[0]["format"] == read


@pytest.mark.parametrize("compress", ['"none,qsgd:4"', '["none", "qsgd:4"]', '"none, qsgd:4"'])
def test_a_communication_string_is_a_comma_list_as_on_the_command_line(tmp_path, compress):
    """Helper 233: ``loss = "0,0.1"`` ran two settings, but ``compress = "none,qsgd:4"`` was refused ("must be one of
    none, qsgd, ..., got 'none,qsgd:4'"): a string is the command line's comma list for every such key."""
    path = tmp_path / "e.toml"
    path.write_text(f"{BASE}[communication]\ncompress = {compress}\n")
    options, _, _ = config.load(str(path))
    assert options["compress"].replace(" ", "") == "none,qsgd:4"
    path.write_text(f'{BASE}[communication]\ncompress = "none,bogus:4"\n')
    with pytest.raises(config.ConfigError, match=r"\[communication\] compress must be one of .*got 'bogus:4'"):
        config.load(str(path))

"""The seed's failure: a detached channel leaves the encoder without gradients."""

import pytest

from hil.demos import grad_flow


@pytest.fixture(scope="module")
def reports():
    return {r.mode: r for r in grad_flow.run()}


@pytest.mark.parametrize("mode", ["no_grad", "detach", "tensor"])
def test_cut_graph_starves_encoder(reports, mode):
    r = reports[mode]
    assert r.encoder_grad_is_none
    assert not r.decoder_grad_is_none


def test_complex_channel_trains_encoder_with_exact_gradients(reports):
    r = reports["complex"]
    assert not r.encoder_grad_is_none and r.encoder_grad_norm > 1e-3
    assert r.max_fd_error is not None and r.max_fd_error < 1e-7


def test_cli_gradflow_runs(capsys):
    from hil.cli import main

    assert main(["gradflow"]) == 0
    assert "Only 'complex' trains the encoder" in capsys.readouterr().out

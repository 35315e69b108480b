"""cpu_threads: torch's and the BLAS pools' threads limited inside the block, restored after."""

import numpy as np
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from hil.apps.common import cpu_threads


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_cpu_threads_limits_torch_and_blas_and_restores():
    np.ones((4, 4)) @ np.ones((4, 4))  # numpy's BLAS loaded
    torch_before = torch.get_num_threads()
    # two threads before, whatever this machine's default, so that the limit has work to do
    with threadpool_limits(limits=2, user_api="blas"):
        torch.set_num_threads(2)
        try:
            blas_before = _blas_threads()
            assert blas_before and set(blas_before) == {2}  # numpy's own BLAS is seen
            with cpu_threads(1):
                assert torch.get_num_threads() == 1
                assert _blas_threads() == [1] * len(blas_before)
            assert torch.get_num_threads() == 2
            assert _blas_threads() == blas_before
        finally:
            torch.set_num_threads(torch_before)


def test_cpu_threads_takes_at_least_one():
    with cpu_threads(0):
        assert torch.get_num_threads() == 1
        assert set(_blas_threads()) == {1}


def test_rx_runs_inside_cpu_threads(monkeypatch):
    """hil rx --threads N: _main runs with N threads for torch and BLAS."""
    from hil.apps import rx

    seen = {}

    def fake_main(a):
        seen["torch"], seen["blas"] = torch.get_num_threads(), set(_blas_threads())
        return 0

    monkeypatch.setattr(rx, "_main", fake_main)
    assert rx.main(["--radio", "tcp://127.0.0.1:1", "--threads", "1"]) == 0
    assert seen == {"torch": 1, "blas": {1}}

import pytest

TINY = {
    "model": {"bandwidth_ratio": "1/6", "hidden": 8},
    "channel": {"profile": "multipath_cfo", "snr_db": [0.0, 20.0]},
    "train": {
        "crop": 16,
        "batch_size": 8,
        "steps": 4,
        "eval_every": 2,
        "eval_tiles": 16,
        "seed": 3,
        "eval_snr_db": [10.0],
        "threads": 1,
    },
}


@pytest.fixture
def tiny_cfg():
    import copy

    from hil.jscc.train import ExperimentConfig

    return ExperimentConfig.from_dict(copy.deepcopy(TINY))

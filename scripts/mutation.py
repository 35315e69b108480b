#!/usr/bin/env python3
"""Mutation testing (mutmut 3) of the modules where a bug costs most, one module at a time.

    python scripts/mutation.py [--module wire --module header ...] [--list] [--keep DIR]

For each module it copies ``hil/``, ``tests/`` and ``pyproject.toml`` into a scratch folder
(the checkout is never touched), adds a ``[tool.mutmut]`` section that mutates only that
module and runs only the tests of its area, runs ``mutmut run``, and reads ``mutmut
results --all true``. It prints, per module, killed / survived / other (timeouts,
suspicious, no tests) and the score killed / (killed + survived), then the surviving
mutants' names (``mutmut show NAME`` in the kept folder prints the diff of one).

Slow (minutes per module on two cores) and not part of CI; needs ``pip install
'mutmut==3.8.1'`` (the ``mutation`` extra).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# module key -> (file to mutate, test files of its area)
MODULES: dict[str, tuple[str, list[str]]] = {
    "header": ("hil/phy/header.py", ["tests/phy/test_frame.py"]),
    "coding": ("hil/phy/coding.py", ["tests/phy/test_frame.py", "tests/phy/test_coding.py"]),
    "sync": ("hil/phy/sync.py", ["tests/phy/test_sync.py"]),
    "receive": (
        "hil/phy/receive.py",
        [
            "tests/phy/test_receive.py",
            "tests/phy/test_surrogate.py",
            "tests/phy/test_receive_frame.py",
            "tests/phy/test_receive_reference.py",
        ],
    ),
    "wire": (
        "hil/transport/wire.py",
        [
            "tests/transport/test_wire.py",
            "tests/transport/test_properties.py",
            "tests/transport/test_raw_guards.py",
        ],
    ),
    "accounting": (
        "hil/apps/accounting.py",
        ["tests/apps/test_accounting.py", "tests/apps/test_accounting_inferred.py"],
    ),
    "checkpoint": ("hil/jscc/checkpoint.py", ["tests/jscc/test_checkpoint.py"]),
    "digital": (
        "hil/baseline/digital.py",
        ["tests/baseline/test_baseline.py", "tests/baseline/test_whole.py"],
    ),
    "sim-converters": (
        "hil/radio/sim.py",
        [
            "tests/radio/test_sim.py",
            "tests/radio/test_sim_engine.py",
            "tests/radio/test_sim_parity.py",
        ],
    ),
    "twin-model": ("hil/twin/model.py", ["tests/twin/test_model.py"]),
}


# mutant name -> why it cannot change behaviour; excluded from the score, printed apart.
# (See docs/mutation.md for the survivors that are left and why.)
EQUIVALENT: dict[str, str] = {
    # hil/phy/header.py
    "hil.phy.header.xǁHeaderǁunpack__mutmut_43": (
        "version left to its default: unpack has just required v == FORMAT_VERSION, the default"
    ),
    "hil.phy.header.x_decode_header_bits__mutmut_5": (
        "asarray without float64: np.where(..., 0.0), np.clip and viterbi_decode's own float64 "
        "conversion give the same values for every real dtype"
    ),
    "hil.phy.header.x_decode_header_bits__mutmut_7": "same as mutmut_5 (dtype argument dropped)",
    "hil.phy.header.x_decode_header_bits__mutmut_32": (
        "LLR saturation at 1e6 + 1 instead of 1e6: a free constant far above any real LLR; "
        "only inputs crafted between the two levels could decode differently"
    ),
    "hil.phy.header.x_decode_header_bits__mutmut_33": "same as mutmut_32, upper bound",
    "hil.phy.header.x_decode_header_bits__mutmut_35": "the LLRs divided by the scrambler's signs (+-1) instead of multiplied: the same values exactly",
    "hil.phy.header.x_decode_header_bits__mutmut_48": "LLR == 0 (an erasure) guessed as 1 instead of 0 on the fast path: a wrong guess is not a codeword with a good CRC, so the row falls back to Viterbi, which ignores the guess",
    "hil.phy.header.x__tiers__mutmut_4": "known_bits(history=None) instead of False: both are falsy, the same bits",
    "hil.phy.header.x__tiers__mutmut_6": "the two tiers never found equal: when they are equal the same decode runs twice and reads the same headers",
    "hil.phy.header.x__tiers__mutmut_9": "as _tiers mutmut_6 (compared with None)",
    "hil.phy.header.x__tiers__mutmut_10": "as _tiers mutmut_6 (compared with None)",
    "hil.phy.header.x__list_decode__mutmut_5": "list decoding in overlapping batches (step 1): each failed row decoded again gives the same paths and the same choice",
    "hil.phy.header.x__list_decode__mutmut_9": "the list pass with n_list = 1: its one path is the Viterbi path held to the same known bits (or none), which has already failed the CRC",
    "hil.phy.header.x__list_decode__mutmut_10": "as _list_decode mutmut_9",
    "hil.phy.header.x__list_decode__mutmut_12": "as _list_decode mutmut_9 (one batch)",
    "hil.phy.header.x__list_decode__mutmut_16": "batches of 33 instead of 32: rows are decoded independently, the batch size only bounds memory",
    "hil.phy.header.xǁHeaderPriorǁknown_bits__mutmut_5": "np.full infers int64 from the Python int -1 (64-bit platforms): the same array",
    "hil.phy.header.xǁHeaderPriorǁknown_bits__mutmut_8": "as known_bits mutmut_5 (dtype argument dropped)",
    "hil.phy.header.xǁHeaderPriorǁknown_bits__mutmut_87": "zip(strict=None) over the 3 fields and a shape Header has already checked to be 3 long",
    "hil.phy.header.xǁHeaderPriorǁknown_bits__mutmut_90": "as known_bits mutmut_87 (strict dropped)",
    "hil.phy.header.xǁHeaderPriorǁknown_bits__mutmut_94": "as known_bits mutmut_87 (strict=False)",
    "hil.phy.header.x_code_header_bits__mutmut_18": "numpy's reshape takes -2 as -1 (unknown)",
    "hil.phy.header.x_code_header_bits__mutmut_43": "numpy's reshape takes -2 as -1 (unknown)",
    "hil.phy.header.x_decode_header_llr__mutmut_3": (
        "asarray without float64: decode_header_bits converts to float64 itself; isfinite and "
        "size do not depend on the dtype"
    ),
    "hil.phy.header.x_decode_header_llr__mutmut_5": "same as mutmut_3 (dtype argument dropped)",
    # hil/phy/coding.py
    "hil.phy.coding.x_repetition_decode__mutmut_10": "numpy's reshape takes -2 as -1 (unknown)",
    "hil.phy.coding.x__penalty__mutmut_11": (
        "a third penalty column of zeros: the kernels read columns 0 and 1 (the input bit) only"
    ),
    "hil.phy.coding.x__llr_batch__mutmut_3": (
        "asarray without float64: the compiled kernels multiply each LLR by a float64 branch "
        "sign and add it to float64 path metrics, so any real input is promoted exactly "
        "before anything is summed"
    ),
    "hil.phy.coding.x__llr_batch__mutmut_5": "as _llr_batch mutmut_3 (dtype argument dropped)",
    # hil/phy/sync.py
    "hil.phy.sync.xǁStreamSyncǁrefine__mutmut_1": (
        "sc_metric's default 1.0 instead of 0.0: both lie outside [strong_sc, WEAK_SC_MAX) "
        "(strong_sc >= threshold > 0, WEAK_SC_MAX = 0.8), so a caller that gives no metric "
        "gets the strong long-training gate either way"
    ),
    "hil.phy.sync.xǁStreamSyncǁrefine__mutmut_72": (
        "the coarse derotation's phase origin moved: a constant phase on the whole segment, "
        "which neither the correlation magnitudes nor the fine CFO (a phase difference) see"
    ),
    "hil.phy.sync.xǁStreamSyncǁmetric__mutmut_2": (
        "(len(r) - L) / L < W instead of // : for an integer W and q >= 0, q < W exactly when "
        "floor(q) < W"
    ),
    "hil.phy.sync.x__complex__mutmut_3": (
        "complex input cast to complex128, real input passed as it is: the kernels convert "
        "every sample with np.complex128 whatever its dtype, so the sums are the same"
    ),
    "hil.phy.sync.x__complex__mutmut_5": (
        "real input cast to float64 instead of complex128: the kernels convert every sample "
        "with np.complex128, the same values"
    ),
    # hil/phy/receive.py
    "hil.phy.receive.x_line_fit__mutmut_2": "dim +1 is dim -1 of the [B, S] line_fit takes",
    "hil.phy.receive.x_line_fit__mutmut_23": "dim +1 is dim -1 of the [B, S] line_fit takes",
    "hil.phy.receive.x_line_fit__mutmut_33": "dim +1 is dim -1 of the [B, S] line_fit takes",
    "hil.phy.receive.x_line_fit__mutmut_8": "arange without a dtype: int64 steps, promoted to y's dtype by the subtraction and product: the same values",
    "hil.phy.receive.x_line_fit__mutmut_11": "as line_fit mutmut_8",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_45": "persistent=None is falsy: the buffer stays out of the state dict (tested)",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_55": "persistent=None is falsy: the buffer stays out of the state dict (tested)",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_66": "persistent=None is falsy: the buffer stays out of the state dict (tested)",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_77": "persistent=None is falsy: the buffer stays out of the state dict (tested)",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_90": "persistent=None is falsy: the buffer stays out of the state dict (tested)",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_84": "pilot_k as int64: every use converts it to the input's real dtype first",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_86": "as __init__ mutmut_84",
    "hil.phy.receive.xǁOfdmReceiverǁ_cfo__mutmut_14": "dim +1 is dim -1 of the 2-D tensor (the function checks x is [B, L])",
    "hil.phy.receive.xǁOfdmReceiverǁ_derotate__mutmut_8": "dim +1 is dim -1 of the 2-D tensor (the function checks x is [B, L])",
    "hil.phy.receive.xǁOfdmReceiverǁ_smooth__mutmut_26": "Tensor.to(None) returns the tensor unchanged",
    "hil.phy.receive.xǁOfdmReceiverǁ_smooth_phase__mutmut_12": "dim +1 is dim -1 of the 2-D tensor (the function checks x is [B, L])",
    "hil.phy.receive.xǁOfdmReceiverǁ_smooth_phase__mutmut_17": "arange without a dtype: int64 symbol indices, promoted by the product with the float ramp: the same values",
    "hil.phy.receive.xǁOfdmReceiverǁ_smooth_phase__mutmut_20": "arange without a dtype: int64 symbol indices, promoted by the product with the float ramp: the same values",
    "hil.phy.receive.xǁOfdmReceiverǁ_smooth_phase__mutmut_3": "rdt None: the arange defaults to float32 integers (exact) promoted by the float64 ramp, and var.to(None) is a no-op",
    "hil.phy.receive.xǁOfdmReceiverǁ_smooth_phase__mutmut_23": "Tensor.to(None) returns the tensor unchanged",
    "hil.phy.receive.xǁOfdmReceiverǁsmoothed_phase_error__mutmut_6": "arange without a dtype: int64 indices promoted by the float products: the same values",
    "hil.phy.receive.xǁOfdmReceiverǁsmoothed_phase_error__mutmut_9": "arange without a dtype: int64 indices promoted by the float products: the same values",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_164": "persistent=None is falsy: the buffer stays out of the state dict (tested)",
    "hil.phy.receive.xǁOfdmReceiverǁ_const__mutmut_3": "the cache never hit: every call converts the constant afresh, the same values (only slower)",
    "hil.phy.receive.xǁOfdmReceiverǁ_const__mutmut_4": "as _const mutmut_3 (no constant is kept under the key None)",
    "hil.phy.receive.xǁChannelEstimateǁrows__mutmut_3": "as_tensor of a list of Python ints is int64 (torch.long) without a dtype",
    "hil.phy.receive.xǁChannelEstimateǁrows__mutmut_6": "as rows mutmut_3",
    "hil.phy.receive.xǁChannelEstimateǁrows__mutmut_4": "the index tensor on the CPU: torch indexes a tensor on any device with a CPU index (checked on the meta device)",
    "hil.phy.receive.xǁChannelEstimateǁrows__mutmut_7": "as rows mutmut_4",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_104": "persistent=None is falsy: the buffer stays out of the state dict (tested)",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_115": "persistent=None is falsy: the buffer stays out of the state dict (tested)",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_148": "persistent=None is falsy: the buffer stays out of the state dict (tested)",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_174": "persistent=None is falsy: the buffer stays out of the state dict (tested)",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_186": "persistent=None is falsy: the buffer stays out of the state dict (tested)",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_122": "k_pd as int64: its integers are exact in any dtype, and _const converts them to the working one",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_124": "as __init__ mutmut_122",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_127": "astype(None) is float64",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_181": "a / L = a L for the long training values L = +-1 on the used bins",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_193": "lts_index as int64: estimate asks _const for it in float64, the same integers",
    "hil.phy.receive.xǁOfdmReceiverǁ__init____mutmut_195": "as __init__ mutmut_193",
    "hil.phy.receive.xǁOfdmReceiverǁ_cfo__mutmut_8": "estimate cuts x to lts_len = lts_cp + 2 n before _cfo: the slice ends there either way",
    "hil.phy.receive.xǁOfdmReceiverǁ_const__mutmut_31": "the symbol indices as int64: their distances are the same integers, converted to the asked dtype",
    "hil.phy.receive.xǁOfdmReceiverǁ_const__mutmut_33": "as _const mutmut_31",
    "hil.phy.receive.xǁOfdmReceiverǁ_frame__mutmut_15": "dim +1 is dim -1 of the [B, L] frames",
    "hil.phy.receive.xǁOfdmReceiverǁ_frame__mutmut_19": "dim +1 is dim -1 of the [B, L] frames (the error message's count)",
    "hil.phy.receive.xǁOfdmReceiverǁ_lts__mutmut_44": "dim +1 is dim -1 of the [B, U] differences",
    "hil.phy.receive.xǁOfdmReceiverǁestimate__mutmut_8": "x.shape[+1] is read only once x.dim() == 2 held: dim 1 is dim -1",
    "hil.phy.receive.xǁOfdmReceiverǁestimate__mutmut_56": "dim +1 is dim -1 of the [B, U] estimate",
    "hil.phy.receive.xǁOfdmReceiverǁestimate__mutmut_20": "lts_index is a float64 buffer: converted to no dtype it stays float64, what estimate asks for",
    "hil.phy.receive.xǁOfdmReceiverǁ_smooth_phase__mutmut_42": "var is already in the working real dtype (n0 and the pilot power are): .to(None) and .to(rdt) both leave it",
    "hil.phy.receive.xǁOfdmReceiverǁequalize__mutmut_59": "dim +1 is dim -1 of the [B, P] pilot powers",
    "hil.phy.receive.xǁOfdmReceiverǁequalize__mutmut_66": "cis of a real tensor in x's real precision is already x's complex dtype: .to(None) and .to(x.dtype) both leave it",
    "hil.phy.receive.xǁOfdmReceiverǁequalize__mutmut_110": "as equalize mutmut_66",
    "hil.phy.receive.xǁOfdmReceiverǁequalize__mutmut_145": "the per-bin SNR of working-dtype powers is already in that dtype",
    "hil.phy.receive.xǁOfdmReceiverǁequalize__mutmut_120": "|h|^2 exactly 1e-20 is then divided by 1e-10 in modulus either way",
    "hil.phy.receive.xǁOfdmReceiverǁequalize__mutmut_42": "z / p = z p for pilot values p = +-1",
    "hil.phy.receive.xǁOfdmReceiverǁequalize__mutmut_238": "z / p = z p for pilot values p = +-1",
    "hil.phy.receive.xǁOfdmReceiverǁequalize__mutmut_49": "the smoother on one symbol gives that symbol's own phase, as per-symbol tracking does (tests/phy/test_receive.py::test_phase_smoothing_starts_at_two_symbols checks the two agree exactly)",
    "hil.phy.receive.xǁOfdmReceiverǁequalize__mutmut_93": "the line through two points is the points: line_fit on two symbols changes nothing",
    "hil.phy.receive.xǁOfdmReceiverǁrefine_estimate__mutmut_77": "division by the known symbols, +-1 (the header's BPSK decisions and the pilots), is multiplication",
    "hil.phy.receive.xǁOfdmReceiverǁrefine_estimate__mutmut_94": "as refine_estimate mutmut_77",
    "hil.phy.receive.xǁOfdmReceiverǁrefine_estimate__mutmut_100": "as refine_estimate mutmut_77",
    "hil.phy.receive.xǁOfdmReceiverǁrefine_estimate__mutmut_122": "dim +1 is dim -1 of the [B, U] estimate",
    "hil.phy.receive.xǁOfdmReceiverǁrefine_estimate__mutmut_144": "dim +1 is dim -1 of the [B, U] estimate",
    # hil/radio/sim.py
    "hil.radio.sim.x__bursts__mutmut_26": "zip's strict only checks that starts and ends have one length, which they always do",
    "hil.radio.sim.x__bursts__mutmut_29": "as _bursts mutmut_26",
    "hil.radio.sim.x__bursts__mutmut_30": "as _bursts mutmut_26",
    "hil.radio.sim.xǁSimEngineǁ__init____mutmut_13": "a chain built from no stages passes the samples through unchanged and records nothing",
    "hil.radio.sim.xǁSimEngineǁ__init____mutmut_18": "the first burst starts at max(tx_time, rx_count + LATENCY): LATENCY exceeds 1",
    "hil.radio.sim.xǁSimEngineǁ__init____mutmut_7": "another fixed seed for the channel's generator: the world is as random and as reproducible",
    "hil.radio.sim.xǁSimEngineǁ__init____mutmut_8": "as __init__ mutmut_7",
    "hil.radio.sim.xǁSimEngineǁ_signal__mutmut_17": "lo == hi adds an empty slice",
    "hil.radio.sim.xǁSimEngineǁ_signal__mutmut_80": "a burst that ends exactly at a is dropped one call later: it adds nothing to that call",
    "hil.radio.sim.xǁSimEngineǁ_stages__mutmut_4": "the stages rebuilt on every call instead of when the settings change: the same stages",
    "hil.radio.sim.xǁSimEngineǁ_stages__mutmut_7": "random_phase is only read when no phase0 is given; the engine always gives one",
    "hil.radio.sim.xǁSimEngineǁ_stages__mutmut_10": "as _stages mutmut_7",
    "hil.radio.sim.xǁSimEngineǁ_through_channel__mutmut_153": "TimingOffset draws a missing delay from [0, max_delay_samples] = [0, 0]",
    "hil.radio.sim.xǁSimEngineǁ_through_channel__mutmut_155": "as _through_channel mutmut_153",
    "hil.radio.sim.xǁSimEngineǁ_through_channel__mutmut_169": "phase0 None with random_phase False starts the ramp at phase 0, as 0.0 does",
    "hil.radio.sim.xǁSimEngineǁ_through_channel__mutmut_173": "as _through_channel mutmut_169",
    "hil.radio.sim.xǁSimEngineǁrx__mutmut_34": "the drop schedule tests blocks % drop_every == 0, which counting down meets on the same blocks",
    "hil.radio.sim.xǁSimEngineǁrx__mutmut_47": "flags is 0 before: = and |= give the same bits",
    "hil.radio.sim.xǁSimEngineǁrx__mutmut_57": "time.sleep(0) when due exactly now",
    "hil.radio.sim.xǁSimEngineǁrx__mutmut_77": "float64 zeros instead of complex128: the ADC makes complex64 zeros of either",
    "hil.radio.sim.xǁSimEngineǁrx__mutmut_79": "as rx mutmut_77",
    "hil.radio.sim.xǁSimEngineǁtx_dac__mutmut_24": "an empty cyclic buffer through the channel comes back empty (cut to len(x) = 0)",
    "hil.radio.sim.xǁSimEngineǁtx_dac__mutmut_7": "samples kept in their own precision: the DAC rounds them to 16-bit codes, which complex64 holds exactly, and returns complex128",
    "hil.radio.sim.xǁSimEngineǁtx_dac__mutmut_9": "as tx_dac mutmut_7",
    "hil.radio.sim.xǁSimEngineǁ__init____mutmut_47": "None and 0j are both falsy: no DC offset is added",
    "hil.radio.sim.xǁSimEngineǁ__init____mutmut_57": "a / e^(j theta) = a e^(-j theta): the DC offset's phase is still uniform on the circle",
    "hil.radio.sim.xǁSimEngineǁ__init____mutmut_60": "2 theta for theta uniform on [0, 2 pi) is uniform on the circle too",
    "hil.radio.sim.xǁSimEngineǁ__init____mutmut_68": "an empty key differs from every real one, as None does: the stages are built on first use",
    "hil.radio.sim.xǁSimEngineǁ__init____mutmut_69": "None and False are both falsy: the engine reads as open",
    "hil.radio.sim.xǁSimEngineǁ_stages__mutmut_9": "as _stages mutmut_7 (random_phase left to its default)",
    "hil.radio.sim.xǁSimRadioǁwait_tx__mutmut_1": "the sim's wait_tx returns at once: its timeout is never waited",
    # hil/twin/model.py
    "hil.twin.model.x__buffer_attrs__mutmut_33": "a write that does nothing returns 0 instead of None: the server ignores what a write returns",
    "hil.twin.model.x__lo_channel__mutmut_62": "a write that does nothing returns 0 instead of None: the server ignores what a write returns",
    "hil.twin.model.x__lo_channel__mutmut_75": "a write that does nothing returns 0 instead of None: the server ignores what a write returns",
    "hil.twin.model.x__lo_channel__mutmut_88": "a write that does nothing returns 0 instead of None: the server ignores what a write returns",
    "hil.twin.model.x__lo_channel__mutmut_117": "a write that does nothing returns 0 instead of None: the server ignores what a write returns",
    "hil.twin.model.x__phy__mutmut_315": "a write that does nothing returns 0 instead of None: the server ignores what a write returns",
    "hil.twin.model.x__adc_core__mutmut_25": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__adc_core__mutmut_34": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__adc_core__mutmut_35": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__adc_core__mutmut_42": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__adc_core__mutmut_51": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__adc_core__mutmut_52": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__adc_core__mutmut_59": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__adc_core__mutmut_68": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__adc_core__mutmut_69": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__dac_core__mutmut_25": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__dac_core__mutmut_34": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__dac_core__mutmut_35": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__dac_core__mutmut_42": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__dac_core__mutmut_51": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__dac_core__mutmut_52": "the first part of a calibration cell's key only has to tell the two DMA cores apart, and the mutated one still differs from the other core's (cells independent: tested)",
    "hil.twin.model.x__phy__mutmut_197": "_rates formats every kind but 'TX' as the RX path",
    "hil.twin.model.x__phy__mutmut_200": "_rates formats every kind but 'TX' as the RX path",
    "hil.twin.model.x__phy__mutmut_201": "_rates formats every kind but 'TX' as the RX path",
    "hil.twin.model.x__phy_monitors__mutmut_120": "the file name given explicitly is the one Attr.file builds for channel 'out' anyway",
    "hil.twin.model.x__phy_monitors__mutmut_124": "as _phy_monitors mutmut_120 (filename left out)",
    "hil.twin.model.x_parse_fir_config__mutmut_118": "129 taps is not a multiple of 16, refused either way",
    "hil.twin.model.x_parse_fir_config__mutmut_33": "keyword pairs read with step 1 add pairs keyed by values (numbers), never DEC or INT: the same decimation",
    "hil.twin.model.x_parse_fir_config__mutmut_9": "each line is strip()ped, which removes a carriage return as well",
    # hil/apps/accounting.py
    "hil.apps.accounting.xǁAccountingǁ_resolve__mutmut_18": (
        "p0 <= h: a header failure never sits at the stream position of a frame whose header "
        "was read (one detection is one or the other), so h == p0 cannot occur"
    ),
    "hil.apps.accounting.xǁAccountingǁ_resolve__mutmut_19": "h <= p1: as mutmut_18",
    "hil.apps.accounting.xǁAccountingǁcompact__mutmut_39": (
        "h >= end[0]: as _resolve mutmut_18, no failure has the position of a read header"
    ),
    "hil.apps.accounting.xǁAccountingǁcompact__mutmut_9": (
        "k <= end: end also among the older bounds adds the empty interval (end, end)"
    ),
    "hil.apps.accounting.xǁAccountingǁcompact__mutmut_24": (
        'recent[s] = "" instead of None: recent is used for its keys only'
    ),
    "hil.apps.accounting.xǁAccountingǁcompact__mutmut_28": "as compact mutmut_24",
    "hil.apps.accounting.xǁAccountingǁsettle__mutmut_6": 'float("INF") is float("inf")',
    "hil.apps.accounting.xǁAccountingǁsettle__mutmut_13": (
        "last bound max(sent) + 2 instead of + 1: no sent seq lies between the two"
    ),
    "hil.apps.accounting.xǁAccountingǁobserved__mutmut_4": (
        "seq < highest: seq == highest then takes the other branch, which adds nothing "
        "(empty range) and leaves highest as it was"
    ),
    "hil.apps.accounting.xǁAccountingǁobserved__mutmut_11": "setdefault(seq) is setdefault(seq, None)",
    "hil.apps.accounting.xǁAccountingǁobserved__mutmut_19": "as observed mutmut_11",
    "hil.apps.accounting.xǁAccountingǁobserved__mutmut_30": "as observed mutmut_11",
    # hil/baseline/digital.py
    "hil.baseline.digital.xǁDigitalCodecǁ__init____mutmut_38": (
        "num_bits_per_symbol=1 for BPSK instead of None: the 5G bit interleaver of order 1 is "
        "the identity"
    ),
    "hil.baseline.digital.xǁDigitalCodecǁ__init____mutmut_39": "as __init__ mutmut_38",
    "hil.baseline.digital.xǁDigitalCodecǁ__init____mutmut_56": (
        "hard_out=True left out: it is LDPC5GDecoder's default"
    ),
    "hil.baseline.digital.xǁDigitalCodecǁframed_bits__mutmut_20": (
        "0/1 bits as float64 instead of float32: they are stored into a float32 array"
    ),
    "hil.baseline.digital.xǁDigitalCodecǁunframe__mutmut_6": (
        "asarray without float32: 0/1 bits minus the scrambler round to the same integers"
    ),
    "hil.baseline.digital.xǁDigitalCodecǁunframe__mutmut_8": "as unframe mutmut_6",
    "hil.baseline.digital.xǁDigitalCodecǁ_demodulate__mutmut_2": (
        "y not cast to complex64: Sionna's demapper takes complex128 as well; the bits differ "
        "at most by float rounding of the LLRs (and the LDPC decoder clips them at 20)"
    ),
    "hil.baseline.digital.xǁDigitalCodecǁ_demodulate__mutmut_5": (
        "as _demodulate mutmut_2, for no (float64)"
    ),
    "hil.baseline.digital.xǁDigitalCodecǁ_demodulate__mutmut_27": (
        "the decoded 0/1 bits as float64 instead of float32: unframe reads them as float32"
    ),
    "hil.baseline.digital.xǁDigitalCodecǁencode_blocks__mutmut_5": (
        "the bit buffer as float64 zeros: 0/1 bits either way, and Sionna's LDPC encoder and "
        "mapper give the same complex64 symbols (checked equal)"
    ),
    "hil.baseline.digital.xǁDigitalCodecǁencode_blocks__mutmut_7": "as encode_blocks mutmut_5",
    # hil/jscc/checkpoint.py
    "hil.jscc.checkpoint.x_save_checkpoint__mutmut_41": (
        "upper-case name of the temporary weights file, renamed away at once"
    ),
    "hil.jscc.checkpoint.x_save_checkpoint__mutmut_45": "as mutmut_41, the temporary JSON file",
    "hil.jscc.checkpoint.x_save_checkpoint__mutmut_61": "json.dumps(sort_keys=None) is sort_keys=False",
    "hil.jscc.checkpoint.x_save_checkpoint__mutmut_64": "sort_keys left out: its default is False",
    # hil/transport/wire.py
    "hil.transport.wire.x_encode__mutmut_24": (
        'payload view cast to "b" instead of "B": the same bytes and nbytes; zmq and '
        "np.frombuffer read the buffer, not the item type"
    ),
    "hil.transport.wire.x_decode__mutmut_79": (
        "version left to its default: decode has just required ver == VERSION, the default"
    ),
}
# zip's strict only checks that the lengths agree: encode_blocks has just required one block per
# codeword, and block_capacity is built from segments, one entry each
for _m in (
    "encode_blocks__mutmut_12",
    "encode_blocks__mutmut_16",
    "encode_blocks__mutmut_17",
    "decode_blocks__mutmut_14",
    "decode_blocks__mutmut_17",
    "decode_blocks__mutmut_18",
):
    EQUIVALENT[f"hil.baseline.digital.xǁDigitalCodecǁ{_m}"] = (
        "zip's strict only checks equal lengths: one block per codeword is required just before, "
        "and block_capacity has one entry per segment"
    )
# Sionna's Mapper already returns complex64 for PAM and QAM, so the BPSK cast is a no-op
for _n in (18, 19, 21):
    EQUIVALENT[f"hil.baseline.digital.xǁDigitalCodecǁ_modulate__mutmut_{_n}"] = (
        "Sionna's Mapper returns complex64 for PAM and QAM alike: the cast changes nothing"
    )
# LDPC5GDecoder clamps its channel LLRs to +-llr_max = 20 itself, so the +-50 clamp before it
# (and any wider or one-sided version of it) changes nothing
for _n in (17, 18, 20, 23, 24):
    EQUIVALENT[f"hil.baseline.digital.xǁDigitalCodecǁ_demodulate__mutmut_{_n}"] = (
        "the decoder clamps channel LLRs to +-20 itself; the +-50 clamp is redundant"
    )
# export_checkpoint passes the source document minus format/fingerprint/model/phy as meta;
# keeping one of them in meta overrides it with the same value (load_checkpoint has just
# verified it) and in the same key position, so the files written are byte for byte the same.
for _n in (5, 6, 7, 8, 9, 10, 11, 12):
    EQUIVALENT[f"hil.jscc.checkpoint.x_export_checkpoint__mutmut_{_n}"] = (
        "a verified field left in meta is written again with the same value, in the same place"
    )
# zmq.Frame is itself a buffer (memoryview(frame) == frame.buffer), so skipping the
# .buffer branch changes nothing; test_zmq_frames_decode_like_bytes shows both ways work.
for _n in ("decode__mutmut_7", "decode__mutmut_9", "decode__mutmut_13", "decode__mutmut_14",
           "decode_raw__mutmut_4", "decode_raw__mutmut_6", "decode_raw__mutmut_10",
           "decode_raw__mutmut_11"):  # fmt: skip
    EQUIVALENT[f"hil.transport.wire.x_{_n}"] = (
        "zmq.Frame supports the buffer protocol: memoryview(frame) is frame.buffer's bytes"
    )

# Single-threaded maths in the mutant workers. mutmut forks one worker per mutant from a
# server that has already imported torch; a worker that reaches a torch op then waits
# forever on the OpenMP pool its parent started, mutmut's CPU limit kills it, and the
# mutant is reported as a timeout. Those "timeouts" were survivors in disguise (every
# mutant that no earlier test killed reached the torch test). One thread each also suits
# two workers on two cores.
_THREADS = {k: "1" for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


# Survivors the tests do not kill, named with why. They are NOT equivalent: they count as
# survivors in the score and are printed with their reason.
_F64 = (
    "a constant converted to no dtype keeps float64: in single precision that intermediate is "
    "computed in double (more exact, slower); every output keeps its dtype and differs only by "
    "float32 rounding, which the tests' tolerances allow"
)
KNOWN_SURVIVORS: dict[str, str] = {
    # .to("cpu") made .to(None): a no-op where every tensor is on the CPU. The receive path's
    # device arguments are tested on the meta device (tests/phy/test_receive.py), but a
    # fingerprint and a safetensors file need real memory: these need a run with CUDA
    "hil.jscc.checkpoint.x_fingerprint__mutmut_14": (
        '.to("cpu") made .to(None): the fingerprint of a GPU model would call .numpy() on GPU '
        "memory (needs CUDA to kill)"
    ),
    "hil.jscc.checkpoint.x_save_checkpoint__mutmut_10": (
        '.to("cpu") made .to(None): safetensors would be handed GPU tensors (needs CUDA to kill)'
    ),
    "hil.jscc.checkpoint.x_save_checkpoint__mutmut_19": "as save_checkpoint mutmut_10",
    "hil.phy.receive.xǁOfdmReceiverǁ_smooth__mutmut_12": _F64 + " (r_lam, the smoother's gains)",
    "hil.phy.receive.xǁOfdmReceiverǁequalize__mutmut_71": _F64 + " (pilot_k, the timing slope)",
    "hil.phy.receive.xǁOfdmReceiverǁequalize__mutmut_101": _F64 + " (k_pd, the phase ramp)",
    "hil.phy.receive.xǁOfdmReceiverǁrefine_estimate__mutmut_103": (
        "one common phase over the whole header instead of one per symbol in the noise "
        "estimate's second pass: measured on 2000 frames (tests/phy/test_receive.py's "
        "unbiasedness test), the noise estimate moves from 0.9934 to 1.0022 of the truth at "
        "-5 dB and by 0.1 % at 5 dB, inside that test's 1.5 % (the first pass already took "
        "each symbol's phase out against the long training field's estimate)"
    ),
    "hil.phy.receive.xǁOfdmReceiverǁrefine_estimate__mutmut_121": (
        "one observation more in the degrees-of-freedom count: the noise estimate moves by "
        "-0.5 % (0.9934 -> 0.9883 of the truth, 2000 frames), less than the -0.67 % the "
        "per-symbol phase fits already leave uncounted; a bound that tight would pin that bias"
    ),
}


def short_name(mutant: str) -> str:
    """hil.phy.header.xǁHeaderǁunpack__mutmut_43 -> Header.unpack__mutmut_43;
    hil.phy.header.x_decode_header_bits__mutmut_5 -> decode_header_bits__mutmut_5."""
    name = mutant.split(".x", 1)[1]
    if name.startswith("ǁ"):
        cls, fn = name[1:].split("ǁ", 1)
        return f"{cls}.{fn}"
    return name.removeprefix("_")


def equivalents_markdown() -> str:
    """The EQUIVALENT list as markdown: one section per module file, in MODULES order."""
    out = []
    for target, _ in MODULES.values():
        prefix = target.removesuffix(".py").replace("/", ".") + ".x"
        names = [k for k in EQUIVALENT if k.startswith(prefix)]
        if not names:
            continue
        out.append(f"`{target}`:\n")
        out += [f"- `{short_name(k)}`: {EQUIVALENT[k]}" for k in names]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def run_module(key: str, keep: Path | None) -> dict:
    target, tests = MODULES[key]
    work = Path(tempfile.mkdtemp(prefix=f"mutmut-{key}-")) if keep is None else keep / key
    if work.exists() and keep is not None:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    for name in ("hil", "tests", "scripts", "firmware_configs"):
        shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
    cfg = (ROOT / "pyproject.toml").read_text()
    cfg += (
        "\n[tool.mutmut]\n"
        'source_paths = ["hil"]\n'
        f'only_mutate = ["{target}"]\n'
        'also_copy = ["scripts", "firmware_configs"]\n'
        f"pytest_add_cli_args_test_selection = {tests!r}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x", "--timeout=120"]\n'
    ).replace("'", '"')
    (work / "pyproject.toml").write_text(cfg)
    mutmut = [sys.executable, "-m", "mutmut"]
    env = {**os.environ, **_THREADS}
    t = time.time()
    subprocess.run([*mutmut, "run", "--max-children", "2"], cwd=work, capture_output=True, env=env)
    res = subprocess.run(
        [*mutmut, "results", "--all", "true"], cwd=work, capture_output=True, text=True, env=env
    ).stdout
    status: dict[str, str] = {}
    for line in res.splitlines():
        m = re.match(r"\s*(\S+): (.+)$", line)
        if m:
            status[m.group(1)] = m.group(2).strip()
    equivalent = sorted(k for k in status if k in EQUIVALENT)
    # entries for this file that name no mutant any more: the source moved, renumber them
    prefix = target.removesuffix(".py").replace("/", ".") + ".x"
    stale = sorted(k for k in EQUIVALENT if k.startswith(prefix) and k not in status)
    # a listed mutant that the tests kill is not equivalent (or the numbering moved)
    stale += [f"{k} (killed)" for k in equivalent if status[k] == "killed"]
    for k in equivalent:
        del status[k]
    killed = sum(1 for v in status.values() if v == "killed")
    survived = sorted(k for k, v in status.items() if v == "survived")
    others: dict[str, int] = {}
    for v in status.values():
        if v not in ("killed", "survived"):
            others[v] = others.get(v, 0) + 1
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "module": key,
        "file": target,
        "killed": killed,
        "survived": survived,
        "other": sum(others.values()),
        "other_kinds": others,
        "equivalent": equivalent,
        "stale": stale,
        "seconds": time.time() - t,
        "folder": str(work) if keep is not None else None,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--module", action="append", choices=sorted(MODULES), help="repeatable; default all"
    )
    p.add_argument("--list", action="store_true", help="print the modules and their tests")
    p.add_argument("--keep", type=Path, help="keep each module's scratch folder under DIR")
    p.add_argument(
        "--equivalents",
        action="store_true",
        help="print the EQUIVALENT list as markdown, by file (docs/mutation.md carries it)",
    )
    a = p.parse_args(argv)
    if a.list:
        for k, (f, t) in MODULES.items():
            print(f"{k:<15} {f:<28} {' '.join(t)}")
        return 0
    if a.equivalents:
        print(equivalents_markdown())
        return 0
    try:
        import mutmut  # noqa: F401
    except ImportError:
        print("mutation testing needs mutmut: pip install 'mutmut==3.8.1'", file=sys.stderr)
        return 2
    rows = []
    print("| module | file | killed | survived | other | equivalent | score | time (s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for key in a.module or list(MODULES):
        r = run_module(key, a.keep)
        n = r["killed"] + len(r["survived"])
        score = f"{100 * r['killed'] / n:.1f} %" if n else "-"
        print(
            f"| {key} | {r['file']} | {r['killed']} | {len(r['survived'])} | {r['other']} | "
            f"{len(r['equivalent'])} | {score} | {r['seconds']:.0f} |",
            flush=True,
        )
        rows.append(r)
    for r in rows:
        if r["other_kinds"]:
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(r["other_kinds"].items()))
            print(f"\nother in {r['file']}: {kinds}")
        if r["equivalent"]:
            print(f"\nequivalent (excluded) in {r['file']}:")
            for e in r["equivalent"]:
                print(f"  {e}: {EQUIVALENT[e]}")
        if r["stale"]:
            print(f"\nEQUIVALENT entries to review (no such mutant, or killed) for {r['file']}:")
            for e in r["stale"]:
                print(f"  {e}")
        if r["survived"]:
            print(f"\nsurvivors in {r['file']}:")
            for s in r["survived"]:
                print(f"  {s}: {KNOWN_SURVIVORS[s]}" if s in KNOWN_SURVIVORS else f"  {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

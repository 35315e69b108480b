"""A receiver that is behind the stream decodes the frames it found together (one decoder
batch), not one by one; one that keeps up decodes each as it completes."""

import logging

from hil.apps.receiver import Receiver
from hil.apps.sources import Chunk
from hil.phy import FrameEvent, Header, OfdmConfig

FP = bytes(range(1, 9))


class _Decoders:
    """Records the batches it is given."""

    def __init__(self):
        self.batches: list[list[int]] = []
        self.flushed = 0

    def decode(self, events):
        self.batches.append([e.header.seq for e in events])
        return []

    def flush(self):
        self.flushed += 1
        return []

    def dropped(self):
        return {"shape": 0, "inconsistent": 0}


def _events(seqs, chunk=0, chunks=1):
    return [
        FrameEvent(
            "ok",
            3000 * s,
            0.0,
            0.0,
            0.9,
            0.9,
            header=Header(s, s, FP, 512, (3, 32, 32), chunk, chunks),
            snr_db=10.0,
            evm_pilots=0.1,
        )
        for s in seqs
    ]


def _receiver():
    dec = _Decoders()
    rx = Receiver(OfdmConfig(), FP, dec, [], logging.getLogger("t"))
    rx.fr_base = 0
    return rx, dec


def test_frames_wait_while_more_samples_do_and_go_to_the_decoder_together():
    rx, dec = _receiver()
    rx.handle(_events([0]), more=True)
    rx.handle(_events([1, 2]), more=True)
    assert dec.batches == []
    rx.handle(_events([3]))  # caught up: everything waiting, in order, in one batch
    assert dec.batches == [[0, 1, 2, 3]]
    rx.handle(_events([4]))  # keeping up: each frame at once
    rx.handle(_events([5, 6]))
    assert dec.batches[1:] == [[4], [5, 6]]


def test_the_batch_is_bounded_in_frames_and_in_time():
    rx, dec = _receiver()
    rx.DECODE_BATCH = 3
    rx.handle(_events([0, 1]), more=True)
    rx.handle(_events([2, 3]), more=True)  # 4 >= 3: decoded
    assert dec.batches == [[0, 1, 2, 3]]
    rx.DECODE_WAIT_S = 0.0  # a frame never waits longer than this
    rx.handle(_events([4]), more=True)
    assert dec.batches[1:] == [[4]]


def test_what_waits_is_decoded_when_the_stream_pauses_or_ends():
    rx, dec = _receiver()
    rx.handle(_events([0]), more=True)
    rx.feed(Chunk(rx.fr._buf[:0], 0, 0, False, 4e6), more=True)  # an empty chunk, more to come
    assert dec.batches == []
    rx.decode_waiting()  # what rx does when nothing comes within its poll
    assert dec.batches == [[0]]
    rx.handle(_events([1]), more=True)
    rx.finish()
    assert dec.batches[1:] == [[1]] and dec.flushed == 1
    rx.handle(_events([2, 3]), more=True)
    rx.feed(Chunk(rx.fr._buf[:0], 0, 0, True, 4e6))  # the end of stream's empty chunk
    assert dec.batches[2:] == [[2, 3]]


def test_a_duplicate_of_a_waiting_frame_is_not_decoded_twice():
    rx, dec = _receiver()
    rx.handle(_events([0]), more=True)
    rx.handle(_events([0, 1, 1]), more=True)  # duplicates: accounted, not decoded again
    rx.decode_waiting()
    assert dec.batches == [[0, 1]] and rx.acc.duplicates == 2


def test_a_photographs_frames_never_wait_for_a_batch():
    """Its decoder holds them until a segment or the image is whole, and batches that itself."""
    rx, dec = _receiver()
    (e,) = _events([7], 0, 41)
    rx.handle([e], more=True)
    assert dec.batches == [[7]]


def test_the_latency_runs_from_the_transmitters_start_to_the_decode():
    import time

    import torch

    from hil.jscc.decoders import Decoded

    rx, _dec = _receiver()
    (e,) = _events([12], 2, 5)  # the image's first frame was seq 10
    t = time.time() - 1.5
    rx.message({"type": "sent", "seq": 10, "item_id": 12, "chunk": 0, "t_start": t})
    for bad in (float("nan"), "soon", None):  # not a time: no latency, nothing broken
        rx.message({"type": "sent", "seq": 20, "item_id": 3, "chunk": 0, "t_start": bad})
    assert list(rx.started) == [(12, 10)]
    rx._emit(Decoded(e, [e], torch.zeros(3, 32, 32)))
    (rec,) = rx.records.items
    assert 1.5 <= rec["latency_s"] < 30
    assert rx.summary()["latency_s"] == {
        "n": 1,
        "median": rec["latency_s"],
        "max": rec["latency_s"],
    }

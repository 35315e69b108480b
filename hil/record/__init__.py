"""SigMF recording and playback of IQ streams (capture once on the bench, decode anywhere)."""

from .sigmf_io import SigMFReader, SigMFWriter, UnsupportedRecording

__all__ = ["SigMFReader", "SigMFWriter", "UnsupportedRecording"]

"""The source-channel codec: model (``model``), training (``train``, ``pipeline``), data sets
(``data``, ``corpus``), metrics, the checkpoint format, and the decoders the receiver uses by
scheme byte (``decoders``). Import the submodule you need; this package imports nothing heavy."""

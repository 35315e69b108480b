"""The processes: ``tx``, ``radio``, ``rx``, and ``link`` which starts all three.

Each has a ``main(argv)`` that tests call in-process; ``hil <name>`` runs it.
"""

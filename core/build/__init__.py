"""The write path: everything that turns a vault into a published index generation.

``builder`` (one build: scan plan, ingest, the stored arrays, publish), ``plan`` and ``source``
(what changed, from the working tree or ``gitbuild``'s commit), ``ingest`` and ``prepare_pool``
(notes into rows, in worker processes), ``publish`` and ``lock`` (the build lock, staging, the
two-phase publish, retention and reaping), ``embed`` and ``build_embed`` (vectors), ``watch``
(rebuild on change), ``report``, ``bounds`` and ``faults``.

``core.index`` holds the stored format and its verified reading; nothing of the read path
(``core.searcher`` and below) imports this package (an import contract and
tests/test_import_isolation.py say so).
"""

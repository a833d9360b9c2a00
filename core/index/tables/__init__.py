"""Each table of the index databases with its DDL and every query on it, as named, typed functions.

One module per table, or per small group of tables that are written and read together:

    meta            the generation's key/value settings and identity (``meta``)
    notes           ``notes`` (one row per note) and the removal of a note with everything derived from it
    notes_fts       the contentless FTS5 table (``notes_fts``) and the one copy of the texts (``note_text``)
    tags            ``note_tags``
    problems        ``note_problems``, ``build_problems`` and the list of every problem
    chunks          ``chunks`` (offset ranges into a note's body)
    chunk_vectors   the dense vectors (``chunk_vectors``) and the chunks still without one
    terms           a writer's TEMP working tables: ``terms``, ``note_terms``, ``chunk_terms`` (never stored)
    term_major      the stored term-major arrays (``term_major``)
    links           ``links`` as written and the resolved ``edges``
    skipped_files   files read but not indexed, and every source file (notes and skipped files)
    git_dates       a git-sourced index's per-path commit dates (``git_dates``)
    checks          the staged index's cross-table consistency counts
    state_db        the generation-state database (``meta``, ``generations``, ``active``)
    word_scratch    the in-memory FTS5 table the term analyser runs the tokenizer through
    connection      PRAGMAs, catalog probes, the read snapshot and the transaction primitive (``atomic``)

``core.index.schema`` keeps the schema version and assembles the DDL from these modules. A
reading query is importable without any build module: these modules import nothing of ours but
``core.errors`` (an import contract in pyproject.toml), and a statement text is prepared once per
call site exactly as it was written at the call site before (``tests/index/test_table_sql.py``
fails on SQL written anywhere else in ``core/``).
"""

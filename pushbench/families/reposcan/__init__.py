"""RepoScan: find N distinct identifiers with a property in a pinned snapshot.

:mod:`.env` (the environment), :mod:`.indexer` (facts from a snapshot), :mod:`.search`
(the paged search index), :mod:`.predicates` (the predicate language: parser, words),
:mod:`.atoms` (what each property tests) and :mod:`.verifier` (the external verifier that
counts distinct valid submissions).
"""

"""RepoScan: find N distinct identifiers with a property in a pinned snapshot.

:mod:`.env` (the environment), :mod:`.indexer` (facts from a snapshot), :mod:`.search`
(the paged search index), :mod:`.predicates` (task properties over facts) and
:mod:`.verifier` (the external verifier that counts distinct valid submissions).
"""

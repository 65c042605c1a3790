"""The parser-replay tier: model output (fixtures of token ids and text) fed through engines' own parsers, no model.

Fixtures are written as each family's model writes them (``writers``, ``generate``) or harvested from live runs
(``harvest``; ``fixtures`` reads and writes them), turned into what each engine's parser receives (``detok``,
``feeder``), answered by the engine's own code in its own environment (``adapters``, ``protocol``, ``session``) and
judged as a live answer would be (``judge``; ``answers`` compares parsers call by call, ``agreement`` a replay with
the live answer). Around that: release sweeps and bisects (``releases``, ``sweep``, ``bisect``, ``versions``), the
triage of failing clusters (``triage``, ``bugs``), repros and the ``toolmatrix replay…`` commands (``cli``).
"""

# The modules by name, not imported here: importing the room loads none of them.
__all__ = ["adapters", "agreement", "answers", "bisect", "bugs", "cli", "detok", "feeder", "fixtures", "generate",
           "harvest", "judge", "protocol", "releases", "repro", "session", "sweep", "triage", "versions", "writers"]

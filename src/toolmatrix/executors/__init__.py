"""Executors: what runs the shards of a plan (``toolmatrix.shards``) beyond this machine.

``github`` writes a GitHub Actions workflow with a job per shard, ``kubernetes`` a Job manifest per shard, and
``ray`` runs the shards as Ray tasks on a cluster and brings their results back. Each takes the plan as it is:
the commands, results directories and GPU counts are decided once, in ``shards``.
"""

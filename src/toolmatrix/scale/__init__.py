"""Many pairs at once: the pairs the specs give, the shards of a plan, and the executors that run them."""

# The modules by name, not imported here: importing the room loads none of them.
__all__ = ["executors", "pairs", "plan", "shards"]

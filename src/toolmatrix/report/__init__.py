"""What a run came to, for people and CI: the gate, pass^k, the session summary and one record shown."""

# The modules by name, not imported here: importing the room loads none of them.
__all__ = ["gate", "passk", "show", "summary"]

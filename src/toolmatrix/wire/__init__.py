"""What goes over the wire and how it reads back, with no I/O: the answer's types (``answer``), one reader per API
surface (``chat``, ``responses``, ``messages``; ``surfaces`` picks one), and the captured ``exchange``.

The types import nothing of the readers, the readers nothing of the exchange: ``answer`` <- ``base`` <- one
module per surface <- ``surfaces`` <- ``exchange``. Nothing here imports the rest of toolmatrix but ``jsontext``.
"""

# Imported by name, not here: ``records`` reads ``answer.Cut`` without loading the readers (and openai's client).
__all__ = ["answer", "base", "chat", "exchange", "messages", "responses", "surfaces"]

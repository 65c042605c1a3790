"""Native tool-call formats ("families"): their markers and a reference parser for each.

No I/O beyond reading the bundled `families.yaml`; parsers never raise on model output.
"""

from ._families import FamiliesError, Family, all_families, get_family, load_families
from ._model import ParsedCall, ParseResult

__all__ = [
    "FamiliesError",
    "Family",
    "ParseResult",
    "ParsedCall",
    "all_families",
    "get_family",
    "load_families",
]

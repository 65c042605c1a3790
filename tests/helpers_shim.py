"""A probe's part, shared by the replay workers' import-shim tests: which engine modules a parse loaded, and
whether each is the installed file byte for byte and reads nothing from a package top the shim left bare.

``SHIM_AUDIT`` is source text for a probe run in the engine's own env (``python -c PROBE``), not importable here.
"""

SHIM_AUDIT = r'''
import base64, hashlib, re, sys
from importlib import metadata
from pathlib import Path


def shim_audit(dists, top_pattern):
    """(loaded, changed, top_reads): the non-top modules of ``dists`` now loaded; those whose file differs from
    the wheel's RECORD hash; those whose source imports from a bare package top (``top_pattern``, re.M)."""
    recorded = {str(f.locate().resolve()): f.hash.value
                for dist in dists for f in metadata.distribution(dist).files if f.hash is not None}
    loaded, changed, top_reads = [], [], []
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] not in dists or "." not in name or not getattr(module, "__file__", None):
            continue
        path = str(Path(module.__file__).resolve())
        digest = base64.urlsafe_b64encode(hashlib.sha256(Path(path).read_bytes()).digest()).rstrip(b"=").decode()
        loaded.append(name)
        if recorded.get(path) != digest:
            changed.append(name)
        if re.search(top_pattern, Path(path).read_text(encoding="utf-8"), re.M):
            top_reads.append(name)
    return loaded, changed, top_reads
'''

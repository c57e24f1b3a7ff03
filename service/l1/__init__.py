"""L1: the deterministic rule engine (RE2 rule packs as data) whose level the model never lowers.

Public surface: `load_pack(path) -> RulePack` (raises `PackError` naming the rule at fault),
`evaluate(pack, text) -> L1Result` (pure), and `PackHolder(path)` with `.pack` and
`.reload() -> bool` for SIGHUP. See docs/l1.md.
"""

from service.l1.engine import evaluate
from service.l1.holder import PackHolder
from service.l1.pack import PackError, RulePack, load_pack

__all__ = ["PackError", "PackHolder", "RulePack", "evaluate", "load_pack"]

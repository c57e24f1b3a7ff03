"""service/store/ is the only code that talks to Redis: no Redis command is called elsewhere."""

from __future__ import annotations

import ast
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[2] / "service"
# Redis commands (lower-case client methods) the service uses or could reach for.
COMMANDS = {
    "hget",
    "hgetall",
    "hmget",
    "hset",
    "hdel",
    "hlen",
    "hincrby",
    "get",
    "set",
    "delete",
    "exists",
    "expire",
    "xadd",
    "xrange",
    "xrevrange",
    "xlen",
    "xack",
    "xdel",
    "xreadgroup",
    "xautoclaim",
    "xpending",
    "xpending_range",
    "xgroup_create",
    "xinfo_groups",
    "zadd",
    "zrem",
    "zrank",
    "zrange",
    "zrangebyscore",
    "zscore",
    "zcard",
    "scan_iter",
    "pipeline",
    "register_script",
    "ping",
    "from_url",
}


def _redis_calls(path: Path) -> list[str]:
    """Calls of a Redis command on something named like a Redis client or pipeline."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in COMMANDS:
            continue
        target = ast.unparse(node.func.value)
        if any(word in target for word in ("client", "pipe", "redis", "Redis")):
            found.append(f"{path.relative_to(SERVICE.parent)}:{node.lineno} {target}.{node.func.attr}")
    return found


def test_no_redis_command_outside_the_store():
    calls = [
        call
        for path in sorted(SERVICE.rglob("*.py"))
        if "store" not in path.relative_to(SERVICE).parts[:1]
        for call in _redis_calls(path)
    ]
    assert calls == []


def test_the_check_sees_a_raw_call(tmp_path):
    sample = SERVICE / "store" / "api.py"  # the store itself is full of them
    assert _redis_calls(sample)

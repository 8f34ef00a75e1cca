"""Moved to edgepilot.plan.settings (the planner decides settings; the engine only applies them)."""

from edgepilot.plan.settings import KV_TYPES, UNQUANTIZED_KV, EngineSettings, kv_type_id

__all__ = ["KV_TYPES", "UNQUANTIZED_KV", "EngineSettings", "kv_type_id"]

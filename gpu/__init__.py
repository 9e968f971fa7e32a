"""Tilescope's attention engine: configs, cost model, tile schedules and backends. No Qt here."""

from .config import AttentionConfig, ConfigError

__all__ = ["AttentionConfig", "ConfigError"]

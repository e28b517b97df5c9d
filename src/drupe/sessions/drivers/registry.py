"""``DriverRegistry``: drivers by type, registered explicitly by the composition root.

Nothing registers itself at import time; ``register`` refuses a second driver of the same type.
"""

from __future__ import annotations

from drupe.errors import ConfigError
from drupe.sessions.drivers.base import Driver

__all__ = ["DriverRegistry"]


class DriverRegistry:
    def __init__(self) -> None:
        self._drivers: dict[str, Driver] = {}

    def register(self, driver: Driver) -> None:
        if driver.type in self._drivers:
            raise ConfigError(f"a driver of type {driver.type!r} is already registered")
        self._drivers[driver.type] = driver

    def get(self, driver_type: str) -> Driver:
        driver = self._drivers.get(driver_type)
        if driver is None:
            raise ConfigError(
                f"no agent driver of type {driver_type!r}; registered: {sorted(self._drivers)!r}"
            )
        return driver

    def types(self) -> list[str]:
        return sorted(self._drivers)

    def __contains__(self, driver_type: object) -> bool:
        return driver_type in self._drivers

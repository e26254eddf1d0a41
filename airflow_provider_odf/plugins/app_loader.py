"""An ASGI app that builds the ODF view's FastAPI app on its first request (plugin loading stays import-free)."""
from __future__ import annotations

from typing import Any


class LazyApp:
    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from airflow_provider_odf.plugins.app import create_app

            self._app = create_app()
        await self._app(scope, receive, send)

"""App factory: one FastAPI app per node (tests run several nodes, so no globals)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from app.api import cluster, dashboard, hooks, internal, records, stream, subscriptions, topics
from app.api.limits import BodyLimitMiddleware
from app.dashboard.service import Dashboard
from app.errors import install_handlers
from app.node import Node
from app.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    node = Node(settings)
    dash = Dashboard(node)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await node.start()
        dash.start()
        try:
            yield
        finally:
            await dash.stop()
            await node.stop()

    app = FastAPI(
        title="tidelog",
        version="0.1.0",
        summary="A replicated, partitioned commit log served over HTTP",
        lifespan=lifespan,
    )
    app.state.node = node
    app.state.dashboard = dash
    install_handlers(app)
    for r in (topics.router, records.router, stream.router, cluster.router, internal.router,
              hooks.router, subscriptions.router, dashboard.router, dashboard.internal_router):
        app.include_router(r)
    app.mount("/static", StaticFiles(directory=dashboard.asset_dir("static")), name="static")
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)
    return app

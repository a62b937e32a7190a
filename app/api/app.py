"""App factory: one FastAPI app per node (tests run several nodes, so no globals)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.api import cluster, internal, records, stream, subscriptions, topics
from app.api.limits import BodyLimitMiddleware
from app.errors import install_handlers
from app.node import Node
from app.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    node = Node(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await node.start()
        try:
            yield
        finally:
            await node.stop()

    app = FastAPI(
        title="tidelog",
        version="0.1.0",
        summary="A replicated, partitioned commit log served over HTTP",
        lifespan=lifespan,
    )
    app.state.node = node
    install_handlers(app)
    for r in (topics.router, records.router, stream.router, cluster.router, internal.router,
              subscriptions.router):
        app.include_router(r)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)
    return app

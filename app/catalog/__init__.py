"""The local catalog: this node's durable bookkeeping that is not the log itself."""

from app.catalog.store import Catalog

__all__ = ["Catalog"]

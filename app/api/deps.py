"""Shared dependencies and parameter parsing for the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.node import Node


def get_node(request: Request) -> Node:
    node: Node = request.app.state.node
    return node


NodeDep = Annotated[Node, Depends(get_node)]

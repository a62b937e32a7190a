"""RFC 9457 problem+json errors with stable codes (API.md).

Every refusal the API makes is an :class:`ApiError`; handlers here turn it,
FastAPI's validation errors and unknown routes into problem documents, so a
client never sees a bare 500 or 422 for bad input.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from replication.controller.errors import ControllerError

PROBLEM = "application/problem+json"

# Controller/state-machine codes → HTTP status.
STATUS_FOR_CODE: dict[str, int] = {
    "INVALID_REQUEST": 400,
    "INVALID_TOPIC_NAME": 400,
    "INVALID_REPLICATION_FACTOR": 400,
    "INVALID_CONFIG": 400,
    "INVALID_PARTITIONS": 400,
    "UNAUTHORIZED": 401,
    "SIGNATURE_MISSING": 401,
    "SIGNATURE_INVALID": 401,
    "SIGNATURE_EXPIRED": 401,
    "FORBIDDEN": 403,
    "TOPIC_NOT_FOUND": 404,
    "PARTITION_NOT_FOUND": 404,
    "NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "TOPIC_EXISTS": 409,
    "ENTITY_EXISTS": 409,
    "ENTITY_NOT_FOUND": 404,
    "RECORD_TOO_LARGE": 413,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "OFFSET_OUT_OF_RANGE": 416,
    "NOT_LEADER": 421,
    "NOT_CONTROLLER": 421,
    "NOT_ENOUGH_REPLICAS": 503,
    "UNAVAILABLE": 503,
    "TIMEOUT": 504,
}


class ApiError(Exception):
    """A refusal with a stable ``code``; ``extra`` fields are merged into the body."""

    def __init__(self, code: str, detail: str, status: int | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.status = status or STATUS_FOR_CODE.get(code, 400)
        self.extra = extra


def problem_response(status: int, code: str, detail: str, **extra: Any) -> Response:
    body = {
        "type": f"https://tidelog.dev/problems/{code.lower().replace('_', '-')}",
        "title": code.replace("_", " ").capitalize(),
        "status": status,
        "detail": detail,
        "code": code,
        **extra,
    }
    return Response(orjson.dumps(body), status_code=status, media_type=PROBLEM)


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> Response:
        return problem_response(exc.status, exc.code, exc.detail, **exc.extra)

    @app.exception_handler(ControllerError)
    async def _controller_error(_: Request, exc: ControllerError) -> Response:
        return problem_response(STATUS_FOR_CODE.get(exc.code, 400), exc.code, exc.detail)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> Response:
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(x) for x in first.get("loc", ()))
        detail = f"{where}: {first.get('msg', 'invalid request')}" if where else "invalid request"
        return problem_response(400, "INVALID_REQUEST", detail)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> Response:
        # A bug, not bad input; still a problem document so clients parse one error shape.
        # Starlette's ServerErrorMiddleware logs the traceback after sending this.
        return problem_response(500, "INTERNAL", f"internal error ({type(exc).__name__}); see the node log")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> Response:
        code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "RECORD_TOO_LARGE"}.get(
            exc.status_code, "INVALID_REQUEST" if exc.status_code < 500 else "INTERNAL"
        )
        return problem_response(exc.status_code, code, str(exc.detail))

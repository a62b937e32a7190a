"""Storage: partition logs of record batches in segment files.

Knows nothing of HTTP or replication roles (ARCHITECTURE.md, layer 5); the
replication layer drives it through :class:`~app.storage.log.PartitionLog`.
"""

from app.storage.batch import BatchHeader, CorruptBatchError, encode_batch, iter_records
from app.storage.log import LogConfig, OffsetOutOfRange, PartitionLog

__all__ = [
    "BatchHeader",
    "CorruptBatchError",
    "LogConfig",
    "OffsetOutOfRange",
    "PartitionLog",
    "encode_batch",
    "iter_records",
]

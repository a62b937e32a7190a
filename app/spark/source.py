"""The ``tidelog`` data source class that Spark instantiates from options."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)

from app.spark.options import OptionError, ReadOptions, WriteOptions, bool_option

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


class TidelogDataSource(DataSource):
    """Read tidelog topics as DataFrames and write DataFrames to topics.

    Options are parsed when Spark asks for a reader or writer, on the driver,
    so mistakes surface before tasks run. The instance itself only holds the
    option map and is pickled to Spark's Python workers.
    """

    @classmethod
    def name(cls) -> str:
        return "tidelog"

    def schema(self) -> StructType:
        from app.spark.schema import tidelog_schema

        return tidelog_schema(bool_option(self.options, "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        from app.spark.reader import TidelogBatchReader
        from app.spark.schema import check_schema

        opts = ReadOptions.parse(self.options, streaming=False)
        check_schema(schema, opts.include_headers)
        return TidelogBatchReader(opts, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from app.spark.reader import TidelogStreamReader
        from app.spark.schema import check_schema

        opts = ReadOptions.parse(self.options, streaming=True)
        check_schema(schema, opts.include_headers)
        return TidelogStreamReader(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from app.spark.writer import TidelogBatchWriter, check_write_schema

        if overwrite:
            raise OptionError("tidelog topics are append-only: use mode('append')")
        opts = WriteOptions.parse(self.options)
        check_write_schema(schema, opts)
        return TidelogBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from app.spark.writer import TidelogStreamWriter, check_write_schema

        # overwrite is true for outputMode("complete"): each batch re-sends the whole result,
        # which on a log simply appends the new version of every row. That is allowed.
        opts = WriteOptions.parse(self.options)
        check_write_schema(schema, opts)
        return TidelogStreamWriter(opts)

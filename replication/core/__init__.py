"""Sans-I/O protocol core: partition replication state, no sockets, clocks or tasks."""

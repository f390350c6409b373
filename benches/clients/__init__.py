"""One benchmark run of one client, each in its own process (see ``benches.compare``)."""

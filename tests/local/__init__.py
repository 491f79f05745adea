"""Services of a run's own on this machine, shared by the tests and by the benchmarks (`make chaos`): free loopback
ports, a private PostgreSQL, Redis and RabbitMQ node, a RabbitMQ cluster."""
